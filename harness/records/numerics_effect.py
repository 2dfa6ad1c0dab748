"""How far a variant's result is from the baseline's, and how far it may be: the compiler-effect
estimate, and the kept outputs it is measured on.

The estimate. Two correct implementations of one dtype (eager dispatch, which rounds every
op to its dtype and makes no compiler choice, and the baseline's compiled program) differ by
their rounding, and how far that rounding carries depends on the program: its reduction
lengths, its depth, its conditioning (a softmax's gradient amplifies what a GELU would not).
A bound from ulps needs those, which the harness does not know for an arbitrary program;
reassociation noise needs a permuted reduction order, which an arbitrary program does not
offer. What the run does have, per leaf and on the same inputs, is the measured spread of two
correct implementations: eager's distance from the baseline. So a leaf's allowed distance is

    allowed = SAFETY · max(spread, FLOOR_ULPS · u_dtype)

with SAFETY 2 (a third correct implementation may sit on the far side of the baseline from
eager) and a floor of a few units of roundoff for leaves the two compute bit for bit alike.
Without an eager variant of the same inputs, the baseline's error against float64 stands in
for the spread (`allowed = SAFETY · max(e_baseline, FLOOR_ULPS · u)`): it measures how far
this dtype's rounding moves this leaf here. It is not used beside a measured spread, because
it also holds whatever the float64 reference computes differently from both, which eager and
the baseline share and a third implementation need not: examples/rounding.py's reference, the
x64 jit with default options, keeps float64 through the bf16 round trip the program asks for
(with `xla_allow_excess_precision: false` it rounds), so eager and a baseline that round are
both 2.9e-4 from it while 5e-8 from each other. A variant "changes the
numerics" only when a leaf moves further than that. Integer leaves are exact (allowed 0).

The kept outputs. Each variant's result is kept as `outputs.npz` (AccuracyFile.outputs):
every value of a leaf up to `leaf_limit` values (MAX_KEPT, fewer for a result of many leaves:
MAX_KEPT_TOTAL over all of them), else a seeded sample of that many flat indices (the same for
every variant, so samples line up), stored as float32 (bf16 and f16 exactly), beside the same
values of its float64 reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import numpy as np

from harness.common import userfiles
from harness.records.numerics import AccuracyFile, DistancesFile, LeafAccuracy, LeafDistance
from harness.store import io

# What the capture keeps of a result: each leaf's values, its float64 reference's, its errors.
Kept = tuple[list[np.ndarray], list[np.ndarray], list[LeafAccuracy]]
MAX_KEPT = 4096  # values kept per leaf: 16 KiB of float32 (and 32 KiB of its reference)
MAX_KEPT_TOTAL = 1 << 16  # values kept over all leaves: a result of many leaves keeps fewer of each
MIN_KEPT = 256
SAMPLE_SEED = 0
SAFETY = 2.0
# Two variants compute the same function of the same inputs when their float64 references
# agree this closely (relative): else a different function (an exact GELU, the GEMM alone, W
# rounded to bf16) is compared, which is no compiler's doing.
SAME_FUNCTION = 1e-9
FLOOR_ULPS = 4.0
# The unit roundoff of each floating dtype (half an ulp of 1.0).
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}


def sample_indices(size: int, limit: int = MAX_KEPT, seed: int = SAMPLE_SEED) -> np.ndarray | None:
    """Returns the sorted flat indices kept of a leaf of `size` values; None: keep them all."""
    if size <= limit:
        return None
    return np.sort(np.random.default_rng(seed).choice(size, size=limit, replace=False))


def kept_values(leaf: np.ndarray, limit: int = MAX_KEPT) -> tuple[np.ndarray, np.ndarray | None]:
    """Returns (the kept values, their flat indices or None when all are kept)."""
    flat = np.asarray(leaf).reshape(-1)
    idx = sample_indices(flat.size, limit)
    values = flat if idx is None else flat[idx]
    floating = values.dtype.kind in "fc" or values.dtype.name == "bfloat16"
    return values.astype(np.float32 if floating else np.int64), idx


def leaf_limit(leaves: int) -> int:
    """Returns how many values are kept of each of a result's `leaves` leaves."""
    return max(MIN_KEPT, min(MAX_KEPT, MAX_KEPT_TOTAL // max(leaves, 1)))


def write_outputs(
    path: Path, leaves: Sequence[np.ndarray], references: Sequence[np.ndarray]
) -> tuple[tuple[int, bool], ...]:
    """Writes the kept values of each leaf and of its float64 reference (the same indices) to
    `path` (.npz); returns (kept, sampled) per leaf."""
    arrays: dict[str, np.ndarray] = {}
    shape = []
    limit = leaf_limit(len(leaves))
    for i, (leaf, ref) in enumerate(zip(leaves, references, strict=True)):
        values, idx = kept_values(leaf, limit)
        flat = np.asarray(ref, np.float64).reshape(-1)
        arrays[f"v{i}"] = values
        arrays[f"r{i}"] = flat if idx is None else flat[idx]
        if idx is not None:
            arrays[f"i{i}"] = idx
        shape.append((int(values.size), idx is not None))
    buffer = BytesIO()
    np.savez_compressed(buffer, **arrays)
    io.write_bytes(path, buffer.getvalue())
    return tuple(shape)


def read_outputs(path: Path, kept: Sequence[int], kind: str = "v") -> list[np.ndarray] | None:
    """Returns the kept values (`kind` "v") or their references' ("r") of the leaves whose
    kept counts the variant's numerics.json records (`kept`); None when the file is absent.
    Read through the one reader (never unpickled, bounded before inflating, each array's shape
    checked against `kept`): a file that is not such an archive raises Unreadable, in one line."""
    if not path.is_file():
        return None
    shapes = {f"{kind}{i}": (int(n),) for i, n in enumerate(kept)}
    arrays = userfiles.read_npz(path, userfiles.ARRAYS, within=path.parent, shapes=shapes)
    return [np.asarray(arrays[name]) for name in shapes]


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Returns ‖a − b‖ / ‖b‖ in float64 (inf when either is not finite where the other is)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        same = np.array_equal(a64, b64, equal_nan=True)
        return 0.0 if same else math.inf
    return float(np.linalg.norm(a64 - b64) / max(float(np.linalg.norm(b64)), 1e-30))


def allowed(dtype: str, spread: float | None, e_base: float | None) -> float:
    """Returns the distance two correct implementations of `dtype` may have on a leaf: from
    eager's measured `spread` from the baseline, else the baseline's error `e_base`."""
    u = UNIT_ROUNDOFF.get(dtype)
    if u is None:  # an integer or bool leaf: exact
        return 0.0
    scale = spread if spread is not None else e_base
    measured = [scale] if scale is not None and math.isfinite(scale) else []
    return SAFETY * max([*measured, FLOOR_ULPS * u])


@dataclass(frozen=True)
class Result:
    """A variant's kept result as the analysis reads it back: its per-leaf errors
    (numerics.json) and each leaf's kept values and float64 reference values (outputs.npz)."""

    accuracy: AccuracyFile
    values: list[np.ndarray]
    references: list[np.ndarray]


def comparable(a: Result, b: Result) -> str | None:
    """Returns why two variants' results cannot be compared leaf by leaf (other leaves,
    shapes or dtypes, or another function of other inputs: their float64 references differ);
    None when they can."""
    if len(a.accuracy.leaves) != len(b.accuracy.leaves):
        return f"{len(a.accuracy.leaves)} leaves against {len(b.accuracy.leaves)}"
    for x, y in zip(a.accuracy.leaves, b.accuracy.leaves, strict=True):
        if (x.path, x.dtype, x.shape, x.kept) != (y.path, y.dtype, y.shape, y.kept):
            were = f"{x.dtype}{list(x.shape)} against {y.dtype}{list(y.shape)}"
            return f"leaf {x.path or 'y'}: {were}"
    for x, ra, rb in zip(a.accuracy.leaves, a.references, b.references, strict=True):
        if distance(ra, rb) > SAME_FUNCTION:
            return (
                f"leaf {x.path or 'y'}: the float64 references differ by "
                f"{distance(ra, rb):.1e}: another function, or other inputs"
            )
    return None


def _err(leaf: LeafAccuracy | None) -> float | None:
    return None if leaf is None else leaf.rel_fro_err


def distances(
    baseline: str, mine: Result, base: Result, eager: tuple[str, Result] | None
) -> DistancesFile:
    """Returns a variant's distances from the baseline (and eager), each leaf with its allowed
    distance; `eager` counts only when it is comparable with the baseline."""
    why = comparable(mine, base)
    if why is not None:
        return DistancesFile(1, baseline, None, comparable=False, why=why)
    if eager is not None and comparable(eager[1], base) is not None:
        eager = None
    leaves = []
    for i, leaf in enumerate(mine.accuracy.leaves):
        spread = distance(eager[1].values[i], base.values[i]) if eager is not None else None
        leaves.append(
            LeafDistance(
                path=leaf.path,
                dtype=leaf.dtype,
                vs_baseline=distance(mine.values[i], base.values[i]),
                vs_eager=distance(mine.values[i], eager[1].values[i]) if eager else None,
                allowed=allowed(leaf.dtype, spread, _err(base.accuracy.leaves[i])),
                spread=spread,
            )
        )
    made = (
        f"{SAFETY:g} x the larger of eager's spread from the baseline and {FLOOR_ULPS:g} "
        "units of roundoff"
        if eager is not None
        else f"{SAFETY:g} x the larger of the baseline's error against float64 and "
        f"{FLOOR_ULPS:g} units of roundoff (no eager variant of these inputs)"
    )
    return DistancesFile(
        1, baseline, eager[0] if eager is not None else None, leaves=tuple(leaves), why=made
    )


def worst(leaves: Sequence[LeafDistance]) -> LeafDistance | None:
    """Returns the leaf furthest past (or nearest to) its allowed distance."""

    def over(d: LeafDistance) -> float:
        if d.vs_baseline is None:
            return -1.0
        if d.allowed <= 0:
            return math.inf if d.vs_baseline > 0 else 0.0
        return d.vs_baseline / d.allowed

    return max(leaves, key=over, default=None)


def moved(d: LeafDistance) -> bool:
    """True when the leaf is further from the baseline's than its allowed distance."""
    return d.vs_baseline is not None and d.vs_baseline > d.allowed
