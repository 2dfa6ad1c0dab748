"""Statistics for comparisons that can say "no difference": medians, bootstrap intervals, verdicts.

Timings are taken in rounds, every variant once per round (harness.timing), so two variants'
rounds pair up: the ratio of their times in one round cancels whatever drifted between rounds
(clocks, temperature, other load). A ratio's interval is a bootstrap over those paired rounds,
seeded so the same data always gives the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SAME_PROGRAM = "same_program"
INDISTINGUISHABLE = "indistinguishable"
FASTER = "faster"
SLOWER = "slower"
NOT_COMPARABLE = "not_comparable"
# Verdicts that must never be ranked, coloured or called a speed-up.
NO_DIFFERENCE = (SAME_PROGRAM, INDISTINGUISHABLE)

BOOTSTRAP_SAMPLES = 2000
SEED = 20261130


def median(values: Sequence[float]) -> float:
    """Returns the median of a non-empty sequence."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def percentile(values: Sequence[float], q: float) -> float:
    """Returns the q-th percentile (0..100) by linear interpolation, like numpy's default."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def bootstrap_ci(
    values: Sequence[float], level: float = 0.95, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """Returns the percentile-bootstrap interval of the median of `values`.

    With a single value the interval is that value: there is no spread to resample.
    """
    if not values:
        raise ValueError("bootstrap of no values")
    if len(values) == 1:
        return (values[0], values[0])
    rng = _rng(seed)
    meds = _resampled_medians(rng, values, samples)
    tail = (1.0 - level) / 2.0
    return _interval(meds, tail)


def _rng(seed: int) -> Any:
    import numpy as np  # here, not at the top: most importers of stats never resample

    return np.random.default_rng(seed)


def _resampled_medians(rng: Any, values: Sequence[float], samples: int) -> Any:
    """Returns `samples` medians of `values` resampled with replacement (vectorised: a
    pure-Python bootstrap was most of a run's analysis time)."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    return np.median(data[rng.integers(0, len(data), size=(samples, len(data)))], axis=1)


def _interval(estimates: Any, tail: float) -> tuple[float, float]:
    import numpy as np

    lo, hi = np.percentile(estimates, [100 * tail, 100 * (1 - tail)])
    return (float(lo), float(hi))


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Returns a[i] / b[i] for rounds where both were measured."""
    if len(a) != len(b):
        raise ValueError(f"paired rounds differ in number: {len(a)} and {len(b)}")
    return [x / y for x, y in zip(a, b, strict=True) if y > 0]


@dataclass(frozen=True)
class RatioEstimate:
    """The median of paired per-round ratios and its bootstrap interval."""

    ratio: float
    ci95: tuple[float, float]
    rounds: int


def ratio_estimate(a: Sequence[float], b: Sequence[float], seed: int = SEED) -> RatioEstimate:
    """Returns the ratio a/b from paired rounds with its 95% interval."""
    ratios = paired_ratios(a, b)
    if not ratios:
        raise ValueError("no paired rounds to compare")
    return RatioEstimate(median(ratios), bootstrap_ci(ratios, seed=seed), len(ratios))


def noise_floor(self_ratio: RatioEstimate | None, minimum: float = 0.0) -> float:
    """Returns the run's noise floor: how far from 1.0 a variant's ratio to itself strays.

    The timing stage times the baseline twice per round (an A/A pair); the larger distance of
    that ratio's interval from 1.0 is the smallest relative difference the run can resolve.
    """
    if self_ratio is None:
        return minimum
    lo, hi = self_ratio.ci95
    return max(minimum, abs(1.0 - lo), abs(hi - 1.0), abs(self_ratio.ratio - 1.0))


@dataclass(frozen=True)
class Decision:
    """A verdict and the sentence that says what decided it."""

    verdict: str
    why: str


def decide(estimate: RatioEstimate | None, floor: float, same_program: bool = False) -> Decision:
    """Returns the verdict for a ratio (this / other) given the run's noise floor.

    `same_program`: both compiled to the same program (harness.hlo.fingerprint), so any
    measured difference is noise whatever the interval says.
    """
    if same_program:
        return Decision(
            SAME_PROGRAM, "the two compile to the same program: any difference is noise"
        )
    if estimate is None:
        return Decision(NOT_COMPARABLE, "no paired timing rounds")
    lo, hi = estimate.ci95
    if lo <= 1.0 <= hi:
        return Decision(INDISTINGUISHABLE, f"the 95% interval {lo:.3f}–{hi:.3f} contains 1.0")
    if abs(estimate.ratio - 1.0) <= floor:
        return Decision(
            INDISTINGUISHABLE,
            f"the difference {abs(estimate.ratio - 1) * 100:.1f}% is within the run's noise floor "
            f"{floor * 100:.1f}%",
        )
    if hi < 1.0:
        return Decision(FASTER, f"the 95% interval {lo:.3f}–{hi:.3f} lies below 1.0")
    return Decision(SLOWER, f"the 95% interval {lo:.3f}–{hi:.3f} lies above 1.0")


def independent_ratio(
    a: Sequence[float], b: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> RatioEstimate:
    """Returns median(a) / median(b) for rounds that do not pair (two runs), with a bootstrap
    interval that resamples each side on its own."""
    if not a or not b:
        raise ValueError("no rounds to compare")
    rng = _rng(seed)
    ratios = _resampled_medians(rng, a, samples) / _resampled_medians(rng, b, samples)
    return RatioEstimate(median(a) / median(b), _interval(ratios, 0.025), min(len(a), len(b)))
