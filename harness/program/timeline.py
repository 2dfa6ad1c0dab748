"""The attributed timeline: every device event of the profile as a slice named by its cluster,
as Chrome trace JSON that Perfetto (ui.perfetto.dev, "Open trace file") and chrome://tracing
open offline. Under command buffers XProf shows only `command_buffer_N`; here each event says
its cluster, kernel, source line, HLO op, command buffer and loop iteration.

Tracks: one process per device, one thread per stream, plus a `steps` track (a slice per step,
from the step markers where the profile has them, else the step's events' extent) and a
`command buffers` track (a slice per execution of each command buffer). The loop iteration of
an event is the number of times its cluster ran before in the same step: 0 outside loops, the
iteration inside a loop body.

Pure: `timeline_of` returns the record; the analysis writes it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from harness.match.match import COMMAND_BUFFER_RE, Attribution
from harness.profile.events import StepMarker
from harness.records.run_files import TimelineFile, TraceEvent

STEPS_TID, BUFFERS_TID = 0, 1  # the first tracks of each device; streams follow


def _us(ns: float) -> float:
    return ns / 1e3


def _buffer_slices(rows: Sequence[tuple[Attribution, int]], pid: int) -> list[TraceEvent]:
    """A slice per execution of each command buffer: a new execution starts when a kernel
    placed by its name runs again on its stream (the next loop iteration) or the step changes."""
    by_buffer: dict[str, list[Attribution]] = defaultdict(list)
    for a, _ in rows:
        op = a.event.hlo_op or ""
        if COMMAND_BUFFER_RE.match(op):
            by_buffer[op].append(a)
    out = []
    for name, events in by_buffer.items():
        events.sort(key=lambda a: a.event.start_ns)
        runs: list[list[Attribution]] = []
        seen: set[tuple[object, str | None]] = set()
        step = object()
        for a in events:
            # Only XLA's own kernels mark an iteration: copies and library calls may repeat
            # a cluster within one.
            anchor = a.rule == "thunk_kernel"
            key = (a.event.stream, a.cluster or a.event.name)
            if not runs or a.event.step != step or (anchor and key in seen):
                runs.append([])
                seen = set()
            step = a.event.step
            if anchor:
                seen.add(key)
            runs[-1].append(a)
        for n, run in enumerate(runs):
            start = min(a.event.start_ns for a in run)
            end = max(a.event.end_ns for a in run)
            out.append(
                TraceEvent(
                    name=name,
                    ph="X",
                    pid=pid,
                    tid=BUFFERS_TID,
                    ts=_us(start),
                    dur=_us(end - start),
                    cat="command_buffer",
                    args={"events": len(run), "execution": n, "step": run[0].event.step},
                )
            )
    return out


def _step_slices(
    rows: Sequence[tuple[Attribution, int]], pid: int, markers: Sequence[StepMarker]
) -> list[TraceEvent]:
    spans: dict[int, list[float]] = {}
    for m in markers:
        spans[m.step] = [m.start_ns, m.end_ns]
    if not spans:
        for a, _ in rows:
            if a.event.step is None:
                continue
            lo, hi = spans.setdefault(a.event.step, [a.event.start_ns, a.event.end_ns])
            spans[a.event.step] = [min(lo, a.event.start_ns), max(hi, a.event.end_ns)]
    return [
        TraceEvent(
            name=f"step {step}",
            ph="X",
            pid=pid,
            tid=STEPS_TID,
            ts=_us(lo),
            dur=_us(hi - lo),
            cat="step",
            args={"step": step},
        )
        for step, (lo, hi) in sorted(spans.items())
    ]


def _name_track(pid: int, tid: int | None, name: str) -> TraceEvent:
    if tid is None:
        return TraceEvent("process_name", "M", pid, 0, args={"name": name})
    return TraceEvent("thread_name", "M", pid, tid, args={"name": name})


def timeline_of(
    attributions: Sequence[Attribution],
    lines: Mapping[tuple[str | None, str], Sequence[str]],
    markers: Sequence[StepMarker] = (),
) -> TimelineFile:
    """The timeline of a profile's attributed events. `lines`: (module, cluster) -> the
    cluster's source lines (the first is shown); `markers`: the host's step windows."""
    devices = {d: i + 1 for i, d in enumerate(sorted({a.event.device for a in attributions}))}
    streams: dict[tuple[str, str], int] = {}
    for a in sorted(attributions, key=lambda a: (a.event.device, a.event.stream)):
        key = (a.event.device, a.event.stream)
        if key not in streams:
            streams[key] = BUFFERS_TID + 1 + sum(1 for d, _ in streams if d == a.event.device)
    runs: Counter[tuple[object, ...]] = Counter()
    slices: list[TraceEvent] = []
    by_device: dict[str, list[tuple[Attribution, int]]] = defaultdict(list)
    for a in sorted(attributions, key=lambda a: (a.event.start_ns, a.event.device)):
        e = a.event
        key = (e.step, a.module, a.cluster or e.name)
        iteration = runs[key]
        runs[key] += 1
        source = lines.get((a.module, a.cluster or ""), ())
        buffer = e.hlo_op if e.hlo_op and COMMAND_BUFFER_RE.match(e.hlo_op) else None
        slices.append(
            TraceEvent(
                name=a.cluster if a.matched and a.cluster else f"unattributed: {e.name}",
                ph="X",
                pid=devices[e.device],
                tid=streams[(e.device, e.stream)],
                ts=_us(e.start_ns),
                dur=_us(e.duration_ns),
                cat="cluster" if a.matched else "unattributed",
                args={
                    "kernel": e.name,
                    "kind": e.kind,
                    "source": source[0] if source else None,
                    "hlo_op": e.hlo_op,
                    "module": a.module,
                    "cluster": a.cluster,
                    "command_buffer": buffer,
                    "iteration": iteration,
                    "step": e.step,
                    "rule": a.rule,
                },
            )
        )
        by_device[e.device].append((a, iteration))
    tracks = []
    for device, pid in devices.items():
        tracks.append(_name_track(pid, None, device))
        tracks.append(_name_track(pid, STEPS_TID, "steps"))
        tracks.append(_name_track(pid, BUFFERS_TID, "command buffers"))
        slices.extend(_step_slices(by_device[device], pid, markers if pid == 1 else ()))
        slices.extend(_buffer_slices(by_device[device], pid))
    for (device, stream), tid in streams.items():
        tracks.append(_name_track(devices[device], tid, stream))
    slices.sort(key=lambda s: (s.ts, s.pid, s.tid))
    return TimelineFile(schema_version=1, traceEvents=(*tracks, *slices))
