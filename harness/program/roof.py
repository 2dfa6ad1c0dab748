"""The roofline, defined once: achieved rates (`rates`), the roof at an intensity
(`attainable`) and a cluster against it (`roof`: the `of roof` column of the analyze report
and of the study's "Where the time goes"). The study's cost section and roofline plot, and the
analyze report's, compute with these.

On a GPU a cluster above 100% of its roof did not beat the hardware: the cost model counts
work the call does not do, or the measured ceiling is low. Such a row is marked
(ABOVE_CEILING) so that it is never read, or ranked, as efficient. On a CPU, data that fits in
cache moves faster than the DRAM copy bandwidth the roof is drawn from, so a figure above 100%
is expected there and left unmarked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from harness.records.program import Roofs

if TYPE_CHECKING:
    from harness.hlo.cost import ClusterCost

ABOVE_CEILING = "above the measured ceiling: the cost model or the ceiling is wrong here"


def rates(
    flops: float | None, moved: float | None, runs: float | None, time_s: float | None
) -> tuple[float | None, float | None]:
    """Achieved FLOP/s and B/s: the cost of one run times the runs a step, over the time; a
    figure not counted (None) has no rate, and neither has anything without a time or runs."""
    if not time_s or runs is None:
        return None, None
    return (
        flops * runs / time_s if flops is not None else None,
        moved * runs / time_s if moved is not None else None,
    )


def attainable(intensity: float, peak: float | None, bytes_per_s: float | None) -> float | None:
    """The roof at this arithmetic intensity: the lower of the peak and bandwidth x intensity,
    of those measured (None: neither). Every roofline draws and divides by this one."""
    bounds = [b for b in (peak, bytes_per_s * intensity if bytes_per_s else None) if b]
    return min(bounds) if bounds else None


def roof(
    flops_per_s: float | None, intensity: float | None, precision: str, c: Roofs | None
) -> tuple[float | None, str]:
    """Achieved FLOP/s over the roof at this intensity (`attainable`), and which roof that is
    ("bf16 peak", "bandwidth": the bandwidth where the two meet); (None, "") without ceilings
    or work."""
    if c is None or flops_per_s is None or not intensity:
        return None, ""
    peak = c.peak_for(precision or None)
    value = attainable(intensity, peak[1] if peak is not None else None, c.bytes_per_s)
    if value is None:
        return None, ""
    on_bandwidth = bool(c.bytes_per_s) and value == c.bytes_per_s * intensity
    return flops_per_s / value, "bandwidth" if on_bandwidth or peak is None else f"{peak[0]} peak"


def above_ceiling(fraction: float | None, c: Roofs | None) -> bool:
    """True for a GPU cluster above 100% of its measured roof (see the module doc)."""
    return fraction is not None and fraction > 1.0 and c is not None and c.platform == "gpu"


def uncosted_calls(
    clusters: Iterable[ClusterCost], times: Mapping[str, float | None]
) -> tuple[tuple[str, str, float | None], ...]:
    """(cluster, custom-call targets, time a step) of each cluster holding a custom-call the
    cost model has no model of: its FLOPs read 0 and it has no roof, which the report says."""
    out = []
    for c in clusters:
        targets = [t for t, _ in c.uncosted if t.startswith("custom-call:")]
        if targets and c.name in times:
            out.append(
                (c.name, ",".join(t.removeprefix("custom-call:") for t in targets), times[c.name])
            )
    return tuple(out)
