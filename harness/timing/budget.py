"""The timing stage's budget when one call is long: one-call batches, then fewer rounds, down
to a stated minimum, and a record that says so.

`rounds.plan` keeps the rounds and shrinks the batches so that they fit `timing.budget_s`;
`rounds.fit_budget` shrinks them further after calibration. A batch cannot shrink under one
call, so a variant whose single call is longer than the budget allows a slot (an eager
scanned LM: 13 s a call against a 6 s budget) used to run every planned round regardless:
274 s of timing against `budget_s: 6`, and nothing said so. Here:

- a variant whose warm-up call already fills a batch is not calibrated (calibration would
  time two more of its calls) and is timed one call per batch, with no settling calls (a
  call that long sets the clock it runs at itself);
- a variant the worker already ran warm (captured in the same process) whose known call
  fills a batch is not warmed up again: two more 13 s calls would be most of the budget;
- when the planned rounds of the smallest batches still exceed what the budget has left, the
  stage runs as many rounds as fit, never fewer than `timing.min_rounds`, and returns a
  `RoundsCut` that timing.json keeps and every verdict of the run cites
  (harness.analyze.judging);
- when even `min_rounds` rounds would run past `timing.max_budget_s`, the slowest variants
  are left out of the rounds (`too_slow`), each with the reason timing.json's `excluded`
  keeps: the stage never runs past its largest budget for one call it cannot time.

Pure functions over seconds measured by the caller: no clock, no JAX.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.records.rounds import RoundsCut


def fills_batch(call_s: float | None, target_batch_s: float) -> bool:
    """True when one call of `call_s` seconds alone fills a batch of `target_batch_s`: the
    variant is timed one call per batch, uncalibrated."""
    return call_s is not None and call_s >= target_batch_s


def round_seconds(
    per_call_s: Mapping[str, float], calls: Mapping[str, int], settling: Mapping[str, int]
) -> float:
    """Returns the seconds one round takes: each slot's calls and settling calls."""
    return sum(per_call_s[n] * (calls[n] + settling.get(n, 0)) for n in calls)


def fewest(planned: int, min_rounds: int) -> int:
    """The fewest rounds a cut may leave: `min_rounds`, at least one, at most the planned."""
    return min(planned, max(1, min_rounds))


def rounds_within(planned: int, min_rounds: int, round_s: float, left_s: float) -> int:
    """Returns how many rounds to run: the planned ones when they fit `left_s`, else as many as
    fit, never fewer than `min_rounds` (nor more than planned)."""
    floor = fewest(planned, min_rounds)
    if planned * round_s <= max(left_s, 0.0):
        return planned
    fit = math.floor(max(left_s, 0.0) / max(round_s, 1e-12))
    return max(floor, min(planned, fit))


def cut(
    planned: int,
    min_rounds: int,
    round_s: float,
    left_s: float,
    per_call_s: Mapping[str, float],
    budget_s: float,
) -> RoundsCut | None:
    """Returns the record of a cut (None when the planned rounds fit): how many rounds ran
    instead of how many, and why, naming the variant with the longest call."""
    rounds = rounds_within(planned, min_rounds, round_s, left_s)
    if rounds >= planned:
        return None
    slowest = max(per_call_s, key=lambda n: per_call_s[n])
    call_s = per_call_s[slowest]
    over = rounds * round_s > max(left_s, 0.0)
    why = (
        f"timed {rounds} of {planned} planned rounds: one call of `{slowest}` takes "
        f"{call_s:.3g} s and a round of the smallest batches {round_s:.3g} s, against the "
        f"{max(left_s, 0.0):.3g} s the {budget_s:g} s budget had left for the rounds"
    )
    if over:
        why += f"; {rounds} rounds (timing.min_rounds) are the fewest timed, past the budget"
    return RoundsCut(
        planned=planned,
        rounds=rounds,
        min_rounds=fewest(planned, min_rounds),
        round_s=round_s,
        left_s=left_s,
        slowest=slowest,
        call_s=call_s,
        over_budget=over,
        why=why,
    )


def too_slow(
    per_call_s: Mapping[str, float],
    calls: Mapping[str, int],
    settling: Mapping[str, int],
    rounds: int,
    left_s: float,
    twins: Mapping[str, str],
) -> dict[str, str]:
    """Returns the variants to leave out of the rounds, with why: the slowest slots, one at a
    time, until `rounds` rounds of the others fit `left_s` (what `timing.max_budget_s` has
    left). A slot that times the same program as another (`twins`: the A/A pair's second
    slot) goes with it. Empty when they fit already."""
    kept = dict(calls)
    out: dict[str, str] = {}
    by_cost = sorted(kept, key=lambda n: per_call_s[n] * (kept[n] + settling.get(n, 0)))
    while kept and rounds * round_seconds(per_call_s, kept, settling) > max(left_s, 0.0):
        slowest = by_cost.pop()
        if slowest not in kept:
            continue
        rounds_s = rounds * per_call_s[slowest] * (kept[slowest] + settling.get(slowest, 0))
        why = (
            f"one call takes {per_call_s[slowest]:.3g} s, and the "
            f"{rounds} rounds timing.min_rounds keeps would take {rounds_s:.3g} s of it, "
            f"past the {max(left_s, 0.0):.3g} s timing.max_budget_s had left"
        )
        for name in [slowest, *(t for t, of in twins.items() if of == slowest)]:
            if name in kept:
                del kept[name]
                out[name] = why
    return out
