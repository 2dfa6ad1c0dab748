"""The one reader of a variant's per-step, per-event data: each attributed device event of the
profiled steps, with its step and its cluster.

The events come through their one reader (harness.records.events_file: events.parquet, or an
old run's kernels.json). Everything that needs events per step (the decomposition's launch
gaps, compare's lines with their intervals) reads them here and never names the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.records import events_file
from harness.records.run_files import KernelEvent
from harness.store.runfolder import VariantFolder


@dataclass(frozen=True)
class StepEvent:
    """One device event of a profiled step."""

    step: int
    cluster: str | None  # the cluster it is attributed to (None: unattributed)
    device: str
    stream: str
    start_ns: float
    duration_ns: float

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns


def step_events(variant: VariantFolder) -> tuple[StepEvent, ...]:
    """Returns the variant's events of its profiled steps, in the profile's order (none where
    it has no profile, or an event carries no step)."""
    return of_events(events_file.read(variant))


def of_events(events: Iterable[KernelEvent]) -> tuple[StepEvent, ...]:
    """`step_events` of events already read (a saved run's `SavedVariant.kernels`)."""
    return tuple(
        StepEvent(e.step, e.cluster, e.device, e.stream, e.start_ns, e.duration_ns)
        for e in events
        if e.step is not None
    )


def mean_span_s(events: tuple[StepEvent, ...]) -> float | None:
    """The mean, over the profiled steps, of the time from a step's first event's start to its
    last event's end (s): the device's busy time plus the gaps between its launches. None
    without events."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for e in events:
        first[e.step] = min(first.get(e.step, e.start_ns), e.start_ns)
        last[e.step] = max(last.get(e.step, e.end_ns), e.end_ns)
    if not first:
        return None
    return sum(last[s] - first[s] for s in first) / len(first) * 1e-9
