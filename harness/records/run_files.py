"""The records of the run folder's other files: the manifest, the ceilings, the analysis's
per-variant files (fusions, kernels, passes, compile, cost, ranking, comm) and the kind of
`python -m harness.analyze`'s analysis.json (its record is harness.records.program's).

summary.json, result.json, timing.json and search.json are harness.records.summary's. Each file here is
a frozen dataclass with `doc(...)` on every field and a `schema_version` of its own, read and
written only through `load` and `write` (the paths are harness.store.runfolder's):

    write(path, record)     the record as JSON, its schema_version the current one
    load(FUSIONS, path)     the file migrated to the current version and validated: a
                            SchemaError naming the file and the dotted key of any value
                            that does not match, an unknown key included

A file written before it had a version (every committed reference's) reads as version 0,
whose migration to 1 only adds the number: the shape did not change. A new key bumps the
file's version with a migration in its `FileKind`, as summary.json's MIGRATIONS do.

Some deep parts stay open (`Plain`), named where they are: the ranking's modules (typed by
harness.records.program.ModuleAnalysis, which the report reads them with), the communication
file's collectives and profile, a torch compile's frames, torch.json's compilation metrics
(harness.records.torch_facts says why). Everything the report reads is typed.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.records.migrations.ceilings import migrate_ceilings_v0
from harness.records.numerics import AccuracyFile, DistancesFile, PassSearch
from harness.records.program import AnalysisFile
from harness.records.saved_config import SavedConfig
from harness.records.torch_facts import TorchFacts
from harness.store import io, runfolder
from harness.store.records import EMPTY, Plain, SchemaError, doc, from_json, loads, to_json

# --- manifest.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Environment:
    """What the run ran on, as the worker's preflight found it."""

    python: str | None = doc("the Python version")
    versions: dict[str, str | None] = doc(
        "the installed version (or `not installed`) of each package a frontend's traits "
        "name, by package, frontend after frontend: `jax`, `jaxlib`, `flax`, `torch`, ...",
        EMPTY,
    )
    platform: str | None = doc("jax's default backend: `cpu`, `gpu`")
    device_kind: str | None = doc("the first device's kind")
    device_count: int | None = doc("devices jax sees")
    host: str | None = doc("the host's name")
    cpu_count: int | None = doc("the host's CPUs")
    host_devices: str | None = doc("whether host devices were forced, and how many")
    git_commit: str | None = doc("the harness checkout's commit, `+dirty` with local changes")
    compilation_cache: str | None = doc(
        "the caches turned off for the study where the user's environment set them: JAX's "
        "persistent compilation cache, XLA's autotune and kernel caches in XLA_FLAGS (None: "
        "none was set when the worker started; JAX's cache is off for a study either way)"
    )
    process: dict[str, Plain] | None = doc(
        "this process of a group (harness.study.group): its rank"
    )

    def value(self, key: str) -> object:
        """The field `key`, or the version of the package `key` (None when not recorded)."""
        if key in self.__dataclass_fields__:
            return getattr(self, key)
        return self.versions.get(key)


@dataclass(frozen=True)
class Override:
    key: str = doc("the dotted config key overridden")
    value: Plain = doc("its value from the command line")
    previous: Plain = doc("its value in the config file")


@dataclass(frozen=True)
class Invocation:
    """How the user started the run, so the commands it prints (time it again, finish it) paste
    as printed: harness.records.invocations builds them from this."""

    python: str = doc(
        "the interpreter, as it can be typed where the run started: relative to that folder"
        " when inside it (`.venv/bin/python`), else absolute"
    )
    make: bool = doc("started through `make` (it sets MAKELEVEL for the commands it runs)", False)


@dataclass(frozen=True)
class Manifest:
    """The run: its config as resolved, where it ran, its status and the seconds per stage."""

    schema_version: int = doc("this file's version (harness.records.run_files.MANIFEST)")
    experiment: str = doc("the config's experiment")
    run_id: str = doc("the run folder's name")
    kind: str | None = doc("`search` or `analyze` (python -m harness.analyze); null for a study")
    config_file: str = doc("the config file it ran")
    config: dict[str, Plain] = doc("the config as resolved (harness.config's keys)", EMPTY)
    overrides: tuple[Override, ...] = doc("the command line's overrides, in order", ())
    environment: Environment | None = doc("versions, platform and devices")
    compiler_options: dict[str, dict[str, Plain]] = doc("each variant's XLA options", EMPTY)
    started: str = doc("when it started (UTC, ISO 8601)")
    resumed: str | None = doc("when it was last resumed")
    finished: str | None = doc("when it ended")
    status: str = doc("`running`, `complete`, `failed` or `interrupted`")
    reason: str | None = doc("why it failed or stopped")
    notes: tuple[str, ...] = doc("what the run says about itself (a re-time's kept files)", ())
    stages_s: dict[str, float] = doc(
        "seconds per stage: start, capture, ceilings (measured, or waited for), timing, ...",
        EMPTY,
    )
    workers: int | None = doc("worker processes started")
    wall_s: float | None = doc("a search's wall time")
    dump: str | None = doc("`python -m harness.analyze`: the dump folder it analysed")
    module: str | None = doc("`python -m harness.analyze`: its --module pattern")
    xplane: str | None = doc("`python -m harness.analyze`: the profile it read")
    ceilings: str | None = doc("`python -m harness.analyze`: the ceilings file it was given")
    invocation: Invocation | None = doc("how it was started (null before manifest version 2)")
    sizes: dict[str, int] | None = doc(
        "the run folder's bytes by kind of file (harness.store.runfolder.SIZE_KINDS: dumps, ir, "
        "profiles, events, timeline, logs, records, reports, other), every file but this one, "
        "a file linked twice once; written when the analysis ends and again when the run does "
        "(null before manifest version 4)"
    )

    @property
    def saved_config(self) -> SavedConfig:
        """`config` read through typed accessors, so its readers walk no dicts."""
        return SavedConfig(self.config)


# --- ceilings.json ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peak:
    flops_per_s: float = doc("the best GEMM rate measured at this precision")
    source: str = doc("how it was measured")


@dataclass(frozen=True)
class Ceilings:
    """The device's measured ceilings: GEMM rate per precision, copy and link bandwidth."""

    schema_version: int = doc("this file's version (harness.records.run_files.CEILINGS)")
    device: str | None = doc("the device kind measured")
    platform: str = doc("its platform")
    peaks: dict[str, Peak] = doc("per precision (`f32`, `tf32`, `bf16`, ...)", EMPTY)
    peak_bytes_per_s: float = doc("the best device copy, bytes read + written per second")
    bytes_source: str = doc("how it was measured")
    link_bytes_per_s: float | None = doc("the device-to-device link, bytes per second")
    link_source: str = doc("how it was measured, or why there is no link")
    measured_at: str = doc("when the oldest figure was measured (UTC)")
    age_s: float = doc("its age when the run used it")
    cache: str | None = doc("the cache the figures came from, when they were kept")
    measured: tuple[str, ...] = doc(
        "the figures measured in this run (a GEMM shape's, `copy:...`, `link:...`), the others "
        "cached",
        (),
    )
    held: tuple[tuple[float, float], ...] = doc(
        "when measuring them held the device beside the variants' captures, (began, ended) "
        "Unix seconds: its compiles and its timings alone",
        (),
    )


# --- variants/<name>/fusions.json -----------------------------------------------------------------


@dataclass(frozen=True)
class ClusterGemm:
    m: int = doc("rows (product of the free dimensions)")
    k: int = doc("the contracted size")
    n: int = doc("columns")
    batch: int = doc("the product of the batch dimensions", 1)
    lhs_dtype: str = doc("the left operand's element type", "")
    rhs_dtype: str = doc("the right operand's element type", "")
    out_dtype: str = doc("the result's element type", "")
    flops: int = doc("2·batch·m·n·k")


@dataclass(frozen=True)
class ClusterEntry:
    """One unit the device executes: a fusion, a library call, a lone op (an Inductor kernel)."""

    name: str = doc("its instruction (or kernel) name")
    computation: str = doc("the computation it is in")
    kind: str = doc("kLoop, kInput, kOutput, kCustom; `library`; else the op's opcode")
    backend_kind: str = doc("the fusion backend kind (`__triton_gemm`), or empty")
    target: str = doc("the library entry it calls, or empty")
    epilogue: str = doc("what a library call fuses after its GEMM, or empty")
    member_opcodes: dict[str, int] = doc("opcode -> count of its members", EMPTY)
    source_ops: tuple[str, ...] = doc("the program's ops it holds", ())
    source_locations: tuple[str, ...] = doc("their source lines", ())
    output_shape: str = doc("its result's shape")
    output_bytes: int = doc("its result's bytes")
    parent: str = doc("the cluster it is nested in, or empty", "")
    gemm: ClusterGemm | None = doc("its matrix product, when it is one GEMM")


@dataclass(frozen=True)
class FusionModule:
    """One optimized module (or Inductor graph) and how the program's ops landed in it."""

    module: str = doc("the module's name")
    path: str | None = doc("its file in the IR ladder")
    clusters: tuple[ClusterEntry, ...] = doc("its clusters, in the module's order", ())
    reverse_map: dict[str, tuple[str, ...]] | None = doc(
        "each op of the module before optimization -> the clusters holding it"
    )
    folded_away: tuple[str, ...] = doc("the ops no cluster holds", ())
    placed_by: dict[str, str] | None = doc("how each op was placed (`identity`, `name`, ...)")
    method: str | None = doc("what identity means for this pair of modules")
    notes: tuple[str, ...] = doc("what could not be mapped exactly", ())
    compile_id: str | None = doc("PyTorch: the Dynamo compile that made the graph")
    device: str | None = doc("PyTorch: the device its kernels run on")


@dataclass(frozen=True)
class FusionsFile:
    """What XLA (or Inductor) made of the program: its clusters and the reverse map."""

    schema_version: int = doc("this file's version (harness.records.run_files.FUSIONS)")
    modules: tuple[FusionModule, ...] = doc("one entry per optimized module", ())


# --- variants/<name>/kernels.json -----------------------------------------------------------------


@dataclass(frozen=True)
class KernelEvent:
    """One device event of the steady window and the cluster it is attributed to."""

    step: int | None = doc("the profiled step it ran in")
    name: str = doc("the kernel, memcpy or memset")
    kind: str = doc("`kernel`, `memcpy`, `memset`, `host_thunk`, ...")
    direction: str | None = doc("a copy's direction: H2D, D2H, D2D")
    bytes: int | None = doc("a copy's or memset's bytes")
    hlo_module: str | None = doc("the module the profile names")
    hlo_op: str | None = doc("the HLO op the profile names")
    program_id: int | None = doc("XLA's module number")
    correlation_id: int | None = doc("the launch's correlation id")
    device: str = doc("the device line")
    stream: str = doc("the stream line")
    start_ns: float = doc("its start")
    duration_ns: float = doc("its duration")
    grid: tuple[int, int, int] | None = doc("a GPU kernel's grid")
    block: tuple[int, int, int] | None = doc("its block")
    registers: int | None = doc("its registers per thread")
    occupancy_pct: float | None = doc("its occupancy")
    device_ordinal: int | None = doc("the N of the device that ran it")
    run_id: int | None = doc("the CPU client's execution id")
    cluster: str | None = doc("the cluster it is attributed to")
    primitive: str | None = doc("eager: the primitive its module ran")
    matched: bool = doc("whether it was attributed")
    rule: str = doc("the matching rule that decided")
    reason: str = doc("why, in words")
    ambiguous: bool | None = doc("whether more than one cluster could hold it")
    cpu_op: str | None = doc("PyTorch: the CPU op that launched it")
    compile_region: str | None = doc("PyTorch: the compiled region it ran in")


@dataclass(frozen=True)
class TransferRow:
    direction: str = doc("H2D, D2H or D2D")
    count_per_step: float = doc("copies a step")
    bytes_per_step: float = doc("bytes a step")
    sizes: tuple[int, ...] = doc("each copy's bytes", ())


@dataclass(frozen=True)
class MatchTotals:
    """The match of the steady window's events to the clusters (harness.match.MatchReport)."""

    steps: int = doc("profiled steps")
    marked_steps: bool = doc("whether the steps were marked (StepTraceAnnotation)")
    events_in_window: int = doc("device events in the steady window")
    outside_window: int = doc("events outside it")
    matched_fraction: float = doc("the fraction of events attributed")
    ambiguous_fraction: float | None = doc("the fraction that more than one cluster could hold")
    gaps: dict[str, Plain] | None = doc("the unattributed time (harness.match.AttributionGaps)")
    kernels_per_step: float = doc("kernels a step")
    memsets_per_step: float = doc("memsets a step")
    device_ops_per_step: float = doc("device events a step")
    device_time_per_step_s: float = doc("device busy time a step")
    device_time_by_step_s: tuple[float, ...] = doc("per profiled step", ())
    launches_per_cluster: dict[str, float] = doc("cluster -> launches a step", EMPTY)
    transfers_per_step: tuple[TransferRow, ...] = doc("copies a step, per direction", ())
    rules: dict[str, int] = doc("rule -> events it decided", EMPTY)
    unmatched: tuple[dict[str, Plain], ...] = doc("every event left unattributed", ())
    attributions: Plain = doc("always null: the events are in `events`")
    notes: tuple[str, ...] = doc("what the match could not do", ())


@dataclass(frozen=True)
class KernelsFile:
    """The match of the steady window's events: its totals, and where every event is."""

    schema_version: int = doc("this file's version (harness.records.run_files.KERNELS)")
    match: MatchTotals | None = doc("the match's totals")
    events: tuple[KernelEvent, ...] = doc(
        "version 1: every event, in the profile's order (since version 2 they are in "
        "`events_file`; harness.records.events_file reads either)",
        (),
    )
    events_file: str | None = doc(
        "the file beside it holding every event and its attribution (events.parquet); null in "
        "version 1"
    )


# --- variants/<name>/passes.json ------------------------------------------------------------------


@dataclass(frozen=True)
class PassRow:
    index: int = doc("the pass's place in the dump")
    pipeline: str = doc("its pipeline")
    # `pass` is a Python keyword: the field is `pass_` and its JSON key `pass` (to_json_keys).
    pass_: str = doc("the pass")
    path: str = doc("the module's file after it")
    instruction_count: int = doc("instructions after it")
    fusion_count: int = doc("fusions after it")
    fingerprint: str = doc("the module's structure after it")
    changed_fusions: bool = doc("whether it changed the fusions")
    explanation: str = doc("what it changed, in words", "")


@dataclass(frozen=True)
class PassesFile:
    """The module after each XLA pass that changed it."""

    schema_version: int = doc("this file's version (harness.records.run_files.PASSES)")
    passes: tuple[PassRow, ...] = doc("in pass order", ())


# --- variants/<name>/compile.json -----------------------------------------------------------------


@dataclass(frozen=True)
class TimedName:
    """Time spent under one name: how often it ran, inclusive and self seconds."""

    name: str = doc("the event")
    count: int = doc("how often it ran")
    total_s: float = doc("inclusive seconds")
    self_s: float = doc("self seconds")


@dataclass(frozen=True)
class TimedPass:
    """One pass of one pipeline: how often it ran, inclusive and self seconds."""

    name: str = doc("the pass")
    pipeline: str = doc("its pipeline")
    count: int = doc("how often it ran")
    total_s: float = doc("inclusive seconds")
    self_s: float = doc("self seconds")


@dataclass(frozen=True)
class XlaCompile:
    """One compile of a JAX variant, from its profile (harness.profile.compile)."""

    path: str = doc("the profile read")
    module: str | None = doc("the module compiled")
    compile_event: str | None = doc("the profile's compile event")
    total_compile_s: float = doc("the compile's seconds")
    top_level: tuple[TimedName, ...] = doc("the compile's top-level events", ())
    pipelines: tuple[TimedName, ...] = doc("per pass pipeline", ())
    passes: tuple[TimedPass, ...] = doc("per pass", ())
    autotuning_s: float = doc("autotuning's seconds")
    autotune_events: tuple[TimedName, ...] = doc("autotuning's events", ())
    jax_events: tuple[TimedName, ...] = doc("jax's own events (tracing, lowering)", ())
    notes: tuple[str, ...] = doc("what the profile could not say", ())
    passes_total_s: float = doc("the passes' inclusive seconds")
    top_passes: tuple[TimedPass, ...] = doc("the ten passes of most inclusive time", ())


@dataclass(frozen=True)
class CompileFile:
    """A JAX variant's compiles: the first call's and the new shape's."""

    schema_version: int = doc("this file's version (harness.records.run_files.COMPILE)")
    first_call: XlaCompile | None = doc("the first call's compile")
    recompile: XlaCompile | None = doc("the new shape's compile")


@dataclass(frozen=True)
class TorchCompile:
    """One torch.compile call split into its phases (harness.frontends.torch.inductor.trace_log)."""

    source: str = doc("where the phases come from (the TORCH_TRACE log's events)")
    total_s: float | None = doc("the compile's seconds")
    dynamo_tracing_s: float | None = doc("Dynamo's tracing")
    aot_s: float | None = doc("AOTAutograd")
    inductor_s: float | None = doc("Inductor")
    kernel_compile_s: float | None = doc("compiling the generated kernels")
    autotune_s: float | None = doc("autotuning")
    guards_s: float | None = doc("building the guards")
    notes: tuple[str, ...] = doc("what the log could not say", ())


@dataclass(frozen=True)
class TorchCompileFile:
    """A PyTorch variant's compiles: both calls' phases, per Dynamo compile id."""

    schema_version: int = doc("this file's version (harness.records.run_files.TORCH_COMPILE)")
    first_call: TorchCompile | None = doc("the first call's compile")
    recompile: TorchCompile | None = doc("the new shape's compile")
    frames: dict[str, Plain] = doc("per compile id: what Dynamo traced, guarded, made", EMPTY)
    guards: tuple[str, ...] = doc("the first call's guards", ())


# --- variants/<name>/timings.json ----------------------------------------------------------------


@dataclass(frozen=True)
class TimingsFile:
    """The capture's blocked per-call times (not the run's timing.json, whose rounds time the
    variants against each other), and a JAX variant's first-call compile events."""

    schema_version: int = doc("this file's version (harness.records.run_files.TIMINGS)")
    latency_blocked_s: tuple[float, ...] = doc("each steady call's seconds, blocked on", ())
    first_call_events: tuple[tuple[str, float], ...] = doc(
        "JAX: each jax.monitoring event of the first call, (event, seconds); empty for PyTorch",
        (),
    )


# --- variants/<name>/cost.json --------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterCostRow:
    name: str = doc("the cluster")
    flops: float = doc("its FLOPs (our cost model)")
    transcendentals: float = doc("its transcendental evaluations")
    bytes: float = doc("the bytes crossing its boundary")
    library_flops: float = doc("its library GEMM's FLOPs", 0.0)
    uncosted: dict[str, int] = doc("opcode -> instructions it could not cost", EMPTY)
    notes: tuple[str, ...] = doc("what the model assumed", ())
    executions: float = doc(
        "how many times it runs a call of its module: the trip counts of the loops around it "
        "(0 for a conditional's branch not counted); its other figures are for one run",
        1.0,
    )
    loop: str = doc("the innermost while loop whose body holds it, or empty", "")
    trip_count: int | None = doc(
        "that loop's trip count per entry (null: not in the HLO, or in no loop)"
    )
    count_source: str = doc(
        "how its executions were counted: `known_trip_count` or `pattern` (the HLO's), "
        "`measured` (a loop around it ran as many iterations as the profile measured, or a "
        "conditional's branch as many executions as it saw take it), "
        "`unknown` (a loop around it has no count: its executions are no count), or empty",
        "",
    )
    entries: float | None = doc("times its loop is entered a call (null: in no loop)")


@dataclass(frozen=True)
class ModuleCostRow:
    module: str = doc("the module")
    flops: float = doc("its FLOPs a call, each cluster times its executions")
    transcendentals: float = doc("its transcendental evaluations a call")
    bytes: float = doc("its boundary bytes a call")
    arithmetic_intensity: float = doc("FLOPs per byte (0 when nothing moves)")
    library_flops: float = doc("its library GEMMs' FLOPs", 0.0)
    uncosted: dict[str, int] = doc("opcode -> instructions not costed", EMPTY)
    clusters: tuple[ClusterCostRow, ...] = doc("per cluster", ())


@dataclass(frozen=True)
class CostFile:
    """Work and traffic by our cost model, per module and cluster, and XLA's own figures."""

    schema_version: int = doc("this file's version (harness.records.run_files.COST)")
    modules: tuple[ModuleCostRow, ...] = doc("per optimized module", ())
    xla: dict[str, float] | None = doc("XLA's cost analysis: flops, bytes accessed, ...")
    xla_disagreements: tuple[str, ...] = doc("where ours and XLA's differ, in words", ())


# --- variants/<name>/ranking.json -----------------------------------------------------------------


@dataclass(frozen=True)
class RankingSteps:
    count: int = doc("profiled steps")
    how: str = doc("how they were found (`markers`)")
    detail: str = doc("in words")


@dataclass(frozen=True)
class RankingFile:
    """Where the variant's time goes (harness.records.program.ProgramAnalysis, one module)."""

    schema_version: int = doc("this file's version (harness.records.run_files.RANKING)")
    ranked_by: str = doc("`device time` or `FLOPs`")
    main: tuple[str, ...] = doc("the main module's key")
    main_rule: str = doc("why it is the main module")
    modules: tuple[dict[str, Plain], ...] = doc(
        "the module analysed (harness.records.program.ModuleAnalysis)", ()
    )
    steps: RankingSteps | None = doc("the profiled steps it was ranked over")
    profile: dict[str, Plain] | None = doc("the profile as a whole (null for a variant)")
    ceilings: dict[str, Plain] | None = doc("the ceilings it was ranked against")
    notes: tuple[str, ...] = doc("what the ranking could not do", ())
    step_rows: tuple[dict[str, Plain], ...] = doc("per marked step: wall, device, idle", ())


# --- variants/<name>/comm.json --------------------------------------------------------------------


@dataclass(frozen=True)
class CommStage:
    index: int = doc("the stage's place in the ladder")
    label: str = doc("its name")
    pass_: str | None = doc("the pass that made it (JSON key `pass`)")
    path: str | None = doc("its file, relative to the variant's folder")


@dataclass(frozen=True)
class CommFile:
    """A sharded variant's collectives, where each came from, and its profile's communication."""

    schema_version: int = doc("this file's version (harness.records.run_files.COMM)")
    collectives: tuple[dict[str, Plain], ...] = doc(
        "every collective (harness.hlo.collectives) with its origin and device groups", ()
    )
    stages: tuple[CommStage, ...] = doc("the ladder's stages the collectives were traced in", ())
    profile: dict[str, Plain] | None = doc("the profile's communication (harness.match.comm)")
    link: tuple[dict[str, Plain], ...] = doc("each collective against the measured link", ())


# --- variants/<name>/timeline.perfetto.json.gz ----------------------------------------------------


@dataclass(frozen=True)
class TraceEvent:
    """One Chrome-trace event: a slice (`X`) or a track's name (`M`)."""

    name: str = doc("the slice's name: a device event's cluster, `step N`, a command buffer")
    ph: str = doc("the phase: `X` a complete slice, `M` metadata naming a process or thread")
    pid: int = doc("the track group: one per device")
    tid: int = doc("the track: one per stream, plus the steps' and command buffers' tracks")
    ts: float = doc("start, µs from the profile's origin", 0.0)
    dur: float = doc("duration, µs", 0.0)
    cat: str = doc("`cluster`, `unattributed`, `step` or `command_buffer`", "")
    args: dict[str, Plain] = doc(
        "a device event's kernel, source line, HLO op, cluster, command buffer, loop "
        "iteration and attribution rule; a track's name",
        EMPTY,
    )


@dataclass(frozen=True)
class TimelineFile:
    """The profile's device events named by their clusters, as Chrome trace JSON (gzipped):
    open it in ui.perfetto.dev ("Open trace file") or chrome://tracing, offline."""

    schema_version: int = doc("this file's version (harness.records.run_files.TIMELINE)")
    traceEvents: tuple[TraceEvent, ...] = doc("the slices and track names, in time order", ())
    displayTimeUnit: str = doc("how the viewer shows times", "ns")
    shown: str = doc(
        "what of the profile the slices show, when not every event: a long profile's first "
        "whole steps (every event is in events.parquet)",
        "",
    )


# --- reading and writing ------------------------------------------------------------------------

# A field named after a Python keyword is spelt with a trailing `_`; its JSON key is the word.
_KEYWORD_FIELDS = {"pass_": "pass"}


@dataclass(frozen=True, eq=False)  # compared and hashed as itself: one object per kind
class FileKind:
    """One kind of file: its record, its version, and the migrations to that version."""

    name: str
    record: type
    version: int
    migrations: Mapping[int, Callable[[dict[str, Any], str], dict[str, Any]]]
    compact: bool = False  # written without indentation (a large file no one reads by eye)


def _versioned(version: int) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """The migration of a file written before it had a version: the same shape, numbered."""

    def migrate(data: dict[str, Any], source: str) -> dict[str, Any]:
        del source
        return {**data, "schema_version": version}

    return migrate


def _first(name: str, record: type, compact: bool = False) -> FileKind:
    return FileKind(name, record, 1, {0: _versioned(1)}, compact)


def _versions_by_frontend(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Version 3: the environment's fixed jax, jaxlib, flax and torch fields are its
    `versions`, which each frontend fills with its own packages'."""
    del source
    env = data.get("environment")
    if isinstance(env, dict):
        old = ("jax", "jaxlib", "flax", "torch")  # as the keys a version-2 manifest wrote
        rest = {k: v for k, v in env.items() if k not in old}
        data = {**data, "environment": {**rest, "versions": {k: env.get(k) for k in old}}}
    return {**data, "schema_version": 3}


# Version 2 added `invocation`: a manifest of version 1 reads with it absent. Version 3
# records each frontend's versions (`environment.versions`); version 4 the folder's `sizes`.
MANIFEST = FileKind(
    runfolder.MANIFEST_FILE,
    Manifest,
    4,
    {0: _versioned(1), 1: _versioned(2), 2: _versions_by_frontend, 3: _versioned(4)},
)
CEILINGS = FileKind(runfolder.CEILINGS_FILE, Ceilings, 1, {0: migrate_ceilings_v0})
FUSIONS = _first(runfolder.FUSIONS_FILE, FusionsFile)
# Version 2 keeps the events in events.parquet (`events_file`): a version-1 file reads with
# its events where they were, which harness.records.events_file reads and migrate moves.
KERNELS = FileKind(runfolder.KERNELS_FILE, KernelsFile, 2, {0: _versioned(1), 1: _versioned(2)})
PASSES = _first(runfolder.PASSES_FILE, PassesFile)
COMPILE = _first(runfolder.COMPILE_FILE, CompileFile)
TIMINGS = _first(runfolder.TIMINGS_FILE, TimingsFile)
TORCH_COMPILE = _first(runfolder.COMPILE_FILE, TorchCompileFile)  # a PyTorch variant's
TORCH_FACTS = _first(runfolder.TORCH_FILE, TorchFacts)  # a PyTorch variant's capture facts
COST = _first(runfolder.COST_FILE, CostFile)
RANKING = _first(runfolder.RANKING_FILE, RankingFile, compact=True)
COMM = _first(runfolder.COMM_FILE, CommFile)
NUMERICS = _first(runfolder.NUMERICS_FILE, AccuracyFile)
DISTANCES = _first(runfolder.DISTANCES_FILE, DistancesFile)
NUMERICS_PASS = _first(runfolder.NUMERICS_PASS_FILE, PassSearch)
TIMELINE = _first(runfolder.TIMELINE_FILE, TimelineFile, compact=True)
ANALYSIS = _first(runfolder.ANALYSIS_FILE, AnalysisFile, compact=True)  # harness.analyze's
KINDS = (
    MANIFEST,
    CEILINGS,
    FUSIONS,
    KERNELS,
    PASSES,
    COMPILE,
    TORCH_COMPILE,
    TORCH_FACTS,
    TIMINGS,
    COST,
    RANKING,
    COMM,
    TIMELINE,
    NUMERICS,
    DISTANCES,
    NUMERICS_PASS,
    ANALYSIS,
)
_KIND_OF = {k.record: k for k in KINDS}


def _to_keys(data: Any) -> Any:
    """Renames keyword fields to their JSON keys (`pass_` -> `pass`), at every depth."""
    if isinstance(data, dict):
        return {_KEYWORD_FIELDS.get(k, k): _to_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_to_keys(v) for v in data]
    return data


def _from_keys(record: type, data: Any) -> Any:
    """The inverse of _to_keys for records that have keyword fields; other data as it is."""
    if record in (PassesFile, CommFile) and isinstance(data, dict):
        inner = "passes" if record is PassesFile else "stages"
        rows = data.get(inner)
        if isinstance(rows, list):
            fixed = [
                {("pass_" if k == "pass" else k): v for k, v in r.items()}
                if isinstance(r, dict)
                else r
                for r in rows
            ]
            return {**data, inner: fixed}
    return data


def record_json(record: Any) -> dict[str, Any]:
    """Returns the JSON data of a file's record, at its kind's current schema_version."""
    kind = _KIND_OF[type(record)]
    return _to_keys(to_json(dataclasses.replace(record, schema_version=kind.version)))


def parse(kind: FileKind, data: Any, source: str) -> Any:
    """Returns `kind`'s record of JSON `data`, migrated to its version; raises SchemaError."""
    if not isinstance(data, dict):
        raise SchemaError(source, "", f"expected a JSON object, got {type(data).__name__}")
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError(source, "schema_version", f"expected an integer, got {version!r}")
    if version > kind.version:
        raise SchemaError(
            source,
            "schema_version",
            f"{version} is newer than this harness reads ({kind.version}); update the harness",
        )
    if version != kind.version and version not in kind.migrations:
        problem = f"{version} is not a version any harness wrote (0 to {kind.version})"
        raise SchemaError(source, "schema_version", problem)
    while version < kind.version:
        data = kind.migrations[version](data, source)
        version = data["schema_version"]
    return from_json(kind.record, _from_keys(kind.record, data), source)


def load(kind: FileKind, path: Path, within: Path | None = None) -> Any:
    """Returns the record of the file at `path`; raises SchemaError naming the file and key
    (an unreadable file, a FIFO, a device, one past its bound or a link out of the folder
    `within`, text that is not JSON, a value of the wrong type, an unknown key)."""
    source = str(path)
    bound = userfiles.MANIFEST if kind is MANIFEST else userfiles.RECORD
    try:
        text = userfiles.read_bytes(path, bound, within)
    except userfiles.Unreadable as e:  # it names the file: the error's source says it once
        raise SchemaError(source, "", str(e).removeprefix(f"{source}: ")) from None
    return parse(kind, loads(text, source), source)


def load_if_present(kind: FileKind, path: Path, within: Path | None = None) -> Any:
    """Returns the record at `path`, or None when there is no such file (a stage that did not
    run for this variant); a file that is there and wrong raises SchemaError."""
    return load(kind, path, within) if path.is_file() else None


def write(path: Path, record: Any) -> Path:
    """Writes a file's record (harness.store.io.write_json: confined to the run, atomic)."""
    kind = _KIND_OF[type(record)]
    if path.name.endswith(".gz"):
        # mtime 0: the same record gives the same bytes.
        data = json.dumps(record_json(record), separators=(",", ":")).encode()
        return io.write_bytes(path, gzip.compress(data, mtime=0))
    return io.write_json(path, record_json(record), compact=kind.compact)


def read_gzipped(kind: FileKind, path: Path, limit: int = 1 << 30) -> Any:
    """Returns `kind`'s record of a gzipped JSON file (the timeline), inflated to at most
    `limit` bytes; raises SchemaError or Unreadable (a ValueError) naming the file."""
    raw = userfiles.read_bytes(path, userfiles.RECORD)  # the one reader: a regular file
    data = userfiles.gunzip(raw, str(path), limit)
    return parse(kind, loads(data, str(path)), str(path))


def from_document(kind: FileKind, document: Any, source: str) -> Any:
    """Returns the record of a producer's plain document (as the hlo, match and profile
    libraries build them), checked against the record: a producer that writes a key its
    record does not know fails here, at the writer, not in a report later."""
    return parse(kind, {"schema_version": kind.version, **document}, source)


def write_document(kind: FileKind, path: Path, document: Mapping[str, Any]) -> Path:
    """Writes a writer's plain `document` (the manifest the run's lifecycle keeps updating)
    through `kind`'s record: a key the record does not know fails at the writer."""
    return write(path, from_document(kind, dict(document), str(path)))


def write_timings(
    variant_dir: Path,
    latency_blocked_s: Sequence[float],
    first_call_events: Sequence[tuple[str, float]] = (),
) -> Path:
    """Writes a variant's timings.json: the one writer, which the JAX and PyTorch captures call."""
    record = TimingsFile(
        schema_version=TIMINGS.version,
        latency_blocked_s=tuple(latency_blocked_s),
        first_call_events=tuple(first_call_events),
    )
    return write(runfolder.VariantFolder(variant_dir).timings, record)


def write_torch_facts(variant_dir: Path, facts: TorchFacts) -> Path:
    """Writes a PyTorch variant's torch.json: the one writer, which its capture calls."""
    return write(runfolder.VariantFolder(variant_dir).torch, facts)
