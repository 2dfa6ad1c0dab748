"""What a match left open, computed from its events: the record is harness.records.gaps."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from harness.profile.events import DeviceEvent
from harness.records.gaps import TOP_UNATTRIBUTED, AttributionGaps, UnattributedKernel


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
