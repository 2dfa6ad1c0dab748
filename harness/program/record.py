"""The records of a program's analysis: the modules it reads (`ModuleInput`), the ceilings of
its roofline, and what it finds (`ProgramAnalysis`: each module's clusters ranked, rolled up
by source line and named scope, its kernels and unfused ops).

`python -m harness.analyze` writes one as analysis.json (harness.program), and each compiled
variant of a study as ranking.json (harness.analyze.ranking); the functions that fill them in
are harness.program.module_analysis and harness.program.sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.records.gaps import AttributionGaps
from harness.store.records import to_json

if TYPE_CHECKING:  # a module's parsed input, never read back: the report loads no HLO code
    from harness.hlo.clusters import Cluster
    from harness.hlo.cost import ModuleCost
    from harness.hlo.parser import HloModule
    from harness.hlo.reverse_map import ReverseMap

ProgramKey = tuple[str, int | None]  # (HLO module name, program id / XLA module number)


# ---------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class ModuleInput:
    """One analysed module: its dump key, program, parsed HLO, clusters, costs, reverse map."""

    key: str
    name: str
    program_id: int | None
    hlo: HloModule = field(repr=False, compare=False)
    clusters: tuple[Cluster, ...] = field(repr=False, compare=False)
    cost: ModuleCost = field(repr=False, compare=False)
    reverse: ReverseMap | None = field(default=None, repr=False, compare=False)

    @property
    def program(self) -> ProgramKey:
        return (self.name, self.program_id)


@dataclass(frozen=True)
class CeilingRates:
    """Device ceilings from a run's ceilings.json: FLOP/s per precision and copy bandwidth."""

    peaks: Mapping[str, float]
    bytes_per_s: float | None
    source: str
    platform: str = ""  # "gpu", "cpu", or "" when ceilings.json does not say

    def peak_for(self, precision: str | None) -> tuple[str, float] | None:
        """The (precision, FLOP/s) a cluster is held to: its GEMM's precision when measured,
        else the largest peak measured."""
        if precision and precision in self.peaks:
            return precision, self.peaks[precision]
        if not self.peaks:
            return None
        best = max(self.peaks, key=lambda p: self.peaks[p])
        return best, self.peaks[best]


def ceilings_from_json(data: Any, source: str) -> CeilingRates:
    """Reads a run's ceilings.json (`peaks: {precision: {flops_per_s}}` and `peak_bytes_per_s`,
    or the older single `peak_flops_per_s` with `dtype`). Raises ValueError naming the key."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a JSON object")
    peaks: dict[str, float] = {}
    raw = data.get("peaks")
    if isinstance(raw, dict):
        for prec, entry in raw.items():
            value = entry.get("flops_per_s") if isinstance(entry, dict) else None
            if _positive(value):
                peaks[str(prec)] = float(value)
    if _positive(data.get("peak_flops_per_s")):
        dtype = str(data.get("dtype") or "peak")
        short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(dtype, dtype)
        peaks.setdefault(short, float(data["peak_flops_per_s"]))
    bw = data.get("peak_bytes_per_s")
    if not peaks and not _positive(bw):
        raise ValueError(f"{source}: no `peaks` and no `peak_bytes_per_s`: not a ceilings.json")
    platform = data.get("platform") if isinstance(data.get("platform"), str) else ""
    return CeilingRates(peaks, float(bw) if _positive(bw) else None, source, platform)


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


# ---------------------------------------------------------------------------------------------
# Outputs


@dataclass(frozen=True)
class Steps:
    """How many steps the steady window holds, and how that was learned."""

    count: int
    how: str  # "markers" | "executions" | "flag"
    detail: str


@dataclass(frozen=True)
class StepRow:
    """One marked step: host wall time (its markers' span), device busy time (the union of its
    events' intervals), summed event self time, the attributed part, and the fractions."""

    step: int
    wall_s: float | None
    device_s: float
    event_s: float
    attributed_s: float
    idle_fraction: float | None  # 1 - device / wall; None without a marker
    coverage: float  # attributed_s / event_s


@dataclass(frozen=True)
class Outlier:
    """One step in which a cluster took over OUTLIER_FACTOR x its median step time
    (harness.program.steps)."""

    cluster: str
    step: int
    time_s: float
    median_s: float


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of a module, with its cost and (with a profile) its time per step."""

    name: str
    kind: str
    target: str
    flops: float
    bytes: float
    time_s: float | None = None
    share: float = 0.0
    launches: float | None = None
    runs: float | None = None
    flops_per_s: float | None = None
    bytes_per_s: float | None = None
    roof_fraction: float | None = None
    roof: str = ""
    above_ceiling: bool = False  # a GPU cluster over 100% of its roof (harness.program.roof)
    precision: str = ""
    lines: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved, or None when the cluster moves nothing."""
        return self.flops / self.bytes if self.bytes else None


@dataclass(frozen=True)
class RollUp:
    """One source line or named scope: its part of the step (time or FLOPs) and clusters."""

    label: str
    value: float
    share: float
    clusters: int
    top_cluster: str


@dataclass(frozen=True)
class KernelRow:
    """One kernel (by name and cluster) of a module: launches and time per step, launch shape."""

    name: str
    cluster: str
    launches: float
    time_s: float
    share: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None
    occupancy_pct: float | None = None


@dataclass(frozen=True)
class UnfusedRow:
    """Lone-instruction clusters of one opcode at the same source lines (a layer repeated 48
    times gives one row): what they came from and why they are alone. `cluster` and `ops` are
    the largest one's; `clusters` all of them; `value` and `share` their sum."""

    cluster: str
    opcode: str
    ops: tuple[str, ...]
    placed_by: str
    lines: tuple[str, ...]
    value: float
    share: float
    reason: str
    clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModuleAnalysis:
    """One module of the program: main program or helper, with its rankings."""

    key: str
    name: str
    program_id: int | None
    role: str  # "main" | "helper"
    kind: str  # "main program", "RNG set-up", ...
    cluster_count: int
    fusion_count: int
    library_calls: tuple[tuple[str, str, int], ...]
    flops: float
    bytes: float
    time_s: float | None = None
    share: float | None = None
    events: int = 0
    kernels_per_step: float | None = None
    executions: int | None = None
    clusters: tuple[ClusterRow, ...] = ()
    by_line: tuple[RollUp, ...] = ()
    by_scope: tuple[RollUp, ...] = ()
    by_layer: tuple[RollUp, ...] = ()  # by_scope with repeated layers folded (when any are)
    kernels: tuple[KernelRow, ...] = ()
    unfused: tuple[UnfusedRow, ...] = ()
    unfused_total: int = 0
    reverse_method: str = ""
    reverse_notes: tuple[str, ...] = ()
    outliers: tuple[Outlier, ...] = ()  # steps over 3x a cluster's median (analyze.steps)
    uncosted_calls: tuple[tuple[str, str, float | None], ...] = ()  # cluster, target, time


@dataclass(frozen=True)
class OutsideProgram:
    """Events of a program that is not among the analysed modules (or not selected)."""

    module: str
    program_id: int | None
    events: int
    time_s: float


@dataclass(frozen=True)
class ProfileSummary:
    """The profile as a whole: the steady window, the match, what lay outside the selection."""

    path: str
    marked: bool
    events_in_window: int
    matched_fraction: float
    unmatched: int
    busy_time_s: float  # union of busy intervals per step
    event_time_s: float  # summed self time per step (the shares' denominator)
    kernels_per_step: float
    device_ops_per_step: float
    outside: tuple[OutsideProgram, ...] = ()
    rules: tuple[tuple[str, int], ...] = ()
    gaps: AttributionGaps = field(default_factory=AttributionGaps)


@dataclass(frozen=True)
class HostTotals:
    """One host's profile of a session as counts over its steady window, each of which sums
    over hosts (`merged_hosts`): what the hosts' analyses, run apart, give back to be merged."""

    host: str  # the profile's file name without .xplane.pb; "all" for the merged session
    events: int  # device events in the steady window
    matched: int
    steps: int
    kernels: int  # kernel (or CPU thunk) launches
    device_time_s: float  # the busy time of every step, summed
    outside: int  # events of programs outside the selection
    launches: tuple[tuple[str, int], ...]  # per `module:cluster`, every matched event
    events_file: str = ""  # its part of the events dataset, relative to the output folder


def merged_hosts(hosts: Sequence[HostTotals]) -> HostTotals:
    """The session's totals: every count summed over its hosts."""
    launches: dict[str, int] = {}
    for h in hosts:
        for key, n in h.launches:
            launches[key] = launches.get(key, 0) + n
    return HostTotals(
        "all",
        sum(h.events for h in hosts),
        sum(h.matched for h in hosts),
        sum(h.steps for h in hosts),
        sum(h.kernels for h in hosts),
        math.fsum(h.device_time_s for h in hosts),
        sum(h.outside for h in hosts),
        tuple(sorted(launches.items())),
    )


@dataclass(frozen=True)
class ProgramAnalysis:
    """Everything the analyze report shows."""

    ranked_by: str  # "device time" | "FLOPs"
    main: tuple[str, ...]
    main_rule: str
    modules: tuple[ModuleAnalysis, ...]
    steps: Steps | None = None
    profile: ProfileSummary | None = None
    ceilings: CeilingRates | None = None
    notes: tuple[str, ...] = ()
    step_rows: tuple[StepRow, ...] = ()  # per marked step: wall, device, idle, coverage

    def to_json(self) -> dict[str, Any]:
        """analysis.json: every field, tuples as lists."""
        return to_json(self)
