"""What a match left open: the device time it could not attribute, and the events it placed
where another command could have run them (ambiguous).

A typed record (`AttributionGaps`) that kernels.json, summary.json's `profile.gaps` and the
analyze report carry; the reports render it above their rankings when anything is missing,
because a ranking without those events is a ranking of part of the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import doc

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
