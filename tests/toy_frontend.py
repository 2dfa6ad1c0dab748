"""A toy third frontend: the GELU expression in plain NumPy, registered from the tests.

It proves the frontend protocol (harness.frontends.registry.Frontend) is the whole of what a
framework needs: a study of its variants is captured, timed, analysed and reported with no
edit outside harness/frontends/ and the `register(...)` line at the bottom. A study's
processes learn of it through `HARNESS_FRONTENDS=<this file>` (tests/test_frontends.py).

Its variants run op by op on the host: nothing is compiled, so there is no IR ladder, no
profile and no dump; the capture keeps the blocked call times and the numerics, judged as the
JAX and PyTorch variants are (harness.variants.accuracy: the float64 reference of its own
seeded NumPy inputs). It imports no JAX, directly or through the harness modules it uses
(tests/test_layers.py checks): the contract it implements is harness.frontends.contract's.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.frontends.contract import Captured, analytic_flops
from harness.frontends.modes import Mode, Traits
from harness.frontends.registry import register
from harness.records.summary import CaptureRecord
from harness.variants import accuracy

NAME = "numpy"

MODES = (
    Mode("numpy_gelu", NAME, ("eager",), "gelu(x @ W + b) in NumPy, op by op", op_by_op=True),
    Mode(
        "numpy_matmul",
        NAME,
        ("lower_bound",),
        "x @ W alone in NumPy",
        op_by_op=True,
        gemm_only=True,
    ),
)

# Its variants are also timed against their JAX twins (vs_framework), as PyTorch's are.
TRAITS = Traits(label="NumPy", compiler="NumPy", timed_against="jax", packages=("numpy",))


def _gelu(h: np.ndarray, form: str) -> np.ndarray:
    if form == "tanh":
        c = np.asarray(math.sqrt(2.0 / math.pi), dtype=h.dtype)
        return 0.5 * h * (1.0 + np.tanh(c * (h + np.asarray(0.044715, h.dtype) * h**3)))
    erf = np.vectorize(math.erf, otypes=[h.dtype])
    return 0.5 * h * (1.0 + erf(h / np.asarray(math.sqrt(2.0), h.dtype)))


@dataclasses.dataclass(frozen=True)
class Inputs:
    """x, W (scaled by 1/sqrt(k)) and b, seeded: NumPy's own draw, not JAX's."""

    x: np.ndarray
    w: np.ndarray
    b: np.ndarray


def inputs_for(p: Any, seed: int) -> Inputs:
    """Returns the seeded inputs of problem `p` at its dtypes (those NumPy knows)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(tuple(p.x_shape)).astype(p.dtype)
    w = (rng.standard_normal((p.k, p.n)) / math.sqrt(p.k)).astype(p.weight_dtype)
    b = rng.standard_normal(p.n).astype(p.weight_dtype)
    return Inputs(x, w, b)


def step_times(fn: Callable[[], Any], warmup: int, steps: int) -> list[float]:
    """Returns the wall seconds of `steps` calls after `warmup` untimed ones (NumPy returns
    when it is done: each call is blocked)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


@dataclasses.dataclass(frozen=True)
class Subject:
    """What a NumPy variant runs: its function and its host arrays (the JAX inputs' bits)."""

    fn: Callable[..., np.ndarray]
    args: tuple[np.ndarray, ...]

    def call(self) -> np.ndarray:
        return self.fn(*self.args)


def _returned(out: Any) -> Any:
    return out  # NumPy returns when it is done: nothing to wait for


class NumpyFrontend:
    name = NAME
    modes = MODES
    traits = TRAITS

    def preload(self, variant: Any) -> tuple[str, ...]:
        del variant
        return ("numpy",)

    def prepare(self, exp: Any, variant: Any, cache: Path | None) -> None:
        del exp, variant, cache  # its inputs are cheap: each variant draws its own

    def subject(self, exp: Any, variant: Any) -> Subject:
        p, mode = variant.problem, variant.mode_spec
        inputs = inputs_for(p, exp.seed)
        args = (inputs.x, inputs.w, inputs.b)

        def numpy_gelu_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
            h = x @ w
            if mode.gemm_only:
                return h
            return _gelu(h + b if p.bias else h, p.gelu)

        return Subject(numpy_gelu_linear, args)

    def capture(self, exp: Any, variant: Any, ctx: Any) -> Any:
        started = time.perf_counter()
        subject = self.subject(exp, variant)
        p = variant.problem
        times = step_times(subject.call, exp.measure.warmup, exp.measure.steps)
        y = subject.call()
        rows = accuracy.sample_rows(p.m, exp.measure.numerics_rows)
        ref = accuracy.reference(p, variant.mode_spec, inputs_for(p, exp.seed), rows)
        record = CaptureRecord(
            status="ok",
            mode=variant.mode,
            module=None,
            latency_blocked_s=tuple(times),
            numerics=accuracy.numerics(y, ref, rows, accuracy.tolerance(p)),
            flops_analytic=analytic_flops(variant),
            flops_analytic_source="formula",
            notes=("NumPy compiles nothing: no IR ladder, no dump, no profile",),
            wall_s=time.perf_counter() - started,
        )
        return Captured(record, subject.call, _returned)

    def compile_for_timing(
        self, exp: Any, variant: Any, workdir: Path, platform: str, executables: Path | None
    ) -> tuple[Callable[[], Any], str | None]:
        del workdir, platform, executables
        return self.subject(exp, variant).call, "NumPy: called again in the timing process"

    def waiter(self, platform: str) -> Callable[[Any], Any]:
        del platform
        return _returned

    def analyze(
        self,
        workdir: Path,
        exp: Any,
        variant: Any,
        record: Any,
        timed: Any,
        ceilings: Any,  # harness.records.run_files.Ceilings | None
        platform: str,
    ) -> tuple[Any, list[str]]:
        del ceilings, platform
        from harness.analyze import unanalyzed

        # Identity, timing and numerics: nothing was compiled, so no other section applies.
        vdir = workdir / "variants" / variant.name
        return unanalyzed(vdir, variant, record, timed), []

    def diverge(
        self,
        base_ir: Path,
        ir: Path,
        base_kernels: list[str] | None,
        kernels: list[str] | None,
    ) -> Any:
        del base_ir, ir, base_kernels, kernels
        return None  # no IR ladder to diverge in


FRONTEND = register(NumpyFrontend())
