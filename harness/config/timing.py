"""The config's timing section (`timing:`), and the checks one field's range cannot express.

Kept apart from harness.config.experiment, as harness.config.limits is;
the schema imports it, and `validate_ranges` checks each field's range.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.config.fields import ranged
from harness.records.resolution import (
    DEFAULT_MAX_NOISE,
    DEFAULT_MAX_OTHERS_SHARE,
    DEFAULT_TARGET_WIDTH,
)


@dataclasses.dataclass(frozen=True)
class TimingOptions:
    """The timing stage: every variant timed in the same rounds, alternating, after capture."""

    rounds: int = ranged(0, 0, 1000, "timing rounds; 0 picks 10 on a CPU and 5 on a GPU")
    batch_s: float = ranged(0.1, 0.0001, 10.0, "target seconds of back-to-back calls per batch")
    budget_s: float = ranged(
        30.0,
        0.01,
        3600.0,
        "the timing rounds' time budget in seconds, warm-up and settling included"
        " (the compiles before them are not)",
    )
    settle: float = ranged(
        0.25,
        0.0,
        4.0,
        "untimed calls of a variant just before each of its batches, as a fraction of the batch",
    )
    # The run's own gate and its adaptive rounds (harness.records.resolution, harness.timing.stage).
    batches: int = ranged(
        3, 1, 50, "short batches per variant per round; the round's figure is their median"
    )
    max_noise: float = ranged(
        DEFAULT_MAX_NOISE, 0.0, 10.0, "the largest A/A noise floor at which differences are called"
    )
    max_others: float = ranged(
        DEFAULT_MAX_OTHERS_SHARE,
        0.0,
        1.0,
        "the largest share of the machine's CPUs other processes may take during the rounds"
        " at which differences are called",
    )
    target_width: float = ranged(
        DEFAULT_TARGET_WIDTH,
        0.0,
        10.0,
        "rounds are added until every ratio's 95% interval is narrower than this (log(hi/lo))",
    )
    min_rounds: int = ranged(
        3,
        2,
        1000,
        "the fewest rounds timed when one round of one-call batches does not fit budget_s"
        " (the rounds are cut to fit, down to this many, and the verdicts say so)",
    )
    max_budget_s: float = ranged(
        0.0, 0.0, 36000.0, "the most seconds the rounds may take with those added; 0: 3× budget_s"
    )
    # With --resume=<id> of a finished run: time its variants again (each compiled again and
    # checked by fingerprint against its captured program), capture nothing, analyze, report.
    only: bool = False


def timing_problem(t: Any) -> tuple[str, str] | None:
    """(key, problem) when `timing.max_budget_s` is under `timing.budget_s` (0 means 3×
    budget_s): the rounds that are added come after the planned ones, which the budget already
    holds. The schema raises it as its ConfigError (it imports this module, not the reverse)."""
    if t.max_budget_s and t.max_budget_s < t.budget_s:
        return (
            "timing.max_budget_s",
            f"must be 0 (3× budget_s) or at least timing.budget_s ({t.budget_s:g}), "
            f"got {t.max_budget_s:g}",
        )
    return None


def max_budget_s(t: Any) -> float:
    """Returns the seconds the rounds may take with the added ones (0 reads as 3× budget_s)."""
    return float(t.max_budget_s or 3.0 * t.budget_s)
