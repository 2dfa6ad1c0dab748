"""The timing stage: every variant timed in the same rounds, alternating, so ratios pair up.

Each round runs every variant once, in an order balanced over rounds for position and for
which variant ran just before (`round_order`, a Williams design):
a batch of back-to-back calls long enough to time well, blocked once at the end. A variant's
time per step in a round is the batch's wall time over its calls. Whatever drifts during the
stage (clocks, temperature, other load) then hits every variant in every round alike, and a
ratio of two variants taken round by round cancels it (harness.common.stats).

The baseline is timed twice in every round, in two places of the order, so the run measures
its own noise: the ratio of the baseline to itself.

Each variant's slot in a round is a few short batches (`batches`), and the round's figure is
their median time per call: a batch that the OS preempted is one outlier among them, not the
round's figure. After the planned rounds, more pairs of rounds are added while a stop rule
says the intervals are still too wide (`more`), until `max_budget_s` is spent; the rule sees
only the rounds, never a verdict.

This module times callables and knows nothing of JAX: the caller passes each variant's call
and the function that waits for its result.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.records.rounds import RoundsCut
from harness.timing import budget

AA_SUFFIX = "#again"  # the baseline's second slot in every round


@dataclass(frozen=True)
class Timed:
    """One thing to time: its name, one call, and how to wait for what the call returned."""

    name: str
    call: Callable[[], Any]
    wait: Callable[[Any], Any]


@dataclass(frozen=True)
class RoundSample:
    """The device context around one round (clocks, temperature, power), as read."""

    round: int
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rounds:
    """Per variant, the time per step in each round; plus how the rounds were run."""

    step_s: dict[str, tuple[float, ...]]
    calls_per_batch: dict[str, int]
    settle_calls: dict[str, int]
    orders: tuple[tuple[str, ...], ...]
    samples: tuple[RoundSample, ...]
    target_batch_s: float
    wall_s: float
    batches: int = 1  # short batches per variant per round, the round's figure their median
    added_rounds: int = 0  # rounds added after the planned ones, while intervals were wide
    stopped: str = ""  # why no more rounds were added
    cut: RoundsCut | None = None  # fewer rounds than planned, to keep the budget (budget.cut)
    # Variants left out of the rounds, with why: even `min_rounds` of their calls would run
    # past `max_budget_s` (budget.too_slow).
    dropped: dict[str, str] = field(default_factory=dict)


def williams_sequence(n: int) -> tuple[int, ...]:
    """Returns the first row of a Williams design for n treatments: 0, 1, n−1, 2, n−2, …

    Its rotations (add s mod n) and their reverses, 2n rows in all, put every treatment in
    every position twice and every ordered pair of treatments next to each other twice
    (Williams 1949, "Experimental designs balanced for the estimation of residual effects of
    treatments")."""
    return tuple(0 if k == 0 else ((k + 1) // 2 if k % 2 else n - k // 2) for k in range(n))


def round_order(names: Sequence[str], r: int) -> tuple[str, ...]:
    """Returns round r's order: the Williams sequence rotated by r // 2, reversed on odd rounds.

    Over 2n rounds every variant runs in every position twice and right after every other
    variant twice. A plain rotation (the order this replaced) always put the same variant
    before each one: on the 2-core VM `xla` always ran after `eager` one way and after
    `xla_no_fusion` the other, and the baseline timed against itself read 12% apart between
    the two directions: a carry-over that put the A/A ratio at 0.974 on average over 15 idle
    runs (1.003 over 20 runs with this design). Balanced,
    each variant's carry-over is the average over all of them, alike for every variant.
    """
    n = len(names)
    row = [names[(i + r // 2) % n] for i in williams_sequence(n)]
    return tuple(reversed(row) if r % 2 else row)


def _batch(
    t: Timed, calls: int, settle: int = 0, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Returns the wall seconds of `calls` back-to-back calls, blocked once at the end.

    `settle` untimed calls of the same variant run first (waited for): a GPU at its power cap
    sets its clock by what just ran, so without them a batch's first calls would run at the
    clock the previous variant left.
    """
    if settle:
        out = None
        for _ in range(settle):
            out = t.call()
        t.wait(out)
    start = clock()
    out = None
    for _ in range(calls):
        out = t.call()
    t.wait(out)
    return clock() - start


def round_figure(batch_s: Sequence[float], calls: int) -> float:
    """Returns a round's time per call for one variant: the median over its short batches,
    so one batch slowed by preemption does not move it."""
    ordered = sorted(b / calls for b in batch_s)
    n = len(ordered)
    if n == 0:
        raise ValueError("a round with no batches")
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def _slot(t: Timed, calls: int, settle: int, batches: int, clock: Callable[[], float]) -> float:
    """Times one variant's slot of a round: settled once, then `batches` short batches."""
    times = [_batch(t, calls, settle if i == 0 else 0, clock) for i in range(batches)]
    return round_figure(times, calls)


MIN_CALLS = 2  # a batch times at least two back-to-back calls, so calls overlap as in a loop
# A slot is split into short batches only while each keeps this many calls. A batch's start
# and end can cost milliseconds on the 2-core VM (idle cores wake for its first call, the
# caller for its result), where the default study's call takes 1.1 ms: timed alone in batches
# of 2 it once measured 2.1–2.9 ms a call, in batches of 10 1.12–1.24 ms. Under this, a slot is
# fewer (or one) longer batches. (The study's idle A/A floors were 10–40% with the 2-call
# split and 15–27% without it: the batches were not the main source of that noise.)
MIN_SPLIT_CALLS = 8


def split_count(calls: Mapping[str, int], batches: int) -> int:
    """Returns how many short batches each slot is split into: `batches`, or fewer where the
    variant with the fewest calls would have under MIN_SPLIT_CALLS a batch."""
    fewest = min(calls.values(), default=0)
    return max(1, min(batches, fewest // MIN_SPLIT_CALLS))


@dataclass(frozen=True)
class Batch:
    """A calibrated batch: how many calls, and the seconds they took."""

    calls: int
    seconds: float


def _same(value: Any) -> Any:
    return value


def calls_for(
    t: Timed,
    target_s: float,
    max_calls: int = 100_000,
    clock: Callable[[], float] = time.perf_counter,
    agree: Callable[[Any], Any] = _same,
) -> Batch:
    """Returns the batch of back-to-back calls that fills about `target_s` (at least
    MIN_CALLS), with the seconds its last calibration took. Each calibration's seconds pass
    through `agree` (in a group of processes, process 0's), so every process grows its batch
    alike and calls a collective as often as the others."""
    calls = MIN_CALLS
    while True:
        elapsed = float(agree(_batch(t, calls, clock=clock)))
        if elapsed >= target_s or calls >= max_calls:
            return Batch(calls, elapsed)
        grow = target_s / max(elapsed, 1e-7)
        calls = min(max_calls, max(calls + 1, math.ceil(calls * min(grow * 1.1, 10.0))))


def fit_budget(
    batches: dict[str, Batch], rounds: int, seconds_left: float, settle: float = 0.0
) -> dict[str, int]:
    """Returns each batch's calls, scaled down alike so that `rounds` rounds of them (and
    their settling calls, `settle` of a batch each) fit in `seconds_left`; never under
    MIN_CALLS (a budget too small for that is exceeded, not met by timing single calls),
    nor a one-call batch (budget.fills_batch) under its one call."""
    per_round = sum(b.seconds for b in batches.values()) * (1.0 + settle)
    scale = min(1.0, max(seconds_left, 0.0) / max(rounds * per_round, 1e-9))
    return {
        n: max(min(MIN_CALLS, b.calls), math.floor(b.calls * scale)) for n, b in batches.items()
    }


def time_rounds(
    timed: Sequence[Timed],
    rounds: int,
    target_batch_s: float,
    warmup: int = 1,
    sample: Callable[[], dict[str, Any]] | None = None,
    budget_s: float | None = None,
    settle: float = 0.0,
    announce: Callable[[str], None] | None = None,
    batches: int = 1,
    more: Callable[[Mapping[str, Sequence[float]]], bool] | None = None,
    max_budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    agree: Callable[[Any], Any] | None = None,
    twins: Mapping[str, str] | None = None,
    min_rounds: int | None = None,
    warm_s: Mapping[str, float] | None = None,
) -> Rounds:
    """Times every entry of `timed` in `rounds` interleaved rounds.

    `sample`, when given, reads the device context before and after each round. With
    `budget_s`, warm-up and calibration count against the budget and the batches shrink
    alike so that the rounds end within it. Each batch is preceded by `settle` of its calls,
    untimed (see `_batch`). `announce`, when given, is told a variant's name before its
    warm-up, its calibration and each of its batches (outside the timed span), so that a
    caller can tell which variant a crash or a hang belongs to.

    Each slot is `batches` short batches (the calibrated batch split between them; fewer when
    a batch would fall under MIN_SPLIT_CALLS calls, see `split_count`) and its figure their
    median time per call (`round_figure`); `Rounds.batches` says how many it was. With `more`
    and `max_budget_s`, pairs of rounds are added after the planned ones while `more(step_s)`
    says the intervals are still too wide and the next pair fits in `max_budget_s`, counted
    from the start like `budget_s`.

    `twins` maps an entry to the entry whose program it times again (the A/A pair's second
    slot to the baseline): it is not calibrated on its own but times exactly its twin's calls
    and settling. Calibrated apart, the two slots of one program timed different numbers of
    calls, and on a GPU at its power cap a longer batch runs at another average clock.

    In a group of processes every decision that sets how many calls run (calibration, the
    budget's scaling, adding rounds) passes through `agree`, which returns process 0's value
    everywhere: each process then runs the same calls, and none waits in a collective for a
    call another does not make.

    A variant whose last warm-up call already fills a batch is timed one call per batch,
    uncalibrated and unsettled; with `budget_s` and `min_rounds`, when the planned rounds of
    the smallest batches still do not fit the budget, fewer rounds run (never under
    `min_rounds`), none are added after them, and `Rounds.cut` says so (harness.timing.budget).
    `warm_s` gives the per-call seconds of variants already run warm in this process (their
    capture's): one whose call fills a batch is neither warmed up nor calibrated again. When
    even `min_rounds` rounds would run past `max_budget_s`, the slowest are left out
    (`Rounds.dropped`, budget.too_slow).
    """
    run = _Run(
        tell=announce or (lambda name: None),
        same=agree or _same,
        clock=clock,
        started=clock(),
        target_batch_s=target_batch_s,
        twin_of={k: v for k, v in (twins or {}).items() if k != v},
    )
    last_call = _warm_up(run, timed, warmup, warm_s or {})
    calibrated = _calibrate(run, timed, last_call)
    calls = {n: b.calls for n, b in calibrated.items()}
    left = None
    if budget_s is not None:
        left = float(run.same(budget_s - (clock() - run.started)))
        calls = fit_budget(calibrated, rounds, left, settle)
    settling = {n: 0 if c == 1 else math.ceil(c * settle) for n, c in calls.items()}
    held = _Held(list(timed), calls, rounds, None, {})
    if left is not None and budget_s is not None and min_rounds is not None:
        held = _held_to_budget(
            run, held, calibrated, settling, left, budget_s, min_rounds, max_budget_s, settle
        )
    # The slot's calls are split between its short batches; the settling stays whole.
    batches = split_count(held.calls, max(1, batches))
    calls = {n: max(min(MIN_CALLS, c), math.ceil(c / batches)) for n, c in held.calls.items()}
    slots = _Slots(run, held.timed, calls, settling, batches, sample)
    rounds_started = clock()
    for r in range(held.rounds):
        slots.one_round(r)
    stopped, added = "", 0
    if held.cut is not None:
        stopped = "budget"  # the planned rounds did not fit it: none are added
    elif more is not None and max_budget_s is not None:
        stopped, added = _added_rounds(run, slots, held.rounds, more, max_budget_s, rounds_started)
    return Rounds(
        step_s={n: tuple(v) for n, v in slots.out.items()},
        calls_per_batch=calls,
        settle_calls=settling,
        orders=tuple(slots.orders),
        samples=tuple(slots.samples),
        target_batch_s=target_batch_s,
        wall_s=clock() - run.started,
        batches=batches,
        added_rounds=added,
        stopped=stopped,
        cut=held.cut,
        dropped=held.dropped,
    )


@dataclass(frozen=True)
class _Run:
    """What every step of `time_rounds` shares: the announcer, process 0's agreement, the
    clock and when the stage started, the batch's target, and each A/A twin's original."""

    tell: Callable[[str], None]
    same: Callable[[Any], Any]
    clock: Callable[[], float]
    started: float
    target_batch_s: float
    twin_of: Mapping[str, str]

    def fills_batch(self, seconds: float) -> bool:
        """True when one call of `seconds`, as process 0 saw it, fills a batch alone."""
        return budget.fills_batch(float(self.same(seconds)), self.target_batch_s)


def _warm_up(
    run: _Run, timed: Sequence[Timed], warmup: int, warm_s: Mapping[str, float]
) -> dict[str, float]:
    """Warms each variant up; returns each one's last warm-up call, seconds (its capture's
    per-call seconds where that already fills a batch: it is not called again)."""
    last_call: dict[str, float] = {}
    for t in timed:
        # Process 0's in a group: every process warms up alike, or a collective waits (each
        # captured the same variants, so each has the same ones warm).
        known = warm_s.get(run.twin_of.get(t.name, t.name))
        known = float(run.same(known)) if known is not None else None
        if known is not None and budget.fills_batch(known, run.target_batch_s):
            last_call[t.name] = known  # warm in this process already, and long
            continue
        run.tell(t.name)
        if warmup >= 1:
            last_call[t.name] = _last_warm_call(run, t, warmup)
    return last_call


def _last_warm_call(run: _Run, t: Timed, warmup: int) -> float:
    """Calls `t` up to `warmup` times; returns the last call's seconds."""
    for i in itertools.count():
        begun = run.clock()
        t.wait(t.call())
        seconds = run.clock() - begun
        long = run.fills_batch(seconds)
        # The first call may have compiled: one that long is called again before its time
        # decides anything; a second that long is warm, and more would only spend the budget.
        if long and i == 0:
            continue
        if long or i + 1 >= warmup:
            return seconds
    raise AssertionError("unreachable: itertools.count() does not end")


def _calibrate(
    run: _Run, timed: Sequence[Timed], last_call: Mapping[str, float]
) -> dict[str, Batch]:
    """Returns each variant's calibrated batch: one call where its last warm-up call fills a
    batch alone; an A/A twin's is its original's (it times exactly the same calls)."""
    calibrated = {}
    for t in timed:
        if t.name in run.twin_of:
            continue
        run.tell(t.name)
        one = float(run.same(last_call[t.name])) if t.name in last_call else None
        if one is not None and budget.fills_batch(one, run.target_batch_s):
            calibrated[t.name] = Batch(1, one)
        else:
            calibrated[t.name] = calls_for(t, run.target_batch_s, clock=run.clock, agree=run.same)
    for name, of in run.twin_of.items():
        calibrated[name] = calibrated[of]
    return calibrated


@dataclass(frozen=True)
class _Held:
    """What the budget leaves: the variants timed, their calls a batch, the rounds, the cut
    (None: the planned rounds fit) and the variants left out, each with why."""

    timed: list[Timed]
    calls: dict[str, int]
    rounds: int
    cut: RoundsCut | None
    dropped: dict[str, str]


def _held_to_budget(
    run: _Run,
    held: _Held,
    calibrated: Mapping[str, Batch],
    settling: Mapping[str, int],
    left: float,
    budget_s: float,
    min_rounds: int,
    max_budget_s: float | None,
    settle: float,
) -> _Held:
    """Returns the rounds the budget leaves (harness.timing.budget.cut), without the variants
    too slow for even `min_rounds` of them within `max_budget_s` (budget.too_slow)."""
    timed, calls, dropped = held.timed, held.calls, held.dropped
    per_call = {n: b.seconds / b.calls for n, b in calibrated.items()}
    if max_budget_s is not None:
        # What max_budget_s has left, never under a quarter of it: warm-up that spent it
        # all leaves the fast variants their rounds (a quarter past it at most).
        spent = run.clock() - run.started
        most = float(run.same(max(max_budget_s - spent, 0.25 * max_budget_s)))
        fewest = budget.fewest(held.rounds, min_rounds)
        # At the smallest batches the budget allows (fit_budget's floor): only a variant
        # whose few calls cannot fit is left out, never one whose batches merely could.
        smallest = {n: max(1, min(MIN_CALLS, c)) for n, c in calls.items()}
        least = {n: 0 if c == 1 else math.ceil(c * settle) for n, c in smallest.items()}
        dropped = budget.too_slow(per_call, smallest, least, fewest, most, run.twin_of)
        timed = [t for t in timed if t.name not in dropped]
        calls = {n: c for n, c in calls.items() if n not in dropped}
        per_call = {n: c for n, c in per_call.items() if n not in dropped}
    if not calls:
        return _Held(timed, calls, 0, None, dropped)
    round_s = budget.round_seconds(per_call, calls, settling)
    cut = budget.cut(held.rounds, min_rounds, round_s, left, per_call, budget_s)
    return _Held(timed, calls, cut.rounds if cut is not None else held.rounds, cut, dropped)


class _Slots:
    """The rounds as they are run: each variant's figure per round, each round's order and
    the device context around it."""

    def __init__(
        self,
        run: _Run,
        timed: Sequence[Timed],
        calls: Mapping[str, int],
        settling: Mapping[str, int],
        batches: int,
        sample: Callable[[], dict[str, Any]] | None,
    ) -> None:
        self.run, self.calls, self.settling, self.batches = run, calls, settling, batches
        self.sample = sample
        self.by_name = {t.name: t for t in timed}
        self.names = [t.name for t in timed]
        self.out: dict[str, list[float]] = {n: [] for n in self.names}
        self.orders: list[tuple[str, ...]] = []
        self.samples: list[RoundSample] = []

    def one_round(self, r: int) -> None:
        order = round_order(self.names, r)
        self.orders.append(order)
        before = self.sample() if self.sample else {}
        for name in order:
            self.run.tell(name)
            self.out[name].append(
                _slot(
                    self.by_name[name],
                    self.calls[name],
                    self.settling[name],
                    self.batches,
                    self.run.clock,
                )
            )
        self.samples.append(RoundSample(r, before, self.sample() if self.sample else {}))


def _added_rounds(
    run: _Run,
    slots: _Slots,
    planned: int,
    more: Callable[[Mapping[str, Sequence[float]]], bool],
    max_budget_s: float,
    rounds_started: float,
) -> tuple[str, int]:
    """Adds pairs of rounds while `more` says the intervals are too wide and the next pair
    fits in `max_budget_s`; returns why it stopped (`widths` or `budget`) and how many it
    added."""
    r = planned
    while run.same(more(slots.out)):
        per_round = (run.clock() - rounds_started) / max(1, r)
        if run.same(run.clock() - run.started + 2 * per_round > max_budget_s):
            return "budget", r - planned
        # Rounds are added in pairs, so the orders stay balanced (see round_order).
        slots.one_round(r)
        slots.one_round(r + 1)
        r += 2
    return "widths", r - planned


def plan(
    variants: int, rounds: int, batch_s: float, budget_s: float, settle: float = 0.0
) -> tuple[int, float]:
    """Returns (rounds, target batch seconds) that fit the budget: the rounds are kept and the
    batch shrinks so that the rounds, settling calls included, take about `budget_s`, a
    fifth of it left for warm-up and calibration (`time_rounds` then holds the stage to the
    budget)."""
    slots = max(1, variants) * max(1, rounds) * (1.0 + settle)
    return rounds, min(batch_s, 0.8 * budget_s / slots)
