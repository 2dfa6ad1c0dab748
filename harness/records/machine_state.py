"""The summary's record of what the machine was doing during the timing rounds (`noise.machine`).

Kept apart from harness.records.summary (over its size limit) as harness.match.gaps is; summary.py
holds it in `Noise`. `machine_state` folds the timing stage's per-round readings
(harness.timing.machine) into it, with no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.store.records import doc

# Pure arithmetic over two of harness.timing.machine's readings (the timing stage reads the
# machine; this library folds what it read, and the stage imports these from here).


def reading_number(reading: Mapping[str, Any], key: str) -> float | None:
    value = reading.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cpu_share(before: Mapping[str, Any], after: Mapping[str, Any]) -> float | None:
    """Returns the worker's CPU seconds over the round's wall seconds, or None without both."""
    w0, w1 = reading_number(before, "wall_s"), reading_number(after, "wall_s")
    c0, c1 = reading_number(before, "cpu_s"), reading_number(after, "cpu_s")
    if None in (w0, w1, c0, c1) or w1 <= w0:  # type: ignore[operator]
        return None
    return (c1 - c0) / (w1 - w0)  # type: ignore[operator]


def steal_share(before: Mapping[str, Any], after: Mapping[str, Any], cpus: int) -> float | None:
    """Returns the steal time over the round's wall time on all CPUs, or None without it."""
    w0, w1 = reading_number(before, "wall_s"), reading_number(after, "wall_s")
    s0, s1 = reading_number(before, "steal_s"), reading_number(after, "steal_s")
    if None in (w0, w1, s0, s1) or w1 <= w0:  # type: ignore[operator]
        return None
    return max(0.0, s1 - s0) / ((w1 - w0) * max(1, cpus))  # type: ignore[operator]


def others_share(before: Mapping[str, Any], after: Mapping[str, Any], cpus: int) -> float | None:
    """Returns the CPU time other processes took over the round's wall time on all CPUs: the
    machine's busy time less the worker's own CPU time; None without both readings."""
    w0, w1 = reading_number(before, "wall_s"), reading_number(after, "wall_s")
    b0, b1 = reading_number(before, "busy_s"), reading_number(after, "busy_s")
    c0, c1 = reading_number(before, "cpu_s"), reading_number(after, "cpu_s")
    if None in (w0, w1, b0, b1, c0, c1) or w1 <= w0:  # type: ignore[operator]
        return None
    others = (b1 - b0) - (c1 - c0)  # type: ignore[operator]
    return max(0.0, others) / ((w1 - w0) * max(1, cpus))  # type: ignore[operator]


def _stage_others_share(
    rounds: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any], Sequence[str]]], cpus: int
) -> float | None:
    """The other processes' share of all CPUs over every round together: a round of tens of
    milliseconds holds only a few of /proc/stat's 10 ms ticks, the stage holds hundreds."""
    parts = [
        (share * wall, wall)
        for _, b, a, _ in rounds
        if (share := others_share(b, a, cpus)) is not None
        and (wall := float(a["wall_s"]) - float(b["wall_s"])) > 0
    ]
    total = sum(w for _, w in parts)
    return sum(x for x, _ in parts) / total if total > 0 else None


@dataclass(frozen=True)
class MachineState:
    cpus: int | None = doc("the CPUs the timing worker could run on")
    load_1m: tuple[float, float] | None = doc(
        "the lowest and highest 1-minute load average read around the rounds"
    )
    cpu_share_min: float | None = doc(
        "the lowest share of a round's wall time the timing worker got as CPU time (under 1: "
        "it waited for a core, on a CPU platform)"
    )
    cpu_share_median: float | None = doc("the median of that share over the rounds")
    steal_max: float | None = doc(
        "the highest CPU steal over a round, a share of its wall time on all CPUs (/proc/stat; "
        "null where the kernel reports none)"
    )
    others_share: float | None = doc(
        "the CPU time other processes took during the rounds, a share of all CPUs' time (the "
        "machine's busy time in /proc/stat less the timing worker's own; null without it)"
    )
    flagged_rounds: tuple[str, ...] = doc(
        "rounds the machine's readings put in doubt, each `round N: why` (as timing.json's "
        "`context[].flags`)",
        (),
    )


def _values(readings: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [
        float(r[key])
        for r in readings
        if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)
    ]


def machine_state(
    rounds: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any], Sequence[str]]],
) -> MachineState | None:
    """Returns the machine's state over the rounds, each (round, before, after, flags); None
    when no round has machine readings (a run from before they were taken)."""
    readings = [r for _, before, after, _ in rounds for r in (before, after)]
    if not any("wall_s" in r for r in readings):
        return None
    counted = _values(readings, "cpus")
    cpus = int(counted[0]) if counted else None
    loads = _values(readings, "load_1m")
    shares = [s for _, b, a, _ in rounds if (s := cpu_share(b, a)) is not None]
    steals = [s for _, b, a, _ in rounds if (s := steal_share(b, a, cpus or 1)) is not None]
    shares.sort()
    return MachineState(
        cpus=cpus,
        load_1m=(min(loads), max(loads)) if loads else None,
        cpu_share_min=shares[0] if shares else None,
        cpu_share_median=shares[len(shares) // 2] if shares else None,
        steal_max=max(steals) if steals else None,
        others_share=_stage_others_share(rounds, cpus or 1),
        flagged_rounds=tuple(
            f"round {r}: {'; '.join(flags)}" for r, _, _, flags in rounds if flags
        ),
    )
