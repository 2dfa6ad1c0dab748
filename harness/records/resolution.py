"""What a run can resolve: its A/A check, and whether the machine let it time at all.

The timing stage times the baseline twice per round (harness.timing.rounds). That pair is the
run's witness: the same program against itself should give an interval that holds 1.0 and a
noise floor within `timing.max_noise`. Where it does not, the floor it measured (the pair's
deviation from 1.0 and its half-width) is what every comparison's interval must clear
(harness.common.stats.decide), so a failed A/A check costs the differences it cannot resolve, named,
and no more. A machine kept busy by other processes changes the ratios themselves, not only
their noise, so that (`busy_reasons`) still withholds every timing verdict; the rules that do
not rest on timing (coverage, memory, structure) stand.
"""

from __future__ import annotations

from harness.records.machine_state import MachineState

# Measured: 10 idle default studies on the 2-core machine (`python benchmarks/busy_machine.py
# --idle_only=10`, 1-minute load 0.41-0.50 before each, configs/gelu.yaml's 40 rounds) gave A/A
# floors of 11.7, 22.5, 13.0, 7.6, 11.8, 8.7, 16.6, 25.4, 23.7 and 11.1%: a 90th percentile of
# 23.9% and a worst of 25.4%. The floor on that machine is set by CPU steal from its host (up to
# 18% of a round) as much as by load, so the default sits above every idle floor seen: an idle
# run is not declared unresolved, and a busy one (16-58% floors measured) mostly is. Each
# pair's verdict still has its own interval, the floor and Holm's correction to pass.
DEFAULT_MAX_NOISE = 0.30
# A ratio's 95% interval must be narrower than this (log(hi/lo), about ±5% around the ratio)
# before adaptive rounds stop; a ratio still wider at the end, whose interval reaches into the
# floor, is "not resolved in this run". Not set from a measurement: the 2-core machine rarely
# meets it (configs/gelu.yaml adds no rounds), the H200 meets it in its planned rounds.
DEFAULT_TARGET_WIDTH = 0.10
# Other processes may take up to this share of the machine's CPUs during the rounds. A busy
# machine changes the ratios themselves, not only their noise. On the 2-core machine
# (benchmarks/busy_machine.py's pooled idle reference: `xla_host_callback` 1.894× `xla`, CI
# 1.787-2.016; `xla_no_fusion` 1.300×):
# - two single-threaded NumPy processes running: others 37-47% of the CPUs, the A/A pair clean
#   (floors 5.8-13.6%), yet `xla_no_fusion` measured 2.36-2.53× and `xla_host_callback`
#   1.57-1.64×, intervals disjoint from the reference's;
# - one such process: others 49-50%, floors 2.1-6.1%, `xla_host_callback` 1.48-1.53×;
# - idle: others 2-3% during a default study, 0.2% with nothing running.
# 15% is five times the idle share and under a third of one busy core's.
DEFAULT_MAX_OTHERS_SHARE = 0.15


NO_PAIR = (
    "no A/A pair: the baseline was not timed twice per round, so the run cannot check its own noise"
)


def aa_reasons(
    baseline: str | None,
    ratio: float | None,
    ci95: tuple[float, float] | None,
    floor: float,
    max_noise: float,
) -> tuple[str, ...]:
    """Returns how the A/A check failed (empty: it held)."""
    if ratio is None or ci95 is None:
        return (NO_PAIR,)
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


def busy_reasons(machine: MachineState | None, max_others: float) -> tuple[str, ...]:
    """Returns why the machine was too busy for the ratios to be an idle machine's (empty:
    it was not, or nothing was read)."""
    if machine is None or machine.others_share is None or machine.others_share <= max_others:
        return ()
    return (
        f"other processes took {machine.others_share * 100:.0f}% of the {machine.cpus} CPUs "
        f"during the rounds, over timing.max_others {max_others * 100:.0f}%: the ratios "
        "measured are this load's, not an idle machine's",
    )
