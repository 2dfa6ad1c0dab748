"""The report's figures: each function takes run data and returns a matplotlib Figure.

Functions are pure (no pyplot state, no files); `save_plots` at the edge writes PNG and SVG under
plots/ and turns a figure whose data is missing into a note instead of a crash.
"""

from __future__ import annotations

import io as stdio
import math
import os
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harness.common import fmt, forked
from harness.frontends import registry
from harness.program.roof import attainable
from harness.records.run_files import KernelEvent, Peak
from harness.report.memory import live_series, memory_pair
from harness.saved.run import SavedRun, SavedVariant
from harness.store import io

PLOT_NAMES = (
    "launches",
    "step_time",
    "compile_time",
    "roofline",
    "timeline",
    "fusion_map",
    "memory",
)
FORMATS = ("png", "svg")  # PNG is what the report shows; SVG is written on request
DPI = 110
VERDICT_COLORS = {"faster": "#2e7d32", "slower": "#c62828"}
NO_DIFFERENCE_COLOR = "#9e9e9e"


class NoData(Exception):
    """The figure's data is absent from this run; the message says which."""


@dataclass(frozen=True)
class PlotOutcome:
    """One plot's result: the files written (relative to the run) or why it was skipped."""

    name: str
    files: tuple[str, ...]
    note: str = ""


# Inches a character of tick-label text takes, per point of font size (DejaVu Sans, average).
CHAR_IN = 0.6 / 72

# A figure draws each bar, label and point: 20,000 variants or 3,000 ops took minutes and made
# images nobody can read. Each figure shows at most this many, says how many it left out, and
# the report's tables list every one; the work of a report stays linear in the run's size.
MAX_PLOT_VARIANTS = 40
MAX_TIMELINE_ROWS = 12
MAX_MAP_OPS = 60


def few(vs: list[SavedVariant], limit: int = MAX_PLOT_VARIANTS) -> list[SavedVariant]:
    """Returns at most `limit` of `vs` in their order: the baseline and lower bound kept, then
    the first of the others."""
    if len(vs) <= limit:
        return vs
    anchors = [v for v in vs if {"baseline", "lower_bound"} & set(v.roles)][:limit]
    chosen = {id(v) for v in anchors}
    for v in vs:
        if len(chosen) >= limit:
            break
        chosen.add(id(v))
    return [v for v in vs if id(v) in chosen]


def of_all(shown: int, total: int, noun: str = "variants") -> str:
    """Returns a title's note of what a capped figure left out ('' when it shows all)."""
    return "" if shown >= total else f" ({shown} of {total} {noun} shown)"


def new_figure(
    width: float,
    height: float,
    left: float = 0.8,
    bottom: float = 0.6,
    right: float = 0.2,
    top: float = 0.4,
    wspace: float = 0.2,
    hspace: float = 0.2,
) -> Figure:
    """Returns an empty figure with fixed margins in inches (the plot area between them).

    Fixed margins, not constrained layout: solving the layout measured every text's extent
    twice per save, half of each figure's drawing time.
    """
    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(
        left=min(left / width, 0.6),
        bottom=min(bottom / height, 0.6),
        right=max(1 - right / width, 0.65),
        top=max(1 - top / height, 0.62),
        wspace=wspace,
        hspace=hspace,
    )
    return fig


def warm_up() -> None:
    """Draws a tiny figure with a log axis into memory: matplotlib's font lookup and its
    mathtext parser (log tick labels) are built once per process, and children forked after
    this find them built (0.1 to 0.2 s of each process's first plot otherwise)."""
    fig = new_figure(1.0, 1.0)
    ax = fig.add_subplot()
    ax.set_yscale("log")
    ax.plot([1, 1000], [1, 1000])
    ax.set_title("warm-up", fontsize=9)
    fig.savefig(stdio.BytesIO(), format="png")


def label_margins(labels: list[str], size: float, degrees: float) -> tuple[float, float]:
    """Returns (left, bottom) inches that fit tick labels rotated by `degrees` and right-aligned
    under their ticks: the first label reaches left of the axes, the longest one down."""
    rad = math.radians(degrees)
    longest = max((len(s) for s in labels), default=0) * size * CHAR_IN
    first = len(labels[0]) * size * CHAR_IN if labels else 0.0
    return max(0.8, first * math.cos(rad) + 0.1), 0.45 + longest * math.sin(rad) + 0.1


def _bar_figure(names: list[str], width: float, height: float) -> tuple[Figure, Any]:
    left, bottom = label_margins(names, 8, 35)
    fig = new_figure(width, height + bottom - 0.6, left=left, bottom=bottom)
    return fig, _bar_axes(fig, names)


def _bar_axes(fig: Figure, names: list[str]) -> Any:
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return ax


def launches(run: SavedRun) -> Figure:
    """Returns grouped bars: device kernels and transfers per step for each profiled variant."""
    every = [v for v in run.variants if v.summary.profile.kernels_per_step is not None]
    if not every:
        raise NoData("no variant has kernels_per_step")
    vs = few(every)
    fig, ax = _bar_figure([v.name for v in vs], 8, 3.6)
    x = range(len(vs))
    k = [v.summary.profile.kernels_per_step or 0 for v in vs]
    t = [sum(tr.count for tr in v.summary.profile.transfers_per_step) for v in vs]
    ax.bar([i - 0.2 for i in x], k, 0.4, label="kernels per step", color="#4472c4")
    ax.bar([i + 0.2 for i in x], t, 0.4, label="transfers per step", color="#ed7d31")
    for i, (a, b) in enumerate(zip(k, t, strict=True)):
        ax.annotate(fmt.count(a), (i - 0.2, a), ha="center", va="bottom", fontsize=7)
        ax.annotate(fmt.count(b), (i + 0.2, b), ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("per step")
    ax.set_title(
        f"Launches and transfers per step ({run.platform}){of_all(len(vs), len(every))}",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return fig


def step_time(run: SavedRun) -> Figure:
    """Returns time-per-step bars with 95% intervals and the lower bound as a line.

    Bars are in config order, never ranked. Their colour is the verdict against the baseline:
    green faster, red slower, grey when the pair is the same program or no difference the run
    can resolve; the baseline itself is blue.
    """
    every = [v for v in run.variants if v.measured]
    if not every:
        raise NoData("no variant has a timed step")
    vs = few(every)
    fig, ax = _bar_figure([v.name for v in vs], 8, 3.8)
    med = [v.summary.timing.step_s * 1e3 for v in vs]
    lo, hi = [], []
    for m, v in zip(med, vs, strict=True):
        c = v.summary.timing.step_ci95_s
        lo.append(m - c[0] * 1e3 if c else 0.0)
        hi.append(c[1] * 1e3 - m if c else 0.0)
    colors = []
    gated = run.summary.noise is not None and not run.summary.noise.resolved
    for v in vs:
        verdict = v.summary.comparison.vs_baseline
        if "baseline" in v.roles:
            colors.append("#4472c4")
        elif verdict is None or gated:  # a run that could not time colours nothing
            colors.append("#bdbdbd")
        else:
            colors.append(VERDICT_COLORS.get(verdict.verdict, NO_DIFFERENCE_COLOR))
    ax.bar(range(len(vs)), med, color=colors, yerr=[lo, hi], capsize=3, ecolor="#333")
    handles = [
        Patch(color="#4472c4", label="baseline"),
        Patch(color=VERDICT_COLORS["faster"], label="faster than baseline"),
        Patch(color=VERDICT_COLORS["slower"], label="slower than baseline"),
        Patch(color=NO_DIFFERENCE_COLOR, label="no resolvable difference / same program"),
    ]
    base = run.by_role("baseline")
    bound = run.by_role("lower_bound", like=base) if base else run.by_role("lower_bound")
    if bound is not None and bound.measured:
        b = bound.summary.timing.step_s * 1e3
        line = ax.axhline(
            b, color="#c00000", ls="--", lw=1, label=f"lower bound {bound.name} {b:.3f} ms"
        )
        handles.append(line)
    ax.legend(handles=handles, fontsize=7)
    ax.set_ylabel("time per step, ms (median, 95% CI)")
    ax.set_title(
        f"Steady-state time per step (interleaved rounds){of_all(len(vs), len(every))}"
        + ("\nthis run could not resolve differences (its A/A check failed)" if gated else ""),
        fontsize=10,
        **({"color": "#c62828"} if gated else {}),  # matplotlib refuses color=None
    )
    return fig


def compile_segments(v: SavedVariant, pipelines: list[str]) -> dict[str, float]:
    """Returns a variant's compile time split into trace, lower, the named pipelines, the rest."""
    seg: dict[str, float] = {}
    c = v.summary.compile
    if registry.traits(v.framework).compile_phases:  # by_pipeline: its own compile's phases
        seg = {f"{v.framework} {k}": float(fmt.num(s) or 0.0) for k, s in c.by_pipeline.items()}
        if c.compile_s is not None and seg:
            seg[f"{v.framework} other"] = max(0.0, c.compile_s - sum(seg.values()))
        return seg
    for value, label in ((c.trace_s, "trace"), (c.lower_s, "lower")):
        if value is not None:
            seg[label] = float(value)
    xla = c.xla_compile_s
    by = c.by_pipeline or {}
    if by:
        for p in pipelines:
            seg[f"XLA {p}"] = float(fmt.num(by.get(p)) or 0.0)
        other = sum(float(fmt.num(s) or 0) for p, s in by.items() if p not in pipelines)
        seg["XLA other pipelines"] = other
        if xla is not None:
            seg["rest of XLA compile"] = max(
                0.0, xla - sum(float(fmt.num(s) or 0) for s in by.values())
            )
    elif xla is not None:
        seg["XLA compile"] = xla
    return seg


def top_pipelines(run: SavedRun, n: int = 5) -> list[str]:
    """Returns the `n` XLA pipelines with the largest compile time summed over variants."""
    total: dict[str, float] = {}
    for v in run.variants:
        if not registry.traits(v.framework).xla:
            continue
        for p, s in (v.summary.compile.by_pipeline or {}).items():
            total[p] = total.get(p, 0.0) + (fmt.num(s) or 0.0)
    return sorted(total, key=lambda p: -total[p])[:n]


def compile_time(run: SavedRun) -> Figure:
    """Returns stacked bars of each variant's compile time: trace, lower, XLA by pipeline (for
    a frontend whose traits say `compile_phases`: its compile's own phases)."""
    pipes = top_pipelines(run)
    every = [(v, compile_segments(v, pipes)) for v in run.variants]
    every = [(v, s) for v, s in every if s]
    if not every:
        raise NoData("no variant has trace_s, lower_s or xla_compile_s")
    shown = {id(v) for v in few([v for v, _ in every])}
    rows = [(v.name, s) for v, s in every if id(v) in shown]
    labels = list(dict.fromkeys(k for _, s in rows for k in s))  # first-seen order
    fig, ax = _bar_figure([n for n, _ in rows], 8, 3.8)
    cmap = matplotlib.colormaps["tab20"]  # XLA's phases and other compilers', all told apart
    bottom = [0.0] * len(rows)
    for j, label in enumerate(labels):
        vals = [s.get(label, 0.0) * 1e3 for _, s in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=label, color=cmap(j % 20))
        bottom = [b + x for b, x in zip(bottom, vals, strict=True)]
    ax.set_ylabel("compile time, ms")
    ax.set_title(f"First-call compile time by phase{of_all(len(rows), len(every))}", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return fig


# A roofline's ceiling is a polyline of this many segments: enough for a sharp ridge on a log axis.
CEILING_SEGMENTS = 200


def log_grid(lo: float, hi: float, segments: int = CEILING_SEGMENTS) -> list[float]:
    """Returns `segments + 1` points from `lo` to `hi`, evenly spaced on a log axis: where a
    roofline's ceiling is drawn."""
    return [lo * (hi / lo) ** (i / segments) for i in range(segments + 1)]


def _roofline_points(run: SavedRun) -> tuple[list[tuple[str, float, float, str]], int]:
    """Returns the points a roofline draws, (name, arithmetic intensity, achieved FLOP/s, GEMM
    precision) of at most MAX_PLOT_VARIANTS variants, and how many variants had both figures."""
    every = [
        v
        for v in run.variants
        if v.measured
        and v.summary.cost.arithmetic_intensity
        and v.summary.cost.achieved_flops_per_s
    ]
    if not every:
        raise NoData("no variant has both arithmetic intensity and achieved FLOP/s")
    pts = [
        (
            v.name,
            v.summary.cost.arithmetic_intensity,
            v.summary.cost.achieved_flops_per_s,
            v.summary.cost.peak_precision,
        )
        for v in few(every)
    ]
    return pts, len(every)


def _draw_ceilings(
    ax: Any, pts: list[tuple[str, float, float, str]], peaks: dict[str, Peak], bw: float | None
) -> list[str]:
    """Draws the ceiling of each GEMM precision the points used, under the copy bandwidth, on
    an x range wide enough for its ridge; returns those precisions (the legend's entries)."""
    xs = [ai for _, ai, _, _ in pts]
    lo, hi = min(xs) / 4, max(xs) * 4
    cmap = matplotlib.colormaps["tab10"]
    used = sorted({p for *_, p in pts if p in peaks})
    for j, prec in enumerate(used):
        peak = fmt.num(peaks[prec].flops_per_s)
        if not peak or not bw:
            continue
        lo, hi = min(lo, peak / bw / 8), max(hi, peak / bw * 8)
        grid = log_grid(lo, hi)
        ax.plot(
            grid,
            [attainable(x, peak, bw) for x in grid],
            color=cmap(j),
            lw=1.5,
            label=f"{prec} ceiling {fmt.si(peak, 'FLOP/s')}, {fmt.si(bw, 'B/s')}",
        )
    return used


def _ceilings_when(run: SavedRun) -> str:
    """Returns when the run's ceilings were measured: in the run, or how long before it."""
    age = fmt.num(run.ceilings.age_s) if run.ceilings is not None else None
    return (
        "measured in this run"
        if not age
        else f"measured on this host {fmt.age(age)} before the run"
    )


def roofline(run: SavedRun) -> Figure:
    """Returns a log-log roofline: arithmetic intensity vs achieved FLOP/s under each
    variant's own ceiling (its GEMM precision), and the copy bandwidth."""
    pts, every = _roofline_points(run)
    peaks = run.ceilings.peaks if run.ceilings is not None else {}
    bw = fmt.num(run.ceilings.peak_bytes_per_s) if run.ceilings is not None else None
    fig = new_figure(7, 4.2, left=0.9, bottom=0.6)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    used = _draw_ceilings(ax, pts, peaks, bw)
    cmap = matplotlib.colormaps["tab10"]
    # One collection for every point, each its own colour as one scatter call apiece gave.
    ax.scatter(
        [ai for _, ai, _, _ in pts],
        [f for _, _, f, _ in pts],
        s=25,
        zorder=3,
        c=[cmap(i % 10) for i in range(len(pts))],
    )
    for name, ai, f, _ in pts:
        ax.annotate(name, (ai, f), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity, FLOP/byte")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="major", alpha=0.25)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_title(
        f"Roofline ({run.platform}), ceilings {_ceilings_when(run)}{of_all(len(pts), every)}",
        fontsize=9,
    )
    if used:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def step_events(v: SavedVariant) -> tuple[list[KernelEvent], str]:
    """Returns one step's device events (the second marked step when there are several)."""
    steps = sorted({r.step for r in v.kernels if r.step is not None})
    if steps:
        step = steps[1] if len(steps) > 1 else steps[0]
        return [r for r in v.kernels if r.step == step], f"step {step}"
    return list(v.kernels), "whole profile"


# The timeline names at most this many clusters, each in a colour of its own; the rest are
# "other", in grey. Ten colours a reader can tell apart, none of them grey.
TIMELINE_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
)  # fmt: skip
OTHER = "other"
OTHER_COLOR = "#9e9e9e"
STEP_BAND_COLOR = "#ececec"


def event_cluster(e: KernelEvent) -> str:
    return str(e.cluster or e.name)


def timeline_colors(
    rows: list[tuple[SavedVariant, list[KernelEvent], str]],
) -> tuple[dict[str, str], list[str]]:
    """Returns each named cluster's colour and the named clusters, the most time first: the
    TIMELINE_COLORS clusters with the most device time over the steps drawn. Any other
    cluster is drawn in OTHER_COLOR."""
    total: dict[str, float] = {}
    for _, evs, _ in rows:
        for e in evs:
            total[event_cluster(e)] = total.get(event_cluster(e), 0.0) + e.duration_ns
    named = sorted(total, key=lambda c: (-total[c], c))[: len(TIMELINE_COLORS)]
    return dict(zip(named, TIMELINE_COLORS, strict=False)), named


def _timeline_rows(
    run: SavedRun,
) -> tuple[list[tuple[SavedVariant, list[KernelEvent], str]], int]:
    """Returns the timeline's rows, (variant, one step's events with a start and a duration,
    which step), of at most MAX_TIMELINE_ROWS variants, and how many variants had events."""
    rows = []
    for v in run.variants:
        evs, label = step_events(v)
        evs = [
            e for e in evs if fmt.num(e.start_ns) is not None and fmt.num(e.duration_ns) is not None
        ]
        if evs:
            rows.append((v, evs, label))
    if not rows:
        raise NoData("no variant has kernels.json events")
    keep = {id(v) for v in few([v for v, _, _ in rows], MAX_TIMELINE_ROWS)}
    return [r for r in rows if id(r[0]) in keep], len(rows)


def _draw_events(ax: Any, evs: list[KernelEvent], color: dict[str, str]) -> list[str]:
    """Draws the events on their streams, in µs from the first, each in its cluster's colour;
    returns the streams, one a row from the top."""
    t0 = min(e.start_ns for e in evs)
    streams = sorted({str(e.stream or "") for e in evs})
    row_of = {s: i for i, s in enumerate(streams)}
    # One collection per (stream, cluster): a Rectangle per event costs seconds to draw
    # for a profile with thousands of kernels.
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for e in evs:
        key = (row_of[str(e.stream or "")], event_cluster(e))
        spans.setdefault(key, []).append(((e.start_ns - t0) / 1e3, e.duration_ns / 1e3))
    for (y, cluster), xranges in spans.items():
        drawn = ax.broken_barh(
            xranges,
            (y - 0.3, 0.6),
            facecolors=color.get(cluster, OTHER_COLOR),
            edgecolor="none",
            zorder=2,
        )
        drawn.set_gid(cluster)  # which cluster a segment is: the legend test reads it
    return streams


def _draw_timeline_row(
    ax: Any, v: SavedVariant, evs: list[KernelEvent], label: str, color: dict[str, str]
) -> bool:
    """Draws one variant's step: its events, the median timed step behind them, its streams
    and title; returns whether it drew the step's band."""
    streams = _draw_events(ax, evs, color)
    step = fmt.num(v.summary.timing.step_s)
    if step:
        ax.axvspan(0, step * 1e6, color=STEP_BAND_COLOR, zorder=0, lw=0)
    ax.autoscale_view()
    gap = v.summary.profile.host_gap_per_step_s
    note = f"  host gap {fmt.ms(gap)}" if gap is not None else ""
    ax.set_yticks(range(len(streams)))
    ax.set_yticklabels([s[:22] for s in streams], fontsize=6)
    ax.set_title(f"{v.name} ({label}, {len(evs)} events){note}", fontsize=8, loc="left")
    ax.tick_params(axis="x", labelsize=7)
    return bool(step)


def _timeline_legend(
    rows: list[tuple[SavedVariant, list[KernelEvent], str]],
    color: dict[str, str],
    named: list[str],
    banded: bool,
) -> list[Patch]:
    """Returns the legend's entries: each named cluster, "other" with how many clusters it
    holds, and the median timed step's band when one was drawn."""
    others = {event_cluster(e) for _, evs, _ in rows for e in evs} - set(named)
    handles = [Patch(color=color[c], label=c[:30]) for c in named]
    if others:
        handles.append(Patch(color=OTHER_COLOR, label=f"{OTHER} ({len(others)} clusters)"))
    if banded:
        handles.append(Patch(color=STEP_BAND_COLOR, label="median timed step"))
    return handles


def timeline(run: SavedRun) -> Figure:
    """Returns an Nsight-style Gantt per variant: one step's events on their streams.

    The clusters with the most device time are coloured, each named in the legend; every other
    event is grey ("other"). The light band behind each row is the variant's median timed step
    from the first device event, so what the events leave of it is time no event covers.
    """
    rows, total = _timeline_rows(run)
    color, named = timeline_colors(rows)
    streams = {str(e.stream or "") for _, evs, _ in rows for e in evs}
    left = 0.25 + min(22, max(len(s) for s in streams)) * 6 * CHAR_IN
    fig = new_figure(
        10.5, 1.0 + 1.1 * len(rows), left=left, bottom=0.55, right=2.3, top=0.35, hspace=0.6
    )
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    banded = [
        _draw_timeline_row(ax, v, evs, label, color)
        for ax, (v, evs, label) in zip(axes, rows, strict=True)
    ]
    axes[-1].set_xlabel(
        "µs from the step's first device event" + of_all(len(rows), total, "variants' steps")
    )
    handles = _timeline_legend(rows, color, named, any(banded))
    fig.legend(handles=handles, fontsize=6, loc="upper right", bbox_to_anchor=(1.0, 1.0))
    return fig


def fusion_partner(run: SavedRun) -> SavedVariant | None:
    """Returns the variant shown beside the baseline in the fusion map: the compiled variant of
    the same size whose clusters differ most in number from the baseline's."""
    base = run.by_role("baseline")
    cands = [
        v
        for v in run.variants
        if "baseline" not in v.roles
        and v.reverse_map()
        and "eager" not in v.roles
        and (base is None or v.same_size(base))
    ]
    if not cands:
        return None
    n = len(base.cluster_entries()) if base else 0
    return max(cands, key=lambda v: abs(len(v.cluster_entries()) - n))


def _fusion_panels(run: SavedRun) -> list[tuple[SavedVariant, dict[str, list[str]], int]]:
    """Returns the fusion map's panels, the baseline's and its partner's: each variant, its
    reverse map cut to its first MAX_MAP_OPS ops, and how many ops the whole map has."""
    base = run.by_role("baseline")
    # Each panel's reverse map, built once and cut to its first MAX_MAP_OPS ops (a program
    # returning 3,000 arrays has 3,000 rows; their clusters come with them).
    maps = [(v, v.reverse_map()) for v in (base, fusion_partner(run)) if v is not None]
    panels = [(v, dict(list(m.items())[:MAX_MAP_OPS]), len(m)) for v, m in maps if m]
    if not panels:
        raise NoData("no fusions.json reverse map for the baseline or any other variant")
    return panels


def _fusion_figure(panels: list[tuple[SavedVariant, dict[str, list[str]], int]]) -> Figure:
    """Returns the empty figure of the fusion map, with room for its longest op and cluster
    names and its tallest panel."""
    height = max(len(m) for _, m, _ in panels)
    op_labels = [o[:38] for _, m, _ in panels for o in m]
    cluster_labels = [c[:24] for _, m, _ in panels for cs in m.values() for c in cs]
    left = 0.2 + max((len(o) for o in op_labels), default=0) * 6 * CHAR_IN
    _, bottom = label_margins(cluster_labels, 6, 45)
    panel = 2.8 + left
    return new_figure(
        panel * len(panels),
        0.8 + bottom + 0.22 * height,
        left=left,
        bottom=bottom,
        top=0.45,
        wspace=left / 2.8,
    )


def _draw_fusion_panel(ax: Any, v: SavedVariant, m: dict[str, list[str]], total: int) -> None:
    """Draws one variant's grid: a point where an op (a row) ended up in a cluster (a
    column), and "folded away" beside an op in none."""
    ops = list(m)
    column = {c: j for j, c in enumerate(dict.fromkeys(c for cs in m.values() for c in cs))}
    clusters = list(column)
    points = [(column[c], i) for i, op in enumerate(ops) for c in m[op]]
    if points:
        ax.scatter(*zip(*points, strict=True), s=40, color="#4472c4")
    for i, op in enumerate(ops):
        if not m[op]:
            ax.annotate("folded away", (0, i), fontsize=6, color="#888", va="center")
    ax.set_yticks(range(len(ops)))
    ax.set_yticklabels([o[:38] for o in ops], fontsize=6)
    ax.set_xticks(range(len(clusters)))
    ax.set_xticklabels([c[:24] for c in clusters], rotation=45, ha="right", fontsize=6)
    ax.set_xlim(-0.5, max(len(clusters), 1) - 0.5)
    ax.invert_yaxis()
    ax.grid(alpha=0.25)
    cut = f" (first {len(ops)} of {total} ops)" if total > len(ops) else ""
    ax.set_title(f"{v.name}: {len(ops)} ops → {len(clusters)} clusters{cut}", fontsize=9)


def fusion_map(run: SavedRun) -> Figure:
    """Returns side-by-side grids: which pre-optimization ops ended up in which cluster."""
    panels = _fusion_panels(run)
    fig = _fusion_figure(panels)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (v, m, total) in zip(axes, panels, strict=True):
        _draw_fusion_panel(ax, v, m, total)
    return fig


def memory(run: SavedRun) -> Figure:
    """Bytes live over the schedule: the baseline and the variant whose peak differs most."""

    pair = memory_pair(run)
    if pair is None:
        raise NoData("no two variants with a live-range peak")
    fig = new_figure(7.5, 3.2, left=0.9)
    ax = fig.add_subplot(1, 1, 1)
    drawn = 0
    for v in pair:
        live, step = live_series(run, v)
        if not live:
            continue
        drawn += 1
        xs = [i * step for i in range(len(live))]
        (line,) = ax.plot(xs, [b / 1e6 for b in live], lw=1.2, label=v.name)
        m = v.summary.memory
        if m is not None and m.peak_bytes is not None and m.peak_at is not None:
            ax.plot([m.peak_at], [m.peak_bytes / 1e6], "o", color=line.get_color())
    if not drawn:
        raise NoData("no memory.json with live bytes")
    ax.set_xlabel("schedule position")
    ax.set_ylabel("live MB")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.25)
    ax.set_title("bytes live over the schedule (dot: XLA's live-range peak)", fontsize=9)
    return fig


PLOTS: dict[str, Callable[[SavedRun], Figure]] = {
    "launches": launches,
    "step_time": step_time,
    "compile_time": compile_time,
    "roofline": roofline,
    "timeline": timeline,
    "fusion_map": fusion_map,
    "memory": memory,
}


def save_figure(fig: Figure, path: Path) -> Path:
    """Writes a figure atomically (a temporary file renamed), with the user's umask; returns
    the path."""
    ext = path.suffix.lstrip(".")
    tmp = path.with_name(f".{path.stem}.tmp.{ext}")
    io.check_inside(tmp)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # A name holding a control character (an escape sequence in a module name) has no
        # glyph, and matplotlib's warning would print that character raw to the terminal.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        fig.savefig(tmp, format=ext, metadata={"Date": None} if ext == "svg" else None)
    os.chmod(tmp, io.FILE_MODE)
    tmp.replace(path)
    return path


def _save_one(run: SavedRun, name: str, out: Path, formats: tuple[str, ...]) -> PlotOutcome:
    """Draws and writes one plot; removes its stale files; returns what happened."""
    try:
        fig = PLOTS[name](run)
    except NoData as e:
        outcome = PlotOutcome(name, (), f"skipped: {e}")
    except Exception as e:  # a plot must never break the report
        last = traceback.format_exception_only(e)[-1].strip()
        outcome = PlotOutcome(name, (), f"skipped: the plot failed ({last})")
    else:
        files = [f"{out.name}/{save_figure(fig, out / f'{name}.{ext}').name}" for ext in formats]
        outcome = PlotOutcome(name, tuple(files))
    for ext in set(FORMATS) - {f.rsplit(".", 1)[-1] for f in outcome.files}:
        (out / f"{name}.{ext}").unlink(missing_ok=True)
    return outcome


def save_plots(
    run: SavedRun, out: Path, formats: tuple[str, ...] = ("png",)
) -> tuple[PlotOutcome, ...]:
    """Writes plots/<name>.<format> for every plot with data; returns what happened to each,
    in PLOTS order.

    Stale files of a skipped plot, or of a format not asked for, are removed, so the folder
    always matches the report. Plots are drawn in forked children too, one per spare CPU
    (harness.common.forked): drawing is most of the report's time.
    """
    out.mkdir(parents=True, exist_ok=True)
    done = forked.fork_map(
        lambda name: _save_one(run, name, out, formats),
        list(PLOTS),
        encode=lambda o: [o.name, list(o.files), o.note],
        decode=lambda d: PlotOutcome(str(d[0]), tuple(d[1]), str(d[2])),
    )
    return tuple(done)
