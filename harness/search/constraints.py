"""What a search holds a candidate to besides speed: its result against the default's, its peak
memory against `search.max_peak_memory`, and which of its dimensions carried its gain.

- **Numerics.** The capture keeps each candidate's outputs (outputs.npz, harness.records.
  numerics_effect). A candidate whose result is further from the default's than two correct
  compiles of one function may differ (the compiler-effect allowance, `numerics_effect.allowed`,
  made of the default's own error against float64 and a floor of a few units of roundoff) is a
  trade: timed and reported with what it costs, never the best. The float64 reference check
  cannot say this: a knob that changes the function (an approximate GELU) changes its own
  reference with it.
- **Memory.** The peak is the study's: XLA's live-range peak of the optimized module
  (`*-live-range.txt`, as harness.analyze.memory reads it), else jax's
  `compiled.memory_analysis()` peak where XLA wrote no live ranges.
- **Attribution.** The best candidate's dimensions (each knob, the XLA options together, the
  dtypes together) are each reset to the default's and timed beside the best in one stage:
  the ablated candidate's time over the best's is what that dimension gave, with its interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from harness.analyze.memory import ladder_files
from harness.analyze.numerics import kept_result
from harness.common import stats, userfiles
from harness.hlo import memory as xm
from harness.records import ladder, numerics_effect
from harness.records.memory import COMPILER_SOURCE, PEAK_SOURCE, MeasuredMemory
from harness.records.numerics_effect import Result
from harness.records.search import MEMORY, NUMERICS, Candidate, ResultChange
from harness.search import space
from harness.store.runfolder import RunFolder


def change(mine: Result, base: Result) -> ResultChange:
    """Returns how far a candidate's kept result is from the default's, leaf by leaf, against
    the compiler-effect allowance of each leaf of the default (its dtype, its error against
    float64). Leaves of other shapes or counts are not comparable, and say why; a leaf's dtype
    may differ (a dtype knob), since both are kept as float32."""
    a, b = mine.accuracy.leaves, base.accuracy.leaves
    if len(a) != len(b):
        return ResultChange(comparable=False, why=f"{len(a)} leaves against {len(b)}")
    for x, y in zip(a, b, strict=True):
        if (x.path, x.shape, x.kept) != (y.path, y.shape, y.kept):
            why = f"leaf {x.path or 'y'}: {list(x.shape)} against {list(y.shape)}"
            return ResultChange(comparable=False, why=why)
    found = []
    for i, leaf in enumerate(b):
        distance = numerics_effect.distance(mine.values[i], base.values[i])
        allowed = numerics_effect.allowed(leaf.dtype, None, leaf.rel_fro_err)
        over = distance / allowed if allowed > 0 else (math.inf if distance > 0 else 0.0)
        found.append((over, leaf.path, distance, allowed))
    if not found:
        return ResultChange(comparable=False, why="no leaves")
    over, path, distance, allowed = max(found, key=lambda f: f[0])
    return ResultChange(
        leaf=path,
        distance=distance,
        allowed=allowed,
        changes=over > 1.0,
        why=f"{numerics_effect.SAFETY:g} x the larger of the default's error against float64 "
        f"and {numerics_effect.FLOOR_ULPS:g} units of roundoff of its dtype",
    )


def result_change(workdir: Path, name: str) -> ResultChange | None:
    """Returns the candidate `name`'s result against the default's; None when either kept no
    outputs (nothing to compare, so no claim either way)."""
    folder = RunFolder(workdir)
    mine, base = kept_result(folder, name), kept_result(folder, space.DEFAULT)
    if mine is None or base is None:
        return None
    return change(mine, base)


def peak(
    workdir: Path, name: str, measured: MeasuredMemory | None
) -> tuple[int | None, str | None]:
    """Returns the candidate's peak bytes and where they come from: XLA's live-range peak of
    its optimized module (the largest module's), else compiled.memory_analysis()'s."""
    lad = ladder.read_ladder(RunFolder(workdir).variant(name).ir)
    peaks = []
    for files in ladder_files(lad):
        if files.live_range is None:
            continue
        text = userfiles.read_text(files.live_range, userfiles.DUMP, errors="replace")
        live = xm.parse_live_range(text, str(files.live_range))
        peaks.append(
            live.peak_bytes if live.peak_bytes is not None else sum(b for _, b in live.at_peak)
        )
    if peaks:
        return max(peaks), PEAK_SOURCE
    compiler = measured.compiler if measured is not None else None
    if compiler is not None and compiler.peak_bytes is not None:
        return compiler.peak_bytes, COMPILER_SOURCE
    return None, None


def rejected(c: Candidate, cap: float | None) -> tuple[str, ...]:
    """Why a candidate cannot be the best however fast: a trade, a peak over the cap."""
    out = []
    if c.effect is not None and c.effect.changes:
        out.append(NUMERICS)
    if cap is not None and c.peak_bytes is not None and c.peak_bytes > cap:
        out.append(MEMORY)
    return tuple(out)


def eligible(c: Candidate, lower_bound: str | None) -> bool:
    """A candidate the search may name: compiled, its own program, no constraint broken, and
    not the lower bound (it computes less)."""
    return c.status == "ok" and not c.rejected and c.name != lower_bound


def _faster(c: Candidate) -> bool:
    return c.vs_default is not None and c.vs_default.verdict == stats.FASTER


def leaders(
    records: Sequence[Candidate], best: str | None, lower_bound: str | None
) -> tuple[str, ...]:
    """The best and the next two eligible candidates: those resolved as faster than the
    default by their ratio to it, then the default, then the rest by their ratio."""
    if best is None:
        return ()
    pool = [c for c in records if eligible(c, lower_bound) and c.name != best]

    def order(c: Candidate) -> tuple[int, float]:
        ratio = c.vs_default.ratio if c.vs_default and c.vs_default.ratio else 1.0
        rank = 0 if _faster(c) else 1 if c.name == space.DEFAULT else 2
        return rank, ratio

    return (best, *(c.name for c in sorted(pool, key=order)[:2]))


def rejected_faster(records: Sequence[Candidate], best: str | None) -> tuple[str, ...]:
    """Candidates a constraint rejected that were faster than the best, fastest first: against
    a default best, resolved as faster than it; against another, a ratio to the default whose
    interval lies wholly below the best's (each is paired with the default of its own stage)."""
    by_name = {c.name: c for c in records}
    mine = by_name[best].vs_default if best in by_name and best != space.DEFAULT else None

    def beats(c: Candidate) -> bool:
        v = c.vs_default
        if v is None or v.ratio is None:
            return False
        if mine is None:
            return v.verdict == stats.FASTER
        if v.ci95 is None or mine.ci95 is None:
            return False
        return v.ci95[1] < mine.ci95[0]

    found = [c for c in records if c.rejected and c.status == "ok" and beats(c)]
    return tuple(c.name for c in sorted(found, key=lambda c: c.vs_default.ratio))


def dimensions(point: space.Point) -> list[tuple[str, space.Point]]:
    """The dimensions a point sets, each with the point that resets it alone: every knob on
    its own, the XLA options together, the dtypes (and the expression's W dtype and GELU form)
    together."""
    out = [
        (f"{space.KWARG}{k}", space.without(point, f"{space.KWARG}{k}")) for k, _ in point.kwargs
    ]
    if point.options:
        out.append(("xla_options", dataclasses.replace(point, options=())))
    dtypes = ("params_dtype", "inputs_dtype", "w_dtype", "gelu")
    if any(getattr(point, f) for f in dtypes):
        out.append(("dtypes", dataclasses.replace(point, **dict.fromkeys(dtypes))))
    return out
