"""What a match left open: the device time it could not attribute, and the events it placed
where another command could have run them (ambiguous).

A typed record (`AttributionGaps`) that kernels.json, summary.json's `profile.gaps` and the
analyze report carry; the reports render it above their rankings when anything is missing,
because a ranking without those events is a ranking of part of the step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.profile.events import DeviceEvent
from harness.records import doc

TOP_UNATTRIBUTED = 12


@dataclass(frozen=True)
class UnattributedKernel:
    """The unattributed events of one name."""

    name: str = doc("the event's name: a kernel, `Memset …` or `Memcpy…`", "")
    kind: str = doc("kernel, memset, memcpy or host_thunk", "")
    events_per_step: float = doc("how many a step", 0.0)
    time_per_step_s: float = doc("their summed duration a step", 0.0)
    reason: str = doc("why the first of them is unattributed (kernels.json has each)", "")


@dataclass(frozen=True)
class AttributionGaps:
    """The steady window's unattributed device time and ambiguous matches."""

    ambiguous_fraction: float = doc(
        "events matched to one of several commands the trace cannot tell apart / all events",
        0.0,
    )
    unattributed_time_per_step_s: float = doc(
        "summed duration of the events no cluster holds, a step", 0.0
    )
    unattributed_share: float = doc(
        "that time / the summed duration of every event in the window", 0.0
    )
    unattributed: tuple[UnattributedKernel, ...] = doc(
        f"the unattributed events by name, longest first (at most {TOP_UNATTRIBUTED})", ()
    )

    @property
    def complete(self) -> bool:
        """True when every event was attributed."""
        return not self.unattributed and self.unattributed_time_per_step_s == 0.0


def gaps_of(rows: Iterable[tuple[DeviceEvent, bool, bool, str]], n_steps: int) -> AttributionGaps:
    """The gaps of a match, from (event, matched, ambiguous, reason) per event of the window."""
    total = ambiguous = 0
    total_ns = missing_ns = 0.0
    by_name: dict[tuple[str, str], list[float]] = defaultdict(list)
    reasons: dict[tuple[str, str], str] = {}
    for event, matched, is_ambiguous, reason in rows:
        total += 1
        total_ns += event.duration_ns
        ambiguous += bool(matched and is_ambiguous)
        if not matched:
            key = (event.name, event.kind)
            by_name[key].append(event.duration_ns)
            reasons.setdefault(key, reason)
            missing_ns += event.duration_ns
    steps = max(1, n_steps)
    names = sorted(by_name.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    return AttributionGaps(
        ambiguous_fraction=ambiguous / total if total else 0.0,
        unattributed_time_per_step_s=missing_ns * 1e-9 / steps,
        unattributed_share=missing_ns / total_ns if total_ns else 0.0,
        unattributed=tuple(
            UnattributedKernel(
                name,
                kind,
                len(durations) / steps,
                sum(durations) * 1e-9 / steps,
                reasons[(name, kind)],
            )
            for (name, kind), durations in names[:TOP_UNATTRIBUTED]
        ),
    )
