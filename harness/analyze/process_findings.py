"""The findings of a study across processes: rules over processes.json, never over names.

Each rule is a pure function of the typed record (harness.summary_processes) that returns
its finding with the evidence, or None when it does not apply. The report renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.summary_processes import ProcessesSummary, VariantProcesses


@dataclass(frozen=True)
class SpreadFinding:
    """One variant whose processes' step times differ by more than the run can explain."""

    variant: str
    straggler: int
    fastest: int
    ratio: float
    ci95: tuple[float, float]
    floor: float
    text: str


def spread_finding(
    name: str, v: VariantProcesses, floor: float | None, resolved: bool | None
) -> SpreadFinding | None:
    """Returns the finding that variant `name` has a straggler, or None.

    It applies when the spread (the straggler's time over the fastest's, median of paired
    rounds) is resolvable: its 95% interval lies above 1.0, the excess exceeds the run's A/A
    noise floor, and the run passed its A/A check. The straggler is picked as the slowest
    median, which biases the ratio upwards; the interval and the floor are what keep an
    equal pair from being called a straggler.
    """
    if v.spread is None or v.spread_ci95 is None or v.straggler is None or v.fastest is None:
        return None
    if resolved is False or floor is None:
        return None
    lo, hi = v.spread_ci95
    if lo <= 1.0 or v.spread - 1.0 <= floor:
        return None
    text = (
        f"`{name}`: process {v.straggler} is the straggler, {v.spread:.3f}× process "
        f"{v.fastest}'s step time (95% CI {lo:.3f}–{hi:.3f}, above the run's noise floor "
        f"{floor:.1%})"
    )
    return SpreadFinding(name, v.straggler, v.fastest, v.spread, (lo, hi), floor, text)


def spread_findings(summary: ProcessesSummary) -> tuple[SpreadFinding, ...]:
    """Returns the spread finding of every variant it applies to, in the record's order."""
    found = (
        spread_finding(name, v, summary.noise_floor, summary.noise_resolved)
        for name, v in summary.variants.items()
    )
    return tuple(f for f in found if f is not None)
