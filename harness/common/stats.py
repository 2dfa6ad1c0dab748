"""Statistics for comparisons that can say "no difference": medians, bootstrap intervals, verdicts.

Timings are taken in rounds, every variant once per round (harness.timing), so two variants'
rounds pair up: the ratio of their times in one round cancels whatever drifted between rounds
(clocks, temperature, other load). A ratio's interval is a bootstrap over those paired rounds,
seeded so the same data always gives the same interval.

One run makes many comparisons, so its verdicts are corrected for multiplicity: each ratio's
two-sided bootstrap p-value (from the same resamples as its interval) enters Holm's step-down
procedure over all of the run's comparisons (`holm`), and a difference is called only where
its Holm-adjusted p-value is under 5% (`decide`). The run-wide chance of calling any false
difference then stays under 5%, where pair-by-pair 95% intervals would call one in twenty.
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
# The interval is still too wide (timing.target_width) after the run's last round and reaches
# into the noise floor, or the run failed its own A/A check: the run cannot tell, which is not
# the same as "no difference".
NOT_RESOLVED = "not_resolved"
# Verdicts that must never be ranked, coloured or called a speed-up.
NO_DIFFERENCE = (SAME_PROGRAM, INDISTINGUISHABLE, NOT_RESOLVED)
ALPHA = 0.05  # the run-wide false-call rate Holm's procedure holds

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
    """The median of paired per-round ratios, its bootstrap interval, and the two-sided
    bootstrap p-value of "the ratio is 1.0" (None when there was nothing to resample)."""

    ratio: float
    ci95: tuple[float, float]
    rounds: int
    p: float | None = None


def ratio_estimate(
    a: Sequence[float], b: Sequence[float], seed: int = SEED, between: float = 0.0
) -> RatioEstimate:
    """Returns the ratio a/b from paired rounds with its 95% interval and p-value.

    `between`: the ratio's run-to-run spread (τ, the sd of its log between runs, measured
    elsewhere: harness.analyze.between_runs). Each resampled median is then multiplied by
    exp(N(0, τ²)), a run's own offset drawn with it (a parametric random-effects bootstrap),
    so that the interval and the p-value hold for another run on this machine, not only for
    more rounds of this one.
    """
    ratios = paired_ratios(a, b)
    if not ratios:
        raise ValueError("no paired rounds to compare")
    if len(ratios) == 1:
        return RatioEstimate(ratios[0], (ratios[0], ratios[0]), 1)
    meds = _resampled_medians(_rng(seed), ratios, BOOTSTRAP_SAMPLES)
    if between > 0:
        import numpy as np

        meds = meds * np.exp(_rng(seed + 1).normal(0.0, between, size=len(meds)))
    return RatioEstimate(median(ratios), _interval(meds, 0.025), len(ratios), _p_value(meds))


def _p_value(meds: Any) -> float:
    """Twice the share of resampled medians on the far side of 1.0 (at most 1): the percentile
    bootstrap's two-sided p-value, so p < 0.05 exactly when the 95% interval excludes 1.0."""
    import numpy as np

    below, above = float(np.mean(meds <= 1.0)), float(np.mean(meds >= 1.0))
    return min(1.0, 2.0 * min(below, above))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> tuple[float, ...]:
    """Returns Holm's adjusted p-values, in the input order.

    Holm–Bonferroni step-down: sorted ascending, the i-th smallest (from 0) is multiplied by
    (m − i), and each adjusted value is the running maximum, capped at 1. A comparison is
    called where its adjusted value is under `alpha`; over all m comparisons the chance of any
    false call is then at most `alpha`, whatever their dependence.
    """
    del alpha  # the adjusted values do not depend on it; kept so callers name the level
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return tuple(out)


def log_width(ci: tuple[float, float] | None) -> float:
    """Returns an interval's width as log(hi / lo): a relative width that reads the same for a
    ratio of 3 as for a ratio of 1 (infinite for an interval that touches 0)."""
    if ci is None:
        return math.inf
    lo, hi = ci
    return math.log(hi / lo) if lo > 0 and hi > 0 else math.inf


def noise_floor(self_ratio: RatioEstimate | None, minimum: float = 0.0) -> float:
    """Returns the run's noise floor: how far a variant's ratio to itself reaches from 1.0.

    The timing stage times the baseline twice per round (an A/A pair). Its deviation from 1.0
    (|log ratio|) is the bias the rounds carry, its half-width (half of log(hi/lo)) how well
    the run measured it; their sum, as a relative difference, is what every comparison's
    interval is widened by before it may call a difference (`decide`).
    """
    if self_ratio is None:
        return minimum
    lo, hi = self_ratio.ci95
    if self_ratio.ratio <= 0 or lo <= 0 or hi <= 0:
        return math.inf
    reach = abs(math.log(self_ratio.ratio)) + 0.5 * math.log(hi / lo)
    return max(minimum, math.expm1(reach))


def clears_floor(ci95: tuple[float, float], floor: float) -> bool:
    """True when the interval, widened on both sides by the floor (a factor 1 + floor),
    still excludes 1.0: the difference is beyond what the run's A/A pair can resolve."""
    lo, hi = ci95
    return lo > 1.0 + floor or hi * (1.0 + floor) < 1.0


@dataclass(frozen=True)
class Decision:
    """A verdict and the sentence that says what decided it."""

    verdict: str
    why: str


def decide(
    estimate: RatioEstimate | None,
    floor: float,
    same_program: bool = False,
    adjusted_p: float | None = None,
    comparisons: int = 1,
    target_width: float | None = None,
    aa_failed: str | None = None,
) -> Decision:
    """Returns the verdict for a ratio (this / other) given the run's noise floor.

    A difference is called only where the ratio's 95% interval, widened on each side by
    `floor` (the A/A pair's deviation from 1.0 and its half-width: what the run measured about
    itself), still excludes 1.0 (`clears_floor`). `same_program`: both
    compiled to the same program (harness.hlo.fingerprint), so any measured difference is noise
    whatever the interval says. `adjusted_p`: the ratio's Holm-adjusted p-value over the run's
    `comparisons` (see `holm`); a difference whose adjusted value is not under ALPHA is not
    called. `aa_failed`: how the run's A/A check failed, if it did; the floor then holds its
    bias, and a ratio that does not clear it is not resolved (never "no difference").
    `target_width`: an interval still wider than this (`log_width`) that reaches into the
    floor is not resolved.
    """
    if same_program:
        return Decision(
            SAME_PROGRAM, "the two compile to the same program: any difference is noise"
        )
    if estimate is None:
        return Decision(NOT_COMPARABLE, "no paired timing rounds")
    lo, hi = estimate.ci95
    width = log_width(estimate.ci95)
    interval = f"the 95% interval {lo:.3f}–{hi:.3f}"
    if clears_floor(estimate.ci95, floor):
        if adjusted_p is not None and adjusted_p >= ALPHA:
            return Decision(
                INDISTINGUISHABLE,
                f"{interval} excludes 1.0, but not after Holm's correction over the run's "
                f"{comparisons} comparisons (adjusted p {adjusted_p:.3f})",
            )
        held = (
            f", and so after Holm's correction over {comparisons} comparisons (adjusted p "
            f"{adjusted_p:.3f})"
            if adjusted_p is not None
            else ""
        )
        side = "below" if hi < 1.0 else "above"
        bound = 1.0 / (1.0 + floor) if hi < 1.0 else 1.0 + floor
        return Decision(
            FASTER if hi < 1.0 else SLOWER,
            f"{interval} lies {side} {bound:.4f}: it clears the run's noise floor "
            f"{floor * 100:.2f}% (the A/A pair's deviation and half-width){held}",
        )
    if aa_failed:
        return Decision(
            NOT_RESOLVED,
            f"not resolved in this run: {interval} does not clear the noise floor "
            f"{floor * 100:.2f}% left by the run's failed A/A check ({aa_failed})",
        )
    if target_width is not None and width > target_width:
        return Decision(
            NOT_RESOLVED,
            f"not resolved in this run: {interval} is {width * 100:.0f}% "
            f"wide, wider than timing.target_width {target_width * 100:.0f}%, and reaches "
            f"into the run's noise floor {floor * 100:.1f}%",
        )
    if lo <= 1.0 <= hi:
        return Decision(INDISTINGUISHABLE, f"{interval} contains 1.0")
    if lo * (1.0 + floor) >= 1.0 and hi <= 1.0 + floor:
        return Decision(
            INDISTINGUISHABLE, f"{interval} lies within the run's noise floor {floor * 100:.1f}%"
        )
    return Decision(
        NOT_RESOLVED,
        f"not resolved in this run: {interval} excludes 1.0 but reaches into the run's noise "
        f"floor {floor * 100:.1f}%",
    )


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
