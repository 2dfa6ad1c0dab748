"""How the timing stage cut its rounds to keep its budget, as timing.json records it (kept apart
from harness.records.summary, which is at its size limit).

The budget (`timing.budget_s`) shrinks each variant's batch first (harness.timing.rounds.plan);
a batch cannot shrink under one call, so where one round of the smallest batches is longer
than the budget allows a round, the stage runs fewer rounds, never fewer than
`timing.min_rounds`, and this record says so (harness.timing.budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import doc


@dataclass(frozen=True)
class RoundsCut:
    planned: int = doc("the rounds planned (`timing.rounds`, or the platform's default)")
    rounds: int = doc("the rounds run instead")
    min_rounds: int = doc("the fewest rounds the stage runs, however long a call")
    round_s: float = doc("seconds one round of the smallest batches takes, as calibrated")
    left_s: float = doc("seconds the budget had left for the rounds after warm-up and calibration")
    slowest: str = doc("the variant with the longest call")
    call_s: float = doc("its one call, seconds")
    over_budget: bool = doc("true when even `min_rounds` rounds did not fit the budget")
    why: str = doc("the cut, in one sentence")
