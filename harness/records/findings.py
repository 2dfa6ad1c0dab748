"""The findings section of summary.json (schema version 6) and its migration, kept apart from
harness.records.summary, which is over its size limit.

A run's conclusions are rules over its typed summary (harness.findings): each rule has a
stable id, says when it applies and what it concludes, and returns one of the records below,
its evidence as typed fields (ratios and intervals, kernels, bytes, the first divergence, the
config key that differs) beside the sentences the report shows. The report, compare, the
results index and the terminal only read these records; none of them concludes anything.

Version 6 added the `findings` section. The loader cannot make it for an older summary (the
rules belong to the analysis stage, which a library does not import): a summary saved before
it reads with `findings` null, and `python -m harness.commands.migrate --run=DIR` writes it from the
run's summary.json and kept files, without analysing the run again.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.gaps import AttributionGaps
from harness.records.numerics import AccuracyFinding, EffectFinding
from harness.store.records import Plain, doc


@dataclass(frozen=True)
class RuleInfo:
    """One rule the analysis ran."""

    id: str = doc("its stable id, named beside each of its findings in the report")
    kind: str = doc(
        "the part of `findings` it fills: `gate`, `coverage`, `timing`, `noise`, `memory`, "
        "`changes`, `untested`, `boundaries` or `observations`"
    )
    summary: str = doc("what it concludes, in one line (the first line of its docstring)")
    error: str | None = doc("why it concluded nothing this time (an exception), if it failed")


@dataclass(frozen=True)
class ConfigChange:
    """One config key whose value differs between a variant and the one it is judged against."""

    key: str = doc(
        "the key: `mode`, `problem.<key>`, `program.inputs`, `program.params`, "
        "`program.kwargs.<name>` (a keyword knob) or `xla_options.<name>`"
    )
    value: Plain = doc("its value in the variant (null: unset)")
    was: Plain = doc("its value in the variant judged against (null: unset)")
    phrase: str = doc("the difference in words, as the report shows it")
    reverse: str = doc("the reference's value in words: what to keep instead", "")


@dataclass(frozen=True)
class TimePart:
    """One part of a timing difference, per step: the variant's figure less the reference's."""

    kind: str = doc(
        "a kind of work (harness.hlo.work.KINDS: `library`, `triton_gemm`, `loop_fusion`, "
        "`reduction_fusion`, `copies`, `collectives`, `control_flow`, `host_calls`, `other`), "
        "`outside_clusters` (device busy time the clusters' sum does not hold: unattributed "
        "events, less overlap), `device` (device busy time, where no cluster times were "
        "ranked), `launch_gaps` (the device idle between a step's first and last event), "
        "`host_gap` (the timed step less the profiled device time and launch gaps), or `line` "
        "(one source line, in `by_line`)"
    )
    what: str = doc("the part in words: a kind of work, a source line, or the host gap")
    delta_s: float = doc("the variant's seconds a step less the reference's")
    variant_s: float | None = doc("the variant's seconds a step (null: absent there)")
    against_s: float | None = doc("the reference's seconds a step (null: absent there)")
    launches: float | None = doc("its launches a step in the variant")
    against_launches: float | None = doc("and in the reference")
    lines: tuple[str, ...] = doc("its source lines (file:line), largest difference first", ())
    bytes: float | None = doc("bytes it moves a step in the variant (our cost model)", None)
    against_bytes: float | None = doc("and in the reference", None)
    flops: float | None = doc("its FLOPs a step in the variant", None)
    against_flops: float | None = doc("and in the reference", None)


@dataclass(frozen=True)
class Decomposition:
    """A timing difference taken apart on the profiled timeline: the parts sum to the profiled
    steps' difference, and the residual is what the timed and profiled windows disagree by."""

    measured_s: float = doc("the timed steps' difference, variant less reference (medians)")
    parts: tuple[TimePart, ...] = doc(
        "the parts by kind of work, the launch gaps and the host gap; the lead first (the "
        "largest named part in the difference's direction), then largest |delta| first",
        (),
    )
    residual_s: float = doc("measured_s less the parts' sum")
    explained_share: float | None = doc(
        "the parts' sum over measured_s: how much of the difference the profile explains"
    )
    note: str = doc("why there is no decomposition, or what limits it", "")
    lead: str = doc("the lead part tied to its mechanism, from the run's measured numbers", "")
    by_line: tuple[TimePart, ...] = doc(
        "the device parts by source line (a cluster over several lines gives each an equal "
        "part), largest |delta| first",
        (),
    )
    overhead_s: float | None = doc(
        "the profiler's cost to the variant: its profiled step less its timed step", None
    )
    against_overhead_s: float | None = doc("and to the reference", None)
    windows: str = doc("how the decomposition's windows relate to the timed ones, measured", "")


@dataclass(frozen=True)
class TimingFinding:
    """A variant timed against its reference: a resolved difference (`timing`), or a pair the
    run cannot tell apart (`noise`)."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    against: str = doc("its reference: its framework's baseline of its size, else the lower bound")
    verdict: str = doc("the comparison's verdict (`comparison.vs_baseline` or `vs_lower_bound`)")
    ratio: float | None = doc("the variant's step time over the reference's (paired rounds)")
    ci95: tuple[float, float] | None = doc("the ratio's 95% interval")
    p_holm: float | None = doc("its Holm-adjusted p-value")
    effect: float = doc("|log ratio|: how findings are ranked", 0.0)
    what: str = doc("the finding in one sentence", "")
    why: str = doc("what differs, in the config and in what the compiler made", "")
    evidence: tuple[str, ...] = doc("the measurements behind it, one line each", ())
    changes: tuple[ConfigChange, ...] = doc("the config keys that differ", ())
    mechanisms: tuple[str, ...] = doc(
        "what the compiler made differently: kernels, transfers, clusters, epilogues, the "
        "GEMM's precision, bytes moved",
        (),
    )
    kernels_per_step: float | None = doc("the variant's kernels per step")
    against_kernels_per_step: float | None = doc("the reference's")
    bytes: float | None = doc("the variant's bytes moved per call (our cost model)")
    against_bytes: float | None = doc("the reference's")
    divergence_stage: str | None = doc("the first IR stage where the two programs differ")
    divergence_detail: str | None = doc("how they differ there")
    decomposition: Decomposition | None = doc(
        "the difference taken apart per step: clusters' device time, the host gap and the "
        "residual (null for a pair never ranked, or saved before schema 8)"
    )


@dataclass(frozen=True)
class Gate:
    """The run's A/A check, which every timing rule reads (harness.records.resolution)."""

    rule: str = doc("the rule's id")
    resolved: bool = doc("the run can resolve differences (`noise.resolved`)", True)
    reasons: tuple[str, ...] = doc("why it cannot (`noise.reasons`)", ())
    evidence: tuple[str, ...] = doc(
        "the measured evidence: the A/A ratio, the load, the worker's CPU time, the SM clock", ()
    )
    line: str = doc("the one sentence that says the run could not resolve differences", "")
    not_timed: str = doc(
        "the sentence that names the variants left out of the timing rounds, and why", ""
    )


@dataclass(frozen=True)
class CoverageFinding:
    """A profiled variant whose device time is not all attributed to clusters."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    verdict: str = doc(
        "`unattributed` (events no cluster holds) or `ambiguous` (matched, not sure)"
    )
    what: str = doc("the finding in one sentence", "")
    gaps: AttributionGaps | None = doc("the unattributed time and kernels, and the ambiguous share")


@dataclass(frozen=True)
class SourceBytes:
    """The bytes live at two peaks from one source line and named scope."""

    source_line: str | None = doc("the user's source line")
    scope: str | None = doc("its named scope")
    bytes: int = doc("bytes from it live at the variant's peak", 0)
    against_bytes: int = doc("at the other's peak", 0)
    buffers: tuple[str, ...] = doc("the larger side's buffers: `instruction shape`", ())


@dataclass(frozen=True)
class MemoryFinding:
    """Two variants of one size whose compiled peaks differ beyond the run's thresholds."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    against: str = doc("its framework's baseline")
    verdict: str = doc("`more` or `less` memory at the peak than the baseline")
    peak_bytes: int = doc("the variant's peak (XLA's live-range peak)", 0)
    against_bytes: int = doc("the baseline's", 0)
    min_ratio: float = doc("the run's `memory.min_ratio` the difference exceeded", 0.0)
    min_bytes: int = doc("the run's `memory.min_bytes` it exceeded", 0)
    what: str = doc("the finding in one sentence", "")
    sources: tuple[SourceBytes, ...] = doc("the source lines that make the difference", ())
    evidence: tuple[str, ...] = doc("the same, one line each as the report shows them", ())


@dataclass(frozen=True)
class Change:
    """A measured change: adopt what a faster variant did, keep what a slower one changed."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant that measured it")
    against: str = doc("the variant it was measured against")
    verdict: str = doc("`adopt` (the variant was faster) or `keep` (it was slower)")
    change: str = doc("the change, in words and config keys")
    effect: str = doc("what was measured, with its interval")
    tradeoff: str = doc("numerics, first call and peak memory beside it", "")
    ratio: float | None = doc("the measured ratio")
    ci95: tuple[float, float] | None = doc("its 95% interval")
    effect_size: float = doc("|log ratio|: how changes are ranked", 0.0)
    changes: tuple[ConfigChange, ...] = doc("the config keys it changes", ())


@dataclass(frozen=True)
class Untested:
    """A known change this run did not measure, with the config that would."""

    rule: str = doc("the rule's id")
    change: str = doc("the change")
    why: str = doc("what it would do")
    snippet: str = doc("the variant to add to the config (YAML)", "")


@dataclass(frozen=True)
class BoundaryPair:
    producer: str = doc("the cluster that runs first")
    consumer: str = doc("the cluster that runs next")


@dataclass(frozen=True)
class BoundaryGroup:
    """Boundaries between consecutive clusters that have the same reasons."""

    reasons: tuple[str, ...] = doc("why the two are separate launches", ())
    count: int = doc("how many boundaries have these reasons", 0)
    examples: tuple[BoundaryPair, ...] = doc("a few of them", ())


@dataclass(frozen=True)
class Boundaries:
    """Why the baseline's clusters are not one: each boundary of one step, grouped by reason."""

    rule: str = doc("the rule's id")
    variant: str = doc("the baseline")
    clusters: int = doc("clusters of its optimized HLO in one step's launches", 0)
    boundaries: int = doc("boundaries between consecutive ones", 0)
    groups: tuple[BoundaryGroup, ...] = doc("the boundaries by reason, most common first", ())


@dataclass(frozen=True)
class Observation:
    """One of the seed chapter's claims, judged for one framework on this run."""

    rule: str = doc("the rule's id")
    key: str = doc("the claim's key")
    claim: str = doc("the claim")
    framework: str = doc("`jax` or `torch`")
    verdict: str = doc(
        "`yes`, `no`, `not on this platform` or `not measured` (the figures to decide are missing)"
    )
    evidence: tuple[str, ...] = doc("the figures behind it", ())
    quote: str = doc("the log or IR lines that back it", "")


@dataclass(frozen=True)
class ProcessSpread:
    """A straggler of a study across processes: one process slower than the fastest by more
    than the run's noise can explain (rule `processes.straggler`)."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    straggler: int = doc("the slowest process's rank", 0)
    fastest: int = doc("the fastest process's rank", 0)
    ratio: float = doc("the straggler's step time over the fastest's (paired rounds)", 0.0)
    ci95: tuple[float, float] = doc("its 95% interval", (0.0, 0.0))
    floor: float = doc("the run's noise floor the excess exceeds", 0.0)
    what: str = doc("the finding in one sentence", "")


@dataclass(frozen=True)
class WaitFinding:
    """A device that waits at its collectives for the others more than a stated share of its
    step (rule `communication.waiting`; schema 11)."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    device: int = doc("the device that waits", 0)
    waited_s: float = doc("its wait per step", 0.0)
    share: float = doc("that wait over its step", 0.0)
    threshold: float = doc("the share above which the rule speaks", 0.0)
    straggler: int | None = doc("the device that arrived last at the most calls")
    straggler_lag_s: float | None = doc("per step, how late the straggler arrived")
    what: str = doc("the finding in one sentence", "")


@dataclass(frozen=True)
class ControlFlowFinding:
    """What a loop or a conditional costs a step (harness.findings.control_flow)."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    where: str = doc("the while loop, or the conditionals and loops whose predicates are read")
    verdict: str = doc(
        "`as counted` (the measured iterations are the trip count), `differs`, `unprofiled` "
        "(no profile), `unmeasured` (no kernel of the body in it), or `host_sync`"
    )
    what: str = doc("the finding in one sentence", "")
    trip_count: int | None = doc("the loop's trip count in the HLO (null: unknown)")
    iterations_per_step: float | None = doc("the iterations the profile shows a step")
    kernels_per_iteration: float | None = doc("kernels one iteration launches")
    copy_share: float | None = doc("the share of the step in the loop body's copies")
    syncs_per_step: float | None = doc("predicates read back to the host a step")
    evidence: tuple[str, ...] = doc("the figures behind it, one line each", ())


@dataclass(frozen=True)
class Findings:
    """The run's conclusions, each from a rule with a stable id (harness.findings)."""

    rules: tuple[RuleInfo, ...] = doc("every rule the analysis ran", ())
    top: str = doc(
        "the run's headline: its largest timing finding, else why it could not resolve "
        "differences, else its largest memory finding, else that it found none",
        "",
    )
    gate: Gate | None = doc("the A/A check (null: the run has no timing rounds)")
    coverage: tuple[CoverageFinding, ...] = doc("device time the profile match left out", ())
    timing: tuple[TimingFinding, ...] = doc("resolved differences, largest effect first", ())
    noise: tuple[TimingFinding, ...] = doc("pairs the run cannot tell apart, never ranked", ())
    memory: tuple[MemoryFinding, ...] = doc("peaks that differ, largest first", ())
    changes: tuple[Change, ...] = doc("what to change: measured changes, largest first", ())
    untested: tuple[Untested, ...] = doc("known changes this run did not measure", ())
    boundaries: Boundaries | None = doc("why the baseline's clusters are separate launches")
    control_flow: tuple[ControlFlowFinding, ...] = doc(
        "what loops and conditionals cost a step, per variant", ()
    )
    processes: tuple[ProcessSpread, ...] = doc(
        "stragglers of a study across processes (processes.json), resolvable ones only", ()
    )
    communication: tuple[WaitFinding, ...] = doc(
        "devices that wait at collectives for the others, per variant (schema 11)", ()
    )
    observations: tuple[Observation, ...] = doc(
        "the seed chapter's claims, claim by claim, one per framework the study has", ()
    )
    numerics: tuple[AccuracyFinding, ...] = doc(
        "each dtype's accuracy against float64, once per dtype (schema 9)", ()
    )
    effects: tuple[EffectFinding, ...] = doc(
        "each variant's result against the baseline's: did a compiler choice move it", ()
    )
