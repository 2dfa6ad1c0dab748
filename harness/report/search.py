"""The search's report: candidates ranked with their intervals, the lower bound marked, what had
no effect, what failed, and the best configuration ready to paste."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from harness import fmt, io
from harness.records import from_json
from harness.report.doc import Block, Bullets, Code, Heading, Image, Para, Table, literal
from harness.report.plots import CHAR_IN, new_figure
from harness.runfolder import RunFolder, stage_timing
from harness.summary import Candidate, SearchRecord, Verdict

NO_DIFFERENCE = ("same_program", "indistinguishable", "not_resolved")


def load(run: Path) -> SearchRecord:
    path = RunFolder(run).search
    return from_json(SearchRecord, io.read_json(path), str(path))


def notes(record: SearchRecord) -> tuple[str, ...]:
    """What the search could not judge: each option compiled only where it cannot act."""
    return tuple(
        f"`{o}` was not tried where it acts: needs `{need}`"
        for o, need in record.not_tried_where_acts.items()
    )


def ranked(record: SearchRecord) -> list:
    """Timed candidates, fastest first: the default included, the lower bound not (it computes
    less; it is shown as the line every candidate is measured against)."""
    return sorted(
        (c for c in record.candidates if c.step_s is not None and c.name != record.lower_bound),
        key=lambda c: c.step_s,
    )


def bound_of(record: SearchRecord) -> Candidate | None:
    """The lower bound's timing, when it was timed."""
    return next(
        (c for c in record.candidates if c.name == record.lower_bound and c.step_s is not None),
        None,
    )


def figure(record: SearchRecord) -> Figure:
    """Horizontal bars of time per step with 95% intervals; the lower bound as a line.

    Candidates no faster than the default by the run's resolution are grey: never ranked as
    wins."""
    rows = ranked(record)
    labels = [f"{c.name}: {c.changed}"[:60] for c in rows]
    margin = 0.2 + max((len(x) for x in labels), default=0) * 7 * CHAR_IN
    fig = new_figure(6 + margin, 1.3 + 0.32 * max(1, len(rows)), left=margin, bottom=0.55)
    ax = fig.add_subplot(1, 1, 1)
    for i, c in enumerate(rows):
        lo, hi = c.step_ci95_s or (c.step_s, c.step_s)
        verdict = c.vs_default.verdict if c.vs_default else "default"
        color = {"faster": "#2e7d32", "slower": "#c62828", "default": "#4472c4"}.get(
            verdict, "#9e9e9e"
        )
        ax.barh(
            i,
            c.step_s * 1e3,
            color=color,
            xerr=[[c.step_s * 1e3 - lo * 1e3], [hi * 1e3 - c.step_s * 1e3]],
            capsize=3,
        )
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    bound = bound_of(record)
    if bound is not None:
        ax.axvline(
            bound.step_s * 1e3,
            color="#c00000",
            ls="--",
            lw=1,
            label=f"lower bound {bound.step_s * 1e3:.3f} ms",
        )
        ax.legend(fontsize=7)
    ax.set_xlabel("time per step, ms (median, 95% CI)")
    ax.set_title(
        "Search: distinct programs, timed together (green: faster than the default)", fontsize=9
    )
    return fig


def stage_name(c: Candidate) -> str:
    """The timing file a candidate's figures come from (a coordinate search times in stages,
    the default again in each), or — when untimed or saved before it was recorded."""
    return f"`{stage_timing(c.stage)}`" if c.stage is not None else "—"


def against(v: Verdict | None, what: str, reference_s: float | None) -> str:
    """A ratio cell with the reference's time per step in the same stage, so the times and
    the ratio beside them come from one set of rounds."""
    if v is None:
        return "—"
    return fmt.verdict(v) + (f"; {what} {fmt.ms(reference_s)}" if reference_s else "")


def blocks(record: SearchRecord, title: str, plot: str | None) -> tuple[Block, ...]:
    rows = ranked(record)
    best = next((c for c in record.candidates if c.name == record.best), None)
    out: list[Block] = [Heading(1, title)]
    summary = (
        f"Searched `{record.base}` ({record.strategy}, budget {record.budget_s:.0f} s, took "
        f"{record.wall_s:.0f} s): {_compiled(record)}, "
        f"{record.same_program_count} of them the same program as an earlier one (not timed again)."
    )
    if record.stopped:
        summary += f" Stopped early: {record.stopped}."
    out.append(Para(summary))
    if record.unresolved:
        out.append(
            Para(
                "**This search could not resolve differences, so it names no best "
                f"configuration**: {'; '.join(record.unresolved)}. Time it again on a quieter "
                "machine."
            )
        )
    if best is not None:
        if best.vs_default is None:
            said = "no candidate was resolved as faster than the default, so the default stays"
        else:
            said = f"against the default {fmt.verdict(best.vs_default)}"
        options = record.best_xla_options
        out += [
            Heading(2, "Best configuration"),
            Para(
                f"`{best.name}` ({best.changed}): {fmt.step(best.step_s, best.step_ci95_s)} in "
                f"{stage_name(best)}; "
                f"{said}; against the lower bound {fmt.verdict(best.vs_lower_bound)}."
            ),
            Code(
                "xla_options:" + "".join(f"\n  {k}: {v!r}" for k, v in options.items())
                if options
                else "xla_options: {}",
                "yaml",
            ),
            Code(f"XLA_FLAGS='{record.best_xla_flags}'", "sh"),
        ]
    bound = bound_of(record)
    out += [
        Heading(2, "Ranked"),
        Para(
            f"Against the lower bound `{bound.name}` (x @ W alone, timed in the same rounds): "
            f"{fmt.step(bound.step_s, bound.step_ci95_s)} in {stage_name(bound)}; each row reads "
            "its ratios against the default and the lower bound timed in its own stage, and "
            "gives their times there. It computes less, so it is the line "
            "every candidate is measured against, never a candidate."
            if bound is not None
            else "No lower bound was timed."
        ),
        Table(
            (
                "candidate",
                "changed",
                "timed in",
                "step (95% CI)",
                "vs default",
                "vs lower bound",
                "compile",
                "numerics",
            ),
            tuple(
                (
                    c.name,
                    c.changed,
                    stage_name(c),
                    fmt.step(c.step_s, c.step_ci95_s),
                    against(c.vs_default, "default", c.default_step_s),
                    against(c.vs_lower_bound, "lower bound", c.lower_bound_step_s),
                    fmt.secs(c.compile_s),
                    fmt.sci(c.rel_fro_err),
                )
                for c in rows
            ),
        ),
    ]
    if plot:
        out.append(
            Image(plot, "search", "Time per step of each distinct program, with 95% intervals.")
        )
    same = [c for c in record.candidates if c.status == "same_program"]
    if same:
        out += [
            Heading(2, "Same program, not timed"),
            Bullets(
                tuple(
                    f"`{c.name}` ({c.changed}) compiles to the program of `{c.same_program_as}`"
                    for c in same
                )
            ),
        ]
    if record.no_effect:
        out.append(
            Para(
                "Options with no effect on this program, where they can act: "
                + ", ".join(f"`{o}`" for o in record.no_effect)
                + "."
            )
        )
    if untried := notes(record):
        out += [Heading(2, "Notes"), Bullets(untried)]
    bad = [c for c in record.candidates if c.status in ("failed", "wrong")]
    if bad:
        out += [
            Heading(2, "Excluded"),
            Bullets(
                tuple(
                    f"`{c.name}` ({literal(c.changed)}): {c.status}: {literal(c.reason)}"
                    for c in bad
                )
            ),
        ]
    return tuple(out)


def _compiled(record: SearchRecord) -> str:
    """How many configurations were compiled: the default and the candidates, and the lower
    bound apart (it is never a candidate)."""
    tried = sum(c.name != record.lower_bound for c in record.candidates)
    bound = " and the lower bound" if tried < len(record.candidates) else ""
    return f"{tried} configurations compiled (the default among them){bound}"
