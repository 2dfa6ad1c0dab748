"""A user's program analysed for the analyze report: which module is the program, how many
steps its profile holds, and per module the clusters ranked, rolled up by source line and by
named scope, with achieved rates against the device's ceilings.

Pure functions over what `harness.analyze.dump` read (parsed modules, clusters, costs, reverse
maps, the profile's attributed events); `harness.report.analysis_report` renders the result.

Conventions (the report states them too):
- A cluster's time is the summed *self* time of its events: an event's duration minus the
  events nested inside it on the same stream (a CPU `while` thunk contains its body's thunks),
  so no time is counted twice. Shares are of the summed self time of every event in the steady
  window (per step); overlapping events on different streams or threads each count in full, so
  the union "device busy time" can be smaller than the sum.
- Per step = over the steady window / the step count (`Steps`).
- A cluster that spans several source lines (or named scopes) gives each an equal part.
- A source line is the innermost stack frame in the user's code: frames in installed packages
  (site-packages, dist-packages) and the standard library are skipped, so a flax `nn.Dense`
  call is charged to the line that called it, not to flax/linen/linear.py. When every frame
  is library code, the innermost frame is used.
- A named scope is the instruction's op_name without its leading `jit(...)` and its trailing
  primitive: `jit(step)/MLP/layer1/Dense_0/dot_general` -> `MLP/layer1/Dense_0`, so
  `jax.named_scope` and flax module paths both show.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from harness.analyze import roof as roofs
from harness.analyze import steps as by_step
from harness.hlo.clusters import Cluster
from harness.hlo.cost import ModuleCost
from harness.hlo.instruction import MAX_ID, Instruction, parse_metadata
from harness.hlo.parser import HloModule
from harness.hlo.reverse_map import ReverseMap
from harness.hlo.shapes import decimal
from harness.match.gaps import AttributionGaps
from harness.match.match import Attribution, MatchReport
from harness.profile.events import DeviceEvent, StepMarker

ProgramKey = tuple[str, int | None]  # (HLO module name, program id / XLA module number)

TOP_ROLLUP = 20
TOP_KERNELS = 15
TOP_UNFUSED = 20
MAIN_FRACTION = 0.25  # another module is a main program too with this share of the top one's

_LIBRARY_FILE = re.compile(r"/(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/(?!site-)")
_HELPERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"threefry|random|prng|_normal|_uniform|randint|bernoulli|_gamma|permutation"),
        "RNG set-up",
    ),
    (re.compile(r"convert_element_type"), "dtype conversion"),
    (re.compile(r"device_put|identity_fn|^jit_copy$|_multi_slice|_unstack|transfer"), "transfer"),
)
# Opcodes XLA's fusion passes never put into a fusion, with the reason.
_NEVER_FUSED = (
    (frozenset({"while", "conditional", "call"}), "control flow: XLA does not fuse it"),
    (
        frozenset(
            {
                "all-reduce",
                "all-reduce-start",
                "all-gather",
                "all-gather-start",
                "reduce-scatter",
                "all-to-all",
                "collective-permute",
                "collective-permute-start",
                "collective-broadcast",
            }
        ),
        "collective: runs as its own communication operation",
    ),
    (
        frozenset({"infeed", "outfeed", "send", "recv", "send-done", "recv-done"}),
        "host or peer transfer: never fused",
    ),
    (frozenset({"custom-call"}), "custom-call: opaque to XLA's fusion passes"),
)
NO_REASON = "no reason recorded"


class StepsUnknown(ValueError):
    """The profile cannot say how many steps it holds; the message names `--steps`."""


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
class Ceilings:
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


def ceilings_from_json(data: Any, source: str) -> Ceilings:
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
    return Ceilings(peaks, float(bw) if _positive(bw) else None, source, platform)


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
    above_ceiling: bool = False  # a GPU cluster over 100% of its roof (harness.analyze.roof)
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
    outliers: tuple[by_step.Outlier, ...] = ()  # steps over 3x a cluster's median (analyze.steps)
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
class ProgramAnalysis:
    """Everything the analyze report shows."""

    ranked_by: str  # "device time" | "FLOPs"
    main: tuple[str, ...]
    main_rule: str
    modules: tuple[ModuleAnalysis, ...]
    steps: Steps | None = None
    profile: ProfileSummary | None = None
    ceilings: Ceilings | None = None
    notes: tuple[str, ...] = ()
    step_rows: tuple[by_step.StepRow, ...] = ()  # per marked step: wall, device, idle, coverage

    def to_json(self) -> dict[str, Any]:
        """analysis.json: every field, tuples as lists."""
        return _plain(self)


def _plain(value: Any) -> Any:
    """JSON-ready copy of nested dataclasses, mappings and sequences (dataclasses.asdict
    deep-copies every leaf, which costs seconds on thousands of cluster rows)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Programs, self time, main program and steps


# jax primitives (and jnp functions) that run as a module of their own when called eagerly.
_PRIMITIVE_NAMES = """
    abs acos acosh add and argmax argmin asin asinh atan atan2 atanh bitcast_convert_type
    broadcast_in_dim cbrt ceil clamp concatenate conj copy cos cosh cumlogsumexp cummax
    cummin cumprod cumsum div dot_general dynamic_slice dynamic_update_slice eq erf erf_inv
    erfc exp exp2 expm1 floor full gather ge gt imag integer_pow iota is_finite le log log1p
    logistic lt max maximum mean min minimum mul multiply ne neg negative nextafter not or
    pad pow real reduce_and reduce_max reduce_min reduce_or reduce_prod reduce_sum rem
    reshape rev round rsqrt scatter scatter_add select_n shift_left shift_right_arithmetic
    shift_right_logical sign sin sinh slice sort sqrt square squeeze stage sub subtract sum
    tan tanh transpose true_divide where xor zeros_like ones_like
"""
_PRIMITIVES = frozenset(_PRIMITIVE_NAMES.split())


def helper_kind(name: str, cluster_count: int, main_names: Iterable[str] = ()) -> str:
    """What a module that is not the main program probably is, from its name: a recompile of
    the main program, RNG set-up, dtype conversion, transfer, a single eager primitive, or
    another program."""
    if name in set(main_names):
        return "recompile of the main program (same name, another program id)"
    for pattern, kind in _HELPERS:
        if pattern.search(name):
            return kind
    bare = re.sub(r"^(jit|pjit)_+", "", name)
    if bare in _PRIMITIVES and cluster_count <= 3:
        return "single primitive (eager op)"
    return "other program"


def self_times(events: Sequence[DeviceEvent]) -> list[float]:
    """Each event's duration minus the time of the events nested inside it on the same
    device and stream (ns), in the input order; events that only overlap are not nested."""
    out = [e.duration_ns for e in events]
    by_stream: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        by_stream[(e.device, e.stream)].append(i)
    for indices in by_stream.values():
        indices.sort(key=lambda i: (events[i].start_ns, -events[i].duration_ns))
        stack: list[int] = []
        for i in indices:
            e = events[i]
            while stack and events[stack[-1]].end_ns <= e.start_ns:
                stack.pop()
            if stack and e.end_ns <= events[stack[-1]].end_ns:
                out[stack[-1]] -= e.duration_ns
            stack.append(i)
    return [max(0.0, t) for t in out]


def program_of(event: DeviceEvent) -> ProgramKey | None:
    """The (module, program id) an event ran in, or None for runtime work outside programs."""
    return None if event.hlo_module is None else (event.hlo_module, event.program_id)


def time_by_program(events: Sequence[DeviceEvent]) -> dict[ProgramKey, float]:
    """Summed self time (ns) of each program's events."""
    out: dict[ProgramKey, float] = defaultdict(float)
    for e, t in zip(events, self_times(events), strict=True):
        key = program_of(e)
        if key is not None:
            out[key] += t
    return dict(out)


def choose_main(
    modules: Sequence[ModuleInput], time_ns: Mapping[ProgramKey, float] | None
) -> tuple[tuple[str, ...], str]:
    """Returns the keys of the main program's modules and a sentence saying how they were
    chosen: the module with the most device time (with a profile that has events of the
    analysed modules), else the most FLOPs; other modules with at least a quarter of its
    measure are main too unless their name marks them as helpers or as a recompile of it."""
    timed = bool(time_ns) and any(time_ns.get(m.program, 0.0) > 0 for m in modules)
    if timed:
        assert time_ns is not None
        measure = {m.key: time_ns.get(m.program, 0.0) for m in modules}
        what = "device time in the profile"
    else:
        measure = {m.key: m.cost.flops for m in modules}
        what = "FLOPs (our cost model)" + (
            "; the profile has no events of the analysed modules"
            if time_ns is not None
            else "; no profile"
        )
    order = sorted(modules, key=lambda m: (-measure[m.key], -len(m.clusters), m.key))
    top = order[0]
    main = [top.key]
    for m in order[1:]:
        if (
            measure[top.key] > 0
            and measure[m.key] >= MAIN_FRACTION * measure[top.key]
            and m.name != top.name  # a recompile is listed apart, as such
            and helper_kind(m.name, len(m.clusters)) == "other program"
        ):
            main.append(m.key)
    rule = f"`{top.key}` is the main program: the module with the most {what}"
    if len(main) > 1:
        rest = ", ".join(f"`{k}`" for k in main[1:])
        rule += f"; {rest} also, with at least {MAIN_FRACTION:.0%} of it"
    others = len(modules) - len(main)
    if others:
        rule += f". The other {others} module(s) are listed apart as helpers"
    return tuple(main), rule + "."


STEP_MARKER_HINT = (
    'mark steps with `with jax.profiler.StepTraceAnnotation("step", step_num=i):` or pass '
    "--steps=N (how many steps the profile covers)"
)


def count_steps(
    main_events: Sequence[DeviceEvent],
    main_label: str,
    marked_steps: int,
    flag: int | None,
) -> Steps:
    """Returns the steps of the steady window.

    In order: the StepTraceAnnotation markers (`marked_steps` > 0); `--steps` (`flag`); the
    executions of the main program, one `run_id` each (every one of its events must carry
    one). Raises StepsUnknown, naming --steps, when none applies: a step count is never
    guessed.
    """
    if flag is not None and flag <= 0:
        raise ValueError(f"--steps must be a positive integer, got {flag}")
    if marked_steps > 0:
        return Steps(
            marked_steps, "markers", f"{marked_steps} steps marked with StepTraceAnnotation"
        )
    runs = {e.run_id for e in main_events}
    detected = len(runs) if main_events and None not in runs else None
    if flag is not None:
        detail = f"--steps={flag}"
        if detected is not None and detected != flag:
            detail += f" (the profile holds {detected} executions of {main_label})"
        return Steps(flag, "flag", detail)
    if detected is None:
        why = (
            f"no events of {main_label}"
            if not main_events
            else f"the events of {main_label} carry no run_id"
        )
        raise StepsUnknown(f"the profile has no step markers and {why}: {STEP_MARKER_HINT}")
    return Steps(
        detected,
        "executions",
        f"{detected} executions of {main_label} (distinct run_id), no step markers",
    )


# ---------------------------------------------------------------------------------------------
# Source lines and named scopes


class _Frames:
    """Resolves stack frames of one module to the user's innermost line, with a cache.

    The StackFrames table as XLA prints it gives `parent_frame_id` as the parent's id plus
    one, so a root frame prints 1: in the H200 fixture, frame 5 (gelu_linear, line 50) prints
    parent 4 while its caller is frame 3 (child, line 65), and frame 1 (`<module>`) prints 1;
    the CPU dumps of tests/mlp_program.py read the same way.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.cache: dict[str, str | None] = {}

    def _frame(self, frame_id: int) -> tuple[str, int] | None:
        """(file:line, parent frame id or 0) of one frame, or None when it does not resolve."""
        loc = self.module.resolve_frame(frame_id)
        if loc is None:
            return None
        meta = parse_metadata(self.module.stack_frames[frame_id])
        parent = decimal(meta.get("parent_frame_id", ""), MAX_ID)
        return f"{loc.file}:{loc.line}", parent - 1 if parent else 0

    def user_line(self, frame: str) -> str | None:
        """The innermost location outside installed packages and the standard library."""
        if frame in self.cache:
            return self.cache[frame]
        found: str | None = None
        innermost: str | None = None
        current = decimal(frame, MAX_ID) or 0
        seen: set[int] = set()
        while current > 0 and current not in seen:
            seen.add(current)
            resolved = self._frame(current)
            if resolved is None:
                break
            where, current = resolved
            innermost = innermost or where
            if not _LIBRARY_FILE.search(where):
                found = where
                break
        self.cache[frame] = found or innermost
        return self.cache[frame]

    def line_of(self, inst: Instruction) -> str | None:
        meta = inst.metadata
        frame = meta.get("stack_frame_id", "")
        if frame:
            line = self.user_line(frame)
            if line is not None:
                return line
        if "source_file" in meta:
            return f"{meta['source_file']}:{meta.get('source_line', '0')}"
        return None


def scope_of(op_name: str) -> str:
    """`jit(f)/MLP/layer1/Dense_0/dot_general` -> `MLP/layer1/Dense_0`; '' at top level."""
    parts = op_name.split("/")
    if parts and re.match(r"^(jit|pjit|pmap|xla_pmap)\(", parts[0]):
        parts = parts[1:]
    return "/".join(parts[:-1])


def cluster_lines(module: HloModule, clusters: Sequence[Cluster]) -> dict[str, tuple[str, ...]]:
    """Each cluster's user source lines (sorted), from its member instructions' frames (the
    members of `harness.hlo.clusters.members`: a fusion's called computations, nested ones
    and reducers included; each computation is read once)."""
    by_name = {inst.name: inst for _, inst in module.instructions()}
    frames = _Frames(module)
    memo: dict[str, frozenset[str]] = {}

    def of_computation(name: str) -> frozenset[str]:
        if name in memo:
            return memo[name]
        memo[name] = frozenset()  # a cycle (never in valid HLO) ends here
        comp = module.computations.get(name)
        found: set[str] = set()
        for inst in comp.instructions if comp is not None else ():
            if inst.opcode != "parameter" and (line := frames.line_of(inst)) is not None:
                found.add(line)
            for sub in inst.called_computations:
                found |= of_computation(sub)
        memo[name] = frozenset(found)
        return memo[name]

    out: dict[str, tuple[str, ...]] = {}
    for c in clusters:
        inst = by_name.get(c.name)
        if inst is None:
            out[c.name] = ()
        elif inst.opcode == "fusion":
            found: set[str] = set()
            for sub in inst.called_computations:
                found |= of_computation(sub)
            out[c.name] = tuple(sorted(found))
        else:
            line = frames.line_of(inst)
            out[c.name] = (line,) if line is not None else ()
    return out


def cluster_scopes(clusters: Sequence[Cluster]) -> dict[str, tuple[str, ...]]:
    """Each cluster's named scopes (sorted), from its source ops' op_names."""
    return {c.name: tuple(sorted({scope_of(op) for op in c.source_ops})) for c in clusters}


_INDEXED = re.compile(r"^(.*)_(\d+)$")
FOLD_AT = 3  # a name with this many numbered copies at one place in the path is a repeated layer


def fold_repeats(scopes: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The scopes with repeated layers folded: where one path position holds `Block_0` ...
    `Block_47` (FOLD_AT or more numbered copies of one name), they become `Block_*`, so the
    roll-up says what one kind of layer costs in all blocks. `Dense_0` and `Dense_1`, two
    different layers of one block, stay apart."""
    copies: dict[tuple[int, str], set[str]] = defaultdict(set)
    for labels in scopes.values():
        for label in labels:
            for depth, part in enumerate(label.split("/")):
                if m := _INDEXED.match(part):
                    copies[(depth, m.group(1))].add(m.group(2))
    fold = {key for key, found in copies.items() if len(found) >= FOLD_AT}

    def folded(label: str) -> str:
        parts = label.split("/")
        for depth, part in enumerate(parts):
            m = _INDEXED.match(part)
            if m and (depth, m.group(1)) in fold:
                parts[depth] = f"{m.group(1)}_*"
        return "/".join(parts)

    return {name: tuple(sorted({folded(x) for x in labels})) for name, labels in scopes.items()}


def roll_up(
    rows: Sequence[ClusterRow], labels: Mapping[str, tuple[str, ...]], total: float, by_time: bool
) -> tuple[RollUp, ...]:
    """Sums each cluster's time (or FLOPs) over its labels, an equal part each; clusters with
    no label count under "(none recorded)". Ordered by value, largest first."""
    value: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    top: dict[str, tuple[float, str]] = {}
    for row in rows:
        v = (row.time_s or 0.0) if by_time else row.flops
        names = labels.get(row.name) or ("(none recorded)",)
        for label in names:
            part = v / len(names)
            value[label] += part
            count[label] += 1
            if part > top.get(label, (-1.0, ""))[0]:
                top[label] = (part, row.name)
    ordered = sorted(value, key=lambda k: (-value[k], k))
    return tuple(
        RollUp(k, value[k], value[k] / total if total else 0.0, count[k], top[k][1])
        for k in ordered
    )


# ---------------------------------------------------------------------------------------------
# Per module


def _precision(cluster: Cluster, ceilings: Ceilings | None) -> str:
    gemm = cluster.gemm
    if gemm is None:
        return ""
    dtypes = {gemm.lhs_dtype, gemm.rhs_dtype}
    if dtypes == {"bf16"}:
        return "bf16"
    if dtypes == {"f16"}:
        return "f16"
    tf32 = ceilings is not None and "tf32" in ceilings.peaks
    return "tf32" if tf32 else "f32"


def _unfused(m: ModuleInput, rows: Mapping[str, ClusterRow], by_time: bool) -> list[UnfusedRow]:
    """Lone-instruction clusters (not a fusion, not a library call), with the pre-optimization
    ops the reverse map placed in them and the reason XLA leaves such an op alone, if any."""
    held: dict[str, list[str]] = defaultdict(list)
    if m.reverse is not None:
        for op, clusters in m.reverse.mapping.items():
            for c in clusters:
                held[c].append(op)
    out = []
    for c in m.clusters:
        if c.is_fusion or c.is_library:
            continue
        reason = next((why for ops, why in _NEVER_FUSED if c.kind in ops), NO_REASON)
        ops = tuple(held.get(c.name, ()))
        if m.reverse is None:
            placed = "no reverse map (no before-optimizations module)"
        else:
            placed = ", ".join(sorted({m.reverse.placed_by.get(op) or "unplaced" for op in ops}))
            placed = placed or "no op placed here"
        row = rows[c.name]
        out.append(
            UnfusedRow(
                cluster=c.name,
                opcode=c.kind,
                ops=ops,
                placed_by=placed,
                lines=row.lines,
                value=(row.time_s or 0.0) if by_time else row.flops,
                share=row.share,
                reason=reason,
                clusters=(c.name,),
            )
        )
    groups: dict[tuple[str, tuple[str, ...], str], list[UnfusedRow]] = defaultdict(list)
    for u in out:
        groups[(u.opcode, u.lines, u.reason)].append(u)
    merged = []
    for members_ in groups.values():
        first = max(members_, key=lambda u: (u.value, u.cluster))
        placed = sorted({part for u in members_ for part in u.placed_by.split(", ")})
        merged.append(
            replace(
                first,
                placed_by=", ".join(placed),
                value=sum(u.value for u in members_),
                share=sum(u.share for u in members_),
                clusters=tuple(u.cluster for u in members_),
            )
        )
    merged.sort(key=lambda r: (-r.value, r.cluster))
    return merged


def _kernels(
    attributions: Sequence[tuple[Attribution, float]], steps: int, total_ns: float
) -> tuple[KernelRow, ...]:
    groups: dict[tuple[str, str], list[tuple[DeviceEvent, float]]] = defaultdict(list)
    for a, t in attributions:
        if a.event.kind in ("kernel", "host_thunk"):
            groups[(a.event.name, a.cluster or "")].append((a.event, t))
    rows = []
    for (name, cluster), evs in groups.items():
        ns = sum(t for _, t in evs)

        def common(values: Iterable[Any]) -> Any:
            found = [v for v in values if v is not None]
            return Counter(found).most_common(1)[0][0] if found else None

        rows.append(
            KernelRow(
                name=name,
                cluster=cluster,
                launches=len(evs) / steps,
                time_s=ns * 1e-9 / steps,
                share=ns / total_ns if total_ns else 0.0,
                grid=common(e.grid for e, _ in evs),
                block=common(e.block for e, _ in evs),
                registers=common(e.registers for e, _ in evs),
                occupancy_pct=common(e.occupancy_pct for e, _ in evs),
            )
        )
    rows.sort(key=lambda r: (-r.time_s, r.name))
    return tuple(rows[:TOP_KERNELS])


def analyse_module(
    m: ModuleInput,
    role: str,
    attributions: Sequence[tuple[Attribution, float]] | None,
    steps: int,
    total: float,
    ceilings: Ceilings | None,
    detail: bool = True,
    kind: str = "",
    medians: by_step.StepMedians | None = None,
) -> ModuleAnalysis:
    """One module's analysis. `attributions`: this program's window events with their self
    times (None without a profile); `total`: the share denominator (window self time per step
    in seconds, or FLOPs without a profile). `detail=False` leaves out rankings (helpers).
    `medians`: times of the median step (analyze.steps) instead of the mean over steps."""
    by_time = attributions is not None
    costs = {c.name: c for c in m.cost.clusters}
    ns: dict[str, float] = defaultdict(float)
    kernels: dict[str, list[str]] = defaultdict(list)
    for a, t in attributions or ():
        if a.matched and a.cluster is not None and a.module == m.name:
            ns[a.cluster] += t
            if a.event.kind in ("kernel", "host_thunk"):
                kernels[a.cluster].append(a.event.name)
    lines = cluster_lines(m.hlo, m.clusters) if detail else {}
    scopes = cluster_scopes(m.clusters) if detail else {}
    folded = fold_repeats(scopes)
    rows: list[ClusterRow] = []
    for c in m.clusters:
        cost = costs.get(c.name)
        flops, moved = (cost.flops, cost.bytes) if cost is not None else (0.0, 0.0)
        mean_ns = ns[c.name] / steps if medians is None else medians.clusters.get(c.name, 0.0)
        time_s = mean_ns * 1e-9 if by_time else None
        launched = kernels.get(c.name, [])
        launches = len(launched) / steps if by_time else None
        runs = (len(launched) / len(set(launched)) / steps) if launched else None
        fps, bps = roofs.rates(flops, moved, runs, time_s)
        precision = _precision(c, ceilings)
        fraction, roof = roofs.roof(fps, flops / moved if moved else None, precision, ceilings)
        value = (time_s or 0.0) if by_time else flops
        rows.append(
            ClusterRow(
                name=c.name,
                kind=c.kind,
                target=c.target,
                flops=flops,
                bytes=moved,
                time_s=time_s,
                share=value / total if total else 0.0,
                launches=launches,
                runs=runs,
                flops_per_s=fps,
                bytes_per_s=bps,
                roof_fraction=fraction,
                roof=roof,
                above_ceiling=roofs.above_ceiling(fraction, ceilings),
                precision=precision,
                lines=lines.get(c.name, ()),
                scopes=scopes.get(c.name, ()),
            )
        )
    if by_time:
        rows.sort(key=lambda r: (-(r.time_s or 0.0), -r.flops, r.name))
    else:
        rows.sort(key=lambda r: (-r.flops, -r.bytes, r.name))
    calls = Counter((c.target, c.epilogue) for c in m.clusters if c.is_library)
    mine = [(a, t) for a, t in attributions or () if program_of(a.event) == m.program]
    own_ns = sum(t for _, t in mine)
    n_kernels = sum(a.event.kind in ("kernel", "host_thunk") for a, _ in mine)
    runs_seen = {a.event.run_id for a, _ in mine}
    executions = len(runs_seen) if mine and None not in runs_seen else None
    unfused = _unfused(m, {r.name: r for r in rows}, by_time) if detail else []
    own_step_ns = own_ns / steps if medians is None else medians.module_ns
    module_value = own_step_ns * 1e-9 if by_time else m.cost.flops
    return ModuleAnalysis(
        key=m.key,
        name=m.name,
        program_id=m.program_id,
        role=role,
        kind=kind or ("main program" if role == "main" else helper_kind(m.name, len(m.clusters))),
        cluster_count=len(m.clusters),
        fusion_count=sum(1 for c in m.clusters if c.is_fusion),
        library_calls=tuple((t, e, n) for (t, e), n in sorted(calls.items())),
        flops=m.cost.flops,
        bytes=m.cost.bytes,
        time_s=module_value if by_time else None,
        share=module_value / total if total else None,
        events=len(mine),
        kernels_per_step=n_kernels / steps if by_time else None,
        executions=executions,
        clusters=tuple(rows) if detail else (),
        by_line=roll_up(rows, lines, total, by_time)[:TOP_ROLLUP] if detail else (),
        by_scope=roll_up(rows, scopes, total, by_time)[:TOP_ROLLUP] if detail else (),
        by_layer=roll_up(rows, folded, total, by_time)[:TOP_ROLLUP] if folded != scopes else (),
        kernels=_kernels(mine, steps, own_ns) if detail and by_time else (),
        unfused=tuple(unfused[:TOP_UNFUSED]),
        unfused_total=sum(len(u.clusters) for u in unfused),
        reverse_method=m.reverse.method if m.reverse is not None else "",
        reverse_notes=m.reverse.notes if m.reverse is not None else (),
        outliers=medians.outliers if medians is not None and detail else (),
        uncosted_calls=roofs.uncosted_calls(m.cost.clusters, {r.name: r.time_s for r in rows}),
    )


def analyse_program(
    modules: Sequence[ModuleInput],
    report: MatchReport | None,
    steps: Steps | None,
    profile_path: str = "",
    outside: Sequence[OutsideProgram] = (),
    ceilings: Ceilings | None = None,
    notes: Sequence[str] = (),
    markers: Sequence[StepMarker] = (),
) -> ProgramAnalysis:
    """The whole program: main modules analysed in full, helpers summarised.

    With a profile (`report`, `steps`), clusters rank by device time per step and shares are of
    the window's summed self time; without one, by FLOPs, shares of the main modules' FLOPs.
    With marked steps, times and shares are of the median step (harness.analyze.steps).
    """
    timed = report is not None and steps is not None
    pairs: list[tuple[Attribution, float]] = []
    if report is not None:
        events = [a.event for a in report.attributions]
        pairs = list(zip(report.attributions, self_times(events), strict=True))
    time_ns = None
    if report is not None:
        time_ns = defaultdict(float)
        for a, t in pairs:
            if (key := program_of(a.event)) is not None:
                time_ns[key] += t
    main, rule = choose_main(modules, time_ns)
    n_steps = steps.count if timed and steps is not None else 1
    has_time = timed and any(time_ns.get(m.program, 0.0) > 0 for m in modules)  # type: ignore[union-attr]
    rows = by_step.step_rows(pairs, markers) if has_time and by_step.per_step(pairs) else ()
    if rows:
        total = by_step.median_event_s(rows)
    elif has_time:
        total = sum(t for _, t in pairs) * 1e-9 / n_steps
    else:
        total = sum(m.cost.flops for m in modules if m.key in main)
    main_names = {m.name for m in modules if m.key in main}
    out = []
    for m in modules:
        role = "main" if m.key in main else "helper"
        kind = (
            "main program" if role == "main" else helper_kind(m.name, len(m.clusters), main_names)
        )
        mine = [(a, t) for a, t in pairs if program_of(a.event) == m.program] if has_time else None
        med = by_step.module_medians(mine or [], m.name, [r.step for r in rows]) if rows else None
        out.append(
            analyse_module(m, role, mine, n_steps, total, ceilings, role == "main", kind, med)
        )
    out.sort(key=lambda r: main.index(r.key) if r.key in main else len(main))
    helpers = [h for h in out if h.role == "helper"]
    if has_time:
        helpers.sort(key=lambda h: (-(h.time_s or 0.0), -h.flops, h.key))
    else:
        helpers.sort(key=lambda h: (-h.flops, h.key))
    summary = None
    if report is not None:
        summary = ProfileSummary(
            path=profile_path,
            marked=report.marked_steps,
            events_in_window=report.events_in_window,
            matched_fraction=report.matched_fraction,
            unmatched=len(report.unmatched),
            busy_time_s=report.device_time_per_step_s,
            event_time_s=sum(t for _, t in pairs) * 1e-9 / max(1, report.steps),
            kernels_per_step=report.kernels_per_step,
            device_ops_per_step=report.device_ops_per_step,
            outside=tuple(outside),
            rules=tuple(sorted(Counter(a.rule for a in report.attributions).items())),
            gaps=report.gaps,
        )
    return ProgramAnalysis(
        ranked_by="device time" if has_time else "FLOPs",
        main=main,
        main_rule=rule,
        modules=tuple([h for h in out if h.role == "main"] + helpers),
        steps=steps,
        profile=summary,
        ceilings=ceilings,
        notes=tuple(notes),
        step_rows=rows,
    )


def with_reverse_maps(a: ProgramAnalysis, modules: Sequence[ModuleInput]) -> ProgramAnalysis:
    """The analysis with each main module's unfused ops and reverse-map notes taken from
    `modules`' reverse maps: the CLI analyses and draws while a large module's reverse map is
    still computing, then fills in what depends on it."""
    by_key = {m.key: m for m in modules}
    by_time = a.ranked_by == "device time"
    out = []
    for ma in a.modules:
        m = by_key.get(ma.key)
        if m is None:
            out.append(ma)
            continue
        unfused = (
            _unfused(m, {r.name: r for r in ma.clusters}, by_time) if ma.role == "main" else []
        )
        out.append(
            replace(
                ma,
                unfused=tuple(unfused[:TOP_UNFUSED]),
                unfused_total=sum(len(u.clusters) for u in unfused),
                reverse_method=m.reverse.method if m.reverse is not None else "",
                reverse_notes=m.reverse.notes if m.reverse is not None else (),
            )
        )
    return replace(a, modules=tuple(out))
