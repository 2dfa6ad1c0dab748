"""Runs the timing stage over the variants a worker holds and returns timing.json's record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.common import stats
from harness.config.experiment import Experiment
from harness.config.timing import max_budget_s
from harness.frontends import registry
from harness.records.summary import RoundContext, TimedVariant, TimingRecord
from harness.timing import clocks, machine, rounds

DEFAULT_ROUNDS = {"cpu": 10, "gpu": 5}


def _wait(out: Any) -> Any:
    import jax

    return jax.block_until_ready(out)


def run(
    exp: Experiment,
    calls: dict[str, Callable[[], Any]],
    platform: str,
    workdir: Path,
    notes: dict[str, str],
    excluded: dict[str, str],
    waits: Mapping[str, Callable[[Any], Any]] | None = None,
    announce: Callable[[str], None] | None = None,
    agree: Callable[[Any], Any] | None = None,
    prepared: Mapping[str, float] | None = None,
    warm_s: Mapping[str, float] | None = None,
) -> TimingRecord:
    """Times `calls` in interleaved rounds, the baseline twice per round; returns the record.

    `waits` gives a variant its own wait for a call's result (its frontend's `waiter`, such
    as a device synchronize); the others wait with `jax.block_until_ready`. `announce`
    is told each variant's name before its calls (rounds.time_rounds); `agree`, in a group
    of processes, makes every decision the rounds take process 0's (rounds.time_rounds).
    `prepared` gives the seconds the worker spent making a variant ready for timing;
    `warm_s` the per-call seconds of those it captured itself (rounds.time_rounds).
    """
    names = list(calls)
    wait = dict(waits or {})
    timed = [rounds.Timed(n, calls[n], wait.get(n, _wait)) for n in names]
    baseline = exp.baseline if exp.baseline in calls else None
    repeat = f"{baseline}{rounds.AA_SUFFIX}" if baseline else None
    if baseline:
        # The second slot sits half-way round the order from the first, so the A/A pair is
        # as far apart in each round as two variants can be.
        at = names.index(baseline) + (len(names) + 1) // 2
        timed.insert(
            at % (len(timed) + 1),
            rounds.Timed(repeat, calls[baseline], wait.get(baseline, _wait)),
        )
    count = exp.timing.rounds or DEFAULT_ROUNDS.get(platform, 10)
    settle = exp.timing.settle
    count, target = rounds.plan(len(timed), count, exp.timing.batch_s, exp.timing.budget_s, settle)
    read, source = clocks.reader(platform)
    pairs = reported_pairs(exp, [t.name for t in timed], baseline, repeat)
    width = exp.timing.target_width
    result = rounds.time_rounds(
        timed,
        count,
        target,
        warmup=max(1, exp.measure.warmup),
        sample=machine.with_machine(read),
        budget_s=exp.timing.budget_s,
        settle=settle,
        announce=announce,
        batches=exp.timing.batches,
        more=lambda step_s: not widths_met(step_s, pairs, width),
        max_budget_s=max_budget_s(exp.timing),
        agree=agree,
        twins={repeat: baseline} if baseline and repeat else None,
        min_rounds=exp.timing.min_rounds,
        warm_s=warm_s,
    )
    timed = [t for t in timed if t.name not in result.dropped]
    host_bound = platform not in ("gpu", "tpu")
    return TimingRecord(
        rounds=len(result.orders),  # the planned ones, fewer when cut, plus those added
        target_batch_s=target,
        settle=settle,
        wall_s=result.wall_s,
        baseline=baseline,
        repeat=repeat,
        orders=result.orders,
        variants={
            t.name: TimedVariant(
                round_step_s=result.step_s[t.name],
                calls_per_batch=result.calls_per_batch[t.name],
                settle_calls=result.settle_calls[t.name],
                note=notes.get(t.name),
                prepare_s=(prepared or {}).get(t.name),
            )
            for t in timed
        },
        excluded={
            **excluded,
            **{n.removesuffix(rounds.AA_SUFFIX): w for n, w in result.dropped.items()},
        },
        context_source=source,
        context=tuple(
            RoundContext(
                s.round,
                s.before,
                s.after,
                machine.flags(s.before, s.after, machine.usable_cpus(), host_bound),
            )
            for s in result.samples
        ),
        batches=result.batches,
        added_rounds=result.added_rounds,
        stopped=result.stopped or None,
        cut=result.cut,
    )


def reported_pairs(
    exp: Experiment, names: Sequence[str], baseline: str | None, repeat: str | None
) -> tuple[tuple[str, str], ...]:
    """Returns the ratios the analysis will report from these rounds, as (this, other): every
    variant against its framework's baseline and lower bound, a variant of a framework timed
    against another (its frontend's `timed_against`) also against the config's baseline, and the
    A/A pair. (A pair of different problem sizes is not reported; it is kept here, where sizes
    are not compared, which can only add rounds.)"""
    timed = [v for v in exp.variants if v.name in names]
    by_role: dict[tuple[str, str], str] = {}
    for v in timed:
        for role in v.resolved_roles:
            by_role.setdefault((v.framework, role), v.name)
    out = []
    for v in timed:
        others = {by_role.get((v.framework, "baseline")), by_role.get((v.framework, "lower_bound"))}
        if registry.traits(v.framework).timed_against is not None:
            others.add(baseline)  # and against the reference framework's baseline
        out += [(v.name, o) for o in sorted(o for o in others if o and o != v.name)]
    if baseline and repeat:
        out.append((repeat, baseline))
    return tuple(out)


def widths_met(
    step_s: Mapping[str, Sequence[float]], pairs: Sequence[tuple[str, str]], target: float
) -> bool:
    """The adaptive rounds' stop rule: True when every pair's 95% interval is narrower than
    `target` (stats.log_width). It reads widths only, never where an interval lies, so
    adding rounds cannot be steered towards excluding 1.0."""
    for a, b in pairs:
        if a not in step_s or b not in step_s:
            continue  # one of them is not in the rounds (rounds.Rounds.dropped)
        x, y = step_s.get(a) or (), step_s.get(b) or ()
        if len(x) < 2 or len(x) != len(y):
            return False
        if stats.log_width(stats.ratio_estimate(x, y).ci95) >= target:
            return False
    return True
