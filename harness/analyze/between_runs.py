"""How far a ratio moves from run to run on this machine, from the earlier runs beside this one.

A run's interval comes from its own rounds, so it holds only the variation between them. On
the 2-core VM the same programs' ratios also move between runs, by more than one run's rounds
show: over 32 idle default studies `xla_host_callback`/`xla` read 1.37–2.07, a spread (sd of
the log ratio) of 0.086 where one run's own interval implies 0.064, and one run's 95% interval
(1.490–1.762) missed five pooled earlier runs' (1.787–2.016) altogether. One process cannot
see this: it is the machine and the process (layout, thread placement, the host's other
tenants), not the rounds.

So the runs of the same experiment already in its results folder are the measurement. An
earlier run counts for a comparison when it:
- is older than this run (run ids sort by time), so re-analysing a run gives the same answer
  as long as the folders before it stay;
- was resolved (its A/A check passed and the machine was quiet: a loaded run's ratios are
  that load's);
- ran on the same host, platform, device kind and jax/jaxlib versions, and timed alike (the
  same `timing` config), as its manifest says;
- timed the same two programs (equal fingerprint digests; a variant with no compiled program
  of its own, eager dispatch, by its mode, framework, problem, program and options).

The spread is DerSimonian and Laird's method-of-moments estimate of the between-run variance
τ² (DerSimonian & Laird 1986, "Meta-analysis in clinical trials"), over the log ratios of up to
MAX_RUNS earlier runs and this one, each weighted by its own rounds' variance. It needs
MIN_RUNS runs in all. This run's interval is then widened by τ (harness.common.stats.ratio_estimate's
`between`); with fewer runs it is this run's alone, and the summary says so.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analyze.verdicts import Pending, estimate, read_timing
from harness.common import stats
from harness.records import run_files
from harness.records.noise import BetweenRuns
from harness.records.run_files import Environment, Manifest
from harness.records.summary import RunSummary, TimingRecord, VariantSummary, load_summary
from harness.store.runfolder import RunFolder

MIN_RUNS = 3  # this run and two earlier ones: τ² from fewer has no degree of freedom to spare
MAX_RUNS = 10  # the most recent earlier runs read: a machine changes over weeks
MAX_FOLDERS = 50  # folders looked at, newest first: a results folder can hold thousands
Z95 = 1.959964


@dataclass(frozen=True)
class RunRatio:
    """One run's log ratio for a comparison and its variance from that run's rounds."""

    log_ratio: float
    variance: float


# The range a ratio of two step times, and its interval's bounds, may take to count: a sibling
# run's summary is the user's file, and a damaged one (ratios near 1e300) widened this run's
# interval to infinity. No two programs of one study differ by a million times.
MAX_RATIO = 1e6
# The largest run-to-run spread (sd of the log ratio) believed; the 2-core VM's is 0.086.
MAX_TAU = 2.0


def _plausible(value: object) -> bool:
    return isinstance(value, float | int) and 1 / MAX_RATIO <= value <= MAX_RATIO


def run_ratio(estimate: stats.RatioEstimate) -> RunRatio | None:
    """Returns the estimate on the log scale, its variance from its 95% interval's width; None
    for an interval with no width (one round), one that touches zero, or a ratio or bound
    outside [1/MAX_RATIO, MAX_RATIO] (NaN and infinities included)."""
    lo, hi = estimate.ci95
    if not all(_plausible(x) for x in (estimate.ratio, lo, hi)) or hi <= lo:
        return None
    return RunRatio(math.log(estimate.ratio), (math.log(hi / lo) / (2 * Z95)) ** 2)


def dersimonian_laird(runs: Sequence[RunRatio]) -> float:
    """Returns τ², the between-run variance of the log ratio: max(0, (Q − (k − 1)) / c), with
    Cochran's Q = Σ w (y − ȳ_w)², w = 1 / variance and c = Σw − Σw² / Σw."""
    k = len(runs)
    if k < 2:
        return 0.0
    w = [1.0 / max(r.variance, 1e-12) for r in runs]
    total = sum(w)
    mean = sum(wi * r.log_ratio for wi, r in zip(w, runs, strict=True)) / total
    q = sum(wi * (r.log_ratio - mean) ** 2 for wi, r in zip(w, runs, strict=True))
    c = total - sum(wi * wi for wi in w) / total
    return max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0


def program_key(v: VariantSummary) -> str:
    """What a variant timed: its compiled program's digest, or (eager dispatch, no program of
    its own) what it ran."""
    if v.hlo.fingerprint is not None:
        return "program:" + v.hlo.fingerprint.digest
    i = v.identity
    what = {
        "mode": i.mode,
        "framework": i.framework,
        "problem": i.problem,
        "program": None if i.program is None else repr(i.program),
        "xla_options": i.xla_options,
    }
    return "ran:" + json.dumps(what, sort_keys=True, default=str)


MACHINE_KEYS = ("host", "platform", "device_kind", "cpu_count", "jax", "jaxlib")


def same_machine(a: Environment | None, b: Environment | None) -> bool:
    """Whether two runs ran where their timings compare: the same named host, platform and
    device, with the same CPUs and jax/jaxlib versions."""
    if a is None or b is None or a.host is None or a.platform is None:
        return False
    return all(a.value(k) == b.value(k) for k in MACHINE_KEYS)


@dataclass(frozen=True)
class EarlierRun:
    """An earlier resolved run on this machine: its folder and its summary."""

    path: Path
    summary: RunSummary

    @functools.cached_property
    def timed(self) -> TimingRecord | None:
        """Its rounds, read only for a summary saved before it kept `ci95_rounds`."""
        return read_timing(self.path)

    def ratio(self, name: str, against: str) -> RunRatio | None:
        """Returns its own-rounds estimate of name / against: from its summary's verdict where
        it kept one, else from its rounds."""
        v = self.summary.variants.get(name)
        for verdict in (
            (v.comparison.vs_baseline, v.comparison.vs_lower_bound, v.comparison.vs_framework)
            if v is not None
            else ()
        ):
            if (
                verdict is not None
                and verdict.against == against
                and verdict.ratio is not None
                and verdict.ci95_rounds
            ):
                return run_ratio(stats.RatioEstimate(verdict.ratio, verdict.ci95_rounds, 0))
        theirs = estimate(self.timed, name, against)
        return run_ratio(theirs) if theirs is not None else None


def same_timing(a: Manifest, b: Manifest) -> bool:
    """Whether two runs timed alike: the same `timing` config (rounds, budgets, batches,
    settling), whether or not either was a re-timing (`timing.only`). A batch of fewer calls
    amortizes less dispatch, so a host-bound ratio moves with it."""

    def timing(m: Manifest) -> Any:
        section = m.saved_config.section("timing")
        return {k: v for k, v in section.items() if k != "only"} if section is not None else None

    return timing(a) == timing(b)


def earlier_runs(workdir: Path, manifest: Manifest | None) -> tuple[EarlierRun, ...]:
    """Returns up to MAX_RUNS resolved runs of this experiment older than `workdir`, newest
    first, that ran on the same machine and timed alike (their summaries; their rounds only
    where needed). A folder that is unreadable or not a run is skipped: it is not this run's
    to judge."""
    if manifest is None or not workdir.parent.is_dir():
        return ()
    out: list[EarlierRun] = []
    older = sorted((p for p in workdir.parent.iterdir() if p.name < workdir.name), reverse=True)
    for path in older[:MAX_FOLDERS]:
        if len(out) >= MAX_RUNS:
            break
        folder = RunFolder(path)
        if not path.is_dir() or path.is_symlink() or not folder.summary.is_file():
            continue
        try:
            theirs = run_files.load(run_files.MANIFEST, folder.manifest, within=path)
            if not same_machine(theirs.environment, manifest.environment):
                continue
            if not same_timing(theirs, manifest):
                continue
            summary = load_summary(folder.summary, within=path)
            if summary.noise is None or not summary.noise.resolved:
                continue
        except (OSError, ValueError):  # SchemaError is a ValueError
            continue
        out.append(EarlierRun(path, summary))
    return tuple(out)


@dataclass(frozen=True)
class Spread:
    """A comparison's between-run spread: τ on the log scale (None: too few runs) and the
    earlier runs it came from."""

    tau: float | None
    runs: tuple[str, ...]


def spread(
    name: str,
    against: str,
    summaries: Mapping[str, VariantSummary],
    this_run: stats.RatioEstimate | None,
    earlier: Sequence[EarlierRun],
) -> Spread:
    """Returns the between-run spread of name / against from the earlier runs that timed the
    same two programs, and this run."""
    if this_run is None or name not in summaries or against not in summaries:
        return Spread(None, ())
    mine = run_ratio(this_run)
    if mine is None:
        return Spread(None, ())
    keys = (program_key(summaries[name]), program_key(summaries[against]))
    ratios, used = [mine], []
    for run in earlier:
        v, o = run.summary.variants.get(name), run.summary.variants.get(against)
        if v is None or o is None or (program_key(v), program_key(o)) != keys:
            continue
        theirs = run.ratio(name, against)
        if theirs is not None:
            ratios.append(theirs)
            used.append(run.path.name)
    if len(ratios) < MIN_RUNS:
        return Spread(None, tuple(used))
    tau = math.sqrt(dersimonian_laird(ratios))
    if not math.isfinite(tau) or tau > MAX_TAU:  # earlier runs that disagree past belief
        return Spread(None, tuple(used))
    return Spread(tau, tuple(used))


def widen(
    pending: Sequence[Pending],
    summaries: Mapping[str, VariantSummary],
    timed: TimingRecord | None,
    earlier: Sequence[EarlierRun],
) -> tuple[tuple[Pending, ...], BetweenRuns]:
    """Returns each comparison with its run-to-run spread in its interval where the earlier
    runs measure one, and what the summary says of them."""
    out, used, widened = [], set(), 0
    for p in pending:
        if p.same_program or p.estimate is None:
            out.append(p)
            continue
        found = spread(p.name, p.against, summaries, p.estimate, earlier)
        used.update(found.runs)
        if found.tau is None:
            out.append(p)
            continue
        widened += 1
        wider = estimate(timed, p.name, p.against, found.tau) if found.tau > 0 else p.estimate
        out.append(
            dataclasses.replace(p, estimate=wider, between=found.tau, rounds_only=p.estimate)
        )
    record = BetweenRuns(
        earlier_runs=tuple(sorted(used)),
        min_runs=MIN_RUNS,
        widened=widened,
        comparisons=sum(1 for p in pending if not p.same_program and p.estimate is not None),
    )
    return tuple(out), record
