"""The rule of a study across processes: a straggler the run can resolve (issue 31).

It reads processes.json's per-variant spread (harness.analyze.processes): the slowest
process's step time over the fastest's, the median of paired rounds with its interval. The
straggler is picked as the slowest median, which biases the ratio upwards; the interval and
the run's noise floor are what keep an equal pair from being called a straggler. It rests on
timing, so it reads the A/A gate.
"""

from __future__ import annotations

from harness.findings.base import Rule, timing_resolved
from harness.records.findings import ProcessSpread
from harness.records.processes import VariantProcesses
from harness.saved.run import SavedRun


def spread_finding(
    rule: str, name: str, v: VariantProcesses, floor: float | None, resolved: bool | None
) -> ProcessSpread | None:
    """The finding that variant `name` has a straggler, or None: its spread's 95% interval
    lies above 1.0, the excess exceeds the run's A/A noise floor, and the run passed its A/A
    check."""
    if v.spread is None or v.spread_ci95 is None or v.straggler is None or v.fastest is None:
        return None
    if resolved is False or floor is None:
        return None
    lo, hi = v.spread_ci95
    if lo <= 1.0 or v.spread - 1.0 <= floor:
        return None
    what = (
        f"`{name}`: process {v.straggler} is the straggler, {v.spread:.3f}× process "
        f"{v.fastest}'s step time (95% CI {lo:.3f}–{hi:.3f}, above the run's noise floor "
        f"{floor:.1%})"
    )
    return ProcessSpread(rule, name, v.straggler, v.fastest, v.spread, (lo, hi), floor, what)


class Straggler(Rule):
    """A process slower than the fastest by more than the run's noise, per variant."""

    id = "processes.straggler"
    kind = "processes"

    def applies(self, run: SavedRun) -> bool:
        return run.processes is not None and timing_resolved(run)

    def conclude(self, run: SavedRun) -> tuple[ProcessSpread, ...]:
        p = run.processes
        assert p is not None
        found = (
            spread_finding(self.id, name, v, p.noise_floor, p.noise_resolved)
            for name, v in p.variants.items()
        )
        return tuple(f for f in found if f is not None)
