"""Device ceilings for the roofline: H200 constants, and a CPU ceiling measured once.

The H200 numbers are what a bf16 dense GEMM and a device-to-device copy reached on this
machine type (one H200 SXM, 141 GB HBM3e) when measured for this harness: 790 TFLOP/s and
4.3 TB/s. They sit below NVIDIA's datasheet figures (989 TFLOP/s dense bf16, 4.8 TB/s) as
every measured ceiling does. For a CPU, `calibrate_cpu` times a float32 matmul and a large copy
(about a second) so the roofline shows what this host can do; run.py stores the result in the
run as ceilings.json at capture time.
"""

from __future__ import annotations

import datetime
import platform as _platform
import sys
import time
from typing import Any

H200 = {
    "device": "NVIDIA H200",
    "peak_flops_per_s": 790e12,
    "peak_bytes_per_s": 4.3e12,
    "dtype": "bfloat16",
    "source": (
        "measured on this machine type (one H200): bf16 dense GEMM 790 TFLOP/s, "
        "device-to-device copy 4.3 TB/s; datasheet 989 TFLOP/s, 4.8 TB/s"
    ),
}


def _best_of(fn: Any, budget_s: float) -> float:
    """Returns the fastest time of `fn()` over repeats that fit in `budget_s` (at least 3)."""
    best = float("inf")
    start = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n += 1
        if n >= 200:
            break
    return best


def calibrate_cpu(
    sizes: tuple[int, ...] = (256, 512, 1024), copy_mib: int = 64, budget_s: float = 1.0
) -> dict[str, Any]:
    """Returns this host's measured ceilings: float32 numpy matmuls and a large array copy.

    The FLOP/s ceiling is the best of several matmul sizes (a ceiling is the most the host
    reaches, and the best size depends on its caches); the copy counts bytes read plus bytes
    written. About `budget_s` seconds in all, half for the matmuls, half for the copy.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    warm = rng.standard_normal((sizes[-1], sizes[-1]), dtype=np.float32)
    _best_of(lambda: warm @ warm, budget_s / 5)  # wake the BLAS threads and the clocks first
    best = 0.0
    for size in sizes:
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        c = np.empty((size, size), np.float32)
        t = _best_of(lambda a=a, b=b, c=c: np.matmul(a, b, out=c), budget_s / 2 / len(sizes))
        best = max(best, 2 * size**3 / t)
    used = "numpy"
    if "jax" in sys.modules:  # at capture time jax is loaded: XLA's own GEMM may beat numpy's
        jax_best = _jax_matmul_flops(sizes[-1], budget_s / 4)
        used = "numpy and jax"
        best = max(best, jax_best)
    src = np.ones(copy_mib * 2**20 // 4, np.float32)
    dst = np.empty_like(src)
    t_cp = _best_of(lambda: np.copyto(dst, src), budget_s / 2)
    return {
        "device": _platform.processor() or _platform.machine(),
        "peak_flops_per_s": best,
        "peak_bytes_per_s": 2 * src.nbytes / t_cp,
        "dtype": "float32",
        "source": (
            f"calibrated on this host: best {used} float32 matmul of {', '.join(map(str, sizes))} "
            f"squared, and a {copy_mib} MiB copy"
        ),
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _jax_matmul_flops(size: int, budget_s: float) -> float:
    """Returns the FLOP/s of a jitted float32 jax matmul (only called when jax is loaded)."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((size, size), jnp.float32)
    f = jax.jit(lambda x, y: x @ y)
    f(a, a).block_until_ready()
    return 2 * size**3 / _best_of(lambda: f(a, a).block_until_ready(), budget_s)


def known_ceilings(environment: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the constant ceilings of the run's device, or None when none are known."""
    kind = str(environment.get("device_kind") or "")
    if "H200" in kind:
        return dict(H200)
    return None


def device_ceilings(environment: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the device's ceilings: known constants, else a CPU calibration, else None."""
    known = known_ceilings(environment)
    if known is not None:
        return known
    if environment.get("platform") == "cpu":
        return calibrate_cpu()
    return None
