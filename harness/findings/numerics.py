"""The numerics rules: two questions, two answers, over the stored per-leaf errors.

    numerics.accuracy         how accurate each dtype is here, against float64, stated once per
                              dtype; a leaf over its tolerance is the dtype's own rounding (a
                              note) when the dtype's reference run (eager, else the baseline)
                              has the same error within ACCURACY_NOISE, else a failure
    numerics.compiler_effect  did a compiler choice move the result: each variant against the
                              baseline of the same dtype and inputs, leaf by leaf, held to the
                              estimated distance of two correct implementations
                              (harness.records.numerics_effect); with the pass that moved it, where the
                              optional pass search found one

A run saved before the per-leaf files existed is judged from summary.json's worst leaf (its
dtype read from its tolerance); it has no compiler-effect figures, so that rule stays silent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.common import fmt
from harness.common.precision import TOLERANCE
from harness.findings.base import Rule
from harness.records import numerics_effect
from harness.records.numerics import AccuracyFinding, EffectFinding, LeafAccuracy
from harness.saved.run import SavedRun, SavedVariant

# A leaf's error is the dtype's own rounding when it is within this fraction of the reference
# run's error of the same leaf (plus a few units of roundoff): bf16 through a deep program
# lands a few percent either side of its reference, a compiler that drops a rounding step or
# adds a lossy one moves it by much more.
ACCURACY_NOISE = 0.25


@dataclass(frozen=True)
class _Leaf:
    variant: str
    leaf: LeafAccuracy


def _leaves(v: SavedVariant) -> tuple[LeafAccuracy, ...]:
    """Each leaf's error against float64: numerics.json's, else summary.json's worst leaf."""
    if v.accuracy is not None:
        return v.accuracy.leaves
    n = v.summary.numerics
    if n.rel_fro_err is None or n.tolerance is None:
        return ()
    dtype = next((d for d, t in TOLERANCE.items() if math.isclose(t, n.tolerance)), None)
    if dtype is None:
        return ()
    return (LeafAccuracy(n.worst_leaf or "", dtype, (), n.rel_fro_err, n.tolerance, n.ok),)


def _name(leaf: str) -> str:
    return f"`{leaf}`" if leaf else "the result"


def _explained(mine: LeafAccuracy, ref: LeafAccuracy | None) -> bool:
    """True when the leaf's error is its dtype's own rounding: the reference run's, within
    noise."""
    if ref is None or mine.rel_fro_err is None or ref.rel_fro_err is None:
        return False
    if not math.isfinite(mine.rel_fro_err):
        return False
    floor = numerics_effect.FLOOR_ULPS * numerics_effect.UNIT_ROUNDOFF.get(mine.dtype, 0.0)
    return mine.rel_fro_err <= ref.rel_fro_err * (1 + ACCURACY_NOISE) + floor


class Accuracy(Rule):
    """Each dtype's accuracy against float64, once: within, its own rounding, or a failure."""

    id, kind = "numerics.accuracy", "numerics"

    def conclude(self, run: SavedRun) -> tuple[AccuracyFinding, ...]:
        ok = [v for v in run.variants if v.ok]
        by_dtype: dict[str, list[_Leaf]] = {}
        for v in ok:
            for leaf in _leaves(v):
                if leaf.tolerance:  # integer leaves are exact: no dtype rounding to state
                    by_dtype.setdefault(leaf.dtype, []).append(_Leaf(v.name, leaf))
        return tuple(self.judge(run, dtype, rows) for dtype, rows in by_dtype.items())

    def judge(self, run: SavedRun, dtype: str, rows: list[_Leaf]) -> AccuracyFinding:
        reference = _reference_of(run, [r.variant for r in rows])
        ref_leaves = {r.leaf.path: r.leaf for r in rows if r.variant == reference}
        over = [r for r in rows if not r.leaf.ok]
        failed = _failed_beyond_rounding(over, reference, ref_leaves)
        shown = list(ref_leaves.values()) or [r.leaf for r in rows]
        worst = max(shown, key=lambda leaf: (leaf.rel_fro_err or 0.0) / (leaf.tolerance or 1.0))
        verdict = "failure" if failed else "rounding" if over else "within"
        what = _accuracy_sentence(dtype, verdict, failed, reference, worst)
        return AccuracyFinding(
            self.id,
            dtype,
            verdict,
            worst.path,
            worst.rel_fro_err,
            worst.tolerance,
            reference,
            failed,
            what,
        )


def _reference_of(run: SavedRun, names: list[str]) -> str | None:
    """The run whose error is the dtype's own rounding: the eager variant's, else the
    baseline's (None where neither has this dtype)."""
    eager = next((v.name for v in run.variants if "eager" in v.roles and v.name in names), None)
    return eager or (run.baseline if run.baseline in names else None)


def _failed_beyond_rounding(
    over: list[_Leaf], reference: str | None, ref_leaves: dict[str, LeafAccuracy]
) -> tuple[str, ...]:
    """The variants with a leaf over its tolerance that the reference's own rounding of that
    leaf does not explain, each once."""
    return tuple(
        dict.fromkeys(
            r.variant
            for r in over
            if r.variant != reference and not _explained(r.leaf, ref_leaves.get(r.leaf.path))
        )
    )


def _accuracy_sentence(
    dtype: str, verdict: str, failed: tuple[str, ...], reference: str | None, worst: LeafAccuracy
) -> str:
    """The accuracy finding's sentence, for its verdict, with the worst leaf's error."""
    err, tol = worst.rel_fro_err, worst.tolerance
    where = f"on {_name(worst.path)}"
    if verdict == "failure":
        return (
            f"{dtype}: {', '.join(failed)} over the tolerance {fmt.sci(tol)} beyond the "
            f"dtype's own rounding ({reference or 'no reference run'}: {fmt.sci(err)} "
            f"{where})"
        )
    if verdict == "rounding":
        return (
            f"{dtype} rounding: {_percent(err)} {where} against float64, over the "
            f"tolerance {_percent(tol)} in {reference}'s own run too: a note, not a failure"
        )
    return f"{dtype}: every leaf within its tolerance {fmt.sci(tol)} (worst {fmt.sci(err)} {where})"


def _percent(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.3g}%"


class CompilerEffect(Rule):
    """Whether each variant's result moved from the baseline's beyond two correct
    implementations' distance, with the first pass after which it moves."""

    id, kind = "numerics.compiler_effect", "effects"

    def conclude(self, run: SavedRun) -> tuple[EffectFinding, ...]:
        out = []
        for v in run.variants:
            d = v.distances
            if not v.ok or d is None or not d.comparable:
                continue
            w = numerics_effect.worst(d.leaves)
            if w is None or w.vs_baseline is None:
                continue
            changes = numerics_effect.moved(w)
            s = v.pass_search
            what = (
                f"{v.name} changes the numerics: {_name(w.path)} is {fmt.sci(w.vs_baseline)} "
                f"from {d.baseline}'s result, beyond the {fmt.sci(w.allowed)} two correct "
                f"{w.dtype} implementations differ by here"
                if changes
                else f"{v.name} computes {d.baseline}'s result within rounding "
                f"({fmt.sci(w.vs_baseline)} on {_name(w.path)}, allowed {fmt.sci(w.allowed)})"
            )
            found = s.found if s is not None and changes else None
            if found is not None and s is not None:
                what += (
                    f"; the numerics first move at pass `{found}` (disabling it alone restores "
                    f"the baseline's result: {fmt.sci(s.distance)} → {fmt.sci(s.restored)})"
                )
            out.append(
                EffectFinding(
                    self.id,
                    v.name,
                    d.baseline,
                    "changes" if changes else "same",
                    w.path,
                    w.vs_baseline,
                    w.allowed,
                    found,
                    s.restored if found is not None and s is not None else None,
                    (s.reason if s is not None else "the pass search did not run")
                    if changes and found is None
                    else None,
                    what,
                )
            )
        return tuple(out)
