"""The first HLO pass after which a variant's result moves from the baseline's: an optional
probe (`measure.numerics_pass_compiles`) for a variant that changes the numerics.

The candidates are the passes that changed the variant's module, in pass order, read from its
per-pass dump (one file per pass that changed it). The search compiles the variant again on
the same inputs with a half of the candidates disabled (`xla_disable_hlo_passes`, added to any
the variant already disables) and keeps the half whose disabling brings every leaf back within
its allowed distance from the baseline's kept outputs (harness.records.numerics_effect), until one pass
is left; that pass disabled alone is the verification. Where neither half restores the result
(passes that move it only together, or a pass XLA will not run without), or the compiles
reach their budget, the record says so; the variant stands either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from harness.hlo.passes import pass_file_info
from harness.records import numerics_effect
from harness.records.numerics import DistancesFile, PassSearch, PassTrial
from harness.variants.program import host_leaf

# Names in a pass dump's file names that are not passes one can disable.
NOT_PASSES = frozenset({"pipeline-start", "pipeline-end"})


class _Budget(Exception):
    """The search reached its budget of compiles."""


def candidate_passes(files: Sequence[Path], module: str) -> tuple[str, ...]:
    """Returns the passes that changed `module`, in the order they first ran, from the names
    of its per-pass dump files (`<module>.<index>.<pipeline>.after_<pass>.before_<next>`)."""
    found: list[tuple[int, str]] = []
    for path in files:
        if f".{module}." not in f".{path.name}":
            continue
        info = pass_file_info(path)
        if info is not None and info[2] not in NOT_PASSES:
            found.append((info[0], info[2]))
    return tuple(dict.fromkeys(name for _, name in sorted(found)))


def bisect(
    candidates: tuple[str, ...],
    trial: Callable[[tuple[str, ...]], PassTrial],
    budget: int,
) -> tuple[str | None, str | None, tuple[PassTrial, ...]]:
    """Returns (the pass whose disabling alone restores the result, why none, the trials)."""
    trials: list[PassTrial] = []

    def restores(disabled: tuple[str, ...]) -> bool:
        if len(trials) >= budget:
            raise _Budget
        trials.append(trial(disabled))
        return trials[-1].within

    if not candidates:
        return None, "the pass dump names no pass that changed the module", ()
    group = candidates
    try:
        while len(group) > 1:
            half = len(group) // 2
            if restores(group[:half]):
                group = group[:half]
            elif restores(group[half:]):
                group = group[half:]
            else:
                failed = [t.error for t in trials[-2:] if t.error]
                why = f"; {failed[0]}" if failed else ""
                return (
                    None,
                    f"neither half of {len(group)} passes restores the result alone "
                    f"(they move it together, or one cannot be disabled){why}",
                    tuple(trials),
                )
        if not (trials and trials[-1].disabled == group) and not restores(group):
            error = trials[-1].error
            return (
                None,
                f"disabling `{group[0]}` alone does not restore the result"
                + (f": {error}" if error else ""),
                tuple(trials),
            )
    except _Budget:
        return None, f"past its budget of {budget} compiles", tuple(trials)
    return group[0], None, tuple(trials)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def compile_trial(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    options: dict[str, Any],
    baseline: list[np.ndarray],
    allowed: list[float],
    leaf: int,
) -> Callable[[tuple[str, ...]], PassTrial]:
    """Returns a trial: `fn` compiled with `options` and the given passes also disabled, run
    on `args`, each leaf's kept values against the baseline's; its distance is leaf `leaf`'s
    (the one searched on), its verdict every leaf's."""
    already = [p for p in str(options.get("xla_disable_hlo_passes") or "").split(",") if p]

    def trial(disabled: tuple[str, ...]) -> PassTrial:
        opts = {**options, "xla_disable_hlo_passes": ",".join([*already, *disabled])}
        try:
            compiled = jax.jit(fn).lower(*args).compile(compiler_options=opts)
            leaves = [host_leaf(x) for x in jax.tree.leaves(compiled(*args))]
        except Exception as e:  # a pass XLA cannot run without: this trial's, not the search's
            return PassTrial(disabled, None, False, _first_line(e))
        limit = numerics_effect.leaf_limit(len(leaves))
        mine = [numerics_effect.kept_values(x, limit)[0] for x in leaves]
        if len(mine) != len(baseline):
            return PassTrial(disabled, None, False, "the result's leaves changed")
        far = [numerics_effect.distance(a, b) for a, b in zip(mine, baseline, strict=True)]
        within = all(d <= a for d, a in zip(far, allowed, strict=True))
        return PassTrial(disabled, far[leaf], within, None)

    return trial


def search(
    candidates: tuple[str, ...],
    trial: Callable[[tuple[str, ...]], PassTrial],
    budget: int,
    leaf: str,
    distance: float,
    allowed: float,
) -> PassSearch:
    """Returns the search's record: the pass found and its verification, or why none."""
    found, reason, trials = bisect(candidates, trial, budget)
    return PassSearch(
        1,
        leaf=leaf,
        distance=distance,
        allowed=allowed,
        candidates=candidates,
        found=found,
        restored=trials[-1].distance if found is not None else None,
        compiles=len(trials),
        budget=budget,
        reason=reason,
        trials=trials,
    )


def run_search(
    subject_fn: Callable[..., Any],
    args: tuple[Any, ...],
    options: dict[str, Any],
    dump_files: Sequence[Path],
    module: str,
    baseline: list[np.ndarray],
    distances: DistancesFile,
    budget: int,
) -> PassSearch:
    """Searches one variant (its DistancesFile `distances`, its dump's files and module)."""
    worst = numerics_effect.worst(distances.leaves)
    if worst is None or worst.vs_baseline is None:
        raise ValueError("the variant has no leaf to search on")
    index = distances.leaves.index(worst)
    allowed = [d.allowed for d in distances.leaves]
    trial = compile_trial(subject_fn, args, options, baseline, allowed, index)
    candidates = candidate_passes(dump_files, module)
    return search(candidates, trial, budget, worst.path, worst.vs_baseline, worst.allowed)
