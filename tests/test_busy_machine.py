"""Conclusions that hold on a busy machine (issue 24): the A/A gate, Holm's correction, the
adaptive rounds' stop rule, robust rounds and the machine's readings.

The statistics and the rounds run on synthetic samples and a fake clock whose answer is
known; the gate on the session's tiny real run with its noise section replaced. No test
reads the wall clock.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from harness import findings as rules
from harness import saved
from harness.analyze import judging, verdicts
from harness.common import stats
from harness.config.experiment import ConfigError
from harness.findings.compare import variant_verdict
from harness.records import invocations, machine_state
from harness.records.summary import (
    SCHEMA_VERSION,
    Comparison,
    RoundContext,
    TimedVariant,
    TimingRecord,
    Verdict,
    parse_summary,
)
from harness.report import findings
from harness.report.conclusion import conclusion_lines
from harness.report.doc import to_markdown
from harness.search import _limits, _verdicts
from harness.timing import machine, rounds, stage


def jitter(center: float, spread: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


# --- Holm's correction --------------------------------------------------------------------------


def test_holm_multiplies_the_ith_smallest_p_by_the_comparisons_left() -> None:
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx((0.04, 0.09, 0.09, 0.5))
    assert stats.holm([0.2, 0.9]) == pytest.approx((0.4, 0.9))  # capped at 1 and monotone
    assert stats.holm([]) == ()


def test_one_marginal_difference_is_called_but_not_when_it_is_one_of_ten() -> None:
    """Pair by pair at 95% every one of these would be `slower`; over the run's ten
    comparisons Holm's correction calls none of them."""
    marginal = stats.RatioEstimate(1.05, (1.01, 1.09), 10, p=0.02)
    alone = verdicts.judge([verdicts.Pending("v", "vs_baseline", "b", marginal, False)], 0.0, None)
    assert alone[("v", "vs_baseline")].verdict == stats.SLOWER
    assert alone[("v", "vs_baseline")].p_holm == pytest.approx(0.02)
    family = [verdicts.Pending(f"v{i}", "vs_baseline", "b", marginal, False) for i in range(10)]
    judged = verdicts.judge(family, 0.0, None)
    assert {v.verdict for v in judged.values()} == {stats.INDISTINGUISHABLE}
    assert "Holm" in judged[("v0", "vs_baseline")].why
    # A clear difference (every resampled median above 1.0: p = 0) survives any family size.
    clear = stats.ratio_estimate([2.0 + 0.01 * i for i in range(10)], [1.0] * 10)
    assert clear.p == 0.0
    judged = verdicts.judge(
        [*family, verdicts.Pending("eager", "vs_baseline", "b", clear, False)], 0.0, None
    )
    assert judged[("eager", "vs_baseline")].verdict == stats.SLOWER


def test_the_bootstrap_p_value_agrees_with_the_interval() -> None:
    same = stats.ratio_estimate(jitter(1.0, 0.05, 12, 1), jitter(1.0, 0.05, 12, 2))
    lo, hi = same.ci95
    assert lo <= 1.0 <= hi and same.p is not None and same.p >= 0.05


# --- the A/A gate ---------------------------------------------------------------------------------


def _failing_aa(run: saved.SavedRun) -> saved.SavedRun:
    """The run as if its baseline had disagreed with itself, every verdict left as it was."""
    noise = dataclasses.replace(
        run.summary.noise,
        self_ratio=0.6645,
        self_ci95=(0.5096, 0.9906),
        floor=0.49,
        resolved=False,
        reasons=("`xla` timed against itself gave 0.6645× (95% CI 0.5096–0.9906)",),
    )
    return dataclasses.replace(run, summary=dataclasses.replace(run.summary, noise=noise))


def _with_a_slower_eager(run: saved.SavedRun) -> saved.SavedRun:
    """The run with `eager` resolved as 3× slower than the baseline (a timing finding)."""
    slower = Verdict(against="xla", ratio=3.0, ci95=(2.9, 3.1), verdict=stats.SLOWER, why="")

    def judged(v: saved.SavedVariant) -> saved.SavedVariant:
        # Every other variant's comparisons are dropped, so the one finding is known.
        comparison = Comparison(vs_baseline=slower if v.name == "eager" else None)
        return dataclasses.replace(v, summary=dataclasses.replace(v.summary, comparison=comparison))

    noise = dataclasses.replace(run.summary.noise, resolved=True, reasons=())
    return dataclasses.replace(
        run,
        summary=dataclasses.replace(run.summary, noise=noise),
        variants=tuple(judged(v) for v in run.variants),
    )


def _judged(run: saved.SavedRun) -> saved.SavedRun:
    """The run with its findings made again by the rules, over its changed summary."""
    summary = dataclasses.replace(run.summary, variants={v.name: v.summary for v in run.variants})
    found = rules.evaluate(rules.read_facts(run.path, summary))
    return dataclasses.replace(run, summary=dataclasses.replace(summary, findings=found))


def test_a_run_that_cannot_time_suppresses_timing_findings_but_not_structural_ones(
    cpu_run: Path,
) -> None:
    resolved = _judged(_with_a_slower_eager(saved.load_run(cpu_run)))
    r = resolved.summary.findings
    assert [f.variant for f in r.timing] == ["eager"] and r.changes
    gated = _judged(_failing_aa(resolved))
    g = gated.summary.findings
    assert g.timing == () and g.changes == ()
    assert not g.gate.resolved and "0.6645×" in g.gate.line
    assert any(n.variant == "eager" and "could not resolve" in n.what for n in g.noise)
    # The rules that do not rest on timing stand: untested changes, attribution gaps,
    # memory, structure and the observations.
    assert g.untested == r.untested != ()
    assert (g.coverage, g.memory, g.boundaries) == (r.coverage, r.memory, r.boundaries)
    assert g.observations == r.observations != ()
    text = to_markdown(tuple(findings.findings_blocks(gated) + findings.changes_blocks(gated)))
    assert "could not resolve differences" in text and "0.6645×" in text
    assert "No change is recommended" in text
    line, retime, *_ = conclusion_lines(gated)
    assert line.startswith("could not resolve:") and "0.6645" in line
    # The study ran with this interpreter from the repository (conftest.run_harness), and the
    # command names it as it can be typed there, not a bare `python` the venv may not be.
    python = invocations.typed_interpreter(sys.executable, REPO)
    assert retime.startswith(f"time it again later: {python} -m harness --config=")
    assert f"--resume={gated.run_id} --config.timing.only=true" in retime
    assert conclusion_lines(resolved)[0].startswith("finding 1: `eager` is 3.00× slower")


def test_compare_reports_no_verdict_change_for_an_unresolved_run(cpu_run: Path) -> None:
    loaded = saved.load_run(cpu_run)
    noise = dataclasses.replace(loaded.summary.noise, resolved=True, reasons=())
    run = dataclasses.replace(loaded, summary=dataclasses.replace(loaded.summary, noise=noise))
    gated = _failing_aa(run)
    sa, sb = run.summary, gated.summary
    a, b = sa.variants["eager"], sb.variants["eager"]
    verdict = variant_verdict(sa, a, sb, b, 0.0, same=True)
    assert verdict.startswith("no verdict: run b could not resolve differences")
    assert not variant_verdict(sa, a, sa, a, 0.0, same=True).startswith("no verdict")
    both = variant_verdict(sb, b, sb, b, 0.0, same=True)
    assert both.startswith("no verdict: runs a and b could not resolve differences")


def test_an_older_summary_whose_baseline_disagreed_with_itself_is_read_as_unresolved() -> None:
    raw = json.loads((REPO / "results" / "reference" / "cpu" / "summary.json").read_text())
    # Migrated from 3 by harness.commands.migrate (its verdicts judged again from its rounds).
    assert raw["schema_version"] == SCHEMA_VERSION
    raw["schema_version"] = 3  # read as the version-3 file it was: its gate judged again
    assert parse_summary(raw, "reference").noise.resolved  # its A/A held, floor 7.1%
    raw["noise"]["self_ci95"] = [0.5096, 0.9906]
    migrated = parse_summary(raw, "old run").noise
    assert not migrated.resolved and "excludes 1.0" in migrated.reasons[0]


def _timing(baseline: list[float], again: list[float], other: list[float]) -> TimingRecord:
    return TimingRecord(
        rounds=len(baseline),
        target_batch_s=0.01,
        wall_s=1.0,
        baseline="default",
        repeat="default#again",
        variants={
            "default": TimedVariant(round_step_s=tuple(baseline)),
            "default#again": TimedVariant(round_step_s=tuple(again)),
            "c01": TimedVariant(round_step_s=tuple(other)),
        },
    )


def _gate(timed: TimingRecord, exp: Any) -> judging.StageGate:
    return judging.gate(timed, _limits(exp))


def test_a_search_stage_that_fails_its_aa_check_calls_only_what_clears_its_floor() -> None:
    from harness.config.experiment import Experiment

    exp = Experiment(experiment="s", baseline="default")
    base = jitter(1.0, 0.01, 10, 3)
    quiet = _timing(base, jitter(1.0, 0.01, 10, 4), [0.5 * x for x in base])
    g = _gate(quiet, exp)
    assert g.withheld == () and g.aa_failed == ()
    assert _verdicts(quiet, [("c01", "default")], g, exp)[("c01", "default")].verdict == (
        stats.FASTER
    )
    # The baseline against itself at 0.7×: a floor over 40%. A candidate at 0.9× cannot clear
    # it and is not resolved; one at 0.5× (twice as fast) does, and is called faster.
    for share, want in ((0.9, stats.NOT_RESOLVED), (0.5, stats.FASTER)):
        noisy = _timing(base, [0.7 * x for x in base], [share * x for x in base])
        g = _gate(noisy, exp)
        assert g.aa_failed and g.withheld == () and g.floor > 0.4
        verdict = _verdicts(noisy, [("c01", "default")], g, exp)[("c01", "default")]
        assert verdict.verdict == want, verdict


def test_a_budget_that_gives_too_few_rounds_withholds_its_intervals_and_says_why() -> None:
    """A 0.1 s eager call in a 3 s budget leaves 3 rounds: no 95% interval is drawn from them;
    the run says how many ran and what to raise (README: budget_s)."""
    from harness.config.experiment import Experiment

    exp = Experiment(experiment="s", baseline="default")
    base = jitter(1.0, 0.01, 3, 3)
    three = _timing(base, jitter(1.0, 0.01, 3, 4), [0.5 * x for x in base])
    (why,) = _gate(three, exp).withheld
    assert "only 3 timing rounds ran" in why and "timing.budget_s" in why
    verdict = _verdicts(three, [("c01", "default")], _gate(three, exp), exp)
    assert verdict[("c01", "default")].verdict != stats.FASTER
    four = _timing(*(jitter(1.0, 0.01, 4, k) for k in (3, 4, 5)))
    assert _gate(four, exp).withheld == ()


# --- adaptive rounds -----------------------------------------------------------------------------


def test_the_stop_rule_reads_widths_not_whether_an_interval_excludes_one() -> None:
    base = jitter(1.0, 0.01, 10, 5)
    narrow_apart = {"a": [1.5 * x for x in jitter(1.0, 0.01, 10, 6)], "b": base}
    narrow_same = {"a": jitter(1.0, 0.01, 10, 7), "b": base}
    wide_apart = {"a": jitter(1.5, 0.4, 10, 8), "b": base}  # excludes 1.0, but wide
    wide_same = {"a": jitter(1.0, 0.4, 10, 9), "b": base}
    pair = [("a", "b")]
    assert stage.widths_met(narrow_apart, pair, 0.10)
    assert stage.widths_met(narrow_same, pair, 0.10)  # holding 1.0 does not stop it less
    assert stats.ratio_estimate(wide_apart["a"], base).ci95[0] > 1.0
    assert not stage.widths_met(wide_apart, pair, 0.10)  # excluding 1.0 does not stop it
    assert not stage.widths_met(wide_same, pair, 0.10)


def test_a_ratio_still_too_wide_is_not_resolved_never_a_verdict() -> None:
    wide = stats.RatioEstimate(1.4, (1.1, 1.9), 10, p=0.0)
    decision = stats.decide(wide, 0.15, adjusted_p=0.0, target_width=0.10)
    assert decision.verdict == stats.NOT_RESOLVED and "not resolved in this run" in decision.why
    assert stats.NOT_RESOLVED in stats.NO_DIFFERENCE
    # The same width wholly beyond the floor decides the direction, either way round.
    assert stats.decide(wide, 0.05, adjusted_p=0.0, target_width=0.10).verdict == stats.SLOWER
    fast = stats.RatioEstimate(0.7, (0.5, 0.9), 10, p=0.0)
    assert stats.decide(fast, 0.05, adjusted_p=0.0, target_width=0.10).verdict == stats.FASTER
    assert stats.decide(fast, 0.15, adjusted_p=0.0, target_width=0.10).verdict == (
        stats.NOT_RESOLVED
    )


class FakeClock:
    """A clock that moves only when a timed call says so: rounds without wall time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _timed(clock: FakeClock, name: str, cost: list[float]) -> rounds.Timed:
    """A variant whose every call advances the clock by cost[0] (changeable mid-run)."""

    def call() -> None:
        clock.now += cost[0]

    return rounds.Timed(name, call, lambda out: None)


def test_rounds_are_added_while_the_rule_asks_and_the_budget_allows() -> None:
    clock = FakeClock()
    timed = [_timed(clock, n, [0.001]) for n in ("a", "b")]
    seen: list[int] = []

    def more(step_s: dict[str, list[float]]) -> bool:
        seen.append(len(step_s["a"]))
        return len(step_s["a"]) < 8

    result = rounds.time_rounds(
        timed, 4, 0.004, warmup=0, budget_s=1.0, more=more, max_budget_s=100.0, clock=clock
    )
    assert seen == [4, 6, 8] and len(result.step_s["a"]) == 8  # pairs of rounds, then it stops
    assert result.added_rounds == 4 and result.stopped == "widths"
    clock = FakeClock()
    timed = [_timed(clock, n, [0.001]) for n in ("a", "b")]
    result = rounds.time_rounds(
        timed, 4, 0.004, warmup=0, more=lambda s: True, max_budget_s=0.5, clock=clock
    )
    assert result.stopped == "budget" and clock.now <= 0.5
    assert result.added_rounds > 0 and result.added_rounds % 2 == 0


# --- robust rounds --------------------------------------------------------------------------------


def test_one_preempted_batch_does_not_move_its_round() -> None:
    assert rounds.round_figure([0.010, 0.500, 0.011], calls=10) == pytest.approx(0.0011)
    clock = FakeClock()
    cost = [0.001]
    slow = _timed(clock, "slow_once", cost)
    calls = {"n": 0}
    inner = slow.call

    def call() -> None:
        calls["n"] += 1
        # Calibration makes calls 1 to 49 (batches of 2, 20 and 27); round 0's slot is three
        # batches of 9, and its second (calls 59 to 67) is 100× slower, as a preempted batch.
        cost[0] = 0.1 if 59 <= calls["n"] <= 67 else 0.001
        inner()

    timed = [rounds.Timed("slow_once", call, slow.wait)]
    result = rounds.time_rounds(timed, 2, 0.024, warmup=0, batches=3, clock=clock)
    assert result.calls_per_batch == {"slow_once": 9} and result.batches == 3
    assert result.step_s["slow_once"] == pytest.approx((0.001, 0.001))


def test_a_slot_too_short_to_split_is_timed_as_fewer_longer_batches() -> None:
    assert rounds.split_count({"a": 24, "b": 40}, 3) == 3
    assert rounds.split_count({"a": 16, "b": 40}, 3) == 2  # the fewest calls decide
    assert rounds.split_count({"a": 6}, 3) == 1  # never a batch of two calls' overhead
    clock = FakeClock()
    timed = [_timed(clock, "short", [0.001])]
    result = rounds.time_rounds(timed, 2, 0.006, warmup=0, batches=3, clock=clock)
    assert result.batches == 1 and result.calls_per_batch["short"] >= 6


# --- the machine's readings -----------------------------------------------------------------------


def test_a_worker_that_got_less_cpu_than_wall_time_is_flagged_as_preempted() -> None:
    before = {"wall_s": 10.0, "cpu_s": 5.0, "load_1m": 0.4, "steal_s": 1.0}
    after = {"wall_s": 11.0, "cpu_s": 5.5, "load_1m": 0.4, "steal_s": 1.0}
    assert machine.flags(before, after, cpus=2, host_bound=True) == (
        "preempted: the worker got 50% of the wall time as CPU time",
    )
    assert machine.flags(before, after, cpus=2, host_bound=False) == ()  # a GPU worker waits
    busy = {**after, "cpu_s": 6.0, "load_1m": 5.0, "steal_s": 1.2}
    assert machine.flags(before, busy, cpus=2, host_bound=True) == (
        "CPU steal 10% of the round",
        "load average 5.0 on 2 CPUs",
    )
    reading = machine.read()
    assert {"wall_s", "cpu_s", "load_1m", "steal_s", "cpus"} <= set(reading)


def test_other_processes_cpu_is_the_machines_busy_time_less_the_workers_own() -> None:
    before = {"wall_s": 10.0, "cpu_s": 5.0, "busy_s": 100.0, "steal_s": 1.0}
    # 1 s of wall on 2 CPUs: the machine was busy 1.6 s, the worker took 0.4 s of it.
    after = {"wall_s": 11.0, "cpu_s": 5.4, "busy_s": 101.6, "steal_s": 1.0}
    assert machine_state.others_share(before, after, 2) == pytest.approx(0.6)
    assert machine.flags(before, after, cpus=2, host_bound=False) == (
        "other processes 60% of the CPUs",
    )
    quiet = {**after, "busy_s": 100.5}  # the worker's own 0.4 s and 0.1 s of the rest
    assert machine_state.others_share(before, quiet, 2) == pytest.approx(0.05)
    assert machine.flags(before, quiet, cpus=2, host_bound=False) == ()
    assert machine_state.others_share({}, after, 2) is None  # a reading from before busy_s
    reading = machine.read()
    assert reading["busy_s"] is None or reading["busy_s"] > 0


def _with_others(timed: TimingRecord, share: float) -> TimingRecord:
    """`timed` with machine readings around each round in which other processes took `share`
    of 2 CPUs."""
    context = tuple(
        RoundContext(
            r,
            {"wall_s": float(r), "cpu_s": 0.5 * r, "busy_s": (0.5 + 2 * share) * r, "cpus": 2},
            {
                "wall_s": r + 1.0,
                "cpu_s": 0.5 * (r + 1),
                "busy_s": (0.5 + 2 * share) * (r + 1),
                "cpus": 2,
            },
        )
        for r in range(timed.rounds)
    )
    return dataclasses.replace(timed, context=context)


def test_a_busy_machine_gates_the_run_even_when_its_aa_pair_is_clean() -> None:
    from harness.config.experiment import Experiment

    exp = Experiment(experiment="s", baseline="default")
    base = jitter(1.0, 0.01, 10, 3)
    clean = _timing(base, jitter(1.0, 0.01, 10, 4), [0.5 * x for x in base])
    assert _gate(_with_others(clean, 0.05), exp).withheld == ()
    busy = _gate(_with_others(clean, 0.6), exp)
    assert len(busy.withheld) == 1
    assert busy.withheld[0].startswith("other processes took 60% of the 2 CPUs")
    assert "timing.max_others 15%" in busy.withheld[0]
    judged = _verdicts(_with_others(clean, 0.6), [("c01", "default")], busy, exp)
    assert judged[("c01", "default")].verdict == stats.NOT_RESOLVED
    lenient = dataclasses.replace(exp, timing=dataclasses.replace(exp.timing, max_others=0.7))
    assert _gate(_with_others(clean, 0.6), lenient).withheld == ()


def test_a_max_budget_under_the_budget_is_refused_in_one_line(tmp_path: Path) -> None:
    from harness.config import load

    load("gelu.yaml", ["--config.timing.max_budget_s=0"])
    with pytest.raises(ConfigError, match=r"timing.max_budget_s: must be 0"):
        load("gelu.yaml", ["--config.timing.max_budget_s=1.0"])


# --- re-time later ------------------------------------------------------------------------------


def test_a_saved_run_is_timed_again_with_its_programs_checked_and_nothing_lost(
    cpu_run: Path, tmp_path: Path
) -> None:
    import shutil

    from conftest import TINY, run_harness

    root = tmp_path / "results"
    copy = root / "gelu" / cpu_run.name
    shutil.copytree(cpu_run, copy, symlinks=True)
    before = json.loads((copy / "timing.json").read_text())
    proc = run_harness(
        "--config=gelu.yaml",
        *TINY,
        f"--resume={cpu_run.name}",
        "--config.timing.only=true",
        results_root=root,
    )
    assert proc.returncode == 0, proc.stderr
    assert "first call" not in proc.stdout  # nothing captured again
    # a finished run was never interrupted, and its progress lines say where they come from
    assert "interrupted" not in proc.stdout, proc.stdout
    assert re.search(r"^\[\d+/\d+\] xla +kept from the earlier run \(", proc.stdout, re.M)
    kept = sorted(copy.glob("timing.before-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == before
    assert sorted(copy.glob("summary.before-*.json"))
    after = json.loads((copy / "timing.json").read_text())
    assert after["wall_s"] != before["wall_s"]
    notes = [v["note"] or "" for v in after["variants"].values()]
    assert any("optimized HLO equals the captured one" in n for n in notes), notes
    assert "re-timed (timing.only)" in json.loads((copy / "manifest.json").read_text())["notes"][0]
    assert sorted(copy.glob("manifest.before-*.json"))
    # Without timing.only a finished run is still never changed.
    plain = run_harness("--config=gelu.yaml", *TINY, f"--resume={cpu_run.name}", results_root=root)
    assert plain.returncode == 2 and plain.stderr.startswith("error: flag --resume=")
    assert json.loads((copy / "timing.json").read_text()) == after


def _failed(run: saved.SavedRun, names: set[str]) -> saved.SavedRun:
    """The run with `names` failed: no timing, status failed."""

    def fail(v: saved.SavedVariant) -> saved.SavedVariant:
        if v.name not in names:
            return v
        ident = dataclasses.replace(v.summary.identity, status="failed", reason="TypeError: x")
        summary = dataclasses.replace(v.summary, identity=ident, timing=type(v.summary.timing)())
        return dataclasses.replace(v, summary=summary)

    return dataclasses.replace(run, variants=tuple(fail(v) for v in run.variants))


def test_failed_variants_are_never_said_to_show_no_difference(cpu_run: Path) -> None:
    """The terminal's findings line and its `failed variants:` line read the same statuses."""
    loaded = saved.load_run(cpu_run)
    noise = dataclasses.replace(loaded.summary.noise, resolved=True, reasons=())
    quiet = dataclasses.replace(loaded, summary=dataclasses.replace(loaded.summary, noise=noise))
    every = {v.name for v in quiet.variants}
    nothing = _judged(_failed(quiet, every))
    assert nothing.summary.findings.timing == ()
    (line, *_) = conclusion_lines(nothing)
    assert (
        line
        == f"findings: nothing to compare: 0 of {len(every)} variants timed ({len(every)} failed)"
    )
    some = _judged(_failed(quiet, {"eager"}))
    if not some.summary.findings.timing:
        (line, *_) = conclusion_lines(some)
        assert "(1 failed, so not compared)" in line and "no resolvable difference" in line


def test_the_verdict_never_says_passed_beside_failed(cpu_run: Path) -> None:
    """A run whose A/A check failed but that still resolves (the floor widened every interval),
    without a pair ratio recorded: its header is one verdict, read from `aa_held`."""
    loaded = saved.load_run(cpu_run)
    noise = dataclasses.replace(
        loaded.summary.noise,
        resolved=True,
        reasons=(),
        aa_held=False,
        aa_reasons=(),
        self_ratio=None,
        self_ci95=None,
    )
    run = _judged(
        dataclasses.replace(loaded, summary=dataclasses.replace(loaded.summary, noise=noise))
    )
    text = to_markdown(tuple(findings.verdict_blocks(run)))
    assert "passed" not in text and "its A/A check failed" in text, text
    assert "()" not in text, text
