"""Two runs diffed line by line: for each variant present in both, the device time a step of
each source line and kind of work side by side, with a bootstrap interval over each run's
profiled steps, and a verdict only where the interval clears both runs' noise (issue 60).

- Lines are matched across compiles by source line and kind of work, never by instruction
  names, which change between compiles: a cluster's time goes to its source lines (a cluster
  over several lines gives each an equal part, as the ranking does) under its kind of work
  (harness.hlo.work), and the runs' rows pair on (line, kind).
- The interval resamples each run's profiled steps with replacement, independently (the runs
  are independent), and takes the 2.5th and 97.5th percentiles of the difference of the means
  and of their ratio.
- A line is called slower or faster as a finding is (harness.common.stats.clears_floor): where
  the ratio's interval, widened by the larger of the two runs' A/A floors (what each run
  measured about its own noise), still excludes 1.0, and where the difference's interval also
  clears the runs' resolution in seconds: that floor of the larger run's device time a step.
  The interval resamples steps within a run, so it cannot see what changes between two
  processes; on a CPU a small kernel's time moves 1.5-2x between two runs of one config
  (benchmarks/compare_aa_gpu.py --cpu) while the step holds within its floor, and a line that
  moves less than the step could is below what the runs resolve. A line present in one run
  only is called where the other run's steps never ran it and its own interval clears that
  resolution. A run that
  could not resolve differences (no A/A floor, a busy machine), or fewer than MIN_STEPS
  profiled steps on either side, gives no verdict.

The per-step, per-event data comes through one reader (harness.match.step_events), so this
module does not depend on the file it is stored in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness.common import stats
from harness.hlo import work
from harness.match.step_events import StepEvent, step_events
from harness.program.module_analysis import self_times
from harness.records import run_files
from harness.records.compare import (
    FASTER,
    NO_LINE_VERDICT,
    SLOWER,
    UNCHANGED,
    LineChange,
)
from harness.records.summary import load_summary
from harness.saved.read import cluster_facts
from harness.saved.run import ClusterFact
from harness.store.runfolder import RunFolder, VariantFolder

# A percentile bootstrap over fewer steps than this is no interval (two steps resample to
# three values): such a line is shown without a verdict.
MIN_STEPS = 5
NO_LINE = "(no source line)"
UNATTRIBUTED = "(unattributed)"
SAMPLES = 2000
Key = tuple[str, str]  # (source line, kind of work)


def cluster_places(vf: VariantFolder) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each cluster's source lines and kind of work: the lines as ranking.json resolved them
    (the user's innermost frame), else fusions.json's; the kind from fusions.json's record."""
    fusions = run_files.load_if_present(run_files.FUSIONS, vf.fusions)
    facts: dict[str, ClusterFact] = {c.name: c for c in cluster_facts(fusions)}
    lines: dict[str, tuple[str, ...]] = {}
    for m in fusions.modules if fusions is not None else ():
        for c in m.clusters:
            if c.name is not None:
                lines[c.name] = tuple(c.source_locations)
    ranking = run_files.load_if_present(run_files.RANKING, vf.ranking)
    for module in ranking.modules if ranking is not None else ():
        for c in module.get("clusters") or ():
            if isinstance(c, dict) and isinstance(c.get("lines"), list) and c.get("name"):
                lines[str(c["name"])] = tuple(str(x) for x in c["lines"])
    out = {}
    for name in set(facts) | set(lines):
        f = facts.get(name)
        kind = work.kind_of(f.kind, f.target or "", f.backend, f.opcodes) if f else "other"
        out[name] = (lines.get(name) or (NO_LINE,), kind)
    return out


def per_step(
    events: tuple[StepEvent, ...], places: Mapping[str, tuple[tuple[str, ...], str]]
) -> tuple[list[int], dict[Key, np.ndarray]]:
    """Returns the profiled steps, in order, and each (line, kind)'s device time (s) in each of
    them: an event's self time (less what is nested in it), split equally over its cluster's
    lines."""
    steps = sorted({e.step for e in events})
    index = {s: i for i, s in enumerate(steps)}
    out: dict[Key, np.ndarray] = defaultdict(lambda: np.zeros(len(steps)))
    for e, ns in zip(events, self_times(events), strict=True):  # type: ignore[arg-type]
        lines, kind = (
            places.get(e.cluster, ((NO_LINE,), "other"))
            if e.cluster
            else ((UNATTRIBUTED,), "other")
        )
        for line in lines:
            out[(line, kind)][index[e.step]] += ns * 1e-9 / len(lines)
    return steps, dict(out)


def _resampled_means(rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
    picks = rng.integers(0, len(values), size=(SAMPLES, len(values)))
    return values[picks].mean(axis=1)


def line_change(
    variant: str,
    key: Key,
    a: np.ndarray | None,
    b: np.ndarray | None,
    na: int,
    nb: int,
    floor: float | None,
    resolution_s: float = 0.0,
    seed: int = stats.SEED,
) -> LineChange:
    """One (line, kind) of a variant in both runs; `a` or `b` is None where that run's steps
    never ran it (zeros of its `na`/`nb` steps). A difference is called only past `floor` (a
    ratio) and `resolution_s` (seconds a step)."""
    xa = a if a is not None else np.zeros(max(na, 1))
    xb = b if b is not None else np.zeros(max(nb, 1))
    rng = np.random.default_rng(seed)
    ma, mb = _resampled_means(rng, xa), _resampled_means(rng, xb)
    diff = mb - ma
    lo, hi = (float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5)))
    ratio_ci = None
    if a is not None and np.all(ma > 0):
        r = mb / ma
        ratio_ci = (float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)))
    if floor is None or min(na, nb) < MIN_STEPS:
        verdict = NO_LINE_VERDICT
    elif ratio_ci is not None:
        verdict = (
            (SLOWER if ratio_ci[0] > 1 else FASTER)
            if stats.clears_floor(ratio_ci, floor) and (lo > resolution_s or hi < -resolution_s)
            else UNCHANGED
        )
    else:  # absent in a: new in b where b's own interval clears the resolution
        verdict = SLOWER if lo > resolution_s else UNCHANGED
    if a is not None and b is None and verdict != NO_LINE_VERDICT:
        verdict = FASTER if hi < -resolution_s else UNCHANGED
    return LineChange(
        variant=variant,
        line=key[0],
        work=key[1],
        a_s=float(xa.mean()),
        b_s=float(xb.mean()),
        ci95_s=(lo, hi),
        ratio_ci95=ratio_ci,
        floor=floor if floor is not None else float("nan"),
        verdict=verdict,
        steps=(na, nb),
        resolution_s=resolution_s,
    )


def variant_lines(
    name: str,
    a: tuple[list[int], dict[Key, np.ndarray]],
    b: tuple[list[int], dict[Key, np.ndarray]],
    floor: float | None,
) -> list[LineChange]:
    """Every (line, kind) of one variant in either run, diffed."""
    (sa, ta), (sb, tb) = a, b
    if not sa or not sb:
        return []
    step_s = max(_step_s(ta), _step_s(tb))
    resolution = floor * step_s if floor is not None else 0.0
    return [
        line_change(name, key, ta.get(key), tb.get(key), len(sa), len(sb), floor, resolution)
        for key in sorted(set(ta) | set(tb))
    ]


def _step_s(table: Mapping[Key, np.ndarray]) -> float:
    """A run's device time a step: its lines summed in each step, averaged over the steps."""
    return float(np.sum(list(table.values()), axis=0).mean()) if table else 0.0


def ordered(lines: list[LineChange]) -> tuple[LineChange, ...]:
    """The lines that moved first, largest difference first; then the rest, likewise."""
    return tuple(sorted(lines, key=lambda c: (not c.moved, -abs(c.b_s - c.a_s))))


def _floor(run: Path) -> float | None:
    noise = load_summary(RunFolder(run).summary).noise
    return noise.floor if noise is not None and noise.resolved else None


def compare_lines(a: Path, b: Path) -> tuple[LineChange, ...]:
    """Returns every source line and kind of work of each variant profiled in both runs,
    diffed with its interval; the lines that moved first."""
    fa, fb = _floor(a), _floor(b)
    return lines_between(a, b, None if fa is None or fb is None else max(fa, fb))


def lines_between(a: Path, b: Path, floor: float | None) -> tuple[LineChange, ...]:
    """`compare_lines` against a given noise floor (None: no verdicts)."""
    ra, rb = RunFolder(a), RunFolder(b)
    va = load_summary(ra.summary).variants
    vb = load_summary(rb.summary).variants
    out: list[LineChange] = []
    for name in (n for n in va if n in vb):
        da, db = ra.variant(name), rb.variant(name)
        steps_a = per_step(step_events(da), cluster_places(da))
        steps_b = per_step(step_events(db), cluster_places(db))
        out += variant_lines(name, steps_a, steps_b, floor)
    return ordered(out)
