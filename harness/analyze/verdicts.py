"""The run's timing verdicts, decided together: Holm's correction over all of them, each
against the run's A/A floor.

One run compares every variant with its baseline, its lower bound and (PyTorch) its JAX
counterpart, often thirty comparisons and more; at 95% pair by pair one of twenty differences
it calls would be noise. Here each comparison's ratio is estimated first (paired rounds,
harness.common.stats, its interval holding the run-to-run spread where earlier runs measured it),
then the p-values of all that are not the same program enter Holm's step-down procedure
(`stats.holm`), and each verdict is decided with its adjusted p-value against the floor the
A/A pair measured (`stats.decide`): a difference is called only where the interval clears it,
so a failed A/A check leaves a 9× difference standing and a 1% one not resolved. Only what
makes every ratio untrustworthy (`withheld`: a busy machine, no A/A pair) turns every verdict
into `not_resolved`, with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.common import stats, terminal, userfiles
from harness.records.summary import TimingRecord, Verdict
from harness.store import io
from harness.store.records import from_json
from harness.store.runfolder import RunFolder


def read_timing(workdir: Path, warn: bool = False) -> TimingRecord | None:
    """Returns a run's timing.json, the rounds its verdicts come from; None when the run has
    none, or it is unreadable or holds more rounds than a timing stage records (which `warn`
    says in one line: the run's own rounds, not a sibling run's)."""
    path = RunFolder(workdir).timing
    if not path.is_file():
        return None
    try:
        data = io.read_json(path, userfiles.TIMING)
        if not _plausible_rounds(data):
            if warn:
                _unused(f"{path}: holds more than {MAX_ROUNDS} rounds, more than a stage records")
            return None
        return from_json(TimingRecord, data, str(path))
    except (OSError, ValueError) as e:
        if warn:
            _unused(terminal.one_line(e))
        return None


def _unused(why: str) -> None:
    """Says, in one line, why the run's rounds are not used (its verdicts stay as judged)."""
    print(f"warning: {why}; its rounds are not used", file=sys.stderr, flush=True)


# Far above what a timing stage records (1000 planned rounds, added rounds within 3× the
# budget), far below what takes minutes to judge again.
MAX_ROUNDS = 20_000


def _plausible_rounds(data: object) -> bool:
    """False for timing data whose rounds no timing stage records: more than MAX_ROUNDS
    rounds, or a variant with more samples than that; checked before a record is built."""
    if not isinstance(data, dict):
        return True  # from_json says what is wrong
    orders, variants = data.get("orders"), data.get("variants")
    if isinstance(orders, list) and len(orders) > MAX_ROUNDS:
        return False
    rounds = data.get("rounds")
    if isinstance(rounds, int) and rounds > MAX_ROUNDS:
        return False
    for timed in variants.values() if isinstance(variants, dict) else ():
        lists = timed.values() if isinstance(timed, dict) else ()
        if any(isinstance(v, list) and len(v) > MAX_ROUNDS * 64 for v in lists):
            return False
    return True


@dataclass(frozen=True)
class Pending:
    """One comparison before its verdict: `name` against `against`, as the `kind` of
    comparison (`vs_baseline`, `vs_lower_bound`, `vs_framework`)."""

    name: str
    kind: str
    against: str
    estimate: stats.RatioEstimate | None
    same_program: bool
    # The run-to-run spread in `estimate` (harness.analyze.between_runs; None: not measured),
    # and the estimate from the run's rounds alone where the spread widened it.
    between: float | None = None
    rounds_only: stats.RatioEstimate | None = None


def estimate(
    timed: TimingRecord | None, name: str, against: str, between: float = 0.0
) -> stats.RatioEstimate | None:
    """Returns the paired-round ratio name / against, or None without paired rounds; with
    `between`, its interval holds that run-to-run spread too (stats.ratio_estimate)."""
    a = timed.variants.get(name) if timed else None
    b = timed.variants.get(against) if timed else None
    if a and b and a.round_step_s and len(a.round_step_s) == len(b.round_step_s):
        return stats.ratio_estimate(a.round_step_s, b.round_step_s, between=between)
    return None


def judge(
    pending: Sequence[Pending],
    floor: float,
    target_width: float | None,
    withheld: Sequence[str] = (),
    aa_failed: Sequence[str] = (),
) -> dict[tuple[str, str], Verdict]:
    """Returns each comparison's verdict, keyed by (name, kind).

    The family corrected is every comparison with a p-value that is not the same program.
    `aa_failed`, how the run's A/A check failed, names the floor's cause in the verdicts that
    do not clear it; `withheld`, why no ratio of the run can be trusted, turns every verdict
    that is not `same_program` or `not_comparable` into `not_resolved`.
    """
    family = [
        i
        for i, p in enumerate(pending)
        if not p.same_program and p.estimate is not None and p.estimate.p is not None
    ]
    adjusted = dict(
        zip(family, stats.holm([pending[i].estimate.p for i in family]), strict=True)  # type: ignore[union-attr]
    )
    out = {}
    for i, p in enumerate(pending):
        decision = stats.decide(
            p.estimate,
            floor,
            same_program=p.same_program,
            adjusted_p=adjusted.get(i),
            comparisons=len(family),
            target_width=target_width,
            aa_failed=aa_failed[0] if aa_failed else None,
        )
        verdict, why = decision.verdict, decision.why
        if withheld and verdict not in (stats.SAME_PROGRAM, stats.NOT_COMPARABLE):
            verdict, why = (
                stats.NOT_RESOLVED,
                f"the run could not resolve differences: {withheld[0]}",
            )
        out[(p.name, p.kind)] = Verdict(
            against=p.against,
            ratio=p.estimate.ratio if p.estimate else None,
            ci95=p.estimate.ci95 if p.estimate else None,
            verdict=verdict,
            why=why,
            p_holm=adjusted.get(i),
            between_runs=p.between,
            ci95_rounds=(p.rounds_only or p.estimate).ci95 if p.estimate else None,
        )
    return out
