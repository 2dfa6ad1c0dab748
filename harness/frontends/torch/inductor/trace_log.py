"""Read a TORCH_TRACE log (the structured trace tlparse reads) into compile facts.

The log is one glog-prefixed line per record, a JSON object whose first key names the
record (`dynamo_start`, `compilation_metrics`, `chromium_event`, `artifact`,
`inductor_output_code`, ...), followed by the record's payload as tab-indented lines.
Records carry `frame_id`/`frame_compile_id`, Dynamo's compile id ("0/1": frame 0, second
compile). From them: graphs per compile, graph breaks and their reasons, guard counts,
recompile reasons, the compile-time phases (chromium B/E events, else compilation metrics),
and each compile's payloads (output code, post-grad graph, provenance) that
`harness.frontends.torch.inductor.artifacts` turns into graphs. Nothing here imports torch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common import userfiles

AOT_ID_RE = re.compile(r"^# AOT ID: \['([^']+)'")


class ArtifactError(ValueError):
    """An Inductor artifact or TORCH_TRACE log that cannot be read; names the file (and line)."""


def read_text(path: Path) -> str:
    """Return a file's text, or ArtifactError naming it."""
    try:
        return userfiles.read_text(path, userfiles.IR_TEXT)
    except userfiles.Unreadable as err:
        raise ArtifactError(f"{path}: cannot read ({err})") from err


@dataclass(frozen=True)
class TraceRecord:
    """One structured-trace record: its kind (the JSON's first key), metadata and payload."""

    line: int
    kind: str
    meta: Mapping[str, Any]
    payload: str

    @property
    def compile_id(self) -> str | None:
        frame, attempt = self.meta.get("frame_id"), self.meta.get("frame_compile_id")
        return None if frame is None or attempt is None else f"{frame}/{attempt}"

    @property
    def body(self) -> Any:
        """The value under the record's kind key (`{"name": ...}` for artifacts)."""
        return self.meta.get(self.kind)


_GLOG = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ \S+\] (\{.*)$")


def read_trace_records(path: Path | str) -> tuple[TraceRecord, ...]:
    """Return the records of a TORCH_TRACE log, in file order.

    A record is a glog-prefixed line holding a JSON object, followed by its payload as
    lines starting with a tab. Lines of neither form are skipped; a file with no record at
    all, or a record line whose JSON is broken, raises ArtifactError naming file and line.
    """
    file = Path(path)
    text = read_text(file)
    records: list[TraceRecord] = []
    current: tuple[int, str, dict[str, Any]] | None = None
    payload: list[str] = []

    def flush() -> None:
        if current is not None:
            records.append(TraceRecord(current[0], current[1], current[2], "\n".join(payload)))

    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("\t"):
            if current is not None:
                payload.append(line[1:])
            continue
        match = _GLOG.match(line)
        if not match:
            continue
        flush()
        payload = []
        try:
            meta = json.loads(match.group(1))
        except json.JSONDecodeError as err:
            raise ArtifactError(f"{file}:{number}: record is not JSON ({err})") from err
        if not isinstance(meta, dict) or not meta:
            raise ArtifactError(f"{file}:{number}: record is not a JSON object")
        current = (number, next(iter(meta)), meta)
    flush()
    if not records:
        raise ArtifactError(f"{file}: no TORCH_TRACE records (not a structured trace log)")
    return tuple(records)


@dataclass(frozen=True)
class GraphBreak:
    """One graph break Dynamo logged: where, why, and whether its frame still made a graph.

    `reason` is the headline (`Unsupported Tensor.item() call with
    capture_scalar_outputs=False`); `detail` the full text with explanation and hints.
    """

    compile_id: str
    reason: str
    location: str | None
    detail: str
    graph_emitted: bool


@dataclass(frozen=True)
class CompileTimes:
    """Where compile time went, in seconds (None: not in the log).

    Phases nest: total ⊃ Dynamo tracing + guards + backend; backend = AOTAutograd ⊃
    Inductor ⊃ kernel compile (Triton on the GPU, the C++ compiler on the CPU). `aot_s` and
    `inductor_s` are exclusive (their nested phase removed), so the fields add up to at
    most `total_s`. `autotune_s` is Triton's launch-config benchmarking, which runs at the
    first call, outside the compile.
    """

    total_s: float | None
    dynamo_tracing_s: float | None
    guards_s: float | None
    aot_s: float | None
    inductor_s: float | None
    kernel_compile_s: float | None
    autotune_s: float | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FrameCompile:
    """One Dynamo compile (`compile_id` "frame/n"): what it traced, guarded and produced."""

    compile_id: str
    function: str | None
    location: str | None
    graph_emitted: bool
    graph_op_count: int | None
    guard_count: int | None
    recompile_reason: str | None
    restart_reasons: tuple[str, ...]
    fail_reason: str | None
    graph_breaks: tuple[GraphBreak, ...]
    aot_ids: tuple[str, ...]
    phases_s: Mapping[str, float]
    metrics: Mapping[str, Any]
    artifacts: Mapping[str, str]

    @property
    def times(self) -> CompileTimes:
        return compile_times([self])

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "function": self.function,
            "location": self.location,
            "graph_emitted": self.graph_emitted,
            "graph_op_count": self.graph_op_count,
            "guard_count": self.guard_count,
            "recompile_reason": self.recompile_reason,
            "restart_reasons": list(self.restart_reasons),
            "fail_reason": self.fail_reason,
            "graph_breaks": [_break_json(b) for b in self.graph_breaks],
            "aot_ids": list(self.aot_ids),
            "phases_s": dict(self.phases_s),
            "times": self.times.to_json(),
        }


def _break_json(b: GraphBreak) -> dict[str, Any]:
    return {
        "compile_id": b.compile_id,
        "reason": b.reason,
        "location": b.location,
        "graph_emitted": b.graph_emitted,
    }


@dataclass(frozen=True)
class DynamoSession:
    """The compiles between two Dynamo resets (`torch._dynamo.explain` resets before and after
    it runs, so a process that explains and then compiles logs two sessions)."""

    frames: tuple[FrameCompile, ...]

    @property
    def graph_count(self) -> int:
        return sum(f.graph_emitted for f in self.frames)

    @property
    def graph_breaks(self) -> tuple[GraphBreak, ...]:
        """Breaks that split a graph (their frame emitted one), as `explain()` counts them."""
        return tuple(b for f in self.frames for b in f.graph_breaks if b.graph_emitted)

    @property
    def graph_break_count(self) -> int:
        return len(self.graph_breaks)

    @property
    def break_reasons(self) -> tuple[str, ...]:
        return tuple(b.reason for b in self.graph_breaks)

    @property
    def skipped_breaks(self) -> tuple[GraphBreak, ...]:
        """Breaks in frames that produced no graph: the op ran eagerly, nothing was split."""
        return tuple(b for f in self.frames for b in f.graph_breaks if not b.graph_emitted)

    @property
    def guard_count(self) -> int:
        """Guards installed over all frames (each compiled frame guards its own cache entry)."""
        return sum(f.guard_count or 0 for f in self.frames)

    @property
    def recompile_reasons(self) -> tuple[str, ...]:
        return tuple(f.recompile_reason for f in self.frames if f.recompile_reason)

    @property
    def inductor_ran(self) -> bool:
        return any("inductor_output_code" in f.artifacts for f in self.frames)

    @property
    def times(self) -> CompileTimes:
        return compile_times(self.frames)

    def frame(self, compile_id: str) -> FrameCompile | None:
        return next((f for f in self.frames if f.compile_id == compile_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "break_reasons": list(self.break_reasons),
            "skipped_breaks": [_break_json(b) for b in self.skipped_breaks],
            "guard_count": self.guard_count,
            "recompile_reasons": list(self.recompile_reasons),
            "inductor_ran": self.inductor_ran,
            "times": self.times.to_json(),
            "frames": [f.to_json() for f in self.frames],
        }


@dataclass(frozen=True)
class TorchTraceFacts:
    """What a TORCH_TRACE log says about compilation, split into Dynamo sessions."""

    path: str
    torch_version: str | None
    sessions: tuple[DynamoSession, ...]
    notes: tuple[str, ...] = ()

    @property
    def main(self) -> DynamoSession:
        """The last session that ran Inductor (the real compile), else the last session."""
        ran = [s for s in self.sessions if s.inductor_ran]
        return ran[-1] if ran else self.sessions[-1]

    @property
    def graph_by_compile_id(self) -> dict[str, str]:
        """compile id -> AOT id of the (forward) graph it produced, in the main session."""
        return {f.compile_id: aot for f in self.main.frames for aot in f.aot_ids[:1]}

    def to_json(self) -> dict[str, Any]:
        main = self.main
        return {
            "path": self.path,
            "torch_version": self.torch_version,
            "sessions": len(self.sessions),
            "main_session": self.sessions.index(main),
            **main.to_json(),
            "notes": list(self.notes),
        }


_BREAK_AT = re.compile(r"Graph break in user code at (.*):(\d+)")
_ENCOUNTERED = "Encountered graph break"


def break_headline(text: str) -> str:
    """The one-line reason of a graph break text (`Unsupported Tensor.item() call ...`)."""
    body = text.split("Graph Break Reason:", 1)[-1].split("User code traceback:", 1)[0]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(_ENCOUNTERED)]
    return (useful or lines or [text.strip()])[0]


def read_trace_log(path: Path | str) -> TorchTraceFacts:
    """Return the compile facts of a TORCH_TRACE log (a file, or a folder of `*.log` files:
    the newest one is read, as `tlparse --latest` does)."""
    file = _trace_file(Path(path))
    return trace_facts(read_trace_records(file), str(file))


def _trace_file(path: Path) -> Path:
    if path.is_file():
        return path
    if path.is_dir():
        logs = sorted(path.glob("*.log"), key=lambda p: (p.stat().st_mtime, p.name))
        if logs:
            return logs[-1]
        raise ArtifactError(f"{path}: no *.log TORCH_TRACE file in this folder")
    raise ArtifactError(f"{path}: no such TORCH_TRACE log")


class _Frame:
    """Mutable accumulator for one compile while the log is read."""

    def __init__(self, compile_id: str) -> None:
        self.compile_id = compile_id
        self.location: str | None = None
        self.function: str | None = None
        self.graph = False
        self.metrics: dict[str, Any] = {}
        self.runtime: dict[str, Any] = {}
        self.recompile: str | None = None
        self.breaks: list[tuple[str, str | None, str]] = []
        self.aot_ids: list[str] = []
        self.artifacts: dict[str, str] = {}
        self.open: dict[str, list[float]] = {}
        self.phases: Counter[str] = Counter()
        self.dynamo_begun = False

    def freeze(self) -> FrameCompile:
        m = self.metrics
        restart = tuple(break_headline(str(r)) for r in m.get("restart_reasons") or ())
        breaks = tuple(
            GraphBreak(self.compile_id, reason, loc, detail, self.graph)
            for reason, loc, detail in dict.fromkeys(self.breaks)
        )
        if not breaks and restart and self.graph:
            # Older logs carry no dynamo_graph_break_reason artifact: the restart reasons
            # of a frame that still made a graph are its breaks.
            breaks = tuple(GraphBreak(self.compile_id, r, None, r, True) for r in restart)
        # The runtime entry (2.11: autotuning at the first call) fills what the compile left None.
        merged = {**m, **{k: v for k, v in self.runtime.items() if m.get(k) is None}}
        metrics = {k: v for k, v in merged.items() if not k.endswith("_config")}
        return FrameCompile(
            compile_id=self.compile_id,
            function=self.function or _opt_str(m.get("co_name")),
            location=self.location or _code_location(m),
            graph_emitted=self.graph,
            graph_op_count=_opt_int(m.get("graph_op_count")),
            guard_count=_opt_int(m.get("guard_count")),
            recompile_reason=_opt_str(m.get("recompile_reason")) or self.recompile,
            restart_reasons=restart,
            fail_reason=_opt_str(m.get("fail_reason")),
            graph_breaks=breaks,
            aot_ids=tuple(dict.fromkeys(self.aot_ids)),
            phases_s=dict(self.phases),
            metrics=metrics,
            artifacts=dict(self.artifacts),
        )


def _opt_int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _opt_float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "None" else str(value)


def _code_location(metrics: Mapping[str, Any]) -> str | None:
    name, line = metrics.get("co_filename"), metrics.get("co_firstlineno")
    return f"{name}:{line}" if name and line is not None else None


def trace_facts(records: Iterable[TraceRecord], path: str = "") -> TorchTraceFacts:
    """Return the compile facts of parsed TORCH_TRACE records.

    Records are grouped by compile id. A `dynamo_start` (or the `dynamo` phase opening) for a
    compile id the current session already saw starts a new session: Dynamo was reset.
    """
    reading = _Reading(path)
    for rec in records:
        reading.read(rec)
    sessions = reading.sessions
    frozen = tuple(DynamoSession(tuple(f.freeze() for f in s.values())) for s in sessions if s)
    if not frozen:
        raise ArtifactError(f"{path}: the log holds no Dynamo compile")
    return TorchTraceFacts(path, reading.version, frozen, tuple(reading.notes))


class _Reading:
    """The records read so far: the interned strings, the Dynamo sessions (each its frames by
    compile id), the PyTorch version and the notes on records that could not be read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.strings: dict[int, str] = {}
        self.sessions: list[dict[str, _Frame]] = [{}]
        self.version: str | None = None
        self.notes: list[str] = []

    def frame(self, cid: str) -> _Frame:
        return self.sessions[-1].setdefault(cid, _Frame(cid))

    def read(self, rec: TraceRecord) -> None:
        """Files one record: an interned string, a chromium phase, the version, the start of
        a frame's compile, or one of its frame's facts (`_fill`)."""
        body, cid = rec.body, rec.compile_id
        if rec.kind == "str" and isinstance(body, list) and len(body) == 2:
            self.strings[_opt_int(body[1]) or 0] = str(body[0])
        elif rec.kind == "chromium_event":
            self.chromium(rec)
        elif (
            rec.kind == "artifact"
            and isinstance(body, dict)
            and body.get("name") == "torch_version"
        ):
            data = _json_or_none(rec.payload)
            if isinstance(data, dict):
                self.version = str(data.get("pytorch_version"))
        elif cid is None:
            return
        elif rec.kind == "dynamo_start":
            self.dynamo_start(rec, cid)
        else:
            if rec.kind == "compilation_metrics" and isinstance(body, dict):
                self.version = self.version or _opt_str(body.get("pytorch_version"))
            _fill(self.frame(cid), rec)

    def chromium(self, rec: TraceRecord) -> None:
        """A chromium event: a phase of its compile id's frame. Dynamo's phase opening again
        for a compile id this session already began starts a new session (Dynamo was reset)."""
        event = _json_or_none(rec.payload)
        if not isinstance(event, dict):
            self.notes.append(f"{self.path}:{rec.line}: chromium event payload is not JSON")
            return
        ecid = str((event.get("args") or {}).get("compile_id") or rec.compile_id or "")
        if not ecid:
            return
        if event.get("name") == "dynamo" and event.get("ph") == "B":
            if ecid in self.sessions[-1] and self.sessions[-1][ecid].dynamo_begun:
                self.sessions.append({})
            self.frame(ecid).dynamo_begun = True
        _add_phase(self.frame(ecid), event)

    def dynamo_start(self, rec: TraceRecord, cid: str) -> None:
        """A frame's compile starts: a compile id this session already located starts a new
        session (Dynamo was reset); the frame is named by the top of its stack."""
        current = self.sessions[-1].get(cid)
        if current is not None and current.location is not None:
            self.sessions.append({})
        f = self.frame(cid)
        stack = rec.body.get("stack") if isinstance(rec.body, dict) else None
        if isinstance(stack, list) and stack and isinstance(stack[-1], dict):
            top = stack[-1]
            name = self.strings.get(_opt_int(top.get("filename")) or -1, str(top.get("filename")))
            f.location, f.function = f"{name}:{top.get('line')}", str(top.get("name"))


def _fill(f: _Frame, rec: TraceRecord) -> None:
    """Files one record of a frame's compile: its graph, metrics, output code, AOT graphs,
    guards and named artifacts (a graph break, the recompile reasons, any other)."""
    body, kind = rec.body, rec.kind
    if kind == "dynamo_output_graph":
        f.graph = True
        f.artifacts["dynamo_output_graph"] = rec.payload
    elif kind == "compilation_metrics" and isinstance(body, dict):
        f.metrics = dict(body)
    elif kind == "compilation_metrics_runtime" and isinstance(body, dict):
        f.runtime = {k: v for k, v in body.items() if v is not None}
    elif kind == "inductor_output_code":
        f.artifacts["inductor_output_code"] = rec.payload
        match = AOT_ID_RE.match(rec.payload.splitlines()[0] if rec.payload else "")
        if match:
            f.aot_ids.append(match.group(1))
    elif (kind.startswith("aot_") and kind.endswith("_graph")) or kind == "dynamo_cpp_guards_str":
        f.artifacts[kind] = rec.payload
    elif kind == "artifact" and isinstance(body, dict):
        _fill_artifact(f, str(body.get("name")), rec.payload)


def _fill_artifact(f: _Frame, name: str, payload: str) -> None:
    if name == "dynamo_graph_break_reason":
        at = _BREAK_AT.search(payload)
        loc = f"{at.group(1)}:{at.group(2)}" if at else None
        f.breaks.append((break_headline(payload), loc, payload))
    elif name == "recompile_reasons":
        f.recompile = _recompile_text(payload)
    else:
        f.artifacts[name] = payload


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _recompile_text(payload: str) -> str:
    data = _json_or_none(payload)
    if isinstance(data, list):
        return "; ".join(str(x) for x in data)
    return str(data) if isinstance(data, str) else payload.strip()


def _add_phase(f: _Frame, event: Mapping[str, Any]) -> None:
    """Accumulates one chromium B/E (or X) event into the frame's phase durations."""
    name, ph, ts = str(event.get("name")), event.get("ph"), _opt_float(event.get("ts"))
    if ts is None:
        return
    if ph == "B":
        f.open.setdefault(name, []).append(ts)
    elif ph == "E" and f.open.get(name):
        f.phases[name] += (ts - f.open[name].pop()) * 1e-6
    elif ph == "X" and (dur := _opt_float(event.get("dur"))) is not None:
        f.phases[name] += dur * 1e-6


_KERNEL_COMPILE_PHASES = ("async_compile.precompile", "compile_file")


def compile_times(frames: Iterable[FrameCompile]) -> CompileTimes:
    """Return the compile-time breakdown summed over frames.

    Chromium phases are used when the log has them (`entire_frame_compile`,
    `bytecode_tracing`, `build_guards`, `backend_compile`, `inductor_compile`, the kernel
    compile, `CachingAutotuner.benchmark_all_configs`); otherwise the compilation-metrics
    fields (`entire_frame_compile_time_s`, `backend_compile_time_s`,
    `inductor_compile_time_s`, `triton_compile_time_us`, the autotune fields).
    """
    frames = list(frames)
    phases: Counter[str] = Counter()
    for f in frames:
        phases.update(f.phases_s)
    if phases.get("entire_frame_compile"):
        kernel = sum(phases.get(p, 0.0) for p in _KERNEL_COMPILE_PHASES)
        inductor = phases.get("inductor_compile")
        backend = phases.get("backend_compile")
        return CompileTimes(
            total_s=phases["entire_frame_compile"],
            dynamo_tracing_s=phases.get("bytecode_tracing"),
            guards_s=phases.get("build_guards"),
            aot_s=(backend - (inductor or 0.0)) if backend is not None else None,
            inductor_s=(inductor - kernel) if inductor is not None else None,
            kernel_compile_s=kernel if any(p in phases for p in _KERNEL_COMPILE_PHASES) else None,
            autotune_s=phases.get("CachingAutotuner.benchmark_all_configs"),
            source="chromium_events",
        )

    def total(key: str, scale: float = 1.0) -> float | None:
        values = [_opt_float(f.metrics.get(key)) for f in frames]
        present = [v * scale for v in values if v is not None]
        return sum(present) if present else None

    inductor = total("inductor_compile_time_s")
    backend = total("backend_compile_time_s")
    kernel = total("triton_compile_time_us", 1e-6)
    autotune = [
        v
        for v in (
            total("compile_time_autotune_time_us", 1e-6),
            total("runtime_triton_autotune_time_us", 1e-6),
        )
        if v is not None
    ]
    return CompileTimes(
        total_s=total("entire_frame_compile_time_s"),
        dynamo_tracing_s=None,
        guards_s=None,
        aot_s=(backend - (inductor or 0.0)) if backend is not None else None,
        inductor_s=(inductor - (kernel or 0.0)) if inductor is not None else None,
        kernel_compile_s=kernel,
        autotune_s=sum(autotune) if autotune else None,
        source="compilation_metrics",
    )
