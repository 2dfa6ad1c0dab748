"""The results contract: summary.json, defined once as frozen dataclasses, one section per concern.

A run's summary.json is a `RunSummary`: run-level facts and, per variant, a `VariantSummary`
made of sections (identity, timing, compile, hlo, cost, profile, numerics, comm, comparison), and
the run's `findings` (harness.records.findings), which the analysis stage's rules make. Each
section has exactly one producer, a function of the analysis stage that reads the saved files
(harness.analyze.sections), so no key is ever written twice. The report, compare and the
results index read summaries only through `load_summary`, which validates every value and
names the file and key of any that is wrong; results/README.md's key table is generated from
these classes (`python -m harness.records.keytables` prints it) and a test keeps the two equal.

`SCHEMA_VERSION` goes up with every change to these classes. Older summaries are migrated
on load (`migrate`); a newer one is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.common.precision import narrowest_float
from harness.records.comm import Comm
from harness.records.findings import Findings
from harness.records.gaps import AttributionGaps
from harness.records.memory import MeasuredMemory, Memory
from harness.records.migrations import MIGRATIONS
from harness.records.noise import Noise
from harness.records.probes import ProbeCosts, ProbeFailure
from harness.records.rounds import RoundsCut
from harness.store.records import (
    EMPTY,
    Plain,
    SchemaError,
    doc,
    from_json,
    loads,
    to_json,
)

# The file names are the run folder's (harness.store.runfolder), kept here for their readers.
from harness.store.runfolder import RESULT_FILE as RESULT_FILE
from harness.store.runfolder import SEARCH_FILE as SEARCH_FILE
from harness.store.runfolder import SUMMARY_FILE as SUMMARY_FILE
from harness.store.runfolder import TIMING_FILE as TIMING_FILE
from harness.store.runfolder import one_component

SCHEMA_VERSION = 12


# --- identity ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpectedError:
    type: str = doc("the exception's class name")
    message: str = doc("its first line")


@dataclass(frozen=True)
class Failure:
    kind: str = doc("`exception` (raised in the variant) or `crash` (the process died)")
    signal: str | None = doc("the signal that ended the process, e.g. `SIGABRT`, for a crash")
    exit_code: int | None = doc("the process's exit status, for a crash")
    stderr_tail: tuple[str, ...] = doc("the last lines the process wrote to stderr", ())


@dataclass(frozen=True)
class ArraySpec:
    shape: tuple[int, ...] = doc("its dimensions", ())
    dtype: str = doc("its element type", "")


@dataclass(frozen=True)
class ProgramRecord:
    """The user's own function a program study ran (config `program`), as this variant called it."""

    function: str = doc(
        "the function, `module:function` or `/path/to/file.py:function`, called as "
        "`function(params, *inputs)`"
    )
    init: str = doc(
        "its parameter initializer, called once as `init(jax.random.key(seed), *input_specs)`"
    )
    inputs: tuple[ArraySpec, ...] = doc(
        "the arguments after the parameters, as called (after the variant's `program.dtype`)", ()
    )
    recompile_inputs: tuple[ArraySpec, ...] = doc(
        "the arguments of the new-shape call (the recompile)", ()
    )
    output: tuple[ArraySpec, ...] = doc("the result's leaves", ())
    param_leaves: int | None = doc("arrays in the parameter pytree")
    param_count: int | None = doc("elements in them (the parameter count)")
    param_bytes: int | None = doc("their bytes, after the variant's `program.w_dtype`")
    param_dtypes: tuple[str, ...] = doc("their element types, after `program.w_dtype`", ())
    param_bytes_by_dtype: dict[str, int] | None = doc("their bytes by dtype (null: older runs)")
    flops_source: str = doc(
        "where `cost.flops_analytic` comes from: `config` (`program.flops`) or `hlo_before` "
        "(our cost model of the unoptimized HLO)",
        "",
    )
    gemm_flops: float | None = doc(
        "FLOPs of the unoptimized HLO's dots and convolutions, by our cost model: the work a "
        "GEMM ceiling bounds (`cost.fraction_of_peak` is withheld when it is under 80% of "
        "`cost.flops`)"
    )
    reference_dtypes: tuple[str, ...] = doc(
        "the element types of the reference's result: `float64`, unless the function fixes "
        "its own dtype (then the reference is no wider than that)",
        (),
    )
    kwargs: dict[str, Plain] = doc("the static keyword arguments it was called with", EMPTY)

    def gemm_dtypes(self) -> tuple[str, str]:
        """The (x, W) dtypes a GEMM of this variant runs in, for its ceiling: the narrowest
        floating input dtype and the narrowest floating parameter dtype (float32 if none)."""
        return narrowest_float(i.dtype for i in self.inputs), narrowest_float(self.param_dtypes)


@dataclass(frozen=True)
class Identity:
    """What the variant is and what became of it (producer: the run and the capture record)."""

    status: str = doc("`ok`, `skipped` or `failed`")
    reason: str | None = doc("why skipped or failed; for an expected error, what was expected")
    mode: str = doc(
        "how the expression ran: `eager`, `jit`, `matmul_only`, `jit_host_callback`, ..."
    )
    framework: str = doc("`jax` (or `torch` for the PyTorch row)")
    description: str = doc("the config's description", "")
    roles: tuple[str, ...] = doc(
        "what the variant stands for in the study (`baseline`, `lower_bound`, `eager`, "
        "`host_callback`, `traced_branch`, `device_branch`, `library_epilogue`, `compiled`), "
        "from its mode, options, the config's `baseline` and its `roles` key",
        (),
    )
    problem: dict[str, Plain] = doc(
        "the problem it ran: m, k, n, batch, dtype, w_dtype, gelu, bias, frontend (empty in a "
        "program study: see `program`)",
        EMPTY,
    )
    program: ProgramRecord | None = doc(
        "the user's own function, its arguments and parameters, in a program study (config "
        "`program`)"
    )
    xla_options: dict[str, Plain] = doc("the XLA options of its compile", EMPTY)
    module: str | None = doc("the XLA module name (`jit_gelu_linear`)")
    wall_s: float | None = doc("wall time the harness spent capturing it")
    expected_error: ExpectedError | None = doc("the error a variant was expected to raise")
    failure: Failure | None = doc("how a failed variant failed")
    callback_lines: int | None = doc("lines a host callback printed during the variant")
    eager_modules: tuple[str, ...] = doc("the primitive modules eager dispatch compiled", ())
    probe_failures: tuple[ProbeFailure, ...] = doc(
        "the optional probes that failed (recompile, profile, dump compile, emitter dumps, "
        "numerics), each with its reason; the variant's other results stand",
        (),
    )


# --- timing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Steady-state speed (producer: the timing stage's timing.json)."""

    step_s: float | None = doc(
        "time per step: the median over timing rounds of back-to-back calls blocked once per batch"
    )
    step_ci95_s: tuple[float, float] | None = doc("95% confidence interval of `step_s`")
    rounds: int | None = doc("timing rounds the median is over")
    calls_per_batch: int | None = doc("back-to-back calls in each round's batch")
    round_step_s: tuple[float, ...] = doc("each round's time per step", ())
    interleaved: bool | None = doc(
        "true when every variant was timed in the same rounds, alternating, so ratios pair rounds"
    )
    latency_blocked_median_s: float | None = doc(
        "one call blocked with `block_until_ready`: dispatch and synchronisation included (median)"
    )
    latency_blocked_p10_s: float | None = doc("its 10th percentile")
    latency_blocked_p90_s: float | None = doc("its 90th percentile")


# --- compile ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompilePass:
    name: str = doc("the pass")
    pipeline: str | None = doc("its pipeline, or null when the saved files do not say")
    count: int = doc("how many times it ran")
    total_s: float = doc("inclusive seconds")
    self_s: float = doc("seconds outside nested events")


@dataclass(frozen=True)
class Compile:
    """Compile and first-call pauses (producer: the capture record and the first-call profile)."""

    first_call_s: float | None = doc("the first call: trace + lower + compile + first execution")
    compile_s: float | None = doc(
        "trace + lower + XLA compile of the first call; for PyTorch, Dynamo's whole compile"
    )
    trace_s: float | None = doc("tracing to a jaxpr")
    lower_s: float | None = doc("lowering to StableHLO")
    xla_compile_s: float | None = doc("XLA's compile")
    first_execute_s: float | None = doc("the first execution after the compile")
    backend_compiles: int | None = doc(
        "XLA compiles during the first call (eager: one per primitive); for PyTorch, Dynamo "
        "compiles"
    )
    fresh_process: bool | None = doc(
        "true when the variant compiled in a process of its own, so its pause includes its own "
        "autotuning and no cache left by another variant"
    )
    compile_slots: int | None = doc(
        "how many compiles the shared device let run together while this variant compiled "
        "(capture.compiles): over 1, its pauses may hold another compile's contention, and "
        "no finding compares them; null when no other worker shared the device"
    )
    autotune_choices: dict[str, str] | None = doc(
        "on a GPU, each fusion the first compile autotuned (XLA's cache key) and a digest of "
        "its choice: compare says how many chose differently when two runs' programs differ"
    )
    recompile_s: float | None = doc("the pause of the call with m halved")
    recompile_explanation: str | None = doc(
        "JAX's cache-miss log for that call; for PyTorch, Dynamo's recompile reasons"
    )
    recompile_backend_compiles: int | None = doc(
        "XLA compiles the new shape caused (PyTorch: Dynamo compiles)"
    )
    recompile_xla_compile_s: float | None = doc("their seconds")
    recompile_fusion_changed: bool | None = doc(
        "whether the new-shape module's fusion structure differs from the first module's"
    )
    top_passes: tuple[CompilePass, ...] = doc("the slowest passes of the first XLA compile", ())
    by_pipeline: dict[str, float] = doc(
        "seconds per XLA pass pipeline, first compile; for PyTorch, per torch.compile phase: "
        "`dynamo_tracing`, `guards`, `aot_autograd`, `inductor`, `kernel_compile` (Triton, or "
        "the C++ compiler on a CPU)",
        EMPTY,
    )
    autotuning_s: float | None = doc(
        "seconds in the GPU GEMM autotuner (`config-assigner`); for PyTorch, Triton's autotuning"
    )
    notes: tuple[str, ...] = doc("what the compile breakdown could not determine, and why", ())

    @property
    def compiled_together(self) -> int:
        """The most compiles that could run together with this variant's (1: alone, or no
        other worker shared the device)."""
        return self.compile_slots or 1


# --- dynamo (PyTorch variants) ----------------------------------------------------------------


@dataclass(frozen=True)
class Dynamo:
    """What torch.compile's Dynamo made of a PyTorch variant: graphs, breaks, guards and
    recompiles (producer: torch.json from the capture, and the TORCH_TRACE log)."""

    options: dict[str, Plain] = doc(
        "the torch.compile arguments: `mode` (absent: default), `dynamic`, `fullgraph`", EMPTY
    )
    explain_source: str | None = doc(
        "where the graph and break counts come from: `explain()`, or `TORCH_TRACE` when this "
        "torch's explain() is not available"
    )
    graph_count: int | None = doc("graphs Dynamo captured from the function (1: no break)")
    graph_break_count: int | None = doc("graph breaks in it")
    break_reasons: tuple[str, ...] = doc("each break's one-line reason", ())
    break_locations: tuple[str, ...] = doc("each break's `file:line` in the user's code", ())
    compiled_graphs: int | None = doc("graphs Inductor compiled for the first call")
    guard_count: int | None = doc("guards the first call's compiles installed")
    dynamic_shapes: bool | None = doc("whether the first call's graphs have symbolic sizes")
    recompiles: int | None = doc(
        "Dynamo compiles the new-shape call caused (0: the first compile's guards held)"
    )
    recompile_reasons: tuple[str, ...] = doc("Dynamo's reason for each, as it logged it", ())
    recompile_guard_count: int | None = doc("guards those recompiles installed")
    recompile_dynamic_shapes: bool | None = doc(
        "whether the new-shape graphs have symbolic sizes (automatic dynamic shapes)"
    )
    notes: tuple[str, ...] = doc("what could not be determined, and why", ())


# --- hlo --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryGemm:
    m: int = doc("rows of the output")
    k: int = doc("the contracted size")
    n: int = doc("columns of the output")
    batch: int = doc("batch count (1 for a plain GEMM)")
    lhs_dtype: str = doc("x's element type")
    rhs_dtype: str = doc("W's element type")
    out_dtype: str = doc("the output's element type")


@dataclass(frozen=True)
class LibraryCall:
    target: str = doc("the library entry: `__cublas$lt$matmul`, `__ynn_fusion`, ...")
    epilogue: str | None = doc("the fused GEMM epilogue (`BIAS`, `BIAS_GELU`, ...) if any")
    cluster: str | None = doc("the cluster (HLO instruction) that calls it")
    gemm: LibraryGemm | None = doc(
        "what it computes, for a GEMM: so a CPU and a GPU run pair like for like"
    )


@dataclass(frozen=True)
class PassChange:
    index: int = doc("the pass's position in the compile")
    pipeline: str = doc("its pipeline")
    name: str = doc("the pass")
    sentence: str = doc("what it changed in the fusion structure")


@dataclass(frozen=True)
class Fingerprint:
    digest: str = doc("one hash over the parts below: equal digests mean the same program")
    hlo: str | None = doc(
        "the optimized HLO with backend configs and schedule order, names and metadata ignored "
        "(PyTorch: the post-grad graphs)"
    )
    thunks: str | None = doc(
        "the thunk (launch) sequence, where XLA dumps one (PyTorch: the wrapper's launches)"
    )
    code: str | None = doc(
        "the emitted LLVM IR or PTX, symbols renamed, where XLA dumps it (PyTorch: the "
        "generated kernels' sources)"
    )


@dataclass(frozen=True)
class Hlo:
    """What XLA made of the program (producer: HLO analysis of the IR ladder)."""

    fusion_count: int | None = doc(
        "fusions in the HLO after optimization (PyTorch: kernels Inductor generated)"
    )
    cluster_count: int | None = doc("units the device executes: fusions, library calls, lone ops")
    library_calls: tuple[LibraryCall, ...] = doc(
        "library calls (cuBLAS, cuBLASLt, YNNPACK, ...)", ()
    )
    fusion_changing_passes: tuple[PassChange, ...] = doc(
        "passes that changed the fusion structure", ()
    )
    fingerprint: Fingerprint | None = doc(
        "the compiled program's identity (harness.hlo.fingerprint)"
    )


# --- cost -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """Work and traffic against the device's ceilings (producer: the cost model and ceilings)."""

    flops_analytic: float | None = doc(
        "the FLOPs one call should take: 2·rows·k·n (the GEMM) in the GELU study; in a program "
        "study `program.flops`, else our cost model of the unoptimized HLO"
    )
    flops_analytic_source: str | None = doc(
        "where `flops_analytic` comes from: `formula` (2·rows·k·n), `config` (`program.flops`) "
        "or `hlo_before` (our cost model of the unoptimized HLO, `hlo_before` of the ladder)"
    )
    flops: float | None = doc("FLOPs by our cost model of the optimized HLO")
    bytes: float | None = doc("bytes read and written at cluster boundaries, by our cost model")
    transcendentals: float | None = doc("transcendental evaluations, by our cost model")
    arithmetic_intensity: float | None = doc("`flops` / `bytes`")
    flops_xla: float | None = doc("XLA's `cost_analysis()` flops")
    bytes_xla: float | None = doc("XLA's `cost_analysis()` bytes accessed")
    transcendentals_xla: float | None = doc("XLA's `cost_analysis()` transcendentals")
    disagreements: tuple[str, ...] = doc(
        "where XLA's counts cannot be right, or differ from ours", ()
    )
    loop_counts: str | None = doc("where the figures rest on loop counts measured, or on none")
    achieved_flops_per_s: float | None = doc("`flops` (else `flops_analytic`) over `timing.step_s`")
    achieved_bytes_per_s: float | None = doc("`bytes` over `timing.step_s`")
    peak_flops_per_s: float | None = doc("the ceiling for this variant's dtype and GEMM precision")
    peak_precision: str | None = doc("which ceiling: `bf16`, `f16`, `tf32`, `f32`, ...")
    peak_source: str | None = doc("where the ceiling came from")
    fraction_of_peak: float | None = doc("`achieved_flops_per_s` / `peak_flops_per_s`")
    fraction_withheld: str | None = doc("why `fraction_of_peak` is not given, when it is not")


# --- profile ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transfer:
    direction: str = doc("`H2D`, `D2H`, `D2D` or `P2P`")
    count: float = doc("copies per step")
    bytes: float = doc("bytes per step")


@dataclass(frozen=True)
class Profile:
    """The device timeline of the steady window (producer: profile matching)."""

    kernels_per_step: float | None = doc("kernel launches (or CPU thunks) per step")
    device_ops_per_step: float | None = doc("kernels + memsets + memcpys per step")
    transfers_per_step: tuple[Transfer, ...] = doc("host/device copies per step, by direction", ())
    device_time_per_step_s: float | None = doc("union of device busy intervals per profiled step")
    profiled_step_time_s: float | None = doc("the wall time of a profiled step (its step marker)")
    host_gap_per_step_s: float | None = doc("profiled step wall time − device time")
    matched_fraction: float | None = doc(
        "device events attributed to a cluster / all device events"
    )
    unmatched_events: int | None = doc(
        "events that could not be attributed (kernels.json says why)"
    )
    gaps: AttributionGaps | None = doc("the unattributed device time and kernels; ambiguous events")
    launches_per_cluster: dict[str, float] = doc(
        "launches per step of each `module:cluster`", EMPTY
    )
    step_sequence: tuple[str, ...] = doc(
        "one step's device events in launch order, as clusters", ()
    )
    unlaunched_clusters: tuple[str, ...] = doc(
        "clusters the profile never saw: an untaken branch, or work the profiler cannot see", ()
    )
    device_vs_step: float | None = doc(
        "profiled device time per step / `timing.step_s` − 1: beyond ±5% the two windows ran "
        "differently (clocks, or the host bound the step)"
    )


@dataclass(frozen=True)
class Numerics:
    """The result against a float64 NumPy reference (producer: the capture record)."""

    max_abs_err: float | None = doc("largest absolute error")
    max_rel_err: float | None = doc("largest relative error")
    rel_fro_err: float | None = doc("relative Frobenius error ‖y − ref‖ / ‖ref‖")
    tolerance: float | None = doc("the allowed `rel_fro_err` for the narrowest input dtype")
    ok: bool | None = doc("finite and within tolerance")
    worst_leaf: str | None = doc(
        "of a pytree result, the leaf these errors are of, by its path (`[0]['w']`): the "
        "furthest from passing, each leaf judged by its own dtype's tolerance, integers exactly"
    )
    failed_leaves: tuple[str, ...] = doc("the paths of the leaves outside their tolerance", ())
    reference_note: str | None = doc(
        "why the reference is not the variant's function in float64: a knob that cannot run in "
        "it (cuDNN attention) ran with the experiment's kwargs; a program that fails or draws "
        "other random numbers under x64 ran in float32 on the CPU (its tolerance said)"
    )


# --- comparison -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    against: str = doc("the variant compared with")
    stage: str = doc("the first IR stage where the two differ (`none` when none does)")
    detail: str = doc("how, in one sentence")
    files: tuple[str, str] | None = doc(
        "for `passes`: the first pair of per-pass files that differ (the other's, this "
        "variant's), relative to the run folder",
        None,
    )


@dataclass(frozen=True)
class Verdict:
    against: str = doc("the variant compared with")
    ratio: float | None = doc("this variant's `step_s` over the other's (median of paired rounds)")
    ci95: tuple[float, float] | None = doc("95% bootstrap interval of the ratio")
    verdict: str = doc(
        "`same_program`, `indistinguishable`, `faster`, `slower`, `not_comparable` or "
        "`not_resolved` (interval wider than timing.target_width and reaching into the noise "
        "floor, the run's A/A check failed and the interval does not clear its floor, or the run "
        "could not time: a busy machine, no A/A pair)"
    )
    why: str = doc("what decided the verdict", "")
    p_holm: float | None = doc("its p-value, Holm-adjusted over the run's timing comparisons")
    between_runs: float | None = doc(
        "its run-to-run spread on this machine (τ of the log ratio, harness.analyze.between_runs)"
        " in ci95 and p_holm; null: fewer than noise.between_runs.min_runs runs timed these"
    )
    ci95_rounds: tuple[float, float] | None = doc("the interval from this run's rounds alone")


@dataclass(frozen=True)
class Comparison:
    """How the variant relates to the others (producer: the comparison over the run)."""

    first_divergence: Divergence | None = doc("against the baseline")
    vs_baseline: Verdict | None = doc("speed against the baseline of the same framework and size")
    vs_lower_bound: Verdict | None = doc(
        "speed against the lower bound of the same framework and size"
    )
    vs_framework: Verdict | None = doc(
        "a PyTorch variant's speed against the JAX variant in its role and of its size (eager "
        "against eager, lower bound against lower bound, a split branch against lax.cond, any "
        "other against the JAX baseline)"
    )


# --- the variant and the run ------------------------------------------------------------------


@dataclass(frozen=True)
class VariantSummary:
    identity: Identity = doc("what the variant is")
    timing: Timing = doc("steady-state speed", Timing())
    compile: Compile = doc("compile pauses", Compile())
    hlo: Hlo = doc("what XLA made of it", Hlo())
    cost: Cost = doc("work, traffic and ceilings", Cost())
    profile: Profile = doc("the device timeline", Profile())
    numerics: Numerics = doc("against the float64 reference", Numerics())
    comm: Comm = doc("communication, for a variant sharded over devices", Comm())
    comparison: Comparison = doc("against the other variants", Comparison())
    dynamo: Dynamo | None = doc("torch.compile's graphs, breaks and recompiles (PyTorch only)")
    memory: Memory | None = doc("the peak, what is live at it, and each source's figures")
    analysis_errors: tuple[str, ...] = doc(
        "analyses that failed for this variant (the run goes on)", ()
    )

    @property
    def ok(self) -> bool:
        return self.identity.status == "ok"


@dataclass(frozen=True)
class RunSummary:
    schema_version: int = doc("the version of this schema the file was written with")
    experiment: str = doc("the config's experiment name")
    run_id: str = doc("the run folder's name")
    platform: str | None = doc("`cpu` or `gpu`")
    baseline: str = doc("the config's baseline variant")
    noise: Noise | None = doc("the run's own noise floor and device clocks")
    variants: dict[str, VariantSummary] = doc("every selected variant, in config order", EMPTY)
    findings: Findings | None = doc(
        "the run's conclusions, each from a rule of the analysis stage (harness.findings); "
        "null in a summary saved before schema 6, until `python -m harness.commands.migrate` adds them"
    )


# --- what the capture stage writes per variant (variants/<name>/result.json) ------------------


@dataclass(frozen=True)
class Pauses:
    first_call_s: float | None = doc("the first call: trace + lower + compile + first execution")
    compile_s: float | None = doc("trace + lower + XLA compile")
    trace_s: float | None = doc("tracing")
    lower_s: float | None = doc("lowering")
    xla_compile_s: float | None = doc("XLA's compile")
    first_execute_s: float | None = doc("the first execution")
    backend_compiles: int | None = doc("XLA compiles during the first call")
    fresh_process: bool | None = doc("compiled in a process of its own")
    compile_slots: int | None = doc(
        "how many compiles the shared device let run together while this variant compiled "
        "(capture.compiles); null when no other worker shared the device"
    )


@dataclass(frozen=True)
class Recompile:
    seconds: float | None = doc("the pause of the call with m halved")
    explanation: str | None = doc("JAX's cache-miss log for it")
    backend_compiles: int | None = doc("XLA compiles it caused")
    xla_compile_s: float | None = doc("their seconds")


@dataclass(frozen=True)
class XlaCost:
    flops: float | None = doc("XLA's cost_analysis flops")
    bytes: float | None = doc("bytes accessed")
    transcendentals: float | None = doc("transcendentals")
    error: str | None = doc("why XLA's cost analysis is unavailable")


@dataclass(frozen=True)
class MeshRecord:
    mesh: tuple[int, ...] = doc("devices along each mesh axis")
    axes: tuple[str, ...] = doc("the axes' names")
    devices: int = doc("devices in the mesh")
    device_assignment: tuple[int, ...] = doc("the device id of each partition")
    device_kind: str = doc("what the devices are")
    specs: dict[str, str] = doc("PartitionSpec of x, w, b and out", EMPTY)
    shard_map: str | None = doc("the shard_map body, if any")
    output_sharding: str | None = doc("the result's PartitionSpec as jax reported it")


@dataclass(frozen=True)
class CaptureRecord:
    """One variant's raw capture: what the capture stage measured, before any analysis."""

    status: str = doc("`ok`, `skipped` or `failed`")
    reason: str | None = doc("why skipped or failed")
    mode: str = doc("the variant's mode")
    module: str | None = doc("the XLA module name")
    wall_s: float | None = doc("seconds spent capturing")
    failure: Failure | None = doc("how it failed")
    expected_error: ExpectedError | None = doc("the error it was expected to raise")
    callback_lines: int | None = doc("lines a host callback printed")
    eager_modules: tuple[str, ...] = doc("primitive modules eager dispatch compiled", ())
    pauses: Pauses | None = doc("the first call's pauses")
    recompile: Recompile | None = doc("the new-shape call")
    latency_blocked_s: tuple[float, ...] = doc("blocked per-call times after warm-up", ())
    numerics: Numerics | None = doc("against the float64 reference")
    xla_cost: XlaCost | None = doc("XLA's cost analysis of the compiled program")
    flops_analytic: float | None = doc(
        "2·rows·k·n; in a program study `program.flops`, else our cost model of the unoptimized HLO"
    )
    flops_analytic_source: str | None = doc(
        "`formula`, `config` or `hlo_before` (null: `formula`, as before this key existed)"
    )
    program: ProgramRecord | None = doc("what a program study's variant ran")
    autotune_choices: dict[str, str] | None = doc(
        "on a GPU, each fusion the first compile autotuned (XLA's cache key) and a digest of "
        "its choice, measured times left out: two runs' choices compare"
    )
    notes: tuple[str, ...] = doc("what the capture could not do, and why", ())
    mesh: MeshRecord | None = doc("the mesh and shardings of a sharded variant")
    probe_failures: tuple[ProbeFailure, ...] = doc("the optional probes that failed, and why", ())
    memory: MeasuredMemory | None = doc("compiled.memory_analysis() and the device peak")
    probe_s: ProbeCosts | None = doc("what each probe of the capture cost, seconds")


def load_capture(path: Path, within: Path | None = None) -> CaptureRecord:
    """Returns a variant's result.json; raises SchemaError naming the file and key."""
    try:
        text = userfiles.read_text(path, userfiles.RECORD, within)
    except (OSError, ValueError) as e:
        raise SchemaError(str(path), "", f"unreadable: {e}") from None
    return from_json(CaptureRecord, loads(text, str(path)), str(path))


# --- what the timing stage writes (timing.json) -----------------------------------------------


@dataclass(frozen=True)
class TimedVariant:
    round_step_s: tuple[float, ...] = doc("time per step in each round, in round order", ())
    calls_per_batch: int | None = doc("back-to-back calls per batch")
    settle_calls: int | None = doc("untimed calls of the variant just before each batch")
    note: str | None = doc("e.g. compiled again for timing, and whether it matched the capture")
    prepare_s: float | None = doc(
        "seconds making it ready in the timing worker before its rounds: its inputs, and its "
        "program loaded (or compiled again); null: the worker captured it itself"
    )


@dataclass(frozen=True)
class RoundContext:
    round: int = doc("the round")
    before: dict[str, Plain] = doc(
        "device readings before the round (clocks, temperature, power)", EMPTY
    )
    after: dict[str, Plain] = doc("device readings after it", EMPTY)
    flags: tuple[str, ...] = doc("why the machine readings put the round in doubt", ())


@dataclass(frozen=True)
class TimingRecord:
    """The timing stage's rounds: every variant in the same rounds, alternating."""

    rounds: int = doc("rounds run")
    target_batch_s: float = doc("the target seconds of one batch")
    settle: float = doc("untimed calls before each batch, as a fraction of its calls", 0.0)
    wall_s: float = doc("seconds the stage took")
    baseline: str | None = doc("the variant timed twice per round, to measure the run's noise")
    repeat: str | None = doc("the name of its second slot")
    orders: tuple[tuple[str, ...], ...] = doc("each round's order", ())
    variants: dict[str, TimedVariant] = doc(
        "per timed variant (and the baseline's second slot)", EMPTY
    )
    excluded: dict[str, str] = doc("variants not timed, and why", EMPTY)
    context_source: str | None = doc("where the device readings come from, or why there are none")
    context: tuple[RoundContext, ...] = doc("the device readings around each round", ())
    batches: int = doc("short batches per variant per round; the round's figure is their median", 1)
    added_rounds: int = doc("rounds added after the planned ones while intervals were wide", 0)
    stopped: str | None = doc("why no more rounds: `widths` (narrow enough) or `budget`")
    cut: RoundsCut | None = doc(
        "fewer rounds than planned: one round of one-call batches did not fit the budget"
    )


# search.json's records are harness.records.search's.


def load_summary(path: Path, within: Path | None = None) -> RunSummary:
    """Returns the summary at `path`, migrated to this schema; raises SchemaError naming the key.

    A summary written by a newer harness (a larger schema_version) is refused, since its
    meaning may have changed. One that is a link out of the folder `within` (a sibling run's)
    is refused too.
    """
    source = str(path)
    try:
        text = userfiles.read_text(path, userfiles.SUMMARY, within)
    except userfiles.Unreadable as e:  # a FIFO, a device, too large, not UTF-8
        raise SchemaError(source, "", str(e).removeprefix(f"{source}: ")) from None
    return parse_summary(loads(text, source), source)


def parse_summary(data: Any, source: str) -> RunSummary:
    """Returns the RunSummary of JSON data, migrating older versions; raises SchemaError."""
    if not isinstance(data, dict):
        raise SchemaError(source, "", f"expected a JSON object, got {type(data).__name__}")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError(source, "schema_version", f"expected an integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            source,
            "schema_version",
            f"{version} is newer than this harness reads ({SCHEMA_VERSION}); update the harness",
        )
    if version != SCHEMA_VERSION and version not in MIGRATIONS:
        problem = f"{version} is not a version any harness wrote (1 to {SCHEMA_VERSION})"
        raise SchemaError(source, "schema_version", problem)
    while version < SCHEMA_VERSION:
        try:  # an old file of other shapes than its version wrote fails inside: its fault
            data = MIGRATIONS[version](data, source)
        except SchemaError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
            problem = f"a malformed version-{version} summary ({type(e).__name__}: {e})"
            raise SchemaError(source, "", problem) from None
        version = data["schema_version"]
    summary = from_json(RunSummary, data, source)
    for name in summary.variants:  # each names a folder of the run: one path component
        if not one_component(name):
            raise SchemaError(source, "variants", f"{name[:80]!r} is not a variant name")
    return summary


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """Returns the JSON data of a summary, as written to summary.json."""
    return to_json(summary)
