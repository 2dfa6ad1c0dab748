"""The rule protocol: when a rule applies, and what it concludes."""

from __future__ import annotations

from typing import Any, ClassVar

from harness.saved.run import SavedRun


class Rule:
    """A rule: a stable `id`, the `kind` of record it makes (the part of summary.json's
    `findings` it fills), `applies` (the run has what the rule needs) and `conclude` (its
    records, each naming the rule's id; none when nothing is concluded). The first line of
    the docstring is what the rule concludes, in the findings' `rules` list."""

    id: ClassVar[str] = ""
    kind: ClassVar[str] = ""

    def applies(self, run: SavedRun) -> bool:
        del run
        return True

    def conclude(self, run: SavedRun) -> tuple[Any, ...]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""


def timing_resolved(run: SavedRun) -> bool:
    """The gate every timing rule reads: false when the run could not time at all (a busy
    machine, no A/A pair; a failed A/A check is judged per verdict, harness.common.stats.decide)
    (`noise.resolved`); a run with no timing rounds has nothing to suppress."""
    return run.summary.noise is None or run.summary.noise.resolved
