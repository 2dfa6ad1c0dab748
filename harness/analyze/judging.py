"""The run's timing verdicts and its noise section, judged from the saved rounds: one function
for the analysis, the search and `python -m harness.commands.migrate`.

The gate is computed once here (`gate`): the A/A pair's ratio and floor, how the A/A check
failed (which no longer withholds anything by itself: each comparison must clear the floor,
harness.common.stats.decide), and what withholds every verdict (a busy machine, no A/A pair). The
verdicts are a function of the stored rounds (timing.json), the run-to-run spread each
comparison recorded and the timing config, so a saved run, a committed reference included,
is judged again without timing again (`rejudge`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analyze import verdicts
from harness.common import stats
from harness.records.machine_state import MachineState, machine_state
from harness.records.noise import BetweenRuns, Noise
from harness.records.resolution import (
    DEFAULT_MAX_NOISE,
    DEFAULT_MAX_OTHERS_SHARE,
    DEFAULT_TARGET_WIDTH,
    NO_PAIR,
    aa_reasons,
    busy_reasons,
)
from harness.records.saved_config import SavedConfig
from harness.records.summary import RunSummary, TimingRecord, Verdict
from harness.timing.clocks import clock_limits, clock_spread

CLOCK_TOLERANCE = 0.05
# The fewest rounds a run's 95% intervals are drawn from. A budget that gives fewer (a 0.1 s
# eager call in a 3 s budget: 3 rounds) withholds every timing verdict and says why, rather
# than print an interval from 2 degrees of freedom. 4, not more: the suite's tiny studies
# (tests/conftest.py TINY) time 4 rounds and are judged.
MIN_INTERVAL_ROUNDS = 4
KINDS = ("vs_baseline", "vs_lower_bound", "vs_framework")


@dataclass(frozen=True)
class TimingLimits:
    """The timing config's keys the judgement reads."""

    max_noise: float = DEFAULT_MAX_NOISE
    max_others: float = DEFAULT_MAX_OTHERS_SHARE
    target_width: float | None = DEFAULT_TARGET_WIDTH


def limits_from(timing: Any) -> TimingLimits:
    """The limits of a loaded config's `timing` section (harness.config.experiment)."""
    return TimingLimits(timing.max_noise, timing.max_others, timing.target_width)


def limits_of(config: SavedConfig | None) -> TimingLimits:
    """A saved config's timing limits (a manifest's `config`), the defaults for keys it lacks
    or holds with another type."""

    def number(key: str) -> float | None:
        return config.number("timing", key) if config is not None else None

    # A limit of 0 is a limit (refuse every floor, every other process), never "the default".
    max_noise, max_others = number("max_noise"), number("max_others")
    width = number("target_width")
    return TimingLimits(
        max_noise=DEFAULT_MAX_NOISE if max_noise is None else max_noise,
        max_others=DEFAULT_MAX_OTHERS_SHARE if max_others is None else max_others,
        target_width=DEFAULT_TARGET_WIDTH if width is None else width,
    )


@dataclass(frozen=True)
class StageGate:
    """What one timing stage can resolve: the A/A pair, its floor, how its check failed, and
    why no verdict of it can be called at all."""

    self_ratio: stats.RatioEstimate | None
    floor: float
    aa_failed: tuple[str, ...]
    withheld: tuple[str, ...]
    machine: MachineState | None
    # Why the stage ran fewer rounds than planned (timing.json's `cut`): every verdict says it.
    cut: str | None = None


def aa_pair(timed: TimingRecord | None) -> stats.RatioEstimate | None:
    """Returns the baseline's ratio to itself over the rounds (the run's A/A comparison)."""
    if timed is None or not timed.baseline or not timed.repeat:
        return None
    a, b = timed.variants.get(timed.repeat), timed.variants.get(timed.baseline)
    if not a or not b or not a.round_step_s or len(a.round_step_s) != len(b.round_step_s):
        return None
    return stats.ratio_estimate(a.round_step_s, b.round_step_s)


def timing_machine(timed: TimingRecord) -> MachineState | None:
    """Returns what the machine was doing during the timing rounds (None before readings)."""
    return machine_state([(c.round, c.before, c.after, c.flags) for c in timed.context])


def gate(timed: TimingRecord | None, limits: TimingLimits) -> StageGate:
    """Returns the stage's gate. A stage with no timed variants has nothing to withhold."""
    pair = aa_pair(timed)
    floor = stats.noise_floor(pair)
    if timed is None or not timed.variants:
        return StageGate(pair, floor, (), (), None)
    machine = timing_machine(timed)
    failed = aa_reasons(
        timed.baseline,
        pair.ratio if pair else None,
        pair.ci95 if pair else None,
        floor,
        limits.max_noise,
    )
    withheld = (
        tuple(r for r in failed if r == NO_PAIR)
        + too_few_rounds(timed)
        + busy_reasons(machine, limits.max_others)
    )
    cut = timed.cut.why if timed.cut is not None else None
    return StageGate(pair, floor, tuple(r for r in failed if r != NO_PAIR), withheld, machine, cut)


def too_few_rounds(timed: TimingRecord) -> tuple[str, ...]:
    """Why the run's intervals are withheld when its baseline ran fewer than
    MIN_INTERVAL_ROUNDS rounds (empty otherwise, or without a baseline's rounds)."""
    base = timed.variants.get(timed.baseline)
    rounds = len(base.round_step_s) if base is not None and base.round_step_s else 0
    if not rounds or rounds >= MIN_INTERVAL_ROUNDS:
        return ()
    return (
        f"only {rounds} timing rounds ran, fewer than the {MIN_INTERVAL_ROUNDS} a 95% interval "
        "is drawn from: timing.budget_s must hold several rounds of the slowest call (the "
        "eager one; README: budget_s)",
    )


def judge(
    pending: Sequence[verdicts.Pending], g: StageGate, limits: TimingLimits
) -> dict[tuple[str, str], Verdict]:
    """Each pending comparison's verdict against the gate (harness.analyze.verdicts.judge)."""
    judged = verdicts.judge(pending, g.floor, limits.target_width, g.withheld, g.aa_failed)
    if g.cut is None:
        return judged
    return {
        k: v if v.verdict == stats.SAME_PROGRAM else dataclasses.replace(v, why=f"{v.why}; {g.cut}")
        for k, v in judged.items()
    }


def unresolvable(judged: Mapping[tuple[str, str], Verdict]) -> tuple[str, ...]:
    """The comparisons whose interval excludes 1.0 but which the floor left not resolved,
    each as "`variant` against `reference` ratio× (lo–hi)"."""
    out = []
    for (name, _), v in judged.items():
        if v.verdict != stats.NOT_RESOLVED or v.ci95 is None or v.ratio is None:
            continue
        lo, hi = v.ci95
        if lo > 1.0 or hi < 1.0:
            out.append(f"`{name}` against `{v.against}` {v.ratio:.4f}× ({lo:.4f}–{hi:.4f})")
    return tuple(dict.fromkeys(out))


def noise_section(
    timed: TimingRecord | None,
    g: StageGate,
    limits: TimingLimits,
    judged: Mapping[tuple[str, str], Verdict],
    spread: BetweenRuns | None = None,
) -> Noise | None:
    """Returns the run's noise floor, its A/A check, the device clocks, the machine's state
    around the timing rounds, the comparisons the floor left unresolvable and the run-to-run
    spread in the intervals."""
    if timed is None:
        return None

    readings = [r for c in timed.context for r in (c.before, c.after) if r]
    clocks = [
        r.get("sm_clock_mhz") for r in readings if isinstance(r.get("sm_clock_mhz"), int | float)
    ]
    mid = stats.median(clocks) if clocks else None
    flagged = tuple(
        c.round
        for c in timed.context
        if mid
        and any(
            isinstance(r.get("sm_clock_mhz"), int | float)
            and abs(r["sm_clock_mhz"] - mid) > CLOCK_TOLERANCE * mid
            for r in (c.before, c.after)
        )
    )
    pair = g.self_ratio
    return Noise(
        baseline=timed.baseline,
        self_ratio=pair.ratio if pair else None,
        self_ci95=pair.ci95 if pair else None,
        floor=g.floor,
        rounds=timed.rounds,
        context_source=timed.context_source,
        sm_clock_spread=clock_spread(readings),
        flagged_rounds=flagged,
        clock_limits=clock_limits(readings),
        resolved=not g.withheld,
        reasons=g.withheld,
        aa_held=pair is not None and not g.aa_failed,
        aa_reasons=g.aa_failed,
        unresolvable=unresolvable(judged) if g.aa_failed and not g.withheld else (),
        max_noise=limits.max_noise,
        comparisons=sum(1 for v in judged.values() if v.p_holm is not None),
        machine=g.machine,
        between_runs=spread,
        not_timed=dict(timed.excluded),
    )


def stored_pending(summary: RunSummary, timed: TimingRecord) -> list[verdicts.Pending]:
    """The comparisons a saved summary made, estimated again from the saved rounds with the
    run-to-run spread each recorded; the same program where both fingerprints agree."""
    out = []
    for name, s in summary.variants.items():
        for kind in KINDS:
            v = getattr(s.comparison, kind)
            other = summary.variants.get(v.against) if v is not None else None
            if v is None or other is None or v.against == name:
                continue
            fa, fb = s.hlo.fingerprint, other.hlo.fingerprint
            same = fa is not None and fb is not None and fa.digest == fb.digest
            tau = v.between_runs or 0.0
            out.append(
                verdicts.Pending(
                    name,
                    kind,
                    v.against,
                    verdicts.estimate(timed, name, v.against, tau),
                    same,
                    between=v.between_runs,
                    rounds_only=verdicts.estimate(timed, name, v.against) if tau else None,
                )
            )
    return out


def rejudge(summary: RunSummary, timed: TimingRecord, limits: TimingLimits) -> RunSummary:
    """Returns the summary with every timing verdict and its noise section judged again from
    the saved rounds (findings untouched: the rules run after)."""
    g = gate(timed, limits)
    judged = judge(stored_pending(summary, timed), g, limits)
    spread = summary.noise.between_runs if summary.noise is not None else None
    variants = {}
    for name, s in summary.variants.items():
        c = s.comparison
        fresh = {k: judged.get((name, k), getattr(c, k)) for k in KINDS}
        variants[name] = dataclasses.replace(s, comparison=dataclasses.replace(c, **fresh))
    noise = noise_section(timed, g, limits, judged, spread)
    return dataclasses.replace(summary, variants=variants, noise=noise)


__all__ = ["StageGate", "TimingLimits", "gate", "judge", "limits_of", "rejudge"]
