"""The expression y = gelu(x @ W + b) for each frontend and mode, its data, and its reference.

Every function takes (x, w, b) so that all frontends compile a program with the same parameters.
The Python function is named after what it computes (`gelu_linear`, `matmul_only`), because XLA
names the module after it (`jit_gelu_linear`) and the dumps are filtered by that name.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from harness.config.experiment import Problem, Variant
from harness.frontends.modes import Mode
from harness.store import npz

ArrayFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class Inputs:
    x: jax.Array
    w: jax.Array
    b: jax.Array


def gelu(h: jax.Array, form: str) -> jax.Array:
    return jax.nn.gelu(h, approximate=(form == "tanh"))


def _dense_jnp(p: Problem) -> ArrayFn:
    def dense(x, w, b):
        h = x @ w
        return h + b if p.bias else h

    return dense


def _dense_linen(p: Problem) -> ArrayFn:
    import flax.linen as nn

    layer = nn.Dense(features=p.n, use_bias=p.bias, param_dtype=jnp.dtype(p.weight_dtype))

    def dense(x, w, b):
        params = {"kernel": w, "bias": b} if p.bias else {"kernel": w}
        return layer.apply({"params": params}, x)

    return dense


def _dense_nnx(p: Problem) -> ArrayFn:
    from flax import nnx

    # eval_shape builds the module without running its random initializers.
    model = nnx.eval_shape(
        lambda: nnx.Linear(
            p.k, p.n, use_bias=p.bias, param_dtype=jnp.dtype(p.weight_dtype), rngs=nnx.Rngs(0)
        )
    )
    graphdef, state = nnx.split(model)
    paths, treedef = jax.tree_util.tree_flatten_with_path(state)

    def dense(x, w, b):
        # Put W and b into the module's state by path, whatever order flax flattens it in.
        by_name = {"kernel": w, "bias": b}
        leaves = [by_name[_last_key(path)] for path, _ in paths]
        return nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, leaves))(x)

    return dense


def _last_key(path: tuple) -> str:
    for entry in reversed(path):
        key = getattr(entry, "key", getattr(entry, "name", None))
        if isinstance(key, str) and key in ("kernel", "bias"):
            return key
    raise ValueError(f"flax nnx state path {path} names neither kernel nor bias")


DENSE = {"jnp": _dense_jnp, "flax_linen": _dense_linen, "flax_nnx": _dense_nnx}


def build_function(variant: Variant) -> ArrayFn:
    """Returns the Python function the variant compiles (or, in eager mode, dispatches)."""
    p, mode = variant.problem, variant.mode_spec
    dense = DENSE[p.frontend](p)

    if mode.gemm_only:

        def matmul_only(x, w, b):
            del b
            return x @ w

        return matmul_only

    if mode.host_print:

        def gelu_linear(x, w, b):
            h = dense(x, w, b)
            # The host callback sits between the GEMM and the GELU, splitting the device program.
            jax.debug.print("gelu_linear: mean(x @ W + b) = {m}", m=h.mean())
            return gelu(h, p.gelu)

        return gelu_linear

    if mode.python_branch:

        def gelu_linear(x, w, b):
            h = dense(x, w, b)
            if h.mean() > 0:  # a Python branch on a traced value: jit cannot compile this
                return gelu(h, p.gelu)
            return h

        return gelu_linear

    if mode.device_branch:

        def gelu_linear(x, w, b):
            h = dense(x, w, b)
            return jax.lax.cond(h.mean() > 0, lambda t: gelu(t, p.gelu), lambda t: t, h)

        return gelu_linear

    def gelu_linear(x, w, b):
        return gelu(dense(x, w, b), p.gelu)

    return gelu_linear


def make_inputs(p: Problem, seed: int) -> Inputs:
    """Returns seeded x, W (scaled by 1/sqrt(k)) and b, already on the device.

    Made by one jit: eager, each primitive of jax.random compiles alone (0.97 s against
    0.59 s on the 2-core CPU for a [512, 256] problem), and on a GPU, where inputs over
    CACHED_BYTES are made again in every variant's process, that work holds the device
    shared (harness.capture.turn), so a measurement asking meanwhile waits for it."""
    made = _made(seed, tuple(p.x_shape), p.k, p.n, p.dtype, p.weight_dtype)
    return Inputs(*jax.block_until_ready(made))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4, 5))
def _made(
    seed: int, x_shape: tuple[int, ...], k: int, n: int, dtype: str, weight_dtype: str
) -> tuple[jax.Array, jax.Array, jax.Array]:
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, x_shape, dtype=jnp.dtype(dtype))
    w = jax.random.normal(kw, (k, n), dtype=jnp.dtype(weight_dtype)) * (1.0 / math.sqrt(k))
    b = jax.random.normal(kb, (n,), dtype=jnp.dtype(weight_dtype))
    return x, w.astype(weight_dtype), b


_INPUTS: dict[tuple, Inputs] = {}


def inputs_for(p: Problem, seed: int, cache: Path | None = None) -> Inputs:
    """Returns make_inputs(p, seed), made once per distinct input shapes, dtypes and seed.

    Variants that differ only in what they compute (the GELU form, the frontend, options)
    share their inputs, so the data is generated once and is bit-identical across them.
    With `cache` (a folder), inputs up to CACHED_BYTES are kept there between runs, keyed by
    the recipe, the jax version and the platform: the same bits as making them again, without
    the second or so of compiling JAX's random number kernels every run.
    """
    key = (p.x_shape, p.dtype, p.weight_dtype, p.k, p.n, seed)
    if key not in _INPUTS:
        found = _read_cached(cache, key) if cache is not None else None
        _INPUTS[key] = found or make_inputs(p, seed)
        if cache is not None and found is None and input_bytes(p) <= CACHED_BYTES:
            _write_cached(cache, key, _INPUTS[key])
    return _INPUTS[key]


CACHED_BYTES = 64 << 20
# Bump when make_inputs changes what it makes (2: one jit; fused, a GPU may round apart).
_RECIPE = 2


def _cache_key(key: tuple) -> str:
    """What a cached inputs file must have been made from: the recipe, the problem's shapes,
    dtypes and seed, the jax version and the platform."""
    return repr((_RECIPE, key, jax.__version__, jax.default_backend()))


def _cache_name(key: tuple) -> str:
    return f"inputs-{hashlib.sha256(_cache_key(key).encode()).hexdigest()[:20]}.npz"


def expected_arrays(key: tuple) -> dict[str, tuple[tuple[int, ...], str]]:
    """The shape and dtype of x, W and b that make_inputs makes for `key`."""
    x_shape, dtype, weight_dtype, k, n, _seed = key
    return {"x": (tuple(x_shape), dtype), "w": ((k, n), weight_dtype), "b": ((n,), weight_dtype)}


def _read_cached(cache: Path, key: tuple) -> Inputs | None:
    """Returns the cached inputs for `key`, or None (made again) when absent, unreadable,
    refused by io.read_cache_file (a link, outside the results root), or made from anything
    other than `key`: the recorded key, and every array's shape, dtype and size, must be the
    ones make_inputs makes, so a file copied over another's is a miss, never used."""
    found = npz.read_keyed(cache, _cache_name(key), _cache_key(key))
    if found is None:
        return None
    arrays = []
    for n, (shape, dtype) in expected_arrays(key).items():
        kind = jnp.dtype(dtype)
        raw, kept_dtype, kept_shape = (found.get(x) for x in (n, f"{n}_dtype", f"{n}_shape"))
        if (
            raw is None
            or kept_dtype is None
            or kept_shape is None
            or str(kept_dtype) != dtype
            or tuple(int(d) for d in kept_shape) != shape
            or raw.dtype != np.uint8
            or raw.size != math.prod(shape) * kind.itemsize
        ):
            return None
        arrays.append(np.frombuffer(raw.tobytes(), dtype=kind).reshape(shape))
    return Inputs(*(to_device(a) for a in arrays))


def _write_cached(cache: Path, key: tuple, inputs: Inputs) -> None:
    """Keeps `inputs` as raw bytes (bf16 has no NumPy dtype of its own) with dtypes, shapes
    and the key they were made from."""
    parts: dict[str, np.ndarray] = {}
    for n in ("x", "w", "b"):
        a = np.asarray(getattr(inputs, n))
        parts[n] = np.frombuffer(a.tobytes(), dtype=np.uint8)
        parts[f"{n}_dtype"] = np.array(str(a.dtype))
        parts[f"{n}_shape"] = np.array(a.shape, dtype=np.int64)
    # A cache that cannot be written (or is refused) is only slower.
    npz.write_keyed(cache, _cache_name(key), _cache_key(key), parts)


def halve_rows(x: jax.Array) -> jax.Array:
    """Returns x with m halved: the new shape that forces a recompile.

    Cut on the host and placed as cached inputs are: a device slice is an eager op whose
    compile (65 ms on a CPU) every variant would pay again after clearing JAX's caches."""
    host = np.asarray(x)
    return to_device(host[..., : host.shape[-2] // 2, :])


def to_device(a: np.ndarray) -> jax.Array:
    """Returns a copy of `a` on the default device, uncommitted, as `jnp.asarray` would make
    it, without the identity computation that `jnp.asarray` compiles for each new shape."""
    return jax.block_until_ready(jax.device_put(a))


_REFERENCE_RECIPE = 1  # bump when reference() changes what it computes


def reference_key(p: Problem, mode: Mode, seed: int, rows: np.ndarray) -> str:
    """Returns what `reference(p, mode, inputs_for(p, seed), rows)` is made from, as text: the
    inputs' recipe (their shapes, dtypes and seed, jax's version and the platform: the inputs
    cache's key), what reference() reads of the problem and the mode (the GEMM alone; else the
    GELU form, the bias and whether a branch on the mean decides), the rows and NumPy's
    version. Variants with equal keys have bit-identical references.

    Left out because reference() does not read them: the frontend (jnp, flax.linen and
    flax.nnx compute the same math on the same inputs), a host print, and for the GEMM alone
    the GELU form and the bias."""
    inputs = (p.x_shape, p.dtype, p.weight_dtype, p.k, p.n, seed)
    what = ("gemm",) if mode.gemm_only else ("gelu", p.gelu, p.bias, mode.branches)
    picked = tuple(int(r) for r in np.asarray(rows).ravel())
    return repr((_REFERENCE_RECIPE, _cache_key(inputs), what, picked, np.__version__))


_ITEM = {"float32": 4, "bfloat16": 2, "float16": 2}


def input_bytes(p: Problem) -> int:
    """Returns the bytes of x, W and b."""
    return p.rows * p.k * _ITEM[p.dtype] + (p.k * p.n + p.n) * _ITEM[p.weight_dtype]


def problem_bytes(p: Problem) -> int:
    """Returns a working-set estimate: x, W, b, y and two temporaries of y's size."""
    return input_bytes(p) + 3 * p.rows * p.n * 4
