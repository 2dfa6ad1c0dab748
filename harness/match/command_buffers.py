"""Events inside CUDA-graph command buffers, placed on the commands the thunk files list.

Inside a command buffer every profile event says `hlo_op=command_buffer_N`. The thunk files
(`harness.hlo.thunks`) list the buffer's commands, their DAG and each command's HLO
instruction; one execution's events run on one stream, in an order that DAG allows. So, per
stream and step, in start order:

- **named kernels anchor**: an event whose name is a kernel of the buffer goes to a ready
  command (all its printed predecessors placed) launching that kernel, and of those with the
  event's grid and block;
- **library kernels** (cuBLAS `nvjet_*`, cuDNN, anything no command names) go to a ready
  library command of a compatible kind; an NCCL kernel only to a collective command of the
  collective it names (`_nccl_fits`); a cuDNN call runs several kernels, so the next
  library event stays with the open call until it repeats a kernel name; a cuBLAS call's
  follow-up kernel (split-K's reduce) stays with it when no other library call is ready;
- **memsets** go to the command of the event they precede (the next non-memset event), else
  of the event before them;
- when every command has run, or a step begins, the next execution starts.

An event that no ready command fits goes to the first unplaced command that fits
(`thunk_out_of_order`), so nothing is lost and the reason says so. After placement,
an event is **ambiguous** when another command of the same signature (kernel and launch
shape, or library kind) could take its place without breaking the DAG: the match is made
(the first in command order) and counted apart, with the candidates in the reason.

Buffers holding control flow (while, conditional) repeat their bodies, so their events are
left to the name rules of `harness.match.match` (the condition kernel goes to its node).

A kernel XLA deduplicated may be launched by commands in several branches of one conditional
(greedy's argmax and sampling's share `input_reduce_fusion`). Each execution of the
conditional ran one branch, so its kernel goes to the command in the branch that ran
(`_branch_that_ran`), by this evidence in turn: a command of that branch already placed
since the conditional's `set_case_condition` event (its own kernels, in the buffer's
order), none of the sibling branch's; else the next kernel in the stream that only one
candidate branch launches; else a kernel only that branch launches seen anywhere in the
stream. Without any, the first in command order is taken, and the event is marked ambiguous.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.hlo.thunks import Command, CommandBuffer
from harness.profile.events import DeviceEvent

_CUBLAS_KERNEL = re.compile(
    r"^(?:void )?(?:nvjet_|sm\d+_xmma|cutlass|ampere_|volta_|turing_|hopper_|cublas|gemm)",
    re.IGNORECASE,
)
# Kernels only cuBLAS launches: a cuDNN call never runs them (cuDNN's own GEMMs are cudnn_*,
# xmma or cutlass kernels).
_CUBLAS_ONLY = re.compile(r"^(?:void )?(?:nvjet_|cublas|gemm)", re.IGNORECASE)
_CUDNN_KERNEL = re.compile(r"cudnn", re.IGNORECASE)
_CUBLAS_KINDS = frozenset({"kCublasLtMatmul", "kGemm", "kCublas"})
_CUDNN_KINDS = frozenset({"kCuDnn", "kConvolution", "kNorm", "kFusedMHA", "kCudnn"})
# A device-to-device copy inside a CUDA graph runs as one of these kernels, not a memcpy.
_COPY_KERNEL = re.compile(r"^memcpy\w{0,32}$")
_COPY_KINDS = frozenset({"kCopy", "kMemcpy", "kDeviceToDevice"})
# The kernel a CUDA-graph conditional node launches to pick its branch (or a while node to
# decide whether the loop goes on).
_CONDITION_KERNEL = re.compile(r"^set_\w{0,32}condition$")
_CONTROL_KINDS = frozenset({"kConditional", "kWhile"})
# NCCL's kernels name the collective they run (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`).
# Only that part is read, to keep an NCCL kernel on a collective command of its kind (its
# algorithm and protocol parts are not a reliable description: NVIDIA/nccl#2196); a
# collective-permute and an all-to-all run as `SendRecv`.
_NCCL_KERNEL = re.compile(r"^(?:void )?nccl", re.IGNORECASE)
_NCCL_OPS = (
    ("allreduce", ("AllReduce",)),
    ("allgather", ("AllGather",)),
    ("reducescatter", ("ReduceScatter",)),
    ("sendrecv", ("CollectivePermute", "AllToAll", "Send", "Recv")),
    ("broadcast", ("Broadcast",)),
)
_COLLECTIVE_KIND = re.compile(
    r"AllReduce|AllGather|ReduceScatter|CollectivePermute|AllToAll|Broadcast|Send|Recv|Nccl"
)


def _nccl_fits(command: Command, event: DeviceEvent) -> bool:
    """True when an NCCL kernel may belong to `command`: a collective command, of the kind the
    kernel names when it names one."""
    if not _COLLECTIVE_KIND.search(command.kind):
        return False
    flat = event.name.replace("_", "").lower()
    for op, kinds in _NCCL_OPS:
        if op in flat:
            return any(k in command.kind for k in kinds)
    return True


# Thunks that only hold or order others: no event of their own.
_STRUCTURAL_KINDS = frozenset(
    {"kAsyncStart", "kAsyncDone", "kDynamicSliceFusion", "kCommandBuffer", "kSequential"}
)


@dataclass(frozen=True)
class Placement:
    """Where one command-buffer event was placed: the command, its instruction, the rule."""

    command: int
    instruction: str | None
    rule: str
    reason: str
    ambiguous: bool = False


def _family(name: str) -> str | None:
    if _CUDNN_KERNEL.search(name):
        return "cudnn"
    if _CUBLAS_KERNEL.match(name):
        return "cublas"
    return None


def _event_class(e: DeviceEvent) -> str:
    """What kind of command may own a library-side event: a copy, a branch choice, a call."""
    if e.kind == "memcpy" or _COPY_KERNEL.match(e.name):
        return "copy"
    if _CONDITION_KERNEL.match(e.name):
        return "condition"
    return "call"


def _compatible(command: Command, event: DeviceEvent) -> bool:
    """True when `command` may have launched `event`: copies only on copies, branch choices on
    conditionals and whiles, and a library kernel only on a call of its own library."""
    what = _event_class(event)
    if what == "copy":
        return command.kind in _COPY_KINDS
    if what == "condition":
        return command.kind in _CONTROL_KINDS
    if command.kind in _COPY_KINDS or command.kind in _CONTROL_KINDS:
        return False
    if _NCCL_KERNEL.match(event.name):
        return _nccl_fits(command, event)
    family = _family(event.name)
    if command.kind in _CUBLAS_KINDS:
        return family in (None, "cublas")
    if command.kind in _CUDNN_KINDS:
        return not _CUBLAS_ONLY.match(event.name)
    # Other calls (custom calls, collectives) run their own kernels, never a library's.
    return family is None


def placeable(c: Command) -> bool:
    """True for a command that launches events itself (not a wrapper, not an XLA-emitted
    while or conditional's body marker)."""
    return c.kind not in _STRUCTURAL_KINDS


def _label(c: Command) -> str:
    return f"{c.instruction or '?'} (command {c.index:03d}, {c.kind})"


class _Execution:
    """The placement state of one execution of a buffer on one stream."""

    def __init__(self, buffer: CommandBuffer) -> None:
        self.buffer = buffer
        self.by_index = {c.index: c for c in buffer.commands if placeable(c)}
        # Commands in a loop body or a branch run any number of times (zero included): an
        # execution is complete without them.
        self.required = {c.index for c in buffer.commands if placeable(c) and c.owner is None}
        self.preds: dict[int, set[int]] = defaultdict(set)
        for c in buffer.commands:
            if c.index not in self.by_index:
                continue  # a wrapper's edges order its thunks only loosely: not followed
            self.preds[c.index].update(p for p in c.prev if p in self.by_index)
            for n in c.next:
                if n in self.by_index:
                    self.preds[n].add(c.index)
        self.reset()

    def reset(self) -> None:
        self.placed: dict[int, list[int]] = {}  # command -> event positions, in order
        self.names: dict[int, set[str]] = defaultdict(set)
        self.open: int | None = None  # the library call the last non-memset event went to
        self.chose: dict[int, int] = {}  # conditional -> position of its last branch choice

    def complete(self) -> bool:
        return bool(self.required) and self.required <= self.placed.keys()

    def ready(self, c: Command) -> bool:
        return c.index not in self.placed and all(p in self.placed for p in self.preds[c.index])


def _fits(c: Command, e: DeviceEvent) -> bool:
    return (c.grid is None or e.grid is None or c.grid == e.grid) and (
        c.block is None or e.block is None or c.block == e.block
    )


NO_EVIDENCE = "no evidence says which branch ran"


@dataclass(frozen=True)
class _Branches:
    """A buffer's conditional branches: each command's (conditional, branch) and the kernels
    each branch launches that no sibling branch does."""

    of: Mapping[int, tuple[int, str]]
    unique: Mapping[tuple[int, str], frozenset[str]]

    @classmethod
    def of_buffer(cls, buffer: CommandBuffer) -> _Branches:
        conditionals = {c.index for c in buffer.commands if c.kind == "kConditional"}
        of = {
            c.index: (c.owner, c.branch)
            for c in buffer.commands
            if c.owner in conditionals and c.branch is not None
        }
        kernels: dict[tuple[int, str], set[str]] = defaultdict(set)
        for c in buffer.commands:
            if c.index in of and c.kernel is not None:
                kernels[of[c.index]].add(c.kernel)
        unique = {
            key: frozenset(
                names
                - {
                    k
                    for other, ks in kernels.items()
                    if other[0] == key[0] and other != key
                    for k in ks
                }
            )
            for key, names in kernels.items()
        }
        return cls(of, unique)


def _branch_that_ran(
    ex: _Execution,
    candidates: Sequence[Command],
    branches: _Branches,
    pos: int,
    events: Sequence[tuple[int, DeviceEvent]],
) -> tuple[list[Command], str]:
    """The candidates narrowed to the branch that ran, where they lie in several branches of
    one conditional, and the evidence, in words ("" where nothing narrowed them)."""
    keys = {branches.of.get(c.index) for c in candidates}
    if len(keys) < 2 or None in keys:
        return list(candidates), ""
    owners = {k[0] for k in keys if k is not None}
    mine = _in_branches_that_ran(ex, candidates, branches, owners)
    if mine:
        return mine, "its branch's other kernels ran in this execution"
    return _by_branch_only_kernels(candidates, branches, pos, events)


def _in_branches_that_ran(
    ex: _Execution, candidates: Sequence[Command], branches: _Branches, owners: set[int]
) -> list[Command]:
    """The candidates in a branch of which some command was placed since its conditional
    (one of `owners`) last chose a branch in this execution."""
    since = {o: ex.chose.get(o, -1) for o in owners}
    ran = {
        branches.of[c]
        for c, ps in ex.placed.items()
        if c in branches.of and branches.of[c][0] in owners and ps[-1] > since[branches.of[c][0]]
    }
    return [c for c in candidates if branches.of[c.index] in ran]


def _by_branch_only_kernels(
    candidates: Sequence[Command],
    branches: _Branches,
    pos: int,
    events: Sequence[tuple[int, DeviceEvent]],
) -> tuple[list[Command], str]:
    """The candidates whose branch alone launches a kernel that follows before the next
    condition is set, else that ran anywhere on this stream (when that names one branch);
    all of them, with NO_EVIDENCE, when neither tells."""
    for _, later in events[pos + 1 :]:
        if later.name.startswith("set_") and later.name.endswith("condition"):
            break
        hits = [
            c for c in candidates if later.name in branches.unique.get(branches.of[c.index], ())
        ]
        if hits:
            return hits, f"{later.name}, a kernel only its branch launches, follows"
    seen = {e.name for _, e in events}
    hits = [c for c in candidates if branches.unique.get(branches.of[c.index], frozenset()) & seen]
    if hits and len({branches.of[c.index] for c in hits}) == 1:
        return hits, "a kernel only its branch launches ran on this stream"
    return list(candidates), NO_EVIDENCE


def _choose_named(
    ex: _Execution,
    e: DeviceEvent,
    kernels: Mapping[str, list[Command]],
    branches: _Branches | None = None,
    pos: int = 0,
    events: Sequence[tuple[int, DeviceEvent]] = (),
):
    named = kernels.get(e.name, [])
    shaped = [c for c in named if _fits(c, e)] or named
    ready = [c for c in shaped if ex.ready(c)]
    if ready and branches is not None:
        ready, why = _branch_that_ran(ex, ready, branches, pos, events)
        if why:
            return ready[0], f"thunk_kernel:{why}"
    if ready:
        return ready[0], "thunk_kernel"
    left = [c for c in shaped if c.index not in ex.placed]
    if left:
        return left[0], "thunk_out_of_order"
    return None, ""


def _choose_library(ex: _Execution, e: DeviceEvent, library: Sequence[Command]):
    open_call = ex.by_index.get(ex.open) if ex.open is not None else None
    if open_call is not None and not _compatible(open_call, e):
        open_call = None
    ready = [c for c in library if ex.ready(c) and _compatible(c, e)]
    if (
        open_call is not None
        and open_call.kind not in _CUBLAS_KINDS
        and e.name not in ex.names[open_call.index]
    ):
        return open_call, "thunk_library"
    if ready:
        return ready[0], "thunk_library"
    if open_call is not None:
        return open_call, "thunk_library"
    left = [c for c in library if c.index not in ex.placed and _compatible(c, e)]
    if left:
        return left[0], "thunk_out_of_order"
    return None, ""


def _commands_by_kernel(buffer: CommandBuffer) -> dict[str, list[Command]]:
    """The buffer's kernel commands by the name of the kernel each launches, in command order."""
    kernels: dict[str, list[Command]] = defaultdict(list)
    for c in buffer.commands:
        if c.kernel is not None:
            kernels[c.kernel].append(c)
    return kernels


def _choose(
    ex: _Execution,
    e: DeviceEvent,
    kernels: Mapping[str, list[Command]],
    library: Sequence[Command],
    branches: _Branches,
    pos: int,
    events: Sequence[tuple[int, DeviceEvent]],
):
    """The command of this execution that ran `e`, and the rule (":evidence") that chose it:
    by kernel name where a kernel command launches it, else among the library calls."""
    if e.name in kernels:
        return _choose_named(ex, e, kernels, branches, pos, events)
    return _choose_library(ex, e, library)


def _placement(chosen: Command, rule_and_evidence: str, e: DeviceEvent, buffer: str) -> Placement:
    """`e` placed on `chosen` of the buffer named `buffer`, by the rule `_choose` gave, with
    the reason in words; ambiguous where no evidence told the branch that ran."""
    rule, _, evidence = rule_and_evidence.partition(":")
    what = "kernel" if chosen.kernel is not None else "library kernel of"
    if rule == "thunk_library" and chosen.kind in _COPY_KINDS | _CONTROL_KINDS:
        rule = "thunk_copy" if chosen.kind in _COPY_KINDS else "thunk_condition"
    reason = {
        "thunk_kernel": f"kernel {e.name} is {_label(chosen)} in {buffer}"
        + (
            f", in the branch that ran ({evidence})" if evidence and evidence != NO_EVIDENCE else ""
        ),
        "thunk_copy": f"{e.kind} {e.name} is the device copy {_label(chosen)} in "
        f"{buffer}, the next copy the command DAG allows",
        "thunk_condition": f"kernel {e.name} chooses the branch (or the next iteration) of "
        f"{_label(chosen)} in {buffer}",
        "thunk_library": f"{what} {_label(chosen)} in {buffer}, placed by "
        "the command DAG between the named kernels",
        "thunk_out_of_order": f"{e.kind} {e.name} placed on {_label(chosen)} in "
        f"{buffer}, the first unplaced command that fits: no ready command did "
        "(the DAG the thunk file prints is incomplete here)",
    }[rule]
    if evidence == NO_EVIDENCE:
        reason += "; ambiguous: the first branch in command order is taken"
    return Placement(
        chosen.index, chosen.instruction, rule, reason, ambiguous=evidence == NO_EVIDENCE
    )


def _place_stream(
    buffer: CommandBuffer, events: Sequence[tuple[int, DeviceEvent]]
) -> dict[int, Placement]:
    """Places one stream's events of `buffer` (window index, event; in start order)."""
    kernels = _commands_by_kernel(buffer)
    library = [c for c in buffer.commands if c.kernel is None and placeable(c)]
    branches = _Branches.of_buffer(buffer)
    ex = _Execution(buffer)
    out: dict[int, Placement] = {}
    memsets: list[int] = []  # positions waiting for the event they precede
    executions: list[tuple[_Execution, list[tuple[int, int]]]] = []  # (state, (pos, command))
    placed_here: list[tuple[int, int]] = []
    step = object()
    positions = [i for i, _ in events]

    def finish_execution() -> None:
        nonlocal ex, placed_here
        executions.append((ex, placed_here))
        ex, placed_here = _Execution(buffer), []

    def settle_memsets(target: int | None, after: bool) -> None:
        for pos in memsets:
            if target is None:
                continue
            c = ex.by_index[target]
            where = "before" if after else "after"
            out[positions[pos]] = Placement(
                target,
                c.instruction,
                "thunk_memset",
                f"memset {where} {_label(c)} in {buffer.name}",
            )
        memsets.clear()

    for pos, (_, e) in enumerate(events):
        if e.step != step and placed_here:
            settle_memsets(placed_here[-1][1], after=False)
            finish_execution()
        step = e.step
        if ex.complete():
            finish_execution()
        if e.kind == "memset":
            memsets.append(pos)
            continue
        for attempt in range(2):
            chosen, rule = _choose(ex, e, kernels, library, branches, pos, events)
            if chosen is not None or attempt or not placed_here:
                break
            # Nothing of this execution is left for the event: the next execution begins.
            finish_execution()
        if chosen is None:
            continue  # left to the name rules: it names nothing this buffer runs
        settle_memsets(chosen.index, after=True)
        if chosen.kind == "kConditional":
            ex.chose[chosen.index] = pos
        ex.placed.setdefault(chosen.index, []).append(pos)
        ex.names[chosen.index].add(e.name)
        ex.open = chosen.index if chosen.kernel is None else None
        placed_here.append((pos, chosen.index))
        out[positions[pos]] = _placement(chosen, rule, e, buffer.name)
    if placed_here:
        settle_memsets(placed_here[-1][1], after=False)
        finish_execution()
    memsets.clear()
    for state, placed in executions:
        _mark_ambiguous(state, placed, positions, events, out)
    return out


# One stream's events of one buffer placed (harness.match.table_match places one execution
# at a time through it).
place_stream = _place_stream


def _signature(c: Command) -> tuple[object, ...]:
    return (c.kernel, c.grid, c.block) if c.kernel is not None else (c.kind,)


@dataclass(frozen=True)
class _Swaps:
    """Whether two placed commands of one execution could run in each other's place without
    breaking the DAG's order: the first and last event position of each command, and each
    command's successors."""

    preds: Mapping[int, set[int]]  # the execution's own (a defaultdict)
    first: Mapping[int, int]
    last: Mapping[int, int]
    succs: Mapping[int, set[int]]

    @classmethod
    def of(cls, ex: _Execution) -> _Swaps:
        succs: dict[int, set[int]] = defaultdict(set)
        for c, ps in ex.preds.items():
            for p in ps:
                succs[p].add(c)
        return cls(
            ex.preds,
            {c: ps[0] for c, ps in ex.placed.items()},
            {c: ps[-1] for c, ps in ex.placed.items()},
            succs,
        )

    def allowed(self, c: int, other: int) -> bool:
        first, last = self.first, self.last
        lo, hi = (c, other) if first[c] < first[other] else (other, c)
        # Swapping the earlier command `lo` and the later `hi`: `hi`'s predecessors must
        # run before `lo`'s events, `lo`'s successors after `hi`'s.
        return all(last.get(p, -1) < first[lo] for p in self.preds[hi]) and all(
            first.get(s, 1 << 62) > last[hi] for s in self.succs[lo]
        )


def _mark_ambiguous(
    ex: _Execution,
    placed: Sequence[tuple[int, int]],
    positions: Sequence[int],
    events: Sequence[tuple[int, DeviceEvent]],
    out: dict[int, Placement],
) -> None:
    """Marks each event whose command could be swapped with another of the same signature
    (each run as one event here) without breaking the DAG's order."""
    swaps = _Swaps.of(ex)
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for c in ex.placed:
        groups[_signature(ex.by_index[c])].append(c)

    def names(c: int) -> tuple[str, ...]:
        return tuple(events[p][1].name for p in ex.placed[c])

    for pos, c in placed:
        mine = out.get(positions[pos])
        if mine is None or mine.rule == "thunk_memset" or mine.ambiguous:
            continue
        alternatives = []
        for other in groups[_signature(ex.by_index[c])]:
            a, b = ex.by_index[c], ex.by_index[other]
            if other == c or a.instruction == b.instruction or names(c) != names(other):
                continue
            if swaps.allowed(c, other):
                alternatives.append(b)
        if alternatives:
            cands = ", ".join(_label(x) for x in [ex.by_index[c], *alternatives])
            out[positions[pos]] = Placement(
                mine.command,
                mine.instruction,
                mine.rule,
                f"{mine.reason}; ambiguous: the DAG allows any of {cands} here, the first in "
                "command order is taken",
                ambiguous=True,
            )


def place_events(
    window: Sequence[DeviceEvent],
    buffers_of: Mapping[int, CommandBuffer],
) -> dict[int, Placement]:
    """Returns window index -> placement for every event of a placeable command buffer.

    `buffers_of` maps a window index to the command buffer its event ran in (the caller
    resolves module, program and `hlo_op`). Each stream is placed on its own: a branch of a
    conditional node, or an async copy, may run on another stream than the rest.
    """
    streams: dict[tuple[int, str, str, str], list[tuple[int, DeviceEvent]]] = defaultdict(list)
    buffers: dict[int, CommandBuffer] = {}
    for i, buffer in buffers_of.items():
        e = window[i]
        buffers[id(buffer)] = buffer
        streams[(id(buffer), e.device, e.stream, str(e.program_id))].append((i, e))
    out: dict[int, Placement] = {}
    for key, rows in streams.items():
        rows.sort(key=lambda r: (r[1].start_ns, r[0]))
        out.update(_place_stream(buffers[key[0]], rows))
    return out
