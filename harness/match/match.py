"""Attribute every device event of a profile to a fusion cluster of the optimized HLO.

Input: the kernel table (`harness.profile.events.DeviceEvent` rows) and, per
HLO module, the clusters found by the HLO stage. The matcher only needs the
attributes in `ClusterLike`, so it never imports the HLO parser.

Rules, tried in order for each event (`rule` in the result says which fired):

- `hlo_op`: the event's `hlo_op` stat is a cluster name (or equals it with
  `.`->`_`, the way XLA names kernels). Memsets carry the hlo_op of the GEMM
  custom-call they prepare (`memset_for_gemm`); memcpys from host callbacks
  carry the callback's hlo_op (`callback_transfer`).
- `command_buffer_kernel` / `command_buffer_library`: when XLA ran the program
  as a CUDA-graph command buffer every event says `hlo_op=command_buffer_N`.
  The kernel name is then matched against the instruction names inside that
  command buffer (clusters whose `parent` is it; if the HLO stage knows no
  parents, all clusters of the module) with `.`->`_`. Library kernels
  (`nvjet_*`, `sm90_xmma_*`, `cutlass*`, `gemm*`, ...) and memsets go to the
  custom-call in the command buffer when there is exactly one.
  Caveat: XLA deduplicates identical kernels, so `wrapped_multiply_1` may have
  run for instruction `wrapped_multiply.3`; the name match then credits
  `wrapped_multiply.1`. Counts per step are exact; launches per cluster
  inside a command buffer are by kernel name.
- `thunk_kernel`, `thunk_library`, `thunk_copy`, `thunk_condition`, `thunk_memset`,
  `thunk_out_of_order`: when the dump's thunk files say what a command buffer holds
  (`command_buffers=`), its events are placed on its commands by
  `harness.match.command_buffers` (named kernels anchor; library kernels, the `memcpy*`
  kernels of device copies, the `set_case_condition` kernel of a conditional and memsets are
  placed by the command DAG between them), which replaces the two rules above for that
  buffer, loop bodies and branches included. Where the DAG allows another command of the same
  kernel, the match is made and counted apart (`ambiguous`).
- `eager_module`: in eager mode each primitive is its own small jit module
  (`jit_tanh`, ...). When that module has no HLO (no dump), the event is
  attributed to the module and its primitive (`jit_tanh` -> `tanh`) and
  counted as matched by module.

Everything else is unmatched with a reason. Module keys in `clusters_by_module`
are module names, or `(module name, program_id)` pairs to tell apart modules of
the same name (XLA's dump file `module_NNNN.<name>` has NNNN == program_id).

Counting conventions (per step = over the steady window / steps):
- `kernels_per_step`: kernel launches (GPU kernels, or CPU thunks), no memsets;
- `device_ops_per_step`: every device event: kernels + memsets + memcpys, as
  the fixture README counts "device ops";
- `device_time_per_step_s`: the union of busy intervals over all streams.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from harness.hlo.thunks import CommandBuffer
from harness.match.command_buffers import Placement, place_events
from harness.match.gaps import gaps_of
from harness.profile.events import DeviceEvent, events_to_json
from harness.profile.table import union_ns
from harness.records.gaps import AttributionGaps
from harness.store.records import to_json

Mode = Literal["jit", "eager"]
ModuleKey = str | tuple[str, int]

# `gemm` alone is no library prefix: XLA's Triton GEMM fusions launch `gemm_fusion_dot_N`.
LIBRARY_KERNEL_RE = re.compile(
    r"^(nvjet_|sm\d+_xmma|cutlass|gemm(?!_fusion)|ampere_|volta_|turing_|hopper_|cublas|"
    r"void cutlass|void cudnn|cudnn)",
    re.IGNORECASE,
)
COMMAND_BUFFER_RE = re.compile(r"^command_buffer")


class ClusterLike(Protocol):
    """What the matcher reads from an HLO-stage cluster (harness.hlo.clusters.Cluster)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def target(self) -> str | None: ...
    @property
    def epilogue(self) -> str | None: ...
    @property
    def parent(self) -> str | None: ...
    @property
    def source_ops(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class Attribution:
    """Where one device event came from, or why that is unknown (cluster None, matched False)."""

    event: DeviceEvent
    matched: bool
    rule: str
    reason: str
    module: str | None
    cluster: str | None = None
    primitive: str | None = None
    ambiguous: bool = False  # matched, but another command of the same kernel could have run it


@dataclass(frozen=True)
class TransferSummary:
    """Memcpys of one direction in the steady window, per step."""

    direction: str
    count_per_step: float
    bytes_per_step: float
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class MatchReport:
    """Attribution of the steady window's device events and per-step counts."""

    steps: int
    marked_steps: bool
    events_in_window: int
    matched_fraction: float
    attributions: tuple[Attribution, ...]
    kernels_per_step: float
    memsets_per_step: float
    device_ops_per_step: float
    launches_per_cluster: Mapping[str, float]
    transfers_per_step: tuple[TransferSummary, ...]
    device_time_per_step_s: float
    device_time_by_step_s: tuple[float, ...]
    outside_window: int
    notes: tuple[str, ...] = field(default=())
    gaps: AttributionGaps = field(default_factory=AttributionGaps)

    @property
    def ambiguous_fraction(self) -> float:
        return self.gaps.ambiguous_fraction

    @property
    def unmatched(self) -> Sequence[Attribution]:
        view = getattr(self.attributions, "unmatched", None)  # a table's view selects them
        if view is not None:
            return view()
        return tuple(a for a in self.attributions if not a.matched)

    def rule_counts(self) -> dict[str, int]:
        """How many events each rule decided."""
        counts = getattr(self.attributions, "rule_counts", None)
        return counts() if counts is not None else dict(Counter(a.rule for a in self.attributions))

    def host_gap_per_step_s(self, wall_step_s: float) -> float:
        """Return wall step time minus device busy time: what the host and launch path cost."""
        return wall_step_s - self.device_time_per_step_s

    def to_json(self, events: bool = True) -> dict[str, Any]:
        """Return match.json: summary numbers, every unmatched event, the rule counts, and
        (`events`) every attribution."""
        return {
            "steps": self.steps,
            "marked_steps": self.marked_steps,
            "events_in_window": self.events_in_window,
            "outside_window": self.outside_window,
            "matched_fraction": self.matched_fraction,
            "ambiguous_fraction": self.ambiguous_fraction,
            "gaps": to_json(self.gaps),
            "kernels_per_step": self.kernels_per_step,
            "memsets_per_step": self.memsets_per_step,
            "device_ops_per_step": self.device_ops_per_step,
            "device_time_per_step_s": self.device_time_per_step_s,
            "device_time_by_step_s": list(self.device_time_by_step_s),
            "launches_per_cluster": dict(self.launches_per_cluster),
            "transfers_per_step": [
                asdict(t) | {"sizes": list(t.sizes)} for t in self.transfers_per_step
            ],
            "rules": self.rule_counts(),
            "unmatched": [_attribution_json(a) for a in self.unmatched],
            "attributions": [_attribution_json(a) for a in self.attributions] if events else None,
            "notes": list(self.notes),
        }


def match_events(
    events: Sequence[DeviceEvent],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    steps: int | None = None,
    mode: Mode = "jit",
    command_buffers: Mapping[ModuleKey, Sequence[CommandBuffer]] | None = None,
) -> MatchReport:
    """Return the attribution report for the steady window of `events`.

    The steady window is every event with a step when the profile had step
    markers, else the whole profile; then `steps` (the number of calls the
    profile covers) must be given. `mode="eager"` allows module-only matches.
    `command_buffers` (keyed as `clusters_by_module`) are the modules' command buffers
    from their thunk files: their events are placed on the buffers' commands.
    """
    if mode not in ("jit", "eager"):
        raise ValueError(f"mode must be 'jit' or 'eager', got {mode!r}")
    marked = any(e.step is not None for e in events)
    window = [e for e in events if e.step is not None] if marked else list(events)
    n_steps, notes = step_count(len({e.step for e in window}), len(window), marked, steps)
    programs = program_ids(clusters_by_module)
    next_launch = NextLaunch(window)
    attributions = _spread_reused_kernels(
        tuple(_attribute(e, next_launch, clusters_by_module, mode, programs) for e in window),
        clusters_by_module,
        n_steps,
    )
    if command_buffers:
        attributions = _with_placements(
            window, attributions, clusters_by_module, command_buffers, programs
        )
    return report_of(window, attributions, n_steps, marked, len(events) - len(window), notes)


def report_of(
    window: Sequence[DeviceEvent],
    attributions: tuple[Attribution, ...],
    n_steps: int,
    marked: bool,
    outside_window: int,
    notes: tuple[str, ...],
) -> MatchReport:
    """The report's per-step figures, from the steady window's events and their
    attributions (one each, in the same order), whichever matcher made them."""
    if not window:
        notes = (*notes, "no device events in the steady window")
    matched = sum(a.matched for a in attributions)
    by_step = _busy_by_step(window, marked, n_steps)
    gaps = gaps_of(((a.event, a.matched, a.ambiguous, a.reason) for a in attributions), n_steps)
    return MatchReport(
        steps=n_steps,
        marked_steps=marked,
        events_in_window=len(window),
        matched_fraction=matched / len(window) if window else 0.0,
        attributions=attributions,
        kernels_per_step=sum(e.kind in ("kernel", "host_thunk") for e in window) / n_steps,
        memsets_per_step=sum(e.kind == "memset" for e in window) / n_steps,
        device_ops_per_step=len(window) / n_steps,
        launches_per_cluster=_launches_per_cluster(attributions, n_steps),
        transfers_per_step=_transfers(window, n_steps),
        device_time_per_step_s=sum(by_step) / n_steps,
        device_time_by_step_s=by_step if marked else (),
        outside_window=outside_window,
        notes=notes,
        gaps=gaps,
    )


def _with_placements(
    window: Sequence[DeviceEvent],
    attributions: tuple[Attribution, ...],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    command_buffers: Mapping[ModuleKey, Sequence[CommandBuffer]],
    programs: Mapping[str, set[int]],
) -> tuple[Attribution, ...]:
    """The attributions with every event of a known command buffer placed on its command."""
    buffers_of: dict[int, CommandBuffer] = {}
    for i, e in enumerate(window):
        buffers = _clusters_for(e, command_buffers, programs)  # type: ignore[arg-type]
        hit = next((b for b in buffers or () if b.name == e.hlo_op), None)
        if isinstance(hit, CommandBuffer):
            buffers_of[i] = hit
    placed = place_events(window, buffers_of)
    out = list(attributions)
    for i, p in placed.items():
        clusters = _clusters_for(window[i], clusters_by_module, programs) or ()
        out[i] = _placed(window[i], p, {c.name for c in clusters}, attributions[i].primitive)
    return tuple(out)


def _placed(
    event: DeviceEvent, p: Placement, names: set[str], primitive: str | None
) -> Attribution:
    rule = p.rule
    if p.instruction is not None and p.instruction in names:
        return Attribution(
            event, True, rule, p.reason, event.hlo_module, p.instruction, primitive, p.ambiguous
        )
    return Attribution(
        event,
        False,
        "thunk_unknown_instruction",
        f"{p.reason}; but its instruction {p.instruction!r} is no cluster of the module",
        event.hlo_module,
    )


def _structure(cluster: ClusterLike) -> tuple[Any, ...]:
    return (
        cluster.kind,
        getattr(cluster, "output_shape", None),
        tuple(getattr(cluster, "member_opcodes", ())),
    )


def _spread_reused_kernels(
    attributions: tuple[Attribution, ...],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    n_steps: int,
) -> tuple[Attribution, ...]:
    """Returns attributions with repeated launches of one reused kernel spread over its twins.

    XLA compiles structurally identical fusions once and launches that kernel for each of
    them (seen in the H200 command-buffer fixture: `wrapped_multiply_1` ran five times a step
    for `wrapped_multiply.1` to `.5`). The n-th launch in a step goes to the n-th of those
    clusters, in program order, among the twins whose own kernel name never appears (cycling
    through them when the window holds several unmarked steps).
    """
    names_seen = {a.event.name for a in attributions}
    in_window = Counter((a.module, a.event.name) for a in attributions)
    counts: Counter[tuple[Any, ...]] = Counter()
    out = []
    for a in attributions:
        if a.rule != "command_buffer_kernel" or a.cluster is None:
            out.append(a)
            continue
        launches = max(1, round(in_window[(a.module, a.event.name)] / n_steps))
        twins = reused_twins(a.event, a.cluster, clusters_by_module, launches, names_seen)
        key = (a.event.step, a.module, a.event.name)
        index = counts[key]
        counts[key] += 1
        # Without step markers the window holds every step: launches cycle through the twins.
        if len(twins) < 2 or index % len(twins) == 0:
            out.append(a)
            continue
        out.append(reused_launch(a, twins[index % len(twins)], index))
    return tuple(out)


def reused_twins(
    event: DeviceEvent,
    cluster: str,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    launches: int,
    names_seen: Collection[str],
) -> list[ClusterLike]:
    """The clusters a reused kernel's launches in a step go to, in turn: its own cluster, then
    the structurally identical ones whose own kernel never ran (at most `launches`); empty
    when its cluster is unknown.

    Only clusters that run once a step take turns. A cluster directly under a `while` or a
    `conditional` does not: a loop body's kernel repeats by iterations, and a branch's twin in
    the sibling branch may never run (on an H100, the KV decoder's greedy argmax, launched 9
    times a step inside its `while_loop`, gave 4 of them to the sampling branch's identical
    argmax, which never ran)."""
    clusters = list(_clusters_for(event, clusters_by_module) or ())
    named = next((c for c in clusters if c.name == cluster), None)
    if named is None:
        return []
    control = {c.name for c in clusters if c.kind in ("while", "conditional")}
    if named.parent in control:
        return [named]
    twins = [named] + [
        c
        for c in clusters
        if c is not named
        and c.parent not in control
        and _structure(c) == _structure(named)
        and kernel_name(c.name) not in names_seen
    ]
    return twins[:launches]


def reused_launch(a: Attribution, twin: ClusterLike, index: int) -> Attribution:
    """The attribution of the `index`-th launch in a step of a reused kernel, to `twin`."""
    return Attribution(
        a.event,
        True,
        "command_buffer_reused_kernel",
        f"kernel {a.event.name} launched again for {twin.name}, a structurally identical "
        f"fusion XLA compiled once (launch {index + 1} of this kernel in the step)",
        a.module,
        twin.name,
        a.primitive,
    )


def kernels_document(report: MatchReport, **extra: Any) -> dict[str, Any]:
    """Returns the match summary (`match`, kernels.json's) and every event with the cluster it
    came from (`events`: the rows of events.parquet, harness.records.events_file.from_rows)."""
    rows = events_to_json(a.event for a in report.attributions)
    for row, a in zip(rows, report.attributions, strict=True):
        row.update(
            cluster=a.cluster,
            primitive=a.primitive,
            matched=a.matched,
            rule=a.rule,
            reason=a.reason,
            ambiguous=a.ambiguous,
        )
    return {**extra, "match": report.to_json(events=False), "events": rows}


def primitive_of(module: str) -> str:
    """Return the jax primitive an eager module ran: `jit_integer_pow` -> `integer_pow`."""
    return module.removeprefix("jit_")


def kernel_name(instruction: str) -> str:
    """Return the kernel name XLA gives an HLO instruction (`.` -> `_`)."""
    return instruction.replace(".", "_")


def is_library_kernel(name: str) -> bool:
    """Return True for cuBLAS/cuBLASLt/CUTLASS kernel names, which no HLO instruction carries."""
    return bool(LIBRARY_KERNEL_RE.match(name))


def union_busy_ns(events: Sequence[DeviceEvent]) -> float:
    """Return the length of the union of the events' [start, end) intervals, in ns."""
    starts = np.array([e.start_ns for e in events], dtype=np.float64)
    ends = np.array([e.end_ns for e in events], dtype=np.float64)
    return union_ns(starts, ends)


def step_count(
    counted: int, events: int, marked: bool, steps: int | None
) -> tuple[int, tuple[str, ...]]:
    """The steps a window of `events` events covers (`counted` distinct marked steps), and a
    note where the caller's `steps` overrides or stands in for the markers."""
    if steps is not None and steps <= 0:
        raise ValueError(f"steps must be > 0, got {steps}")
    if marked:
        if steps is not None and steps != counted:
            return steps, (f"steps={steps} given but {counted} steps have device events",)
        return counted, ()
    if steps is None:
        if events:
            raise ValueError("profile has no step markers: pass steps= (how many calls it covers)")
        return 1, ()
    return steps, ("no step markers: the whole profile is the steady window",)


def program_ids(
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
) -> dict[str, set[int]]:
    """Returns module name -> the program ids the caller keyed clusters under."""
    out: dict[str, set[int]] = {}
    for key in clusters_by_module:
        if isinstance(key, tuple):
            out.setdefault(key[0], set()).add(key[1])
    return out


def _clusters_for(
    event: DeviceEvent,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    programs: Mapping[str, set[int]] | None = None,
) -> Sequence[ClusterLike] | None:
    """The clusters of the event's program: keyed by (module, program_id), else by module name
    alone, but never by name when the caller keyed that name under other program ids (a
    recompile of the same function is another program with other instructions)."""
    if event.hlo_module is None:
        return None
    if event.program_id is not None and (event.hlo_module, event.program_id) in clusters_by_module:
        return clusters_by_module[(event.hlo_module, event.program_id)]
    programs = program_ids(clusters_by_module) if programs is None else programs
    if event.program_id is not None and programs.get(event.hlo_module):
        return None
    return clusters_by_module.get(event.hlo_module)


def _attribute(
    event: DeviceEvent,
    next_launch: Callable[[DeviceEvent], DeviceEvent | None],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    mode: Mode,
    programs: Mapping[str, set[int]] | None = None,
) -> Attribution:
    module = event.hlo_module
    if module is None:
        return _without_module(event, next_launch(event), mode)
    clusters = _clusters_for(event, clusters_by_module, programs)
    if clusters is None:
        return _without_clusters(event, module, clusters_by_module, mode, programs)
    return _in_clusters(event, module, clusters, mode)


def _without_module(event: DeviceEvent, consumer: DeviceEvent | None, mode: Mode) -> Attribution:
    """An event no module names: in eager mode, an H2D upload belongs to the primitive
    launched next (`consumer`); anything else is not attributed."""
    if mode == "eager" and event.kind == "memcpy" and event.direction == "H2D" and consumer:
        # Eager dispatch uploads a primitive's host arguments (Python scalars) just
        # before launching it: the copy belongs to the primitive launched next.
        return Attribution(
            event,
            True,
            "eager_host_argument",
            f"H2D upload of {event.bytes} bytes, a host argument of the next launch "
            f"{consumer.hlo_module}/{consumer.hlo_op}",
            consumer.hlo_module,
            consumer.hlo_op,
            primitive_of(consumer.hlo_module or ""),
        )
    return Attribution(event, False, "no_module", _no_module_reason(event, consumer), None)


def _without_clusters(
    event: DeviceEvent,
    module: str,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    mode: Mode,
    programs: Mapping[str, set[int]] | None,
) -> Attribution:
    """An event of a module with no analysed clusters: an eager primitive's (attributed to
    its module), another program of an analysed module (a recompile), or an unknown module."""
    if mode == "eager":
        return Attribution(
            event,
            True,
            "eager_module",
            f"eager module {module} has no HLO analysis; attributed to module and "
            f"primitive {primitive_of(module)!r} (matched by module)",
            module,
            primitive=primitive_of(module),
        )
    known = sorted(str(k) for k in clusters_by_module)
    others = sorted((programs or {}).get(module, ()))
    if event.program_id is not None and others:
        return Attribution(
            event,
            False,
            "other_program",
            f"module {module} program_id {event.program_id} is another program than the "
            f"analysed {module} (program ids {others}): a recompile, not attributed",
            module,
        )
    return Attribution(
        event,
        False,
        "unknown_module",
        f"module {module} (program_id {event.program_id}) is not among the analysed "
        f"modules {known}: another program, or its HLO is missing",
        module,
    )


def _in_clusters(
    event: DeviceEvent, module: str, clusters: Sequence[ClusterLike], mode: Mode
) -> Attribution:
    """An event of an analysed module: the cluster its hlo_op names (by name or kernel
    name), else a member of the command buffer it ran in, else not attributed."""
    primitive = primitive_of(module) if mode == "eager" else None
    by_name = {c.name: c for c in clusters}
    by_kernel = {kernel_name(c.name): c for c in clusters}
    op = event.hlo_op
    hit = by_name.get(op) if op else None
    hit = hit or (by_kernel.get(kernel_name(op)) if op else None)
    if hit is not None:
        rule = {"memset": "memset_for_gemm", "memcpy": "callback_transfer"}.get(
            event.kind, "hlo_op"
        )
        return Attribution(
            event, True, rule, f"hlo_op {op} is cluster {hit.name}", module, hit.name, primitive
        )
    if op and (COMMAND_BUFFER_RE.match(op) or any(c.parent == op for c in clusters)):
        return _in_command_buffer(event, op, clusters, primitive)
    return Attribution(
        event,
        False,
        "unknown_op",
        f"hlo_op {op!r} of module {module} is not a cluster ({len(clusters)} clusters known)",
        module,
    )


CONDITION_KERNEL = re.compile(r"^set_\w*condition$")


def _in_command_buffer(
    event: DeviceEvent, op: str, clusters: Sequence[ClusterLike], primitive: str | None
) -> Attribution:
    module = event.hlo_module
    members = [c for c in clusters if c.parent == op]
    scope = f"command buffer {op}"
    if not members:
        members = list(clusters)
        scope = f"module {module} (the HLO does not say what {op} holds)"
    if event.kind == "kernel" and CONDITION_KERNEL.match(event.name):
        # CUDA-graph conditional nodes: XLA launches a small kernel that picks the branch or
        # decides whether the loop goes on; it belongs to the conditional/while itself.
        owners = [c for c in members if c.kind in ("conditional", "while")]
        if len(owners) == 1:
            return Attribution(
                event,
                True,
                "command_buffer_condition",
                f"kernel {event.name} evaluates the condition of {owners[0].kind} "
                f"{owners[0].name} in {scope}",
                module,
                owners[0].name,
                primitive,
            )
    if event.kind == "kernel" and not is_library_kernel(event.name):
        for cluster in members:
            if kernel_name(cluster.name) == event.name:
                return Attribution(
                    event,
                    True,
                    "command_buffer_kernel",
                    f"kernel {event.name} is instruction {cluster.name} in {scope}",
                    module,
                    cluster.name,
                    primitive,
                )
        return Attribution(
            event,
            False,
            "command_buffer_unknown_kernel",
            f"kernel {event.name} names no instruction in {scope}",
            module,
        )
    calls = [c for c in members if c.target]
    if len(calls) == 1:
        what = "memset before" if event.kind == "memset" else "library kernel of"
        return Attribution(
            event,
            True,
            "command_buffer_library",
            f"{what} custom-call {calls[0].name} ({calls[0].target}), the only one in {scope}",
            module,
            calls[0].name,
            primitive,
        )
    return Attribution(
        event,
        False,
        "command_buffer_ambiguous",
        f"{event.kind} {event.name} in {scope}: {len(calls)} custom-calls could own it",
        module,
    )


class NextLaunch:
    """The first event of an XLA program that starts after a given event ends (in start
    order, the window's order breaking ties), found by bisection."""

    def __init__(self, window: Sequence[DeviceEvent]) -> None:
        launched = sorted((e.start_ns, i) for i, e in enumerate(window) if e.hlo_module is not None)
        self.starts = [start for start, _ in launched]
        self.events = [window[i] for _, i in launched]

    def __call__(self, event: DeviceEvent) -> DeviceEvent | None:
        at = bisect.bisect_left(self.starts, event.end_ns)
        return self.events[at] if at < len(self.events) else None


def _no_module_reason(event: DeviceEvent, consumer: DeviceEvent | None) -> str:
    if event.kind != "memcpy":
        return f"{event.kind} {event.name} carries no hlo_module stat"
    hint = (
        f"; the next launch is {consumer.hlo_module}/{consumer.hlo_op}"
        if consumer is not None
        else ""
    )
    return (
        f"Memcpy{event.direction or ''} of {event.bytes} bytes outside any XLA program "
        f"(no hlo_module stat): a host<->device copy made by the runtime, e.g. an eager "
        f"scalar upload{hint}"
    )


def _launches_per_cluster(attributions: Sequence[Attribution], n_steps: int) -> dict[str, float]:
    counts: Counter[str] = Counter()
    for a in attributions:
        if a.matched:
            counts[f"{a.module}:{a.cluster or a.primitive}"] += 1
    return {key: count / n_steps for key, count in sorted(counts.items())}


def _transfers(window: Sequence[DeviceEvent], n_steps: int) -> tuple[TransferSummary, ...]:
    groups: dict[str, list[DeviceEvent]] = defaultdict(list)
    for e in window:
        if e.kind == "memcpy":
            groups[e.direction or "unknown"].append(e)
    return tuple(
        TransferSummary(
            direction=direction,
            count_per_step=len(rows) / n_steps,
            bytes_per_step=sum(r.bytes or 0 for r in rows) / n_steps,
            sizes=tuple(sorted({r.bytes for r in rows if r.bytes is not None})),
        )
        for direction, rows in sorted(groups.items())
    )


def _busy_by_step(window: Sequence[DeviceEvent], marked: bool, n_steps: int) -> tuple[float, ...]:
    if not marked:
        return (union_busy_ns(window) * 1e-9,)
    steps = sorted({e.step for e in window if e.step is not None})
    return tuple(union_busy_ns([e for e in window if e.step == s]) * 1e-9 for s in steps)


def _attribution_json(a: Attribution) -> dict[str, Any]:
    e = a.event
    return {
        "step": e.step,
        "name": e.name,
        "kind": e.kind,
        "hlo_module": e.hlo_module,
        "hlo_op": e.hlo_op,
        "program_id": e.program_id,
        "start_ns": e.start_ns,
        "matched": a.matched,
        "rule": a.rule,
        "ambiguous": a.ambiguous,
        "cluster": a.cluster,
        "primitive": a.primitive,
        "reason": a.reason,
    }
