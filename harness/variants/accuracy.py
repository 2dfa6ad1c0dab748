"""How a variant's result is judged, in NumPy alone: the GELU expression's float64 reference
for sampled rows, the tolerance its dtypes allow and the errors against it.

Every frontend's variants are judged by these, so they import no framework: a plain NumPy
frontend (tests/toy_frontend.py) judges its results as JAX's and PyTorch's are judged.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from harness.common import precision
from harness.common.precision import narrowest_float
from harness.records.summary import Numerics

if TYPE_CHECKING:
    from harness.config.experiment import Problem
    from harness.frontends.modes import Mode

# Relative Frobenius error allowed against the float64 reference, by the narrowest input dtype.
# float32 allows TF32 GEMMs, which XLA uses on NVIDIA GPUs at default precision (~3e-4).
TOLERANCE = precision.TOLERANCE


class Operands(Protocol):
    """The expression's x, W and b, as any framework holds them (NumPy reads each)."""

    x: Any
    w: Any
    b: Any


def sample_rows(m: int, count: int) -> np.ndarray:
    """Returns up to `count` evenly spaced row indices of m, so large problems check cheaply."""
    return np.unique(np.linspace(0, m - 1, num=min(m, count)).astype(np.int64))


def reference(p: Problem, mode: Mode, inputs: Operands, rows: np.ndarray) -> np.ndarray:
    """Returns the float64 NumPy result of `mode`'s function (of any frontend: its record
    says what it computes) for the chosen rows of x (all batch entries)."""
    x = np.asarray(inputs.x).astype(np.float64)[..., rows, :]
    w = np.asarray(inputs.w).astype(np.float64)
    h = x @ w
    if mode.gemm_only:
        return h
    if p.bias:
        h = h + np.asarray(inputs.b).astype(np.float64)
    if mode.branches:  # the branch is on the mean of all of x @ W + b, not of the rows
        full = np.asarray(inputs.x).astype(np.float64) @ w
        if p.bias:
            full = full + np.asarray(inputs.b).astype(np.float64)
        if not full.mean() > 0:
            return h
    if p.gelu == "tanh":
        return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
    erf = np.frompyfunc(math.erf, 1, 1)
    return 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)).astype(np.float64))


def tolerance(p: Problem) -> float:
    """Returns the relative error allowed, set by the narrowest dtype among x and W."""
    return TOLERANCE[narrowest_float((p.dtype, p.weight_dtype))]


def numerics(y: Any, ref: np.ndarray, rows: np.ndarray, tol: float) -> Numerics:
    """Returns max abs/rel error and the relative Frobenius error with a pass/fail verdict, of
    `y` (any array NumPy reads: a JAX or NumPy result) at `rows`."""
    return compare(np.asarray(y)[..., rows, :], ref, tol)


def compare(got: np.ndarray, ref: np.ndarray, tol: float) -> Numerics:
    """Returns the errors of `got` against the float64 `ref` (same shape) and the verdict:
    finite and a relative Frobenius error within `tol`. Shared by the GELU study and a
    program study, so both judge numerics alike."""
    got = got.astype(np.float64)
    ref = ref.astype(np.float64)
    if got.size == 0:
        return Numerics(0.0, 0.0, 0.0, tol, bool(np.isfinite(got).all()))
    diff = np.abs(got - ref)
    rel_fro = float(np.linalg.norm(diff) / max(np.linalg.norm(ref), 1e-30))
    finite = bool(np.isfinite(got).all())
    return Numerics(
        max_abs_err=float(diff.max()),
        max_rel_err=float((diff / np.maximum(np.abs(ref), 1e-6)).max()),
        rel_fro_err=rel_fro,
        tolerance=tol,
        ok=finite and rel_fro <= tol,
    )
