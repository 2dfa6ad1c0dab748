"""The summary's record of what a run can resolve (`noise`): its A/A pair, the floor every
verdict must clear, the machine around the rounds and the run-to-run spread in the intervals;
and the migrations of version-6 and version-7 summaries to it.

Since schema 8 a failed A/A check no longer withholds every verdict of the run: the floor it
measured (the A/A pair's deviation from 1.0 and its half-width) is what each comparison's own
interval must clear, so a 9× difference stands where a 1% one is not resolved, and the
comparisons the floor left unresolvable are named (`unresolvable`). Only what makes every ratio
untrustworthy withholds them all (`resolved` false): a machine kept busy by other processes,
or no A/A pair to measure the floor with.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.machine_state import MachineState
from harness.store.records import EMPTY, doc


@dataclass(frozen=True)
class BetweenRuns:
    """The earlier runs whose ratios measured how far each ratio moves from run to run."""

    earlier_runs: tuple[str, ...] = doc("earlier resolved runs on this machine it used", ())
    min_runs: int = doc("runs, this one included, needed to measure a comparison's spread", 0)
    widened: int = doc("comparisons whose interval includes a measured run-to-run spread", 0)
    comparisons: int = doc("timing comparisons in the run", 0)


@dataclass(frozen=True)
class Noise:
    """What the run can resolve: the baseline timed against itself, and the device's clocks."""

    baseline: str | None = doc("the variant timed twice per round")
    self_ratio: float | None = doc("its second slot over its first, median of paired rounds")
    self_ci95: tuple[float, float] | None = doc("the 95% interval of that ratio")
    floor: float = doc(
        "the A/A pair's deviation from 1.0 plus its half-width, as a relative difference: a "
        "comparison's 95% interval, widened by it on each side, must still exclude 1.0 for a "
        "difference to be called",
        0.0,
    )
    rounds: int | None = doc("timing rounds")
    context_source: str | None = doc("where the device readings came from, or why there are none")
    sm_clock_spread: float | None = doc("(max − min) / max of the SM clock over all readings")
    flagged_rounds: tuple[int, ...] = doc("rounds whose SM clock moved by more than 5%", ())
    clock_limits: tuple[str, ...] = doc(
        "what held the GPU's clocks in any reading (NVML's reasons, such as `software power "
        "cap`): at its power cap a GPU sets its clock by what runs",
        (),
    )
    resolved: bool = doc(
        "the run can call timing differences at all: false when other processes kept the "
        "machine busy (timing.max_others) or no A/A pair was timed, and then no timing "
        "difference is ranked, recommended or compared (before schema 8: also a failed A/A check)",
        True,
    )
    reasons: tuple[str, ...] = doc("why the run could not call any timing difference", ())
    aa_held: bool | None = doc(
        "the A/A check held: the pair's interval holds 1.0 and the floor is within "
        "timing.max_noise (null: judged before schema 8; `python -m harness.commands.migrate` re-judges)"
    )
    aa_reasons: tuple[str, ...] = doc("how the A/A check failed", ())
    unresolvable: tuple[str, ...] = doc(
        "the comparisons whose interval excludes 1.0 but not the floor: differences this run's "
        "noise could not resolve, each as `variant` against `reference` with its interval",
        (),
    )
    max_noise: float | None = doc("the timing.max_noise the floor was held to")
    comparisons: int = doc("the timing comparisons Holm's correction ran over", 0)
    machine: MachineState | None = doc("what the machine was doing during the rounds")
    between_runs: BetweenRuns | None = doc("where the intervals' run-to-run spread came from")
    not_timed: dict[str, str] = doc(
        "variants left out of the timing rounds, and why (a worker that died timing one, a call "
        "too long for timing.max_budget_s): none of their timing comparisons is made",
        EMPTY,
    )
