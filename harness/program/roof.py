"""A cluster's achieved rates against the device's measured ceilings (the `of roof` column of
the analyze report and of the study's "Where the time goes").

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
    flops: float, moved: float, runs: float | None, time_s: float | None
) -> tuple[float | None, float | None]:
    """Achieved FLOP/s and B/s: the cost of one run times the runs a step, over the time."""
    if not time_s or runs is None:
        return None, None
    return flops * runs / time_s, moved * runs / time_s


def roof(
    flops_per_s: float | None, intensity: float | None, precision: str, c: Roofs | None
) -> tuple[float | None, str]:
    """Achieved FLOP/s over the roof at this intensity, min(peak, bandwidth x intensity), and
    which roof that is ("bf16 peak", "bandwidth"); (None, "") without ceilings or work."""
    if c is None or flops_per_s is None or not intensity:
        return None, ""
    peak = c.peak_for(precision or None)
    roofs = []
    if peak is not None:
        roofs.append((peak[1], f"{peak[0]} peak"))
    if c.bytes_per_s:
        roofs.append((c.bytes_per_s * intensity, "bandwidth"))
    if not roofs:
        return None, ""
    value, name = min(roofs)
    return flops_per_s / value, name


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
