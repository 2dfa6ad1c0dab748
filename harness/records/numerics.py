"""The per-leaf numerics records: each variant's error against float64 (the capture's
`numerics.json`, beside its kept outputs), its distance from the baseline's and eager's
results (the analysis's `distances.json`), and the pass search of a variant that moved
(the probe's `numerics_pass.json`); and the two findings the numerics rules make of them.

Two questions, two answers (harness.findings.numerics): accuracy (each leaf against the
float64 reference, held to its dtype's tolerance, stated once per dtype) and the compiler's
effect (each leaf against the baseline of the same dtype and inputs, held to an estimate of how
far two correct implementations of that dtype drift: harness.records.numerics_effect says which).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import doc

# --- variants/<name>/numerics.json (the capture) -------------------------------------------------


@dataclass(frozen=True)
class LeafAccuracy:
    """One result leaf against the float64 reference."""

    path: str = doc("the leaf's pytree path (`` for a single array)")
    dtype: str = doc("the dtype whose tolerance judges it (its own, or narrower arguments')")
    shape: tuple[int, ...] = doc("its shape", ())
    rel_fro_err: float | None = doc("‖y − ref‖ / ‖ref‖ against the float64 reference")
    tolerance: float | None = doc("its dtype's tolerance (0: an integer leaf, exact)")
    ok: bool | None = doc("finite and within the tolerance")
    kept: int = doc("values kept in outputs.npz: all of them, or a fixed sample", 0)
    sampled: bool = doc("true when `kept` is a seeded sample of the leaf's flat indices", False)
    max_abs_err: float | None = doc("its largest absolute error")
    max_rel_err: float | None = doc("its largest relative error")


@dataclass(frozen=True)
class AccuracyFile:
    """A variant's result leaf by leaf against float64, and its kept outputs (outputs.npz)."""

    schema_version: int = doc("this file's version")
    leaves: tuple[LeafAccuracy, ...] = doc("every leaf of the result, in jax.tree order", ())
    outputs: str | None = doc(
        "the kept outputs' file beside it (`v<i>`: leaf i's values, `i<i>`: their flat indices "
        "when sampled, seed `sample_seed`); null when they could not be kept"
    )
    sample_seed: int = doc("the seed of the flat-index sample of a leaf too big to keep", 0)


# --- variants/<name>/distances.json (the analysis) ----------------------------------------------


@dataclass(frozen=True)
class LeafDistance:
    """One leaf of a variant against the baseline's and eager's results of the same inputs."""

    path: str = doc("the leaf's pytree path")
    dtype: str = doc("its dtype")
    vs_baseline: float | None = doc("‖y − y_baseline‖ / ‖y_baseline‖ over the kept values")
    vs_eager: float | None = doc("the same against the eager variant (null: none to compare)")
    allowed: float = doc("the estimated distance two correct implementations may have", 0.0)
    spread: float | None = doc("eager against the baseline: the measured spread in the estimate")


@dataclass(frozen=True)
class DistancesFile:
    """A variant's result against the baseline's and eager's, leaf by leaf."""

    schema_version: int = doc("this file's version")
    baseline: str = doc("the variant compared with")
    eager: str | None = doc("the eager variant of the same dtype and inputs, if any")
    comparable: bool = doc("same leaves, shapes and dtypes as the baseline's", True)
    why: str = doc("why not comparable, or what the estimate was made of", "")
    leaves: tuple[LeafDistance, ...] = doc("every leaf", ())


# --- variants/<name>/numerics_pass.json (the optional pass search) ----------------------------


@dataclass(frozen=True)
class PassTrial:
    """One compile of the search: the passes disabled and the distance it gave."""

    disabled: tuple[str, ...] = doc("the passes disabled (`xla_disable_hlo_passes`)")
    distance: float | None = doc("the worst leaf's distance from the baseline (null: failed)")
    within: bool = doc("every leaf back within its allowed distance", False)
    error: str | None = doc("why the compile or the run failed")


@dataclass(frozen=True)
class PassSearch:
    """The first HLO pass after which the variant's result moves from the baseline's."""

    schema_version: int = doc("this file's version")
    leaf: str = doc("the leaf searched on: the one furthest past its allowed distance")
    distance: float = doc("its distance from the baseline as captured")
    allowed: float = doc("its allowed distance")
    candidates: tuple[str, ...] = doc("the passes that changed the module, in pass order", ())
    found: str | None = doc("the pass whose disabling alone restores the result")
    restored: float | None = doc("the distance with only that pass disabled (the verification)")
    compiles: int = doc("the compiles the search took, the verification included", 0)
    budget: int = doc("the most compiles it was allowed", 0)
    reason: str | None = doc("why no pass was named: past the budget, none restores, ...")
    trials: tuple[PassTrial, ...] = doc("every compile, in order", ())


# --- the findings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccuracyFinding:
    """One dtype's accuracy against float64, stated once (rule `numerics.accuracy`)."""

    rule: str = doc("the rule's id")
    dtype: str = doc("the dtype")
    verdict: str = doc(
        "`within` (every variant's leaves within the tolerance), `rounding` (over it, as the "
        "dtype's own eager or baseline run is: a note) or `failure` (a variant over it beyond "
        "what the dtype's own run shows)"
    )
    leaf: str | None = doc("the leaf furthest from the float64 reference")
    error: float | None = doc("its relative error in the reference implementation")
    tolerance: float | None = doc("the dtype's tolerance")
    reference: str | None = doc("the variant the dtype's own rounding is read from")
    failed: tuple[str, ...] = doc("the variants over the tolerance beyond the dtype's rounding", ())
    what: str = doc("the finding in one sentence", "")


@dataclass(frozen=True)
class EffectFinding:
    """A variant's result against the baseline's (rule `numerics.compiler_effect`)."""

    rule: str = doc("the rule's id")
    variant: str = doc("the variant")
    against: str = doc("the baseline of the same dtype and inputs")
    verdict: str = doc("`changes` (beyond the estimate) or `same` (within it)")
    leaf: str | None = doc("the leaf furthest past (or nearest to) its allowed distance")
    distance: float | None = doc("its distance from the baseline")
    allowed: float | None = doc("its allowed distance")
    first_pass: str | None = doc("the pass whose disabling alone restores the result, if found")
    restored: float | None = doc("the distance with only that pass disabled")
    search: str | None = doc("why the pass search named none, or did not run")
    what: str = doc("the finding in one sentence", "")
