"""Communication on the device: collective time per device and step, and how much of it shows.

Input: the profile's device events, the clusters of each HLO module (for attribution, through
`match_events`) and the collectives of each module (`harness.hlo.collectives`). An event is
communication when its `hlo_op` names a collective: the NCCL kernel of a collective carries
the collective's instruction name (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL` has
`hlo_op=all-reduce.3` in the H200 fixture). NCCL kernel names are never used: their
algorithm/protocol part (RING, LL, ...) is not a reliable description (NVIDIA/nccl#2196). On
the CPU the collective's thunk (`all-reduce`, `reduce_scatter.7`, ...) plays the kernel's role;
its time includes waiting for the other devices at the rendezvous.

Per device and step:
- compute: the union of the device's non-collective events (kernels, memsets, copies);
- communication: the union of its collective events;
- exposed communication: collective time not covered by compute on the device's other
  streams (CPU: other threads); compute on the collective's own stream runs before or after
  it, never beside it, so a collective on the compute stream is exposed in full;
- idle: the device's span in the step (first start to last end) minus the union of all.

The link model (`compare_with_link`) divides each collective's bytes per device (the ring
model in `harness.hlo.collectives`) by a link bandwidth measured elsewhere. The achieved
bandwidth, bytes sent per device over the measured time, is what nccl-tests calls bus
bandwidth for these collectives.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import mean
from typing import Any, Protocol

from harness.common.intervals import Interval, merge
from harness.hlo.collectives import COLLECTIVES
from harness.match.match import Attribution, ClusterLike, ModuleKey, match_events
from harness.profile.devices import device_of
from harness.profile.events import DeviceEvent


class CollectiveLike(Protocol):
    """What this module reads from a `harness.hlo.collectives.Collective`."""

    @property
    def name(self) -> str: ...
    @property
    def opcode(self) -> str: ...
    @property
    def participants(self) -> int: ...
    @property
    def payload_bytes(self) -> int: ...
    @property
    def sent_bytes(self) -> int: ...
    @property
    def hlo_ops(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class DeviceStep:
    """One device in one step (step None: the whole unmarked window). Times in seconds."""

    device: int
    step: int | None
    events: int
    collective_events: int
    span_s: float
    busy_s: float
    compute_s: float
    communication_s: float
    overlapped_s: float
    exposed_s: float
    idle_s: float
    collective_s: tuple[tuple[str, float], ...]
    # Per collective, the part of its time no compute on another stream hides.
    exposed_collective_s: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class DeviceSummary:
    """One device's DeviceStep figures averaged per step."""

    device: int
    events_per_step: float
    compute_s: float
    communication_s: float
    overlapped_s: float
    exposed_s: float
    idle_s: float
    busy_s: float


@dataclass(frozen=True)
class CollectiveTiming:
    """One collective's measured time per step on each device and what that achieves.

    `time_s` is the mean over devices of their per-step time; `achieved_bandwidth_Bps` is
    `sent_bytes / time_s` (bytes each device sends under the ring model). `events_per_step`
    counts events per device and step (1 for one NCCL kernel or one CPU thunk).
    """

    name: str
    opcode: str
    participants: int
    payload_bytes: int
    sent_bytes: int
    events_per_step: float
    per_device_s: tuple[tuple[int, float], ...]
    time_s: float
    achieved_bandwidth_Bps: float | None


@dataclass(frozen=True)
class CommReport:
    """Compute, communication, exposed and idle time per device and step, and per collective."""

    steps: int
    marked_steps: bool
    devices: tuple[int, ...]
    events_in_window: int
    matched_fraction: float
    communication_events: int
    device_steps: tuple[DeviceStep, ...]
    per_device: tuple[DeviceSummary, ...]
    collectives: tuple[CollectiveTiming, ...]
    unmatched: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    collective_like_events: int = 0
    collective_like_matched: int = 0

    @property
    def collective_matched_fraction(self) -> float | None:
        """Returns the share of collective-looking events attributed to a collective (None
        when the window has none)."""
        if not self.collective_like_events:
            return None
        return self.collective_like_matched / self.collective_like_events

    def device(self, device: int) -> DeviceSummary:
        """Returns one device's per-step summary; KeyError names the known devices."""
        for d in self.per_device:
            if d.device == device:
                return d
        raise KeyError(f"device {device} not in the profile (devices {list(self.devices)})")

    def collective(self, name: str) -> CollectiveTiming:
        """Returns one collective's timing; KeyError names the known collectives."""
        for c in self.collectives:
            if c.name == name:
                return c
        raise KeyError(f"collective {name!r} not timed ({[c.name for c in self.collectives]})")

    def to_json(self) -> dict[str, Any]:
        """Returns comm.json: every figure, tuples as lists or objects."""
        return {
            "steps": self.steps,
            "marked_steps": self.marked_steps,
            "devices": list(self.devices),
            "events_in_window": self.events_in_window,
            "matched_fraction": self.matched_fraction,
            "communication_events": self.communication_events,
            "per_device": [asdict(d) for d in self.per_device],
            "device_steps": [
                asdict(s)
                | {
                    "collective_s": dict(s.collective_s),
                    "exposed_collective_s": dict(s.exposed_collective_s),
                }
                for s in self.device_steps
            ],
            "collectives": [
                asdict(c) | {"per_device_s": {str(d): t for d, t in c.per_device_s}}
                for c in self.collectives
            ],
            "unmatched": list(self.unmatched),
            "notes": list(self.notes),
            "collective_like_events": self.collective_like_events,
            "collective_like_matched": self.collective_like_matched,
            "collective_matched_fraction": self.collective_matched_fraction,
        }


def communication_report(
    events: Sequence[DeviceEvent],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    collectives_by_module: Mapping[ModuleKey, Sequence[CollectiveLike]],
    steps: int | None = None,
) -> CommReport:
    """Returns the communication report of the steady window of `events`.

    The window and step count follow `match_events` (marked steps, else `steps` calls). An
    event counts as matched when `match_events` attributes it or its `hlo_op` names a
    collective (an `async-start` wrapper's events name the wrapper, which is no cluster).
    """
    match = match_events(events, clusters_by_module, steps)
    window = [a.event for a in match.attributions]
    comm_of = [_collective_for(a, collectives_by_module) for a in match.attributions]
    matched = sum(
        a.matched or c is not None for a, c in zip(match.attributions, comm_of, strict=True)
    )
    groups: dict[tuple[int, int | None], list[tuple[DeviceEvent, CollectiveLike | None]]]
    groups = defaultdict(list)
    for event, comm in zip(window, comm_of, strict=True):
        groups[(device_of(event), event.step)].append((event, comm))
    device_steps = tuple(
        _device_step(d, s, rows) for (d, s), rows in sorted(groups.items(), key=_key)
    )
    devices = tuple(sorted({d for d, _ in groups}))
    unmatched = tuple(
        a.reason
        for a, c in zip(match.attributions, comm_of, strict=True)
        if not a.matched and c is None
    )
    known = {c.name: c for cs in collectives_by_module.values() for c in cs}
    # Collective events: those attributed to a collective, and those that look like one but
    # were not (the fraction's denominator must include the ones attribution missed).
    like = [c is not None or looks_collective(e) for e, c in zip(window, comm_of, strict=True)]
    return CommReport(
        steps=match.steps,
        marked_steps=match.marked_steps,
        devices=devices,
        events_in_window=len(window),
        matched_fraction=matched / len(window) if window else 0.0,
        communication_events=sum(c is not None for c in comm_of),
        device_steps=device_steps,
        per_device=tuple(_summary(d, device_steps, match.steps) for d in devices),
        collectives=_timings(window, comm_of, known, devices, match.steps),
        unmatched=unmatched,
        notes=match.notes,
        collective_like_events=sum(like),
        collective_like_matched=sum(c is not None for c in comm_of),
    )


def collective_events(
    events: Sequence[DeviceEvent],
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    collectives_by_module: Mapping[ModuleKey, Sequence[CollectiveLike]],
    steps: int | None = None,
) -> tuple[int, tuple[tuple[DeviceEvent, CollectiveLike], ...]]:
    """Returns (the window's steps, each event of the steady window attributed to a
    collective with its collective), attributed as `communication_report` does."""
    match = match_events(events, clusters_by_module, steps)
    found = ((a.event, _collective_for(a, collectives_by_module)) for a in match.attributions)
    return match.steps, tuple((e, c) for e, c in found if c is not None)


_COLLECTIVE_NAME = re.compile(
    r"^(?:"
    + "|".join(sorted(COLLECTIVES, key=len, reverse=True))
    + r")(?:-start|-done)?(?:[.\d]|$)"
)


def looks_collective(event: DeviceEvent) -> bool:
    """True when an event's hlo_op or name is a collective's (`all-reduce.3`, the CPU thunk
    `reduce_scatter.7`) or it is an NCCL kernel: a check on attribution, never a way to
    attribute."""
    for text in (event.hlo_op or "", event.name):
        if _COLLECTIVE_NAME.match(text.replace("_", "-")) or text.lower().startswith("nccl"):
            return True
    return False


def _key(item: tuple[tuple[int, int | None], Any]) -> tuple[int, int]:
    (device, step), _ = item
    return (device, -1 if step is None else step)


def _collective_for(
    a: Attribution, collectives_by_module: Mapping[ModuleKey, Sequence[CollectiveLike]]
) -> CollectiveLike | None:
    e = a.event
    if e.hlo_module is None:
        return None
    found = None
    if e.program_id is not None:
        found = collectives_by_module.get((e.hlo_module, e.program_id))
    if found is None:
        found = collectives_by_module.get(e.hlo_module, ())
    for op in (a.cluster, e.hlo_op):
        if op:
            for c in found:
                if op in c.hlo_ops:
                    return c
    return None


def _exposed(
    rows: Sequence[tuple[DeviceEvent, CollectiveLike | None]],
    comm: Sequence[DeviceEvent],
    compute: Sequence[DeviceEvent],
) -> tuple[list[Interval], dict[str, list[Interval]]]:
    """The exposed intervals of a device's step, in all and per collective name."""
    # Exposed: collective time that no compute on another stream of this device hides. Compute
    # on the collective's own stream cannot run beside it; where timestamps of one stream touch
    # (sub-microsecond in the H200 profiles) that is no overlap either.
    exposed_iv: list[Interval] = []
    exposed_of: dict[str, list[Interval]] = defaultdict(list)
    for stream in {e.stream for e in comm}:
        others = merge(_intervals(e for e in compute if e.stream != stream))
        mine = merge(_intervals(e for e in comm if e.stream == stream))
        exposed_iv.extend(subtract(mine, others))
        for name in {c.name for e, c in rows if c is not None and e.stream == stream}:
            theirs = (e for e, c in rows if c is not None and c.name == name and e.stream == stream)
            exposed_of[name].extend(subtract(merge(_intervals(theirs)), others))
    return exposed_iv, exposed_of


def _time_per_collective(
    rows: Sequence[tuple[DeviceEvent, CollectiveLike | None]],
) -> dict[str, float]:
    """Seconds of the device's step spent in each collective's events, by its name."""
    per_collective: dict[str, float] = defaultdict(float)
    for e, c in rows:
        if c is not None:
            per_collective[c.name] += e.duration_ns * 1e-9
    return per_collective


def _device_step(
    device: int, step: int | None, rows: list[tuple[DeviceEvent, CollectiveLike | None]]
) -> DeviceStep:
    comm = [e for e, c in rows if c is not None]
    compute = [e for e, c in rows if c is None]
    comm_iv, compute_iv = merge(_intervals(comm)), merge(_intervals(compute))
    busy = length(merge(comm_iv + compute_iv))
    exposed_iv, exposed_of = _exposed(rows, comm, compute)
    exposed = length(merge(exposed_iv))
    span = max(e.end_ns for e, _ in rows) - min(e.start_ns for e, _ in rows)
    per_collective = _time_per_collective(rows)
    return DeviceStep(
        device=device,
        step=step,
        events=len(rows),
        collective_events=len(comm),
        span_s=span * 1e-9,
        busy_s=busy * 1e-9,
        compute_s=length(compute_iv) * 1e-9,
        communication_s=length(comm_iv) * 1e-9,
        overlapped_s=(length(comm_iv) - exposed) * 1e-9,
        exposed_s=exposed * 1e-9,
        idle_s=(span - busy) * 1e-9,
        collective_s=tuple(sorted(per_collective.items())),
        exposed_collective_s=tuple(
            sorted((n, length(merge(iv)) * 1e-9) for n, iv in exposed_of.items())
        ),
    )


def _summary(device: int, device_steps: Sequence[DeviceStep], n_steps: int) -> DeviceSummary:
    rows = [s for s in device_steps if s.device == device]

    def per_step(attr: str) -> float:
        return sum(getattr(s, attr) for s in rows) / n_steps

    return DeviceSummary(
        device=device,
        events_per_step=sum(s.events for s in rows) / n_steps,
        compute_s=per_step("compute_s"),
        communication_s=per_step("communication_s"),
        overlapped_s=per_step("overlapped_s"),
        exposed_s=per_step("exposed_s"),
        idle_s=per_step("idle_s"),
        busy_s=per_step("busy_s"),
    )


def _timings(
    window: Sequence[DeviceEvent],
    comm_of: Sequence[CollectiveLike | None],
    known: Mapping[str, CollectiveLike],
    devices: Sequence[int],
    n_steps: int,
) -> tuple[CollectiveTiming, ...]:
    spent: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    count: dict[str, int] = defaultdict(int)
    for e, c in zip(window, comm_of, strict=True):
        if c is not None:
            spent[c.name][device_of(e)] += e.duration_ns * 1e-9
            count[c.name] += 1
    out = []
    for name in sorted(spent):
        c = known[name]
        per_device = tuple((d, spent[name][d] / n_steps) for d in devices if d in spent[name])
        time_s = mean(t for _, t in per_device)
        out.append(
            CollectiveTiming(
                name=name,
                opcode=c.opcode,
                participants=c.participants,
                payload_bytes=c.payload_bytes,
                sent_bytes=c.sent_bytes,
                events_per_step=count[name] / n_steps / len(per_device),
                per_device_s=per_device,
                time_s=time_s,
                achieved_bandwidth_Bps=c.sent_bytes / time_s if time_s > 0 else None,
            )
        )
    return tuple(out)


# --- intervals ----------------------------------------------------------------------------------


def _intervals(events: Iterable[DeviceEvent]) -> list[Interval]:
    return [(e.start_ns, e.end_ns) for e in events]


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Returns the parts of sorted, disjoint intervals `a` that sorted, disjoint `b` leaves."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        cur = start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def length(intervals: Iterable[Interval]) -> float:
    """Returns the summed length of disjoint intervals."""
    return sum(end - start for start, end in intervals)


# --- link-bandwidth model -----------------------------------------------------------------------


@dataclass(frozen=True)
class LinkComparison:
    """A collective's expected time over one link against its measured time.

    `expected_s` = latency + sent_bytes / link bandwidth; `efficiency` = expected / achieved
    time (1.0: the collective ran at link speed; above 1: faster than the model allows, so
    the bandwidth or the byte model is wrong).
    """

    collective: str
    opcode: str
    sent_bytes: int
    link_bandwidth_Bps: float
    latency_s: float
    expected_s: float
    achieved_s: float
    achieved_bandwidth_Bps: float | None
    efficiency: float | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def expected_time_s(sent_bytes: float, link_bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Returns the time to send `sent_bytes` over a link of `link_bandwidth_Bps` bytes/s, plus a
    fixed latency. Raises ValueError for a bandwidth <= 0 or negative bytes or latency."""
    if link_bandwidth_Bps <= 0:
        raise ValueError(f"link bandwidth must be > 0 bytes/s, got {link_bandwidth_Bps}")
    if sent_bytes < 0 or latency_s < 0:
        raise ValueError(f"bytes and latency must be >= 0, got {sent_bytes} and {latency_s}")
    return latency_s + sent_bytes / link_bandwidth_Bps


def compare_with_link(
    timings: Iterable[CollectiveTiming], link_bandwidth_Bps: float, latency_s: float = 0.0
) -> tuple[LinkComparison, ...]:
    """Returns, per timed collective, the link model's time next to the measured one.

    The bandwidth is a measurement the caller brings (e.g. a point-to-point copy test at
    run time); this only does the arithmetic.
    """
    out = []
    for t in timings:
        expected = expected_time_s(t.sent_bytes, link_bandwidth_Bps, latency_s)
        out.append(
            LinkComparison(
                collective=t.name,
                opcode=t.opcode,
                sent_bytes=t.sent_bytes,
                link_bandwidth_Bps=link_bandwidth_Bps,
                latency_s=latency_s,
                expected_s=expected,
                achieved_s=t.time_s,
                achieved_bandwidth_Bps=t.achieved_bandwidth_Bps,
                efficiency=expected / t.time_s if t.time_s > 0 else None,
            )
        )
    return tuple(out)
