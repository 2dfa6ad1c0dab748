"""The summary's record of the run-to-run spread in its intervals (schema 7,
harness.analyze.between_runs), and the migration of a version-6 summary to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.records import doc


@dataclass(frozen=True)
class BetweenRuns:
    """The earlier runs whose ratios measured how far each ratio moves from run to run."""

    earlier_runs: tuple[str, ...] = doc("earlier resolved runs on this machine it used", ())
    min_runs: int = doc("runs, this one included, needed to measure a comparison's spread", 0)
    widened: int = doc("comparisons whose interval includes a measured run-to-run spread", 0)
    comparisons: int = doc("timing comparisons in the run", 0)


def migrate_v6(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-7 data for a version-6 summary: version 7 only added the run-to-run
    spread (`noise.between_runs`, `comparison.*.between_runs` and `ci95_rounds`), which reads
    as not measured (null)."""
    del source
    return {**data, "schema_version": 7}
