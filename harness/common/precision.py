"""What arithmetic a GEMM of given dtypes runs on, so it is scored against the right ceiling.

bf16 and f16 run dense on tensor cores. float32 at JAX's default matmul precision runs on TF32
tensor cores on NVIDIA GPUs; at HIGHEST, and on a CPU, it is true f32. A bf16 x with an f32 W
promotes to f32 (the mixed-dtype trap), so it runs at the f32 (TF32) rate.
"""

from __future__ import annotations

from collections.abc import Iterable

# The floating dtypes a GEMM ceiling and a tolerance are known for, narrowest first.
FLOATS = ("bfloat16", "float16", "float32")
# The relative Frobenius error against float64 each dtype's result is held to.
TOLERANCE = {"float32": 2e-3, "float16": 5e-3, "bfloat16": 2e-2}
SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
NOTE = {
    "tf32": "float32 at JAX's default precision runs on TF32 tensor cores on NVIDIA GPUs",
    "f32": "true float32 arithmetic",
    "bf16": "bfloat16 dense",
    "f16": "float16 dense",
}


def narrowest_float(dtypes: Iterable[str]) -> str:
    """Returns the narrowest of FLOATS among `dtypes` (float32 when none is one of them)."""
    found = [d for d in dtypes if d in FLOATS]
    return min(found, key=FLOATS.index) if found else "float32"


def gemm_dtype(x_dtype: str, w_dtype: str) -> str:
    """Returns the dtype the GEMM runs in: the promotion of x's and W's dtypes."""
    if x_dtype == w_dtype:
        return x_dtype
    return "float32"  # f32 with anything, and bf16 with f16, promote to f32 in JAX


def precision(platform: str, x_dtype: str, w_dtype: str, matmul_precision: str = "default") -> str:
    """Returns the arithmetic a GEMM of these dtypes runs on: `bf16`, `f16`, `tf32` or `f32`."""
    dtype = gemm_dtype(x_dtype, w_dtype)
    if dtype == "float32" and platform == "gpu" and matmul_precision != "highest":
        return "tf32"
    return SHORT[dtype]


def tolerance_dtype(leaf_dtype: str, computed_in: str) -> str | None:
    """Returns the dtype whose tolerance a result leaf is judged by: its own, unless the
    arguments it came from were narrower (`computed_in`), whose rounding it then carries; None
    for an integer or bool leaf, which must be exact."""
    if leaf_dtype not in FLOATS and not leaf_dtype.startswith(("float", "complex")):
        return None
    return narrowest_float((leaf_dtype, computed_in))
