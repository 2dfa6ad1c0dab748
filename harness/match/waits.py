"""Who waits for whom at a collective: each device's arrival at each call, and the straggler.

A collective cannot finish on any device before every device of its group has arrived, so
the devices that start it early wait for the last one. From the steady window's events
attributed to collectives (`harness.match.comm.collective_events`), per step and collective,
the n-th event of each device is that device's n-th call; a call's arrivals are its events'
starts. Per call and device:
- its **lag**: how long after the group's first device it arrived;
- its **wait**: how long before the group's last device it arrived, at most its event's
  length (the time its collective kernel or CPU thunk spent for the others).

Per device and step, the waits and lags are summed; the **wait share** divides the wait by
the device's step (its first event's start to its last event's end in the step). The
**straggler** is the device that arrived last at the most calls (ties: the larger lag).

The arrivals of one profile share a clock: the CPU's devices are threads of one process,
and the GPU's events are put on the host's clock by the profiler. Calls whose devices do not
all show the same number of events in a step are left out, and counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from harness.profile.devices import device_of
from harness.profile.events import DeviceEvent


@dataclass(frozen=True)
class DeviceWait:
    """One device's waits at collectives, per step (seconds)."""

    device: int
    waited_s: float
    lag_s: float
    step_s: float
    wait_share: float | None
    last_arrivals: int
    calls: int


@dataclass(frozen=True)
class Waits:
    """Every device's waits, the straggler, and the calls that could not be paired."""

    per_device: tuple[DeviceWait, ...]
    straggler: int | None
    straggler_lag_s: float | None
    calls: int
    unpaired: int


def _groups(
    name: str, devices: Sequence[int], groups: Mapping[str, Sequence[Sequence[int]]]
) -> list[tuple[int, ...]]:
    """The device groups of a collective among the profiled devices (all of them, as one
    group, when the HLO's groups are unknown or name none of these devices)."""
    known = [tuple(d for d in g if d in devices) for g in groups.get(name, ())]
    known = [g for g in known if len(g) > 1]
    return known or [tuple(devices)]


def collective_waits(
    attributed: Sequence[tuple[DeviceEvent, object]],
    steps: int,
    groups: Mapping[str, Sequence[Sequence[int]]],
    step_spans: Mapping[tuple[int, int | None], float],
) -> Waits:
    """Returns each device's waits at collectives per step.

    `attributed`: (event, its collective) pairs (the collective has a `name`); `groups`: per
    collective name its device groups; `step_spans`: per (device, step) its step in seconds.
    """
    by_call = _calls_by_device(attributed)
    devices = sorted({d for per in by_call.values() for d in per})
    waited: dict[int, float] = defaultdict(float)
    lag: dict[int, float] = defaultdict(float)
    last: dict[int, int] = defaultdict(int)
    count: dict[int, int] = defaultdict(int)
    paired = unpaired = 0
    for (_, name), per in by_call.items():
        for group in _groups(name, devices, groups):
            mine = {d: per[d] for d in group if d in per}
            counts = {len(v) for v in mine.values()}
            if len(mine) < 2 or len(counts) != 1:
                unpaired += max((len(v) for v in mine.values()), default=0)
                continue
            for late, arrivals in _arrivals(mine, counts.pop()):
                last[late] += 1
                paired += 1
                for d, (lag_s, waited_s) in arrivals.items():
                    count[d] += 1
                    lag[d] += lag_s
                    waited[d] += waited_s
    per_step = max(1, steps)
    rows = [
        DeviceWait(
            device=d,
            waited_s=waited[d] / per_step,
            lag_s=lag[d] / per_step,
            step_s=(step_s := _step_s(d, step_spans, per_step)),
            wait_share=waited[d] / per_step / step_s if step_s > 0 else None,
            last_arrivals=last[d],
            calls=count[d],
        )
        for d in devices
    ]
    straggler = max(rows, key=lambda r: (r.last_arrivals, r.lag_s), default=None)
    if straggler is not None and straggler.last_arrivals == 0:
        straggler = None
    return Waits(
        per_device=tuple(rows),
        straggler=straggler.device if straggler else None,
        straggler_lag_s=straggler.lag_s if straggler else None,
        calls=paired,
        unpaired=unpaired,
    )


def _calls_by_device(
    attributed: Sequence[tuple[DeviceEvent, object]],
) -> dict[tuple[int | None, str], dict[int, list[DeviceEvent]]]:
    """Per (step, collective name), each device's events of it, in start order."""
    calls: dict[tuple[int | None, str, int], list[DeviceEvent]] = defaultdict(list)
    for e, c in attributed:
        calls[(e.step, c.name, device_of(e))].append(e)  # type: ignore[attr-defined]
    by_call: dict[tuple[int | None, str], dict[int, list[DeviceEvent]]] = defaultdict(dict)
    for (step, name, device), events in calls.items():
        by_call[(step, name)][device] = sorted(events, key=lambda e: e.start_ns)
    return by_call


def _arrivals(
    mine: Mapping[int, Sequence[DeviceEvent]], calls: int
) -> Iterator[tuple[int, dict[int, tuple[float, float]]]]:
    """For each of a group's `calls` (the i-th event of each of its devices): the device that
    arrived last, and each device's lag and wait in seconds."""
    for i in range(calls):
        starts = {d: v[i].start_ns for d, v in mine.items()}
        first, final = min(starts.values()), max(starts.values())
        late = max(starts, key=lambda d: (starts[d], d))
        yield (
            late,
            {
                d: ((starts[d] - first) * 1e-9, min(final - starts[d], v[i].duration_ns) * 1e-9)
                for d, v in mine.items()
            },
        )


def _step_s(device: int, step_spans: Mapping[tuple[int, int | None], float], steps: int) -> float:
    """The device's mean step in seconds over `steps`."""
    return sum(t for (dev, _), t in step_spans.items() if dev == device) / steps
