"""The tables of a module's ranked clusters and roll-ups, with the conventions they follow:
shared by the run report's "Where the time goes" (harness.report.ranking) and the report of
`python -m harness.analyze` (harness.program.report), so both rank and roll up alike."""

from __future__ import annotations

import os
import os.path
from collections.abc import Sequence

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.program.roof import ABOVE_CEILING
from harness.records.program import ClusterRow, ModuleAnalysis, RollUp
from harness.report.doc import Table, code


class Paths:
    """Shortens source paths to the part below the folder they all share."""

    def __init__(self, labels: Sequence[str]) -> None:
        files = sorted({label.rpartition(":")[0] for label in labels if ":" in label})
        common = os.path.commonpath(files) if files else ""
        if len(files) == 1:
            common = os.path.dirname(files[0])
        self.root = common if common not in ("", "/") else ""

    def short(self, label: str) -> str:
        if self.root and label.startswith(self.root + "/"):
            return label[len(self.root) + 1 :]
        return label


def lines_cell(labels: Sequence[str], paths: Paths, limit: int = 2) -> str:
    """Up to `limit` source lines, shortened, and how many more; MISSING when there are none."""
    if not labels:
        return MISSING
    shown = [f"`{paths.short(x)}`" for x in labels[:limit]]
    more = f" +{len(labels) - limit}" if len(labels) > limit else ""
    return ", ".join(shown) + more


def _scopes(labels: Sequence[str], limit: int = 1) -> str:
    labels = [x for x in labels if x] or []
    if not labels:
        return MISSING
    more = f" +{len(labels) - limit}" if len(labels) > limit else ""
    return ", ".join(code(x) for x in labels[:limit]) + more  # op_name: HLO metadata


def _kind(row: ClusterRow) -> str:
    if row.kind == "library":
        return f"library `{row.target}`"
    return row.kind


def _rate(value: float | None, unit: str) -> str:
    return fmt.si(value, unit) if value is not None else MISSING


def step_time(seconds: float | None) -> str:
    """A time a step, in ms (µs under 0.1 ms), or MISSING."""
    if seconds is None:
        return MISSING
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} µs"


def cluster_table(m: ModuleAnalysis, by_time: bool, paths: Paths, limit: int) -> Table:
    """The ranking: clusters by kernel time a step (or by FLOPs without a profile)."""
    rows = []
    for i, r in enumerate(m.clusters[:limit], 1):
        if by_time:
            rows.append(
                (
                    str(i),
                    code(r.name),
                    _kind(r),
                    step_time(r.time_s),
                    fmt.pct(r.share),
                    fmt.count(r.runs) if r.runs is not None else MISSING,
                    fmt.si(r.flops, "FLOP"),
                    fmt.si(r.bytes, "B"),
                    _rate(r.flops_per_s, "FLOP/s"),
                    _rate(r.bytes_per_s, "B/s"),
                    # Above 100% on a GPU is no achievement but a wrong count: withheld.
                    f"withheld: {ABOVE_CEILING}"
                    if r.above_ceiling
                    else fmt.pct(r.roof_fraction) + (f" ({r.roof})" if r.roof else ""),
                    lines_cell(r.lines, paths),
                    _scopes(r.scopes),
                )
            )
        else:
            rows.append(
                (
                    str(i),
                    code(r.name),
                    _kind(r),
                    fmt.si(r.flops, "FLOP"),
                    fmt.pct(r.share),
                    fmt.si(r.bytes, "B"),
                    f"{r.intensity:.3g}" if r.intensity is not None else MISSING,
                    lines_cell(r.lines, paths),
                    _scopes(r.scopes),
                )
            )
    if by_time:
        header = (
            "#",
            "cluster",
            "kind",
            "time a step",
            "% of step",
            "runs a step",
            "FLOPs a run",
            "bytes a run",
            "FLOP/s",
            "B/s",
            "of roof",
            "source line",
            "named scope",
        )
    else:
        header = (
            "#",
            "cluster",
            "kind",
            "FLOPs",
            "% of FLOPs",
            "bytes",
            "FLOP/byte",
            "source line",
            "named scope",
        )
    return Table(header, tuple(rows))


def rollup_table(rows: Sequence[RollUp], what: str, by_time: bool, paths: Paths | None) -> Table:
    """A roll-up by source line or named scope."""
    value_head = ("time a step", "% of step") if by_time else ("FLOPs", "% of FLOPs")
    body = []
    for r in rows:
        label = paths.short(r.label) if paths is not None else r.label
        body.append(
            (
                f"`{label}`" if label else "(top level)",
                step_time(r.value) if by_time else fmt.si(r.value, "FLOP"),
                fmt.pct(r.share),
                str(r.clusters),
                f"`{r.top_cluster}`",
            )
        )
    return Table((what, *value_head, "clusters", "largest cluster"), tuple(body))


CONVENTIONS = (
    "A cluster is one unit XLA runs: a fusion, a library call (cuBLAS, YNNPACK, ...) or a lone "
    "instruction.",
    "Time is each event's *self* time (its duration less the events nested in it on the same "
    "stream), summed per cluster and divided by the steps; with marked steps, the median over "
    "the steps of each step's sum (a step a cluster did not run in counts 0), so one stalled "
    "event cannot top the ranking. Shares are of the (median) step's summed event time; events "
    "that overlap on different streams or threads each count in full.",
    "FLOPs and bytes are our cost model of one run of the cluster (`cost.json`); achieved "
    "FLOP/s and B/s multiply them by the runs a step and divide by the time. `of roof` is the "
    "achieved FLOP/s over min(peak, bandwidth × intensity), the peak of the GEMM's precision "
    "(else the largest measured). Above 100% on a CPU the cluster beat the measured ceiling: "
    "data that fits in cache moves faster than the DRAM copy bandwidth. Above 100% on a GPU the "
    f"figure is withheld ({ABOVE_CEILING}): it would not be an achievement but a wrong count.",
    "A source line is the innermost frame in your code (frames in site-packages and the "
    "standard library are skipped); a named scope is the op_name path without `jit(...)` and "
    "the primitive, so `jax.named_scope` and flax module paths show. A cluster spanning "
    "several lines or scopes gives each an equal part.",
)
