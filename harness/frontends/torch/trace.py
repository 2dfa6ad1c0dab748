"""Read a torch.profiler Chrome trace into the harness's kernel table.

A row is one `harness.profile.events.DeviceEvent`: a CUDA kernel, memset or memcpy on a GPU
stream or, for a trace with no GPU activity (Inductor's C++ kernels on the CPU), one CPU op
that did the work, kind "host_thunk" (the analogue of an XLA CPU thunk). The trace is read
as torch writes it (`prof.export_chrome_trace(...)`, `.json` or `.json.gz`); nothing here
imports torch.

`hlo_module`/`hlo_op` stay None. Their torch equivalent is the CPU op that launched the
work, kept next to each row in a `TorchDeviceEvent`:

- a GPU event's `External id` is the id of the innermost CPU op active at launch
  (`aten::mm`, the Triton launcher `triton_poi_fused_add_gelu_0`, `aten::_local_scalar_dense`);
  its `correlation` names the runtime call (`cuLaunchKernelEx`, `cudaMemsetAsync`) and
  when the host issued it;
- the CPU ops enclosing that op (by time, on its thread) give the compiled region
  (`Torch-Compiled Region: 0/0` -> compile id "0/0"), the Inductor graph call
  (`## Call CompiledFxGraph <key> ##`) and the graph's direct child that launched it.

On the CPU the rows are the direct children of each `## Call CompiledFxGraph` op (extern
calls such as `aten::addmm`, and `graph_<N>_cpp_*` kernels when Inductor's
`cpp.enable_kernel_profile` is on) plus the top-level ATen ops outside compiled regions
(eager code, graph breaks). Dynamo's own bookkeeping ops are not rows.

Steps: `ProfilerStep#N` annotations (a torch.profiler schedule with `prof.step()`) mark
steps; a GPU event belongs to the step whose window holds its launch, as in events.py.
Without them every step is None and the caller gives the step count.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.profile.events import (
    HOST_PLANE,
    DeviceEvent,
    Direction,
    EventKind,
    ProfileError,
    StepMarker,
    assign_step,
    events_to_json,
    to_float,
    to_int,
)
from harness.store.records import loads

DEVICE_CATS: dict[str, EventKind] = {
    "kernel": "kernel",
    "gpu_memset": "memset",
    "gpu_memcpy": "memcpy",
}
CPU_CATS = frozenset({"cpu_op", "user_annotation"})
GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"
REGION_RE = re.compile(r"^Torch-Compiled Region: (\S+)")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# Dynamo and AOTAutograd runtime bookkeeping: host overhead around a compiled graph, not work.
WRAPPER_OP_PREFIXES = (
    "Torch-Compiled Region",
    "TorchDynamo",
    "Pregraph bytecode",
    "AOTDispatcher",
    "## ",
    "ProfilerStep#",
)
_MEMCPY_DIRECTION: dict[str, Direction] = {
    "HtoD": "H2D",
    "DtoH": "D2H",
    "DtoD": "D2D",
    "PtoP": "P2P",
}
_MEMCPY_RE = re.compile(r"Memcpy (HtoD|DtoH|DtoD|PtoP|HtoH)")
_EPS_US = 1e-3


@dataclass(frozen=True)
class TorchDeviceEvent:
    """A kernel-table row and the CPU op that launched it (the torch stand-in for hlo_op).

    `cpu_op_stack` lists the enclosing CPU ops, outermost first, ending with `cpu_op`.
    `graph_op` is the direct child of the `## Call CompiledFxGraph` op on that stack and
    `graph_op_ordinal` its 0-based position among same-named children of that one call
    (the second `aten::mm` of a graph is ordinal 1). `graph_call` numbers the graph-call
    ops of the trace in time order, so one call's events can be grouped.
    """

    event: DeviceEvent
    cpu_op: str | None
    cpu_op_stack: tuple[str, ...]
    compile_region: str | None
    graph_call: int | None
    graph_op: str | None
    graph_op_ordinal: int | None
    launch_api: str | None
    external_id: int | None

    @property
    def in_compiled_graph(self) -> bool:
        return self.graph_call is not None

    def to_json(self) -> dict[str, Any]:
        row = events_to_json([self.event])[0]
        return row | {
            "cpu_op": self.cpu_op,
            "cpu_op_stack": list(self.cpu_op_stack),
            "compile_region": self.compile_region,
            "graph_call": self.graph_call,
            "graph_op": self.graph_op,
            "graph_op_ordinal": self.graph_op_ordinal,
            "launch_api": self.launch_api,
            "external_id": self.external_id,
        }


@dataclass(frozen=True)
class TorchTrace:
    """A torch.profiler trace read into kernel-table rows, with its step markers."""

    path: str
    events: tuple[TorchDeviceEvent, ...]
    markers: tuple[StepMarker, ...]
    device_kind: str
    notes: tuple[str, ...] = ()

    @property
    def launcher_by_correlation(self) -> dict[int, str | None]:
        """correlation id -> the CPU op that launched that GPU event."""
        return {
            e.event.correlation_id: e.cpu_op
            for e in self.events
            if e.event.correlation_id is not None
        }


@dataclass(frozen=True)
class _Op:
    index: int
    name: str
    cat: str
    pid: Any
    tid: Any
    start_us: float
    dur_us: float
    external_id: int | None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


def load_chrome_trace(path: Path | str) -> dict[str, Any]:
    """Return the decoded trace JSON (`.json` or `.json.gz`); ProfileError names the file."""
    file = Path(path)
    if not file.is_file():
        raise ProfileError(f"{file}: torch profiler trace does not exist")
    try:
        raw = userfiles.read_bytes(file, userfiles.PROFILE)
        if raw[:2] == b"\x1f\x8b":  # inflated to a bound, not to whatever the file says
            raw = userfiles.gunzip(raw, str(file), userfiles.INFLATED_TRACE)
        data = loads(raw, str(file))
    except ValueError as err:  # Unreadable (a bomb, not gzip), SchemaError (not JSON, NaN)
        why = str(err).removeprefix(f"{file}: ")
        raise ProfileError(f"{file}: not a readable torch profiler trace ({why})") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ProfileError(f"{file}: no traceEvents list (not a Chrome trace from torch.profiler)")
    return data


def read_torch_trace(path: Path | str, steps: int | None = None) -> TorchTrace:
    """Return the kernel-table rows of a torch.profiler Chrome trace.

    `steps`, when given, is the expected number of `ProfilerStep#N` windows: a trace whose
    markers disagree raises ProfileError, as events.py does for XSpace profiles.
    """
    if steps is not None and steps <= 0:
        raise ValueError(f"steps must be > 0, got {steps}")
    data = load_chrome_trace(path)
    try:
        trace = torch_trace_from_json(data, str(path))
    except (TypeError, ValueError, KeyError) as err:
        raise ProfileError(f"{path}: trace content is malformed ({err})") from err
    marked = sorted({m.step for m in trace.markers})
    if steps is not None and marked and len(marked) != steps:
        raise ProfileError(
            f"{path}: expected {steps} ProfilerStep windows, the trace has {len(marked)} ({marked})"
        )
    return trace


def torch_trace_from_json(data: Mapping[str, Any], path: str = "") -> TorchTrace:
    """Return the rows of an already-decoded trace (see the module docstring)."""
    raw = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    ops = _cpu_ops(raw)
    parents = _nest(ops)
    by_external = {op.external_id: op for op in ops if op.external_id is not None}
    runtime = _runtime_calls(raw)
    markers = _markers(ops)
    launches = {cid: ts * 1e3 for cid, (_, ts, _, _) in runtime.items()}
    graph_calls = sorted(
        (op for op in ops if op.name.startswith(GRAPH_CALL_PREFIX)), key=lambda o: o.start_us
    )
    call_number = {op.index: i for i, op in enumerate(graph_calls)}
    ordinals = _child_ordinals(ops, parents, call_number)
    context = _Context(ops, parents, call_number, ordinals)
    notes: list[str] = []
    rows = [
        _device_row(e, kind, by_external, runtime, context)
        for e in raw
        if (kind := DEVICE_CATS.get(str(e.get("cat")))) is not None
    ]
    device_kind = "cuda" if rows else "cpu"
    if not rows:
        rows = [context.host_row(op) for op in ops if context.is_host_work(op)]
        if ops and not rows:
            notes.append("no GPU events and no CPU op that ran graph kernels or eager ATen ops")
    stepped = [_with_step(r, markers, launches) for r in rows]
    events = tuple(
        sorted(stepped, key=lambda r: (r.event.start_ns, r.event.device, r.event.stream))
    )
    return TorchTrace(path, events, markers, device_kind, tuple(notes))


def _cpu_ops(raw: Iterable[Mapping[str, Any]]) -> list[_Op]:
    ops = []
    for e in raw:
        if e.get("cat") not in CPU_CATS or "dur" not in e:
            continue
        args = e.get("args") or {}
        ops.append(
            _Op(
                index=len(ops),
                name=str(e.get("name", "")),
                cat=str(e.get("cat")),
                pid=e.get("pid"),
                tid=e.get("tid"),
                start_us=float(e["ts"]),
                dur_us=float(e["dur"]),
                external_id=to_int(args.get("External id")),
            )
        )
    return ops


def _nest(ops: Sequence[_Op]) -> dict[int, int | None]:
    """Returns op index -> index of the innermost op enclosing it on the same thread."""
    parents: dict[int, int | None] = {}
    threads: dict[tuple[Any, Any], list[_Op]] = defaultdict(list)
    for op in ops:
        threads[(op.pid, op.tid)].append(op)
    for thread_ops in threads.values():
        stack: list[_Op] = []
        for op in sorted(thread_ops, key=lambda o: (o.start_us, -o.dur_us, o.index)):
            while stack and not (
                op.start_us >= stack[-1].start_us - _EPS_US
                and op.end_us <= stack[-1].end_us + _EPS_US
            ):
                stack.pop()
            parents[op.index] = stack[-1].index if stack else None
            stack.append(op)
    return parents


def _runtime_calls(raw: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, float, Any, Any]]:
    """Returns correlation id -> (runtime API name, start µs, pid, tid) of host launch calls."""
    out: dict[int, tuple[str, float, Any, Any]] = {}
    for e in raw:
        cat = str(e.get("cat", ""))
        if not (cat.endswith("_runtime") or cat.endswith("_driver")):
            continue
        cid = to_int((e.get("args") or {}).get("correlation"))
        if cid is not None:
            out[cid] = (str(e.get("name")), float(e["ts"]), e.get("pid"), e.get("tid"))
    return out


def _markers(ops: Iterable[_Op]) -> tuple[StepMarker, ...]:
    markers = []
    for op in ops:
        match = STEP_RE.match(op.name)
        if match:
            markers.append(
                StepMarker(op.name, int(match.group(1)), op.start_us * 1e3, op.end_us * 1e3)
            )
    return tuple(sorted(markers, key=lambda m: m.start_ns))


def _child_ordinals(
    ops: Sequence[_Op], parents: Mapping[int, int | None], call_number: Mapping[int, int]
) -> dict[int, int]:
    """Returns op index -> position among same-named direct children of its graph call."""
    children: dict[int, list[_Op]] = defaultdict(list)
    for op in ops:
        parent = parents.get(op.index)
        if parent is not None and parent in call_number:
            children[parent].append(op)
    ordinals: dict[int, int] = {}
    for kids in children.values():
        seen: dict[str, int] = defaultdict(int)
        for op in sorted(kids, key=lambda o: o.start_us):
            ordinals[op.index] = seen[op.name]
            seen[op.name] += 1
    return ordinals


@dataclass(frozen=True)
class _Context:
    ops: Sequence[_Op]
    parents: Mapping[int, int | None]
    call_number: Mapping[int, int]
    ordinals: Mapping[int, int]

    def chain(self, op: _Op) -> list[_Op]:
        """The op and its ancestors, innermost first."""
        out = [op]
        parent = self.parents.get(op.index)
        while parent is not None:
            out.append(self.ops[parent])
            parent = self.parents.get(parent)
        return out

    def describe(self, op: _Op | None) -> dict[str, Any]:
        if op is None:
            return {
                "cpu_op": None,
                "cpu_op_stack": (),
                "compile_region": None,
                "graph_call": None,
                "graph_op": None,
                "graph_op_ordinal": None,
            }
        chain = self.chain(op)
        region = next((m.group(1) for o in chain if (m := REGION_RE.match(o.name))), None)
        call_at = next((i for i, o in enumerate(chain) if o.index in self.call_number), None)
        graph_op = chain[call_at - 1] if call_at else None
        return {
            "cpu_op": op.name,
            "cpu_op_stack": tuple(o.name for o in reversed(chain)),
            "compile_region": region,
            "graph_call": self.call_number[chain[call_at].index] if call_at is not None else None,
            "graph_op": graph_op.name if graph_op else None,
            "graph_op_ordinal": self.ordinals.get(graph_op.index) if graph_op else None,
        }

    def innermost_at(self, pid: Any, tid: Any, ts: float) -> _Op | None:
        best = None
        for op in self.ops:
            if (
                op.pid == pid
                and op.tid == tid
                and op.cat == "cpu_op"
                and op.start_us - _EPS_US <= ts <= op.end_us + _EPS_US
                and (best is None or op.dur_us <= best.dur_us)
            ):
                best = op
        return best

    def is_host_work(self, op: _Op) -> bool:
        """True for a CPU op that did graph or eager work (see the module docstring)."""
        if op.cat != "cpu_op" or op.name.startswith(WRAPPER_OP_PREFIXES):
            return False
        parent = self.parents.get(op.index)
        if parent is not None and parent in self.call_number:
            return True
        ancestors = self.chain(op)[1:]
        return not any(a.cat == "cpu_op" for a in ancestors)

    def host_row(self, op: _Op) -> TorchDeviceEvent:
        event = DeviceEvent(
            step=None,
            name=op.name,
            kind="host_thunk",
            direction=None,
            bytes=None,
            hlo_module=None,
            hlo_op=None,
            program_id=None,
            correlation_id=None,
            device=HOST_PLANE,
            stream=f"thread {op.tid}",
            start_ns=op.start_us * 1e3,
            duration_ns=op.dur_us * 1e3,
        )
        return TorchDeviceEvent(
            event=event, **self.describe(op), launch_api=None, external_id=op.external_id
        )


def _device_row(
    e: Mapping[str, Any],
    kind: EventKind,
    by_external: Mapping[int, _Op],
    runtime: Mapping[int, tuple[str, float, Any, Any]],
    context: _Context,
) -> TorchDeviceEvent:
    args = e.get("args") or {}
    name = str(e.get("name", ""))
    cid = to_int(args.get("correlation"))
    ext = to_int(args.get("External id"))
    api = runtime.get(cid) if cid is not None else None
    op = by_external.get(ext) if ext is not None else None
    if op is None and api is not None:
        op = context.innermost_at(api[2], api[3], api[1])
    direction: Direction | None = None
    if kind == "memcpy":
        match = _MEMCPY_RE.search(name)
        direction = _MEMCPY_DIRECTION.get(match.group(1)) if match else None
    event = DeviceEvent(
        step=None,
        name=name,
        kind=kind,
        direction=direction,
        bytes=to_int(args.get("bytes")) if kind != "kernel" else None,
        hlo_module=None,
        hlo_op=None,
        program_id=None,
        correlation_id=cid,
        device=f"/device:GPU:{args.get('device', e.get('pid'))}",
        stream=f"stream {args.get('stream', e.get('tid'))}",
        start_ns=float(e["ts"]) * 1e3,
        duration_ns=float(e.get("dur", 0.0)) * 1e3,
        grid=_dim3(args.get("grid")),
        block=_dim3(args.get("block")),
        registers=to_int(args.get("registers per thread")),
        occupancy_pct=to_float(args.get("est. achieved occupancy %")),
    )
    return TorchDeviceEvent(
        event=event,
        **context.describe(op),
        launch_api=api[0] if api else None,
        external_id=ext,
    )


def _with_step(
    row: TorchDeviceEvent, markers: tuple[StepMarker, ...], launches: Mapping[int, float]
) -> TorchDeviceEvent:
    step = assign_step(row.event, markers, launches)
    if step == row.event.step:
        return row
    event = DeviceEvent(**{**asdict(row.event), "step": step})
    return TorchDeviceEvent(**{**_shallow(row), "event": event})


def _shallow(row: TorchDeviceEvent) -> dict[str, Any]:
    return {k: getattr(row, k) for k in row.__dataclass_fields__}


def torch_events_to_json(events: Iterable[TorchDeviceEvent]) -> list[dict[str, Any]]:
    """Return kernel-table rows with their launcher columns, as plain dicts."""
    return [e.to_json() for e in events]


def _dim3(value: Any) -> tuple[int, int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 3:
        dims = [to_int(v) for v in value]
        if all(d is not None for d in dims):
            return (dims[0], dims[1], dims[2])  # type: ignore[return-value]
    return None
