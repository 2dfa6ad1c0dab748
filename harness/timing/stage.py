"""Runs the timing stage over the variants a worker holds and returns timing.json's record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.config.schema import Experiment
from harness.summary import RoundContext, TimedVariant, TimingRecord
from harness.timing import clocks, rounds

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
) -> TimingRecord:
    """Times `calls` in interleaved rounds, the baseline twice per round; returns the record.

    `waits` gives a variant its own wait for a call's result (a torch variant's
    `torch.cuda.synchronize()`); the others wait with `jax.block_until_ready`.
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
    result = rounds.time_rounds(
        timed,
        count,
        target,
        warmup=max(1, exp.measure.warmup),
        sample=read,
        budget_s=exp.timing.budget_s,
        settle=settle,
    )
    return TimingRecord(
        rounds=count,
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
            )
            for t in timed
        },
        excluded=dict(excluded),
        context_source=source,
        context=tuple(RoundContext(s.round, s.before, s.after) for s in result.samples),
    )
