"""The timing stage keeps its budget when one call is long, or says why not.

The rounds run on a clock that moves only when a call says so (as in test_busy_machine), so
every count below is exact; the stage itself runs on real JAX calls (an op-by-op loop far
slower than its budget allows a round), and its record and verdicts are checked by the calls
it made, never by wall time.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from harness.analyze import judging, verdicts
from harness.config import ConfigError, load
from harness.timing import budget, rounds, stage


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counted(clock: FakeClock, name: str, cost: float, seen: list[str]) -> rounds.Timed:
    """A variant whose every call advances the clock by `cost` and is counted in `seen`."""

    def call() -> None:
        seen.append(name)
        clock.now += cost

    return rounds.Timed(name, call, lambda out: None)


def run_rounds(
    slow_s: float,
    planned: int = 10,
    budget_s: float = 6.0,
    min_rounds: int = 3,
    warm_s: dict[str, float] | None = None,
):
    clock, seen = FakeClock(), []
    timed = [counted(clock, "fast", 0.001, seen), counted(clock, "slow", slow_s, seen)]
    _, target = rounds.plan(len(timed), planned, 0.1, budget_s, 0.25)
    result = rounds.time_rounds(
        timed,
        planned,
        target,
        warmup=2,
        budget_s=budget_s,
        settle=0.25,
        batches=3,
        more=lambda s: True,
        max_budget_s=3 * budget_s,
        clock=clock,
        min_rounds=min_rounds,
        warm_s=warm_s,
    )
    return result, clock.now, seen


def test_a_call_longer_than_a_round_allows_cuts_the_rounds_and_keeps_the_budget() -> None:
    result, spent, seen = run_rounds(slow_s=1.0)
    cut = result.cut
    assert cut is not None and cut.planned == 10 and 3 <= cut.rounds < 10
    assert len(result.step_s["slow"]) == cut.rounds and result.added_rounds == 0
    # One call per batch, no settling, no calibration: two warm-up calls, then one a round.
    assert result.calls_per_batch["slow"] == 1 and result.settle_calls["slow"] == 0
    assert seen.count("slow") == 2 + cut.rounds
    assert spent <= 1.5 * 6.0 and not cut.over_budget
    assert cut.slowest == "slow" and cut.call_s == pytest.approx(1.0)
    assert result.stopped == "budget" and f"{cut.rounds} of 10 planned rounds" in cut.why


def test_a_call_longer_than_the_budget_allows_runs_the_stated_minimum_and_says_so() -> None:
    # 3 s a call against budget_s 6: three rounds (timing.min_rounds) still fit max_budget_s.
    result, spent, seen = run_rounds(slow_s=3.0)
    cut = result.cut
    assert cut is not None and cut.rounds == 3 and cut.over_budget and not result.dropped
    assert seen.count("slow") == 2 + 3 and spent <= 3 * 6.0
    assert "timing.min_rounds" in cut.why and "past the budget" in cut.why


def test_a_call_whose_minimum_rounds_exceed_the_largest_budget_is_left_out_and_says_why() -> None:
    # The scanned LM of issue 44: 13 s a call against budget_s 6 ran 274 s. Three rounds would
    # take 39 s against max_budget_s 18: it is warmed up (its first call may compile), then
    # left out of the rounds.
    result, spent, seen = run_rounds(slow_s=13.0)
    assert seen.count("slow") == 2 and spent <= 1.5 * 18.0
    assert "slow" not in result.step_s and len(result.step_s["fast"]) >= 3
    why = result.dropped["slow"]
    assert "one call takes 13 s" in why and "timing.max_budget_s" in why


def test_a_long_call_already_warm_in_the_worker_is_not_warmed_up_again() -> None:
    # The eager call of a program captured in this worker: its blocked steps are known.
    result, spent, seen = run_rounds(slow_s=1.0, warm_s={"slow": 1.0})
    assert result.cut is not None and seen.count("slow") == result.cut.rounds
    assert spent <= 1.5 * 6.0


def test_rounds_that_fit_the_budget_are_not_cut() -> None:
    result, _, _ = run_rounds(slow_s=0.002)
    # All ten planned, and (the stop rule asking for more) rounds added up to max_budget_s.
    assert result.cut is None and result.added_rounds > 0
    assert len(result.step_s["slow"]) == 10 + result.added_rounds


def test_the_cut_never_goes_under_its_minimum_nor_over_the_planned_rounds() -> None:
    assert budget.rounds_within(10, 3, round_s=1.0, left_s=100.0) == 10
    assert budget.rounds_within(10, 3, round_s=1.0, left_s=5.5) == 5
    assert budget.rounds_within(10, 3, round_s=1.0, left_s=-2.0) == 3
    assert budget.rounds_within(2, 3, round_s=1.0, left_s=0.5) == 2  # fewer planned: those


def test_min_rounds_under_two_is_a_one_line_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load("gelu.yaml", ["--config.timing.min_rounds=1"])
    assert e.value.key == "timing.min_rounds" and "\n" not in str(e.value)


# A study whose eager call cannot be timed within timing.max_budget_s, and whose jitted call
# can (see test_the_stage_leaves_out_a_call_it_cannot_time_within_its_largest_budget).
# The loop is 0.8 s a call at the fastest, so three rounds never fit 1.6 s, and the quarter of
# it always left gives the jitted call's smallest rounds 0.4 s (0.1 s before: under the full
# suite's load a calibration hiccup made them 0.26 s, and the jitted call was left out too).
# The loop's two warm-up calls spend max_budget_s, whatever the load; the quarter always
# left (1.0 s) holds the jitted call's three rounds (18 calls with its A/A twin) even at 50 ms
# a call: under the suite's load its calibration once read 33 ms, past 1.6 s's quarter.
LEFT_OUT = {"max_budget_s": 4.0, "primitives": 400_000}


def slow_eager_stage(tmp_path: Path, max_budget_s: float, primitives: int = 3000):
    """Times a jitted call and a slow op-by-op loop in the real stage; returns the record,
    the experiment and how many times the loop ran."""
    exp = load(
        "gelu.yaml",
        [
            "--config.timing.rounds=10",
            "--config.timing.budget_s=0.05",
            f"--config.timing.max_budget_s={max_budget_s}",
        ],
    ).experiment
    x = jnp.ones((8, 8), jnp.float32)
    jitted = jax.jit(lambda a: a * 2.0)
    jitted(x).block_until_ready()
    eager_calls = []

    def eager() -> jax.Array:  # thousands of dispatched primitives: far over 0.05 s / 10 rounds
        eager_calls.append(1)
        y = x
        for _ in range(primitives):
            y = y * 1.0001
        return y

    record = stage.run(exp, {"xla": lambda: jitted(x), "eager": eager}, "cpu", tmp_path, {}, {})
    return record, exp, len(eager_calls)


def test_the_stage_cuts_a_slow_eager_call_and_every_verdict_says_so(tmp_path: Path) -> None:
    record, exp, eager_calls = slow_eager_stage(tmp_path, max_budget_s=60.0)
    cut = record.cut
    assert cut is not None and cut.slowest == "eager" and cut.planned == 10
    assert record.rounds == cut.rounds and 3 <= cut.rounds < 10
    assert record.variants["eager"].calls_per_batch == 1
    assert eager_calls == 2 + cut.rounds  # two warm-up calls, then one a round: nothing else
    limits = judging.limits_from(exp.timing)
    g = judging.gate(record, limits)
    pending = [
        verdicts.Pending(
            "eager", "vs_baseline", "xla", verdicts.estimate(record, "eager", "xla"), False
        )
    ]
    (verdict,) = judging.judge(pending, g, limits).values()
    assert verdict.why.endswith(cut.why)


def test_the_stage_leaves_out_a_call_it_cannot_time_within_its_largest_budget(
    tmp_path: Path,
) -> None:
    # max_budget_s 4.0: three rounds of a 400 000-primitive loop (2 s a call at the fastest)
    # cannot fit; it is warmed up and left out, with why, and the jitted call, whose smallest
    # batches fit the quarter of max_budget_s always left (1.0 s), is still timed in its rounds.
    record, _, eager_calls = slow_eager_stage(tmp_path, **LEFT_OUT)
    assert eager_calls == 2 and "eager" not in record.variants
    assert "timing.max_budget_s" in record.excluded["eager"]
    assert len(record.variants["xla"].round_step_s) == record.rounds >= 3


def test_a_variant_left_out_of_the_rounds_is_named_in_the_run_s_opening_line(
    tmp_path: Path,
) -> None:
    from harness.findings.timing import not_timed_line

    record, exp, _ = slow_eager_stage(tmp_path, **LEFT_OUT)
    limits = judging.limits_from(exp.timing)
    g = judging.gate(record, limits)
    noise = judging.noise_section(record, g, limits, {})
    assert noise is not None and set(noise.not_timed) == {"eager"}
    line = not_timed_line(noise)
    assert line.startswith("`eager` was not timed, so none of its timing comparisons is made")
    assert record.excluded["eager"] in line
