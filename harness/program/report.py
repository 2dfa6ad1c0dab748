"""The report of `python -m harness.analyze`: a user's program, ranked and rolled up.

Built once as document blocks (harness.report.doc) and written as report.md and a
self-contained report.html, with its figures as PNG under plots/, like a run's report. Its
cluster and roll-up tables are the run report's (harness.report.cluster_tables). It reads
only a `harness.records.program.ProgramAnalysis`; it never imports JAX.
"""

from __future__ import annotations

import os
import os.path
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.program import roof as roofs
from harness.records.program import (
    ClusterRow,
    HostTotals,
    ModuleAnalysis,
    ProgramAnalysis,
    merged_hosts,
)
from harness.report.cluster_tables import (
    CONVENTIONS,
    Paths,
    cluster_table,
    lines_cell,
    rollup_table,
    step_time,
)
from harness.report.doc import (
    Block,
    Bullets,
    Heading,
    Image,
    Para,
    Table,
    code,
    to_html,
    to_markdown,
)
from harness.report.gaps import gap_blocks
from harness.report.plots import CHAR_IN, NoData, log_grid, new_figure, save_figure
from harness.store import io, runfolder

TOP_BARS = 15
LABELLED_POINTS = 8


@dataclass(frozen=True)
class Figured:
    """One figure's outcome: its file relative to the report, or why it was left out."""

    name: str
    file: str = ""
    note: str = ""


# ---------------------------------------------------------------------------------------------
# Cells


def _dim(value: tuple[int, int, int] | None) -> str:
    return MISSING if value is None else "×".join(str(v) for v in value)


def _all_lines(a: ProgramAnalysis) -> list[str]:
    out: list[str] = []
    for m in a.modules:
        for row in m.clusters:
            out.extend(row.lines)
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def kernel_table(m: ModuleAnalysis) -> Table:
    """The top kernels by time, with launch shape where the profile records it."""
    rows = tuple(
        (
            f"`{k.name[:60]}`",
            f"`{k.cluster}`" if k.cluster else MISSING,
            fmt.count(k.launches),
            step_time(k.time_s),
            fmt.pct(k.share),
            _dim(k.grid),
            _dim(k.block),
            MISSING if k.registers is None else str(k.registers),
            MISSING if k.occupancy_pct is None else f"{k.occupancy_pct:g}%",
        )
        for k in m.kernels
    )
    return Table(
        (
            "kernel",
            "cluster",
            "launches a step",
            "time a step",
            "% of module",
            "grid",
            "block",
            "registers",
            "occupancy",
        ),
        rows,
    )


def unfused_table(m: ModuleAnalysis, by_time: bool, paths: Paths) -> Table:
    """Lone-instruction clusters grouped by opcode and source line, with the ops placed there
    (of the largest) and the reason, if any."""
    rows = []
    for u in m.unfused:
        ops = ", ".join(f"`{op[:70]}`" for op in u.ops[:2]) + (
            f" +{len(u.ops) - 2}" if len(u.ops) > 2 else ""
        )
        rows.append(
            (
                u.opcode,
                lines_cell(u.lines, paths),
                str(len(u.clusters)),
                step_time(u.value) if by_time else fmt.si(u.value, "FLOP"),
                fmt.pct(u.share),
                f"`{u.cluster}`",
                ops or MISSING,
                u.placed_by,
                u.reason,
            )
        )
    return Table(
        (
            "opcode",
            "source line",
            "clusters",
            "time a step" if by_time else "FLOPs",
            "%",
            "largest",
            "its source ops (before optimization)",
            "placed by",
            "reason",
        ),
        tuple(rows),
    )


def helpers_table(helpers: Sequence[ModuleAnalysis], timed: bool) -> Table:
    """The modules that are not the main program."""
    rows = tuple(
        (
            f"`{h.key}`",
            h.kind,
            str(h.cluster_count),
            fmt.si(h.flops, "FLOP"),
            step_time(h.time_s) if timed else MISSING,
            fmt.pct(h.share) if timed else MISSING,
            str(h.events) if timed else MISSING,
            MISSING if h.executions is None else str(h.executions),
        )
        for h in helpers
    )
    return Table(
        (
            "module",
            "what it is",
            "clusters",
            "FLOPs",
            fmt.KERNEL_TIME,
            "% of all modules'",
            "events",
            "executions",
        ),
        rows,
    )


# ---------------------------------------------------------------------------------------------
# Figures


def _label(row: ClusterRow, paths: Paths) -> str:
    line = paths.short(row.lines[0]) if row.lines else ""
    return f"{row.name} ({line})" if line else row.name


def top_figure(m: ModuleAnalysis, by_time: bool, paths: Paths) -> Figure:
    """Two bar panels: the step (or the FLOPs) by source line, and the largest clusters."""
    rows = [r for r in m.clusters if r.share > 0][:TOP_BARS]
    lines = [r for r in m.by_line if r.share > 0][:TOP_BARS]
    if not rows:
        raise NoData("no cluster has any device time" if by_time else "no cluster has FLOPs")
    n = max(len(rows), len(lines))
    names = [paths.short(r.label)[:48] for r in lines] + [r.name[:48] for r in rows]
    margin = 0.2 + max(len(x) for x in names) * 7 * CHAR_IN
    fig = new_figure(
        6.4 + 2 * margin, 1.3 + 0.3 * n, left=margin, bottom=0.5, top=0.55, wspace=margin / 3.2
    )
    left, right = fig.subplots(1, 2)
    panels = (
        (left, [paths.short(r.label) for r in lines], [r.share for r in lines], ["#70ad47"] * n),
        (
            right,
            [r.name for r in rows],
            [r.share for r in rows],
            ["#4472c4" if r.kind == "library" else "#ed7d31" for r in rows],
        ),
    )
    for ax, labels, shares, colors in panels:
        y = list(range(len(labels)))
        ax.barh(y, [x * 100 for x in shares], color=colors[: len(labels)])
        ax.set_yticks(y)
        ax.set_yticklabels([label[:48] for label in labels], fontsize=7)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel("% of the step's device time" if by_time else "% of the FLOPs", fontsize=8)
    left.set_title("by source line", fontsize=9, loc="left")
    right.set_title("largest clusters (blue: library calls)", fontsize=9, loc="left")
    fig.suptitle(m.key, fontsize=9)
    return fig


def _rated_clusters(m: ModuleAnalysis, a: ProgramAnalysis) -> list[ClusterRow]:
    """The module's clusters with both an achieved FLOP/s and an arithmetic intensity: the
    points of its roofline. Raises NoData, saying why, when there are none."""
    pts = [
        r
        for r in m.clusters
        if r.flops_per_s and r.intensity and r.flops_per_s > 0 and r.intensity > 0
    ]
    if not pts:
        raise NoData(
            "no profile: no achieved rates"
            if a.profile is None
            else "no cluster has both FLOPs and device time"
        )
    return pts


def _draw_ceilings(ax: Any, c: roofs.Roofs, xs: list[float]) -> None:
    """Draws each precision's ceiling under the bandwidth (flat without one; the bandwidth's
    slope alone without peaks), on an x range wide enough for each ridge, and names the
    bandwidth in the legend."""
    lo, hi = min(xs) / 4, max(xs) * 4
    cmap = matplotlib.colormaps["tab10"]
    bw = c.bytes_per_s
    for j, (prec, peak) in enumerate(sorted(c.peaks.items())):
        if bw:
            lo, hi = min(lo, peak / bw / 8), max(hi, peak / bw * 8)
        grid = log_grid(lo, hi)
        ys = [roofs.attainable(x, peak, bw) for x in grid]
        ax.plot(grid, ys, color=cmap(j), lw=1.4, label=f"{prec} {fmt.si(peak, 'FLOP/s')}")
    if bw and not c.peaks:
        grid = log_grid(lo, hi)
        ax.plot(grid, [bw * x for x in grid], color="#555", lw=1.2)
    if bw:
        ax.plot([], [], " ", label=f"bandwidth {fmt.si(bw, 'B/s')}")


def _draw_clusters(ax: Any, pts: list[ClusterRow], xs: list[float], paths: Paths) -> None:
    """Draws each cluster as a point, its area its share of the step (blue: a library call),
    and names the LABELLED_POINTS that take the most time."""
    sizes = [20 + 200 * r.share for r in pts]
    colors = ["#4472c4" if r.kind == "library" else "#ed7d31" for r in pts]
    ax.scatter(xs, [r.flops_per_s for r in pts], s=sizes, c=colors, alpha=0.7, zorder=3)
    for r in sorted(pts, key=lambda r: -(r.time_s or 0.0))[:LABELLED_POINTS]:
        ax.annotate(
            _label(r, paths)[:40],
            (r.intensity or 1.0, r.flops_per_s or 1.0),
            fontsize=6,
            xytext=(3, 3),
            textcoords="offset points",
        )


def roofline_figure(m: ModuleAnalysis, a: ProgramAnalysis, paths: Paths) -> Figure:
    """Each cluster's achieved FLOP/s against its arithmetic intensity, under the ceilings
    from --ceilings when given (else the points alone, and the title says so)."""
    pts = _rated_clusters(m, a)
    fig = new_figure(7.5, 4.6, left=0.9, bottom=0.6)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [r.intensity or 1.0 for r in pts]
    c = a.ceilings
    if c is not None:
        _draw_ceilings(ax, c, xs)
    _draw_clusters(ax, pts, xs, paths)
    ax.set_xlabel("arithmetic intensity, FLOP/byte (our cost model)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="both", alpha=0.25)
    where = (
        f"ceilings from {os.path.basename(c.source)}"
        if c is not None
        else "no ceilings given (--ceilings=ceilings.json from a run): points only"
    )
    ax.set_title(f"{m.key}: clusters, area = share of step; {where}", fontsize=8, loc="left")
    if c is not None:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def _figure(name: str, make: Callable[[], Figure], folder: Path) -> Figured:
    try:
        fig = make()
    except NoData as e:
        (folder / f"{name}.png").unlink(missing_ok=True)
        return Figured(name, note=str(e))
    except Exception as e:  # a figure must never break the report
        last = traceback.format_exception_only(e)[-1].strip()
        return Figured(name, note=f"the figure failed ({last})")
    path = save_figure(fig, folder / f"{name}.png")
    return Figured(name, file=f"{folder.name}/{path.name}")


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in key)[:120]


def save_figures(a: ProgramAnalysis, folder: Path) -> dict[str, Figured]:
    """Writes each main module's figures under `folder`; returns them by name."""
    paths = Paths(_all_lines(a))
    by_time = a.ranked_by == "device time"
    out: dict[str, Figured] = {}
    for m in a.modules:
        if m.role != "main":
            continue
        for kind, make in (
            ("top", lambda m=m: top_figure(m, by_time, paths)),
            ("roofline", lambda m=m: roofline_figure(m, a, paths)),
        ):
            name = f"{_safe(m.key)}.{kind}"
            out[name] = _figure(name, make, folder)
    return out


# ---------------------------------------------------------------------------------------------
# The document


def _image(figs: dict[str, Figured], name: str, alt: str, caption: str) -> Block:
    f = figs.get(name)
    if f is None or not f.file:
        return Para(f"*{alt}: not drawn ({f.note if f else 'no figure'}).*")
    return Image(f.file, alt, caption)


def report_blocks(
    a: ProgramAnalysis, dump: str, figs: dict[str, Figured], module_filter: str = ""
) -> tuple[Block, ...]:
    """The analyze report as document blocks."""
    by_time = a.ranked_by == "device time"
    paths = Paths(_all_lines(a))
    mains = [m for m in a.modules if m.role == "main"]
    helpers = [m for m in a.modules if m.role == "helper"]
    blocks: list[Block] = [Heading(1, f"XLA analysis of `{os.path.basename(dump) or dump}`")]
    intro = [f"Dump `{dump}`: {len(a.modules)} module(s) analysed"]
    if module_filter:
        intro.append(f" (`--module={module_filter}`)")
    intro.append(". ")
    if a.profile is not None:
        intro.append(f"Profile `{a.profile.path}`. ")
    else:
        intro.append("No profile (`--xplane`): clusters are ranked by our FLOP and byte counts. ")
    if a.ceilings is not None:
        intro.append(f"Ceilings from `{a.ceilings.source}`.")
    else:
        intro.append("No ceilings (`--ceilings`): rates are shown without roofs.")
    blocks.append(Para("".join(intro)))
    blocks.append(Para(a.main_rule))
    if a.steps is not None:
        blocks.append(Para(f"**Steps: {a.steps.count}**, from {a.steps.detail}."))
    if paths.root:
        blocks.append(Para(f"Source paths are relative to `{paths.root}`."))
    for note in a.notes:
        blocks.append(Para(f"Note: {note}"))
    if a.profile is not None:
        blocks += gap_blocks(a.profile.gaps)

    for m in mains:
        blocks += _main_module(m, a, by_time, paths, figs)
    if helpers:
        blocks.append(Heading(2, "Helper modules", "helpers"))
        blocks.append(
            Para(
                "Modules that are not the main program: RNG set-up, dtype conversions, "
                "transfers, single eager primitives and other programs, guessed from the name."
            )
        )
        blocks.append(helpers_table(helpers, by_time))
    if a.profile is not None:
        blocks += _profile_blocks(a)
        blocks.append(
            Para(
                f"Timeline: [`{runfolder.TIMELINE_FILE}`]({runfolder.TIMELINE_FILE}), every "
                "device event named by its cluster (kernel, source line, HLO op, command buffer "
                "and loop iteration in its args), each step and each command-buffer execution a "
                'slice. Open it offline in ui.perfetto.dev ("Open trace file") or '
                "chrome://tracing."
            )
        )
    blocks.append(Heading(2, "How to read this", "conventions"))
    blocks.append(Bullets(CONVENTIONS))
    blocks.append(
        Para(
            "Files: `analysis.json` (every table in full), `events.parquet` (every event of the "
            "window and its cluster, rule and reason: DuckDB, Polars or pyarrow read it), "
            "`kernels.json` (the match's totals), and per module `fusions.json`, `cost.json`, "
            "`hlo.txt`."
        )
    )
    return tuple(blocks)


def _main_module(
    m: ModuleAnalysis, a: ProgramAnalysis, by_time: bool, paths: Paths, figs: dict[str, Figured]
) -> list[Block]:
    calls = ", ".join(
        f"`{t}`" + (f" ({e})" if e else "") + (f" ×{n}" if n > 1 else "")
        for t, e, n in m.library_calls
    )
    head = [
        f"{m.cluster_count} clusters ({m.fusion_count} fusions), library calls: {calls or 'none'}",
        f"{fmt.si(m.flops, 'FLOP')} and {fmt.si(m.bytes, 'B')} a run (our cost model)",
    ]
    if by_time:
        head.append(
            f"{step_time(m.time_s)} of {fmt.KERNEL_TIME} ({fmt.pct(m.share)} of all modules'), "
            f"{fmt.count(m.kernels_per_step)} kernels a step"
            + (f", {m.executions} executions in the window" if m.executions else "")
        )
    what = "device time" if by_time else "FLOPs"
    blocks: list[Block] = [
        Heading(2, f"Main program `{m.key}`", _safe(m.key)),
        Bullets(tuple(head)),
        Heading(3, f"Clusters by {what}"),
        cluster_table(m, by_time, paths, 25),
    ]
    if len(m.clusters) > 25:
        blocks.append(Para(f"{len(m.clusters) - 25} more clusters in `analysis.json`."))
    blocks += module_step_notes(m)
    name = _safe(m.key)
    blocks.append(_image(figs, f"{name}.top", "Largest clusters", f"Largest clusters by {what}."))
    blocks.append(Heading(3, "By source line"))
    blocks.append(rollup_table(m.by_line, "source line", by_time, paths))
    blocks.append(Heading(3, "By named scope"))
    blocks.append(rollup_table(m.by_scope, "named scope", by_time, None))
    if m.by_layer:
        blocks.append(Para("The same, with repeated layers folded (`Block_0` … → `Block_*`):"))
        blocks.append(rollup_table(m.by_layer, "named scope", by_time, None))
    blocks.append(Heading(3, "Roofline"))
    blocks.append(
        _image(
            figs,
            f"{name}.roofline",
            "Roofline",
            "Achieved FLOP/s of each cluster against its arithmetic intensity; "
            + (
                "roofs: min(peak, bandwidth × intensity)."
                if a.ceilings is not None
                else "no ceilings given, so no roofs."
            ),
        )
    )
    if by_time:
        blocks.append(Heading(3, "Top kernels"))
        if m.kernels:
            blocks.append(kernel_table(m))
            if all(k.grid is None for k in m.kernels):
                blocks.append(Para("This profile records no launch shape (grid, block)."))
        else:
            blocks.append(Para("No kernel events of this module in the window."))
    blocks.append(Heading(3, "Ops that run unfused"))
    if m.unfused:
        blocks.append(
            Para(
                f"{m.unfused_total} cluster(s) are one instruction, neither fused nor a library "
                "call; grouped by opcode and source line. The reason is XLA's rule when the "
                'opcode is one it never fuses; XLA records no other reason ("no reason '
                'recorded").'
            )
        )
        blocks.append(unfused_table(m, by_time, paths))
    else:
        blocks.append(Para("Every cluster is a fusion or a library call."))
    if m.reverse_method:
        blocks.append(
            Para(
                f"Reverse map (pre-optimization op -> cluster, in `fusions.json`): "
                f"matched by {m.reverse_method}."
            )
        )
        blocks.append(Bullets(tuple(m.reverse_notes)))
    else:
        blocks.append(
            Para("No reverse map: the dump holds no before-optimizations file for this module.")
        )
    return blocks


def _profile_blocks(a: ProgramAnalysis) -> list[Block]:
    p = a.profile
    assert p is not None
    items = [
        f"{p.events_in_window} device events in the steady window"
        + (" (the marked steps)" if p.marked else " (the whole profile: no step markers)"),
        f"matched to a cluster: {fmt.pct(p.matched_fraction)} ({p.unmatched} unmatched, "
        f"reasons in `events.parquet`); ambiguous: {fmt.pct(p.gaps.ambiguous_fraction)}",
        f"{fmt.count(p.kernels_per_step)} kernels and {fmt.count(p.device_ops_per_step)} device "
        "ops a step over the analysed modules",
        f"device busy {step_time(p.busy_time_s)} a step (union of intervals); summed event time "
        f"{step_time(p.event_time_s)} a step",
        "attribution rules: " + ", ".join(f"{r} {n}" for r, n in p.rules),
    ]
    blocks: list[Block] = [Heading(2, "Profile", "profile"), Bullets(tuple(items))]
    blocks += step_blocks(a)
    if p.outside:
        blocks.append(
            Para(
                f"**Outside the selection**: {sum(o.events for o in p.outside)} events of "
                f"{len(p.outside)} program(s) that are not analysed here (another module, or "
                "the same name with another program id). None of them is attributed."
            )
        )
        blocks.append(
            Table(
                ("module", "program id", "events", "summed time"),
                tuple(
                    (f"`{o.module}`", str(o.program_id), str(o.events), step_time(o.time_s))
                    for o in p.outside
                ),
            )
        )
    return blocks


def host_blocks(hosts: Sequence[HostTotals]) -> list[Block]:
    """A session of several hosts: each host's totals and the merged ones ([] for one host)."""
    if not hosts:
        return []
    rows = tuple(
        (
            code(h.host) if h.host != "all" else "**all hosts**",
            str(h.events),
            fmt.pct(h.matched / h.events if h.events else 0.0),
            str(h.steps),
            str(h.kernels),
            f"{h.device_time_s:.6g} s",
            str(h.outside),
            code(h.events_file) if h.events_file else "",
        )
        for h in (*hosts, merged_hosts(hosts))
    )
    head = ("host", "events", "matched", "steps", "kernels", "device busy", "outside", "events")
    return [
        Heading(2, "Hosts", "hosts"),
        Para(
            f"**Hosts.** {len(hosts)} hosts' profiles of one session, each analysed apart "
            f"and merged; the clusters, steps and timeline above are {code(hosts[0].host)}'s. The "
            "events are one dataset partitioned by host (`events/host=<name>/`), which DuckDB, "
            "Spark, Trino and pyarrow read as one table with a `host` column."
        ),
        Table(head, rows),
    ]


def step_blocks(a: ProgramAnalysis) -> list[Block]:
    """Each marked step: wall time beside device time, idle fraction, attributed coverage."""
    if not a.step_rows:
        return []
    rows = tuple(
        (
            str(r.step),
            step_time(r.wall_s),
            step_time(r.device_s),
            fmt.pct(r.idle_fraction),
            step_time(r.event_s),
            step_time(r.attributed_s),
            fmt.pct(r.coverage),
        )
        for r in a.step_rows
    )
    head = ("step", "wall", "device busy", "device idle", "summed events", "attributed", "coverage")
    return [
        Para(
            "**Steps.** Wall is the step's `StepTraceAnnotation` window on the host; device busy "
            "the union of its events' intervals; idle = 1 - busy / wall. Coverage is the step's "
            "attributed events' summed self time over all its events'. Cluster times are the "
            "median step's."
        ),
        Table(head, rows),
    ]


def module_step_notes(m: ModuleAnalysis) -> list[Block]:
    """The steps in which one cluster took over 3x its median, and the custom-calls that have
    no cost model (0 FLOPs, no roof), with their time."""
    out: list[Block] = []
    if m.outliers:
        out.append(Para("Steps over 3× a cluster's median step (the ranking uses the median):"))
        out.append(
            Bullets(
                tuple(
                    f"`{o.cluster}`: step {o.step} took {step_time(o.time_s)}, "
                    f"{o.time_s / o.median_s:.1f}× its median step ({step_time(o.median_s)})"
                    if o.median_s
                    else f"`{o.cluster}`: step {o.step} took {step_time(o.time_s)}; its median "
                    "step is 0 (it ran in under half the steps)"
                    for o in m.outliers
                )
            )
        )
    if m.uncosted_calls:
        out.append(
            Para(
                f"**Uncosted library calls** ({len(m.uncosted_calls)}): no cost model, so they "
                "count 0 FLOPs and have no roof: "
                + ", ".join(
                    f"`{name}` (`{target}`, {step_time(t)} a step)"
                    for name, target, t in m.uncosted_calls
                )
                + "."
            )
        )
    return out


def write_figures(out: Path, a: ProgramAnalysis) -> dict[str, Figured]:
    """Writes plots/*.png under `out` (the figures need no reverse map, so the CLI draws them
    while one may still be computing); returns them by name for write_analysis_report."""
    if (out / "plots").is_symlink():  # planted: replace the link, never write through it
        (out / "plots").unlink()
    return save_figures(a, out / "plots")


def write_analysis_report(
    out: Path,
    a: ProgramAnalysis,
    dump: str,
    module_filter: str = "",
    figs: dict[str, Figured] | None = None,
    extra: tuple[Block, ...] = (),
) -> Path:
    """Writes report.md, report.html and (unless `figs` says they are written) plots/*.png
    under `out`, with `extra` blocks (the memory section) at the end; returns report.md's path."""
    for own in ("report.md", "report.html"):
        if (out / own).is_symlink():  # planted: replace the link, never write through it
            (out / own).unlink()
    figs = write_figures(out, a) if figs is None else figs
    blocks = report_blocks(a, dump, figs, module_filter) + extra
    io.write_text(out / "report.md", to_markdown(blocks))
    io.write_text(out / "report.html", to_html(blocks, f"XLA analysis: {dump}"))
    return out / "report.md"
