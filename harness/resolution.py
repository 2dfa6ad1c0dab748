"""Whether a run can resolve differences at all: its A/A check, the gate on every timing verdict.

The timing stage times the baseline twice per round (harness.timing.rounds). That pair is the
run's witness: the same program against itself must give an interval that holds 1.0 and a
noise floor within `timing.max_noise`. A run that fails either cannot tell a real difference
from its noise, so no timing verdict of it is ranked, recommended, searched or compared; the
rules that do not rest on timing (coverage, memory, structure) stand.
"""

from __future__ import annotations

# Measured: 10 idle default studies on the 2-core machine (`python benchmarks/busy_machine.py
# --idle_only=10`, 1-minute load 0.41-0.50 before each, configs/gelu.yaml's 40 rounds) gave A/A
# floors of 11.7, 22.5, 13.0, 7.6, 11.8, 8.7, 16.6, 25.4, 23.7 and 11.1%: a 90th percentile of
# 23.9% and a worst of 25.4%. The floor on that machine is set by CPU steal from its host (up to
# 18% of a round) as much as by load, so the default sits above every idle floor seen: an idle
# run is not declared unresolved, and a busy one (16-58% floors measured) mostly is. Each
# pair's verdict still has its own interval, the floor and Holm's correction to pass.
DEFAULT_MAX_NOISE = 0.30
# PROVISIONAL too, for the same reason: a ratio's 95% interval must be narrower than this
# (log(hi/lo), about ±5% around the ratio) before adaptive rounds stop; a ratio still wider
# at the end is "not resolved in this run".
DEFAULT_TARGET_WIDTH = 0.10


def aa_reasons(
    baseline: str | None,
    ratio: float | None,
    ci95: tuple[float, float] | None,
    floor: float,
    max_noise: float,
) -> tuple[str, ...]:
    """Returns why the A/A pair says the run cannot resolve differences (empty: it can)."""
    if ratio is None or ci95 is None:
        return (
            "no A/A pair: the baseline was not timed twice per round, so the run cannot "
            "check its own noise",
        )
    lo, hi = ci95
    out = []
    if not lo <= 1.0 <= hi:
        out.append(
            f"`{baseline}` timed against itself gave {ratio:.4f}× (95% CI {lo:.4f}–{hi:.4f}): "
            "an interval that excludes 1.0 for a program against itself means the timing failed"
        )
    if floor > max_noise:
        out.append(
            f"the noise floor {floor * 100:.1f}% exceeds timing.max_noise {max_noise * 100:.1f}%"
        )
    return tuple(out)
