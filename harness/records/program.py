"""The records of a program's analysis: what it finds (`ProgramAnalysis`: each module's
clusters ranked, rolled up by source line and named scope, its kernels and unfused ops), the
roofs it holds the clusters to (`Roofs`, a view of the run's ceilings), and the file
`python -m harness.analyze` writes (`AnalysisFile`, analysis.json, versioned as the run's other
files are: harness.records.run_files.ANALYSIS).

A study writes each compiled variant's analysis as ranking.json
(harness.records.run_files.RankingFile, through harness.analyze.ranking); the functions that
fill these records in are harness.program's (module_analysis, sources, steps, analysis).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.records.gaps import AttributionGaps
from harness.store.records import EMPTY, doc, to_json

if TYPE_CHECKING:  # read for its figures only: run_files imports this module for ANALYSIS
    from harness.records.run_files import Ceilings

# ---------------------------------------------------------------------------------------------
# The roofs


@dataclass(frozen=True)
class Roofs:
    """The roofs a program's clusters are held to: the run's measured ceilings
    (harness.records.run_files.Ceilings, read by `roofs_of`) as FLOP/s per precision and a copy
    bandwidth, with the file they came from."""

    peaks: dict[str, float] = doc("precision -> its measured GEMM rate, FLOP/s", EMPTY)
    bytes_per_s: float | None = doc("the measured copy bandwidth, bytes read + written a second")
    source: str = doc("the ceilings file they came from", "")
    platform: str = doc("`gpu` or `cpu`; empty when the ceilings do not say", "")

    def peak_for(self, precision: str | None) -> tuple[str, float] | None:
        """The (precision, FLOP/s) a cluster is held to: its GEMM's precision when measured,
        else the largest peak measured."""
        if precision and precision in self.peaks:
            return precision, self.peaks[precision]
        if not self.peaks:
            return None
        best = max(self.peaks, key=lambda p: self.peaks[p])
        return best, self.peaks[best]


def roofs_of(ceilings: Ceilings, source: str) -> Roofs:
    """The roofs of a run's ceilings (`source`, the file they were read from): each positive
    peak and the copy bandwidth when positive. Raises ValueError naming `source` when neither
    is there: a roofline has nothing to draw."""
    peaks = {
        str(p): float(v.flops_per_s) for p, v in ceilings.peaks.items() if _positive(v.flops_per_s)
    }
    bw = ceilings.peak_bytes_per_s
    if not peaks and not _positive(bw):
        raise ValueError(f"{source}: no `peaks` and no `peak_bytes_per_s`: not a ceilings.json")
    platform = ceilings.platform if isinstance(ceilings.platform, str) else ""
    return Roofs(peaks, float(bw) if _positive(bw) else None, source, platform)


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


# ---------------------------------------------------------------------------------------------
# What the analysis finds


@dataclass(frozen=True)
class Steps:
    """How many steps the steady window holds, and how that was learned."""

    count: int = doc("the steps")
    how: str = doc("`markers`, `executions` or `flag` (--steps)")
    detail: str = doc("how they were counted, in words")


@dataclass(frozen=True)
class StepRow:
    """One marked step: host wall time (its markers' span), device busy time (the union of its
    events' intervals), summed event self time, the attributed part, and the fractions."""

    step: int = doc("the step's number")
    wall_s: float | None = doc("its markers' span (null without a marker)")
    device_s: float = doc("the union of its events' intervals")
    event_s: float = doc("its events' summed self time")
    attributed_s: float = doc("the part of `event_s` attributed to a cluster")
    idle_fraction: float | None = doc("1 - device / wall (null without a marker)")
    coverage: float = doc("`attributed_s` / `event_s`")


@dataclass(frozen=True)
class Outlier:
    """One step in which a cluster took over OUTLIER_FACTOR x its median step time
    (harness.program.steps)."""

    cluster: str = doc("the cluster")
    step: int = doc("the step")
    time_s: float = doc("its time in that step")
    median_s: float = doc("its median step time")


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of a module, with its cost and (with a profile) its time per step."""

    name: str = doc("its instruction name")
    kind: str = doc("kLoop, kInput, kOutput, kCustom; `library`; else the op's opcode")
    target: str = doc("the library entry it calls, or empty")
    flops: float = doc("its FLOPs a run (our cost model)")
    bytes: float = doc("its boundary bytes a run")
    time_s: float | None = doc("its time a step (null without a profile)")
    share: float = doc("its part of the step's time (of the FLOPs without a profile)", 0.0)
    launches: float | None = doc("its launches a step")
    runs: float | None = doc("its runs a step: launches over its distinct kernels")
    flops_per_s: float | None = doc("achieved FLOP/s (harness.program.roof.rates)")
    bytes_per_s: float | None = doc("achieved B/s")
    roof_fraction: float | None = doc("achieved FLOP/s over its roof at its intensity")
    roof: str = doc("which roof: `<precision> peak` or `bandwidth`", "")
    above_ceiling: bool = doc(
        "a GPU cluster over 100% of its roof (harness.program.roof: never read as efficient)",
        False,
    )
    precision: str = doc("its GEMM's precision, the peak it is held to", "")
    lines: tuple[str, ...] = doc("the source lines its ops came from", ())
    scopes: tuple[str, ...] = doc("the named scopes its ops came from", ())

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved, or None when the cluster moves nothing."""
        return self.flops / self.bytes if self.bytes else None


@dataclass(frozen=True)
class RollUp:
    """One source line or named scope: its part of the step (time or FLOPs) and clusters."""

    label: str = doc("the source line or scope")
    value: float = doc("its time a step (its FLOPs without a profile)")
    share: float = doc("its part of the step")
    clusters: int = doc("the clusters it is in")
    top_cluster: str = doc("the largest of them")


@dataclass(frozen=True)
class KernelRow:
    """One kernel (by name and cluster) of a module: launches and time per step, launch shape."""

    name: str = doc("the kernel")
    cluster: str = doc("the cluster it is attributed to")
    launches: float = doc("launches a step")
    time_s: float = doc("its time a step")
    share: float = doc("its part of the step's time")
    grid: tuple[int, int, int] | None = doc("a GPU kernel's grid")
    block: tuple[int, int, int] | None = doc("its block")
    registers: int | None = doc("its registers per thread")
    occupancy_pct: float | None = doc("its occupancy")


@dataclass(frozen=True)
class UnfusedRow:
    """Lone-instruction clusters of one opcode at the same source lines (a layer repeated 48
    times gives one row): what they came from and why they are alone. `cluster` and `ops` are
    the largest one's; `clusters` all of them; `value` and `share` their sum."""

    cluster: str = doc("the largest of the clusters")
    opcode: str = doc("their opcode")
    ops: tuple[str, ...] = doc("the program's ops the largest holds")
    placed_by: str = doc("how its ops were placed (the reverse map's method)")
    lines: tuple[str, ...] = doc("their source lines")
    value: float = doc("their time a step (FLOPs without a profile), summed")
    share: float = doc("their part of the step, summed")
    reason: str = doc("why they are alone, in words")
    clusters: tuple[str, ...] = doc("every cluster of the row", ())


@dataclass(frozen=True)
class ModuleAnalysis:
    """One module of the program: main program or helper, with its rankings."""

    key: str = doc("its dump key (`module_<n>.<name>`)")
    name: str = doc("the HLO module's name")
    program_id: int | None = doc("XLA's module number")
    role: str = doc("`main` or `helper`")
    kind: str = doc("what it is: `main program`, `RNG set-up`, ...")
    cluster_count: int = doc("its clusters")
    fusion_count: int = doc("its fusions")
    library_calls: tuple[tuple[str, str, int], ...] = doc(
        "(target, epilogue, count) of its library calls"
    )
    flops: float = doc("its FLOPs a call")
    bytes: float = doc("its boundary bytes a call")
    time_s: float | None = doc("its time a step (null without a profile)")
    share: float | None = doc("its part of the analysed modules' time")
    events: int = doc("its device events in the steady window", 0)
    kernels_per_step: float | None = doc("its kernels a step")
    executions: int | None = doc("its executions in the window")
    clusters: tuple[ClusterRow, ...] = doc("its clusters, ranked", ())
    by_line: tuple[RollUp, ...] = doc("rolled up by source line", ())
    by_scope: tuple[RollUp, ...] = doc("rolled up by named scope", ())
    by_layer: tuple[RollUp, ...] = doc("`by_scope` with repeated layers folded (when any are)", ())
    kernels: tuple[KernelRow, ...] = doc("its kernels, by time", ())
    unfused: tuple[UnfusedRow, ...] = doc("its lone-instruction clusters, grouped", ())
    unfused_total: int = doc("its lone-instruction clusters", 0)
    reverse_method: str = doc("what the reverse map's identity means here", "")
    reverse_notes: tuple[str, ...] = doc("what the reverse map could not map exactly", ())
    outliers: tuple[Outlier, ...] = doc("steps over 3x a cluster's median", ())
    uncosted_calls: tuple[tuple[str, str, float | None], ...] = doc(
        "(cluster, custom-call targets, time a step) of a call the cost model has no model of",
        (),
    )


@dataclass(frozen=True)
class OutsideProgram:
    """Events of a program that is not among the analysed modules (or not selected)."""

    module: str = doc("the module the profile names")
    program_id: int | None = doc("its program id")
    events: int = doc("its events in the window")
    time_s: float = doc("their time a step")


@dataclass(frozen=True)
class ProfileSummary:
    """The profile as a whole: the steady window, the match, what lay outside the selection."""

    path: str = doc("the profile read")
    marked: bool = doc("whether its steps are marked (StepTraceAnnotation)")
    events_in_window: int = doc("device events in the steady window")
    matched_fraction: float = doc("the fraction of them attributed")
    unmatched: int = doc("events left unattributed")
    busy_time_s: float = doc("the union of busy intervals a step")
    event_time_s: float = doc("summed self time a step (the shares' denominator)")
    kernels_per_step: float = doc("kernels a step")
    device_ops_per_step: float = doc("device events a step")
    outside: tuple[OutsideProgram, ...] = doc("programs outside the selection", ())
    rules: tuple[tuple[str, int], ...] = doc("(matching rule, events it decided)", ())
    gaps: AttributionGaps = field(
        default_factory=AttributionGaps,
        metadata={"doc": "the unattributed time (harness.records.gaps)"},
    )


@dataclass(frozen=True)
class HostTotals:
    """One host's profile of a session as counts over its steady window, each of which sums
    over hosts (`merged_hosts`): what the hosts' analyses, run apart, give back to be merged."""

    host: str = doc("the profile's file name without .xplane.pb; `all` for the merged session")
    events: int = doc("device events in the steady window")
    matched: int = doc("those attributed")
    steps: int = doc("its steps")
    kernels: int = doc("kernel (or CPU thunk) launches")
    device_time_s: float = doc("the busy time of every step, summed")
    outside: int = doc("events of programs outside the selection")
    launches: tuple[tuple[str, int], ...] = doc("(`module:cluster`, every matched event)", ())
    events_file: str = doc("its part of the events dataset, relative to the output folder", "")


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

    ranked_by: str = doc("`device time`, or `FLOPs` without a profile")
    main: tuple[str, ...] = doc("the main program's module keys")
    main_rule: str = doc("why they are the main program")
    modules: tuple[ModuleAnalysis, ...] = doc("every analysed module, main first", ())
    steps: Steps | None = doc("the profile's steps (null without a profile)")
    profile: ProfileSummary | None = doc("the profile as a whole (null without one)")
    ceilings: Roofs | None = doc("the roofs the clusters are held to (null: none given)")
    notes: tuple[str, ...] = doc("what the analysis could not do", ())
    step_rows: tuple[StepRow, ...] = doc("per marked step: wall, device, idle, coverage", ())

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON, tuples as lists."""
        return to_json(self)


@dataclass(frozen=True)
class AnalysisFile(ProgramAnalysis):
    """analysis.json: the program analysis `python -m harness.analyze` wrote, and for a
    session of several hosts each host's totals and their sum (the analysis itself is then
    the first host's)."""

    hosts: tuple[HostTotals, ...] = doc("each host's totals (empty for one profile)", ())
    merged: HostTotals | None = doc("the hosts' totals summed (null for one profile)")
    schema_version: int = doc("this file's version (harness.records.run_files.ANALYSIS)")


def analysis_file(program: ProgramAnalysis, hosts: Sequence[HostTotals]) -> AnalysisFile:
    """analysis.json's record of a program analysis and its session's hosts (none: one
    profile, or none at all)."""
    fields = {f.name: getattr(program, f.name) for f in dataclasses.fields(ProgramAnalysis)}
    return AnalysisFile(**fields, hosts=tuple(hosts), merged=merged_hosts(hosts) if hosts else None)
