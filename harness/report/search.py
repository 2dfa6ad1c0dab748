"""The search's report: candidates ranked with their intervals, the lower bound marked, what had
no effect, what failed, the best configuration ready to paste, the trade-offs of the leaders,
what a constraint rejected, and which dimension carried the best's gain."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from harness.common import fmt
from harness.records.search import Candidate, SearchRecord, config_lines
from harness.records.summary import Verdict
from harness.report.doc import Block, Bullets, Code, Heading, Image, Para, Table, code, literal
from harness.report.plots import CHAR_IN, new_figure
from harness.store import io
from harness.store.records import from_json
from harness.store.runfolder import RunFolder, stage_timing

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


@dataclass(frozen=True)
class Bar:
    """One candidate in the search's plot: its time over the default's, both from one timing
    stage (a coordinate search times the default again in each; absolute times of two stages
    are not comparable, so the plot draws no absolute time)."""

    label: str
    ratio: float
    ci95: tuple[float, float] | None
    verdict: str  # against the default; `default` for the default itself
    bound: float | None  # the lower bound's time over the default's, in the same stage


def bars(record: SearchRecord) -> list[Bar]:
    """The plot's bars, lowest ratio first: each timed candidate's paired ratio to the default
    of its own stage, labelled with that stage's timing file, and the default at 1.0 (its own
    reference in every stage; its label names the stage of its lower-bound mark). A candidate timed with no ratio is left out (the table has it)."""
    out: list[Bar] = []
    for c in ranked(record):
        stage = f" [{stage_timing(c.stage)}]" if c.stage is not None else ""
        bound = (
            c.lower_bound_step_s / c.default_step_s
            if c.lower_bound_step_s and c.default_step_s
            else None
        )
        if c.name == "default":
            label = f"default{stage}: {c.changed}" if c.changed else f"default{stage}"
            out.append(Bar(label[:70], 1.0, None, "default", bound))
        elif c.vs_default is not None and c.vs_default.ratio is not None:
            v = c.vs_default
            label = f"{c.name}{stage}: {c.changed}"[:70]
            out.append(Bar(label, v.ratio, v.ci95, v.verdict, bound))
    return sorted(out, key=lambda b: b.ratio)


def figure(record: SearchRecord) -> Figure:
    """Horizontal bars of each candidate's time over the default's in its own timing stage,
    with 95% intervals; the default at 1.0, and the lower bound of each row's stage marked.

    Candidates no faster than the default by the run's resolution are grey: never ranked as
    wins."""
    rows = bars(record)
    margin = 0.2 + max((len(b.label) for b in rows), default=0) * 7 * CHAR_IN
    fig = new_figure(6 + margin, 1.3 + 0.32 * max(1, len(rows)), left=margin, bottom=0.55)
    ax = fig.add_subplot(1, 1, 1)
    for i, b in enumerate(rows):
        lo, hi = b.ci95 or (b.ratio, b.ratio)
        color = {"faster": "#2e7d32", "slower": "#c62828", "default": "#4472c4"}.get(
            b.verdict, "#9e9e9e"
        )
        err = [[max(0.0, b.ratio - lo)], [max(0.0, hi - b.ratio)]]
        ax.barh(i, b.ratio, color=color, xerr=err, capsize=3)
    marked = [(i, b.bound) for i, b in enumerate(rows) if b.bound is not None]
    if marked:
        ax.plot(
            [x for _, x in marked],
            [i for i, _ in marked],
            "|",
            color="#c00000",
            ms=12,
            mew=2,
            label="lower bound, in the row's stage",
        )
    ax.axvline(1.0, color="#4472c4", ls="--", lw=1, label="default, in the row's stage")
    ax.legend(fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([b.label for b in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(
        "time per step / the default's in the same timing stage (median of paired rounds, 95% CI)"
    )
    ax.set_title(
        "Search: each program against the default of its stage (green: faster)",
        fontsize=9,
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


def _summary(record: SearchRecord) -> Para:
    """What was searched, how, for how long, and how many configurations it compiled."""
    summary = (
        f"Searched `{record.base}` ({record.strategy}, budget {record.budget_s:.0f} s, took "
        f"{record.wall_s:.0f} s): {_compiled(record)}, "
        f"{record.same_program_count} of them the same program as an earlier one (not timed again)."
    )
    if record.stopped:
        summary += f" Stopped early: {record.stopped}."
    return Para(summary)


def _best_blocks(record: SearchRecord) -> list[Block]:
    """The best configuration, ready to paste; or why the search names none (it could not
    resolve differences, or no candidate meets the constraints)."""
    best = next((c for c in record.candidates if c.name == record.best), None)
    out: list[Block] = []
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
        out += [
            Heading(2, "Best configuration"),
            Para(
                f"`{best.name}` ({literal(best.changed)}): "
                f"{fmt.step(best.step_s, best.step_ci95_s)} in {stage_name(best)}; "
                f"{said}; against the lower bound {fmt.verdict(best.vs_lower_bound)}."
            ),
            Code(config_lines(best), "yaml"),
            Code(f"XLA_FLAGS='{record.best_xla_flags}'", "sh"),
        ]
    elif not record.unresolved:
        out.append(Para(f"**No candidate meets the constraints** ({_cap(record)})."))
    return out


def _bound_para(bound: Candidate | None) -> Para:
    """The lower bound every candidate is measured against, and its time, when it was timed."""
    return Para(
        f"Against the lower bound `{bound.name}` (x @ W alone, timed in the same rounds): "
        f"{fmt.step(bound.step_s, bound.step_ci95_s)} in {stage_name(bound)}; each row reads "
        "its ratios against the default and the lower bound timed in its own stage, and "
        "gives their times there. It computes less, so it is the line "
        "every candidate is measured against, never a candidate."
        if bound is not None
        else "No lower bound was timed."
    )


_RANKED_HEAD = (
    "candidate",
    "changed",
    "timed in",
    "step (95% CI)",
    "vs default",
    "vs lower bound",
    "compile",
    "peak",
    "numerics",
    "vs default's result",
)


def _ranked_row(c: Candidate) -> tuple[str, ...]:
    """One timed candidate's row of the ranked table, its ratios read in its own stage."""
    return (
        c.name,
        c.changed,
        stage_name(c),
        fmt.step(c.step_s, c.step_ci95_s),
        against(c.vs_default, "default", c.default_step_s),
        against(c.vs_lower_bound, "lower bound", c.lower_bound_step_s),
        fmt.secs(c.compile_s),
        fmt.si(c.peak_bytes, "B"),
        fmt.sci(c.rel_fro_err),
        effect_words(c),
    )


def _untimed_blocks(record: SearchRecord) -> list[Block]:
    """The candidates not ranked: the same program as an earlier one, options with no effect,
    options not tried where they act, and the candidates that failed or were wrong."""
    out: list[Block] = []
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
    return out


def blocks(record: SearchRecord, title: str, plot: str | None) -> tuple[Block, ...]:
    """The search's report: what was searched, the best configuration, the constraints'
    effects, the ranked candidates (and their plot), then the candidates not ranked."""
    out: list[Block] = [Heading(1, title), _summary(record), *_best_blocks(record)]
    out += constraint_blocks(record)
    out += [
        Heading(2, "Ranked"),
        _bound_para(bound_of(record)),
        Table(_RANKED_HEAD, tuple(_ranked_row(c) for c in ranked(record))),
    ]
    if plot:
        out.append(
            Image(
                plot,
                "search",
                "Each distinct program's time per step over the default's in the timing stage "
                "named on its bar, with 95% intervals.",
            )
        )
    out += _untimed_blocks(record)
    return tuple(out)


def _compiled(record: SearchRecord) -> str:
    """How many configurations were compiled: the default and the candidates, and the lower
    bound apart (it is never a candidate)."""
    tried = sum(c.name != record.lower_bound for c in record.candidates)
    bound = " and the lower bound" if tried < len(record.candidates) else ""
    return f"{tried} configurations compiled (the default among them){bound}"


def _cap(record: SearchRecord) -> str:
    cap = record.max_peak_memory
    return f"search.max_peak_memory {fmt.si(cap, 'B')}" if cap else "no memory cap"


def speedup(v: Verdict | None) -> str:
    """A ratio to the default as a speed-up with its interval: `1.40× faster (1.35–1.45)`."""
    if v is None or not v.ratio:
        return "not timed against the default"
    interval = f" ({1 / v.ci95[1]:.2f}–{1 / v.ci95[0]:.2f})" if v.ci95 else ""
    if v.verdict == "faster":
        return f"{1 / v.ratio:.2f}× faster{interval}"
    if v.verdict == "slower":
        return f"{v.ratio:.2f}× slower ({v.ci95[0]:.2f}–{v.ci95[1]:.2f})" if v.ci95 else "slower"
    return f"{1 / v.ratio:.2f}× the default's speed{interval}, {fmt.VERDICT_WORDS[v.verdict]}"


def effect_words(c: Candidate) -> str:
    """The candidate's result against the default's, in a few words."""
    e = c.effect
    if e is None:
        return "—" if c.name != "default" else "the reference"
    if not e.comparable:
        return f"not comparable: {literal(e.why)}"
    leaf = f" (leaf {literal(e.leaf)})" if e.leaf else ""
    said = "changes it" if e.changes else "within the allowance"
    return f"{said}{leaf}: {fmt.sci(e.distance)} (allowed {fmt.sci(e.allowed)})"


def rejection(c: Candidate, record: SearchRecord) -> str:
    """What each broken constraint costs: `changes the result by 3.1e-02`, `peak 1.2 GB over
    the cap 1.0 GB`."""
    said = []
    if "numerics" in c.rejected and c.effect is not None:
        leaf = f" (leaf {literal(c.effect.leaf)})" if c.effect.leaf else ""
        said.append(
            f"changes the result{leaf} by {fmt.sci(c.effect.distance)}, past the "
            f"{fmt.sci(c.effect.allowed)} two compiles of one function may differ by"
        )
    if "memory" in c.rejected:
        said.append(
            f"its peak {fmt.si(c.peak_bytes, 'B')} is over the cap {fmt.si(record.max_peak_memory, 'B')}"
        )
    return " and ".join(said)


_DIMENSION_WORDS = {"xla_options": "the XLA options", "dtypes": "the dtypes"}


def dimension_words(dimension: str) -> str:
    """`kwargs.attention` as `the attention knob`."""
    if dimension.startswith("kwargs."):
        return f"the {code(dimension.removeprefix('kwargs.'))} knob"
    return _DIMENSION_WORDS.get(dimension, code(dimension))


def gain_words(v: Verdict | None) -> str:
    """The factor a dimension gave, with its interval and, where unresolved, that it is."""
    if v is None or v.ratio is None:
        return "could not be measured"
    interval = f" ({v.ci95[0]:.2f}–{v.ci95[1]:.2f})" if v.ci95 else ""
    note = {
        "same_program": ": the same program without it, no gain",
        "indistinguishable": ", not resolved from 1",
        "not_resolved": ", not resolved in this run",
        "faster": ": faster without it",
    }.get(v.verdict, "")
    return f"{v.ratio:.2f}×{interval}{note}"


def _leader_blocks(record: SearchRecord, by_name: dict[str, Candidate]) -> list[Block]:
    """The best candidate and the next two that break no constraint, side by side, then each
    one as a variant to paste."""
    leaders = [by_name[n] for n in record.leaders if n in by_name]
    if not leaders:
        return []
    out: list[Block] = [
        Heading(2, "Trade-offs of the leaders"),
        Para(
            "The best candidate and the next two that break no constraint: each one's "
            "speed against the default (from paired rounds of its stage), its first call, "
            f"its peak memory and its result against the default's ({_cap(record)})."
        ),
        Table(
            ("candidate", "changed", "vs default", "first call", "peak", "result"),
            tuple(
                (
                    c.name,
                    c.changed,
                    speedup(c.vs_default) if c.name != "default" else "the default",
                    fmt.secs(c.first_call_s),
                    fmt.si(c.peak_bytes, "B"),
                    effect_words(c),
                )
                for c in leaders
            ),
        ),
    ]
    for c in leaders:
        out += [Para(f"`{c.name}` as a variant:"), Code(config_lines(c), "yaml")]
    return out


def _rejected_blocks(record: SearchRecord, by_name: dict[str, Candidate]) -> list[Block]:
    """The candidates a constraint rejected, what each broken constraint costs, and which of
    them were faster than the best."""
    rejected = [c for c in record.candidates if c.rejected and c.status == "ok"]
    if not rejected:
        return []
    faster = set(record.rejected_faster)
    best = by_name.get(record.best or "")
    than = (
        f": faster than the best `{best.name}` ({speedup(best.vs_default)}), and never "
        "named the best"
        if best is not None and best.name != "default"
        else ": faster than the default, and never named the best"
    )
    return [
        Heading(2, "Rejected by a constraint"),
        Bullets(
            tuple(
                f"`{c.name}` ({literal(c.changed)}): "
                f"{speedup(c.vs_default) if c.name != 'default' else 'the default itself'}, and "
                f"{rejection(c, record)}" + (than if c.name in faster else "")
                for c in rejected
            )
        ),
    ]


def _attribution_blocks(record: SearchRecord) -> list[Block]:
    """The best's gain taken apart by dimension, the largest first; or why it is not."""
    if not record.attribution:
        if record.attribution_note and record.best not in (None, "default"):
            return [Para(f"The gain is not taken apart: {literal(record.attribution_note)}.")]
        return []
    ranked_gain = sorted(
        record.attribution, key=lambda a: -(a.gain.ratio if a.gain and a.gain.ratio else 0)
    )
    return [
        Heading(2, "Which dimension carried the gain"),
        Para(
            f"`{record.best}` timed beside itself with each dimension alone set back to the "
            "default's: the time without it over the best's is what it gave."
        ),
        Bullets(
            tuple(
                f"{dimension_words(a.dimension)} ({literal(a.reset)}) "
                f"{'gave' if i == 0 else 'added'} {gain_words(a.gain)}"
                + (f" [{stage_timing(a.stage)}]" if a.stage is not None else "")
                for i, a in enumerate(ranked_gain)
            )
        ),
    ]


def constraint_blocks(record: SearchRecord) -> list[Block]:
    """The leaders' trade-offs, what a constraint rejected, and the best's gain taken apart."""
    by_name = {c.name: c for c in record.candidates}
    return [
        *_leader_blocks(record, by_name),
        *_rejected_blocks(record, by_name),
        *_attribution_blocks(record),
    ]
