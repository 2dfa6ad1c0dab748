"""Which device ran each profiled event, and the events of each device.

On the GPU every device has its own `/device:GPU:N` plane, so the plane says it. On the CPU
with forced host devices (`jax_num_cpu_devices=4` or
`XLA_FLAGS=--xla_force_host_platform_device_count=4`) every device's thunks land on the one
`/host:CPU` plane, on `tf_XLAPjRtCpuClient/<thread id>` lines. Threads are not devices: the
client's pool runs any device's thunks on any thread, and one thread ran thunks of devices 2,
3 and 3 in three consecutive steps of a jax 0.10.2 profile. Each thunk event carries the
device in its `device_ordinal` stat, and `run_id` (one id per execution, shared by all
devices of that step); `read_events_and_markers` copies both into `DeviceEvent`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.profile.events import DeviceEvent, plane_ordinal


@dataclass(frozen=True)
class DeviceEvents:
    """The events one device ran, in time order; `device` is its ordinal (jax's device id
    on one host)."""

    device: int
    events: tuple[DeviceEvent, ...]

    @property
    def streams(self) -> tuple[str, ...]:
        """The lines (GPU streams or CPU threads) its events ran on, sorted."""
        return tuple(sorted({e.stream for e in self.events}))


def device_of(event: DeviceEvent) -> int:
    """Returns the ordinal of the device that ran `event`.

    Prefers the event's `device_ordinal`; else the N of a `/device:GPU:N` plane. Raises
    ValueError for a host event without a `device_ordinal` stat: which CPU device ran it is
    then unknowable (see `split_by_device` for single-device profiles).
    """
    if event.device_ordinal is not None:
        return event.device_ordinal
    ordinal = plane_ordinal(event.device)
    if ordinal is None:
        raise ValueError(
            f"event {event.name!r} (hlo_op {event.hlo_op}) on {event.device} line "
            f"{event.stream!r} carries no device_ordinal: cannot tell which device ran it"
        )
    return ordinal


def split_by_device(events: Iterable[DeviceEvent]) -> tuple[DeviceEvents, ...]:
    """Returns the events of each device, devices in ordinal order, events in time order.

    A profile where no event names its device (a single-device CPU profile from a jax that
    writes no `device_ordinal`) is device 0; a mix of named and unnamed host events raises
    ValueError, since the unnamed ones could belong to any device.
    """
    rows = list(events)
    if rows and all(e.device_ordinal is None and plane_ordinal(e.device) is None for e in rows):
        return (DeviceEvents(0, tuple(sorted(rows, key=_order))),)
    by_device: dict[int, list[DeviceEvent]] = defaultdict(list)
    for e in rows:
        by_device[device_of(e)].append(e)
    return tuple(
        DeviceEvents(d, tuple(sorted(by_device[d], key=_order))) for d in sorted(by_device)
    )


def runs_by_step(events: Sequence[DeviceEvent]) -> dict[int | None, tuple[int, ...]]:
    """Returns the CPU `run_id`s seen in each step (GPU events have none).

    One execution per step gives one run_id per step: a check that step markers and device
    split agree (every device of a step ran as part of the same execution).
    """
    runs: dict[int | None, set[int]] = defaultdict(set)
    for e in events:
        if e.run_id is not None:
            runs[e.step].add(e.run_id)
    return {step: tuple(sorted(ids)) for step, ids in runs.items()}


def _order(e: DeviceEvent) -> tuple[float, str]:
    return (e.start_ns, e.stream)
