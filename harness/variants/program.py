"""The user's own function as the study's program: its import, seeded inputs and parameters,
a variant's dtype changes, the new-shape call, and the float64 reference.

The config's `program` section (harness.config.experiment.Program) names `function` and `init`.
The harness calls

    params = init(jax.random.key(seed), *input_specs, **kwargs)   # once per inputs and seed
    y = function(params, *inputs, **kwargs)                        # in every variant

where each input is one pytree (an array, or a list or mapping of them, as configured: harness.
config.program) and each spec the same pytree of `jax.ShapeDtypeStruct`; `kwargs` are the
static keyword arguments (`program.kwargs`), passed to init only when its signature names them.
Inputs come from the same seed: array leaf i, in jax.tree order over all inputs, from
`jax.random.fold_in(jax.random.key(seed), INPUT_STREAM + i)` (standard normal for floating
dtypes, uniform in [low, high) for integers, fair coin flips for bool, typed PRNG keys split
from it for `dtype: key`), made once per distinct shapes and dtypes, so every variant computes
on bit-identical values. A typed key (`jax.random.key`) may be any leaf of the parameters, the
inputs or the result: wherever the harness reads values on the host (the reference, the
numerics, the kept outputs) it reads the key's data (`jax.random.key_data`, compared exactly),
and it never casts one. A variant's
`program.dtype` casts every floating input, and `program.w_dtype` every floating leaf of the
parameters, after they are made.

The reference is the function itself, run under jit with jax's 64-bit mode on the CPU device:
floating parameters and inputs widened to float64 (the values the variant saw, so the error
measured is the computation's, not the rounding of its inputs). x64 is switched on only inside
`float64_on_cpu`, a config context (thread-local), so no measured variant ever sees it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.common import userfiles
from harness.common.precision import narrowest_float, tolerance_dtype
from harness.config.callables import split_callable
from harness.config.experiment import Program
from harness.config.program import FrozenMap, InputSpec, input_leaves, map_specs
from harness.config.program import leaves as config_leaves
from harness.hlo.clusters import find_clusters
from harness.hlo.cost import module_cost
from harness.hlo.parser import parse_module
from harness.records.numerics import LeafAccuracy
from harness.records.summary import ArraySpec, Numerics, ProgramRecord
from harness.variants.accuracy import TOLERANCE, compare

# Input leaf i is drawn from fold_in(key(seed), INPUT_STREAM + i); init gets key(seed) itself.
INPUT_STREAM = 1 << 20


class ProgramError(ValueError):
    """The program cannot be imported or called as configured; the message says why and `key`
    names the config key it comes from."""

    def __init__(self, message: str, key: str = "program.function"):
        super().__init__(message)
        self.key = key


# ---------------------------------------------------------------------------------------------
# Importing the function


_LOADED: dict[str, Callable[..., Any]] = {}


def load_callable(spec: str) -> Callable[..., Any]:
    """Returns the callable `spec` names (`module:function` or `path/to/file.py:function`).

    Raises ProgramError naming what is missing; an exception the module raises while it is
    imported is reported with its type and first line.
    """
    if spec in _LOADED:
        return _LOADED[spec]
    try:
        where, name, is_file = split_callable(spec)
    except ValueError as e:
        raise ProgramError(str(e)) from None
    try:
        module = (
            userfiles.import_python_file(Path(where), "harness_program")
            if is_file
            else importlib.import_module(where)
        )
    except ModuleNotFoundError as e:
        raise ProgramError(f"cannot import {where!r}: {e}") from None
    except Exception as e:  # the user's module failed while it was imported
        raise ProgramError(f"importing {where} raised {_first(e)}") from e
    fn = getattr(module, name, None)
    if fn is None:
        raise ProgramError(f"{where} has no attribute {name!r}")
    if not callable(fn):
        raise ProgramError(f"{where}:{name} is of type {type(fn).__name__}, not callable")
    _LOADED[spec] = fn
    return fn


def bound(program: Program) -> Callable[..., Any]:
    """Returns the function with the study's (or variant's) static keyword arguments bound,
    named as the function is, so jit names its module `jit_<function>` as before."""
    fn = load_callable(program.function)
    if not program.kwargs:
        return fn
    kwargs = dict(program.kwargs)

    def call(*args: Any) -> Any:
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "function")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    return call


def init_kwargs(program: Program) -> dict[str, Any]:
    """Returns the keyword arguments init's signature names (all of them for `**kwargs`)."""
    if not program.kwargs:
        return {}
    try:
        params = inspect.signature(load_callable(program.init)).parameters.values()
    except (TypeError, ValueError):  # a builtin or a C function: no signature to read
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(program.kwargs)
    names = {p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    return {k: v for k, v in program.kwargs.items() if k in names}


def check(program: Program, seed: int) -> None:
    """Imports the function and its init and traces both on abstract values (`jax.eval_shape`:
    nothing is computed); raises ProgramError, keyed by the one at fault, when either cannot be
    imported, is not callable, or does not accept the configured arguments. The worker runs
    this before any folder exists, so each of these is a config error."""
    for key, spec in (("function", program.function), ("init", program.init)):
        try:
            load_callable(spec)
        except ProgramError as e:
            raise ProgramError(str(e), f"program.{key}") from None
    init, fn = load_callable(program.init), bound(program)
    specs, extra = input_specs(program), init_kwargs(program)
    # Code that branches in Python on a value cannot be traced; it may still run op by op
    # (eager), so that is left to the variants, which record why they fail.
    untraceable = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError)
    try:
        params = jax.eval_shape(lambda k: init(k, *specs, **extra), jax.random.key(seed))
    except untraceable:
        return
    except Exception as e:
        raise ProgramError(f"init(key, *input_specs) raised {_first(e)}", "program.init") from None
    try:
        jax.eval_shape(fn, params, *specs)
    except untraceable:
        return
    except Exception as e:
        raise ProgramError(
            f"function(params, *inputs) raised {_first(e)}", "program.function"
        ) from None


def _first(e: BaseException) -> str:
    """`Type: first line of the message`, for a one-line error."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# Inputs and parameters


def _is_float(dtype: Any) -> bool:
    return not is_key(dtype) and bool(jnp.issubdtype(dtype, jnp.floating))


def is_key(dtype: Any) -> bool:
    """Whether `dtype` is a typed PRNG key's (`key<fry>`), which NumPy cannot hold."""
    return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))


def host_leaf(leaf: Any) -> np.ndarray:
    """Returns one leaf's values as a NumPy array; a typed key's data (`jax.random.key_data`,
    uint32 with the key's own trailing dimension), which is what a key is compared by."""
    if is_key(getattr(leaf, "dtype", None)):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)


def dtype_name(dtype: Any) -> str:
    """Returns a leaf's dtype as text (`float32`, `key<fry>`)."""
    return str(dtype) if is_key(dtype) else str(jnp.dtype(dtype))


KEY_DTYPE = "key"  # an input spec's dtype for a typed PRNG key (jax.random.key's default impl)


def spec_dtype(name: str) -> Any:
    """Returns the dtype an input spec's `dtype` names (`key`: jax.random.key's)."""
    if name == KEY_DTYPE:
        return jax.eval_shape(lambda: jax.random.key(0)).dtype
    return jnp.dtype(name)


def _inputs_tree(program: Program, make: Callable[..., Any], shapes: Any = None) -> tuple:
    """Returns the inputs as the function receives them (mappings as dicts, lists as lists),
    leaf i (jax.tree order over all inputs) being `make(i, spec, shape)`; `shapes` mirrors
    `program.inputs` (None: as configured)."""
    flat = [s for _, s in config_leaves(shapes)] if shapes else None
    counter = itertools.count()

    def leaf(spec: InputSpec) -> Any:
        i = next(counter)
        return make(i, spec, tuple(flat[i]) if flat else spec.shape)

    return tuple(map_specs(leaf, tree) for tree in program.inputs)


def input_specs(program: Program, shapes: Any = None) -> tuple:
    """Returns the inputs as `jax.ShapeDtypeStruct` pytrees as configured (before a variant's
    dtype): what init is called with."""
    return _inputs_tree(
        program, lambda _, s, shape: jax.ShapeDtypeStruct(shape, spec_dtype(s.dtype)), shapes
    )


def _draw(key: jax.Array, shape: tuple[int, ...], spec: InputSpec) -> jax.Array:
    if spec.dtype == KEY_DTYPE:
        return jax.random.split(key, shape) if shape else key
    dtype = jnp.dtype(spec.dtype)
    if spec.dtype == "bool":
        return jax.random.bernoulli(key, 0.5, shape)
    if jnp.issubdtype(dtype, jnp.integer):
        return jax.random.randint(key, shape, spec.low, spec.high, dtype=dtype)
    return jax.random.normal(key, shape, dtype=dtype)


def make_inputs(program: Program, seed: int, shapes: Any = None) -> tuple[Any, ...]:
    """Returns the seeded inputs (at `shapes`, else as configured), floating ones cast to the
    variant's `dtype`, on the default device: leaf i from fold_in(key(seed), INPUT_STREAM + i),
    all drawn by one jit."""

    def drawn(root: jax.Array) -> tuple[Any, ...]:
        def make(i: int, spec: InputSpec, shape: tuple[int, ...]) -> jax.Array:
            x = _draw(jax.random.fold_in(root, INPUT_STREAM + i), shape, spec)
            return x.astype(program.dtype) if program.dtype and _is_float(x.dtype) else x

        return _inputs_tree(program, make, shapes)

    # One jit, one compile (eager, each primitive of jax.random compiles alone).
    return jax.block_until_ready(jax.jit(drawn)(jax.random.key(seed)))


_PARAMS: dict[tuple, Any] = {}


def init_params(program: Program, seed: int) -> Any:
    """Returns `init(jax.random.key(seed), *input_specs, **kwargs it names)`, made once per
    init, inputs, those keyword arguments and seed.

    It runs under jit (one compile instead of one per primitive); an init jit cannot trace (a
    Python branch on a value) is called as it is.
    """
    extra = init_kwargs(program)
    key = (program.init, program.inputs, tuple(sorted(extra.items())), seed)
    if key not in _PARAMS:
        init = load_callable(program.init)
        specs = input_specs(program)
        try:
            params = jax.jit(lambda k: init(k, *specs, **extra))(jax.random.key(seed))
        except (jax.errors.ConcretizationTypeError, TypeError):
            params = init(jax.random.key(seed), *specs, **extra)
        _PARAMS[key] = jax.block_until_ready(params)
    return _PARAMS[key]


def cast_params(params: Any, dtype: str | None) -> Any:
    """Returns the parameters with every floating leaf cast to `dtype` (unchanged for None)."""
    if not dtype:
        return params
    return jax.block_until_ready(
        jax.tree.map(lambda a: a.astype(dtype) if _is_float(a.dtype) else a, params)
    )


@dataclasses.dataclass(frozen=True)
class ProgramArgs:
    """One call's arguments: the parameters and the inputs (one pytree each) after them."""

    params: Any
    inputs: tuple[Any, ...]

    @property
    def args(self) -> tuple[Any, ...]:
        return (self.params, *self.inputs)


_ARGS: dict[tuple, ProgramArgs] = {}


def _args_key(program: Program, seed: int) -> tuple:
    extra = tuple(sorted(init_kwargs(program).items()))
    return (program.init, program.inputs, program.dtype, program.w_dtype, extra, seed)


def args_for(program: Program, seed: int) -> ProgramArgs:
    """Returns the variant's arguments, made once per distinct inputs, dtypes and seed, so
    variants that differ only in options share bit-identical data."""
    key = _args_key(program, seed)
    if key not in _ARGS:
        params = cast_params(init_params(program, seed), program.w_dtype)
        _ARGS[key] = ProgramArgs(params, make_inputs(program, seed))
    return _ARGS[key]


def new_shape_args(program: Program, seed: int) -> ProgramArgs:
    """Returns the arguments of the new-shape call: the same parameters, inputs drawn again at
    `program.new_shapes()` (every leaf sized like the first leaf's halved, unless configured)."""
    params = args_for(program, seed).params
    return ProgramArgs(params, make_inputs(program, seed, program.new_shapes()))


# ---------------------------------------------------------------------------------------------
# The float64 reference and the numerics


@contextlib.contextmanager
def float64_on_cpu() -> Iterator[jax.Device]:
    """Runs the block with jax's 64-bit types on and the CPU device as the default; yields it.

    `jax.enable_x64` (jax >= 0.8) and, before it, `jax.experimental.enable_x64` are config
    contexts: they set the thread-local value for the block only, and jit caches key on it,
    so nothing compiled here is reused by, or leaks into, a measured variant.
    """
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        context = enable(True)
    else:  # pragma: no cover - older jax
        from jax.experimental import enable_x64  # imports JAX: loaded only when called

        context = enable_x64()
    cpu = jax.devices("cpu")[0]
    _draw_float64_as_float32()
    with context, jax.default_device(cpu):
        yield cpu


def _draw_float64_as_float32() -> None:
    """Makes jax.random's float64 draws the variant's float32 draws, widened.

    Under x64 a Python float's dtype is float64, so `jax.random.bernoulli(key, 0.9)` (Flax's
    dropout) or `normal(key)` inside the function would draw 64 bits a value where the
    measured variant drew 32: another dropout mask, and a reference of another computation.
    jax.random's samplers all draw through `_uniform` (jax._src.random.core); a float64 draw
    is taken as the float32 one from the same key and widened, so the reference samples what
    the variant sampled. Only float64 draws change, and only the reference makes them (x64 is
    off everywhere else). Where jax's internals differ, nothing is changed.
    """
    try:
        from jax._src.random import core as random_core  # private: checked below
    except ImportError:  # pragma: no cover - another jax layout
        return
    own = getattr(random_core, "_uniform", None)
    if own is None or getattr(own, "draws_float32", False):
        return

    def _uniform(key: Any, minval: Any, maxval: Any, shape: Any, dtype: Any) -> Any:
        if np.dtype(dtype) != np.float64:
            return own(key, minval, maxval, shape, dtype)
        narrow = own(key, minval, maxval, shape, np.dtype(np.float32))
        return jax.lax.convert_element_type(narrow, np.float64)

    _uniform.draws_float32 = True  # type: ignore[attr-defined]
    random_core._uniform = _uniform


def _widened(leaf: Any, device: jax.Device) -> jax.Array:
    if is_key(leaf.dtype):  # a key is its own data in any precision
        return jax.device_put(leaf, device)
    a = np.asarray(leaf)
    return jax.device_put(a.astype(np.float64) if _is_float(a.dtype) else a, device)


_REFERENCE: dict[tuple, tuple[np.ndarray, ...]] = {}


def reference(program: Program, args: ProgramArgs, seed: int) -> tuple[np.ndarray, ...]:
    """Returns the leaves of `function(params, *inputs)` computed in float64 on the CPU,
    once per distinct arguments (the reference of `xla` serves `xla_no_fusion` too)."""
    key = (program.function, program.kwargs, *_args_key(program, seed))
    if key not in _REFERENCE:
        fn = bound(program)

        # A function of its own: jit's tracing cache, which JAX's cache-miss explanation
        # reads, then never holds this float64 trace beside the variant's, so the new-shape
        # call is explained against the variant's own first trace.
        def float64_reference(*a: Any) -> Any:
            return fn(*a)

        with float64_on_cpu() as cpu:
            params, inputs = jax.tree.map(lambda a: _widened(a, cpu), (args.params, args.inputs))
            out = jax.jit(float64_reference)(params, *inputs)
            _REFERENCE[key] = tuple(host_leaf(leaf) for leaf in jax.tree.leaves(out))
    return _REFERENCE[key]


def reference_for(
    program: Program, default_kwargs: Mapping[str, Any], args: ProgramArgs, seed: int
) -> tuple[tuple[np.ndarray, ...], str | None]:
    """Returns the float64 reference and, where it is not the variant's own, why.

    A keyword knob that selects an implementation may not run in float64 at all (cuDNN's
    attention takes fp16/bf16/fp8 only). The reference is then the function with the
    experiment's keyword arguments, `default_kwargs`: the same computation by another
    implementation, which is what the knob is meant to be. A knob that changes the math as well
    then fails its numerics, with this note beside it. Any other failure is the probe's.
    """
    try:
        return reference(program, args, seed), None
    except Exception as own:
        if dict(program.kwargs) == dict(default_kwargs):
            raise
        changed = ", ".join(
            f"{k}={v}" for k, v in program.kwargs.items() if default_kwargs.get(k) != v
        )
        usual = ", ".join(f"{k}={v}" for k, v in default_kwargs.items()) or "none"
        fallback = dataclasses.replace(program, kwargs=FrozenMap(dict(default_kwargs)))
        ref = reference(fallback, args, seed)
        first = (str(own).strip().splitlines() or [""])[0][:200]
        return ref, (
            f"the float64 reference ran with the experiment's keyword arguments ({usual}): "
            f"`{changed}` does not run in float64 ({type(own).__name__}: {first})"
        )


def reference_key(program: Program, default_kwargs: Mapping[str, Any], seed: int) -> str:
    """Returns what `reference_for(program, default_kwargs, args_for(program, seed), seed)`
    is made from, as text: the function, its keyword arguments and the experiment's (the
    fallback's), the arguments' recipe (init, inputs, dtypes, init's keyword arguments, seed),
    and jax's, NumPy's versions and the platform. The function is named, not read: a key holds
    within one run (harness.capture.reference keeps references for one run only)."""
    own = tuple(sorted((str(k), repr(v)) for k, v in program.kwargs.items()))
    usual = tuple(sorted((str(k), repr(v)) for k, v in default_kwargs.items()))
    versions = (jax.__version__, np.__version__, jax.default_backend())
    return repr(("program", program.function, own, usual, _args_key(program, seed), versions))


def leaf_paths(y: Any) -> list[str]:
    """Returns each array leaf's pytree path (`[0]['w']`; `` for a single array)."""
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(y)[0]]


def _exact(got: np.ndarray, ref: np.ndarray) -> Numerics:
    """An integer or bool leaf: right only when every element equals the reference's."""
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    rel = float(np.linalg.norm(diff) / max(np.linalg.norm(ref.astype(np.float64)), 1e-30))
    return Numerics(
        worst, worst / max(float(np.abs(ref).max(initial=0)), 1.0), rel, 0.0, worst == 0
    )


# A reference leaf this small against its neighbours' scale is zero up to the reference's own
# rounding (64 float32 units of roundoff): an exact 0 the float64 or float32 reference misses
# by its rounding, as a gradient BatchNorm cancels.
ZERO_REFERENCE = 64 * 2.0**-24


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a.astype(np.float64))))) if a.size else 0.0


def neighbour_scale(got: list[np.ndarray], ref: tuple[np.ndarray, ...]) -> float:
    """The scale a leaf whose reference is zero is judged on: the median root mean square of
    the result's floating reference leaves (1.0 when they are all zero). Relative to an exact 0
    any rounding is infinite (a conv bias whose gradient BatchNorm cancels read 2.36e+11%);
    against its neighbours' size it is rounding."""
    sizes = [_rms(r) for g, r in zip(got, ref, strict=True) if _is_float(g.dtype) and _rms(r) > 0]
    return float(np.median(sizes)) if sizes else 1.0


def _absolute(got: np.ndarray, ref: np.ndarray, scale: float, tol: float) -> Numerics:
    """A leaf whose reference is zero: the root mean square of its error over `scale`."""
    g = got.astype(np.float64)
    diff = np.abs(g - ref.astype(np.float64))
    worst = float(diff.max())
    err = _rms(diff) / scale
    return Numerics(worst, worst / scale, err, tol, bool(np.isfinite(g).all()) and err <= tol)


def _badness(n: Numerics) -> float:
    """How far a leaf is from passing: its error over its tolerance (inf when it fails an exact
    or finite check), so the worst leaf is the one nearest to, or furthest past, failing."""
    if not n.ok:
        if not n.tolerance:
            return math.inf
        return (
            math.inf
            if n.rel_fro_err is None or not math.isfinite(n.rel_fro_err)
            else (1e6 + n.rel_fro_err / n.tolerance)
        )
    return (n.rel_fro_err or 0.0) / n.tolerance if n.tolerance else 0.0


def judged_leaves(
    y: Any, ref: tuple[np.ndarray, ...], computed_in: str = "float32"
) -> list[LeafAccuracy]:
    """Returns each leaf of the result against the reference: a floating leaf within its own
    dtype's tolerance (no tighter than that of `computed_in`, the narrowest floating dtype
    among the arguments), relative to its reference or, where that is exactly zero, to its
    neighbours' scale (`neighbour_scale`); an integer leaf exactly (its dtype its own, its
    tolerance 0)."""
    got = [host_leaf(leaf) for leaf in jax.tree.leaves(y)]
    if len(got) != len(ref) or any(g.shape != r.shape for g, r in zip(got, ref, strict=False)):
        raise ProgramError(
            f"the result has leaves {[g.shape for g in got]}, the float64 reference "
            f"{[r.shape for r in ref]}: the function's output depends on the dtype"
        )
    judged = []
    scale = neighbour_scale(got, ref)
    for path, g, r in zip(leaf_paths(y), got, ref, strict=True):
        dtype = tolerance_dtype(str(jnp.dtype(g.dtype)), computed_in)
        if dtype is None:
            n = _exact(g, r)
        elif r.size and _rms(r) <= ZERO_REFERENCE * scale:  # 0 up to the reference's rounding
            n = _absolute(g, r, scale, TOLERANCE[dtype])
        else:
            n = compare(g, r, TOLERANCE[dtype])
        judged.append(
            LeafAccuracy(
                path=path,
                dtype=dtype or str(jnp.dtype(g.dtype)),
                shape=tuple(int(d) for d in g.shape),
                rel_fro_err=n.rel_fro_err,
                tolerance=n.tolerance,
                ok=n.ok,
                max_abs_err=n.max_abs_err,
                max_rel_err=n.max_rel_err,
            )
        )
    return judged


def unreferenced(y: Any) -> tuple[list[np.ndarray], list[np.ndarray], list[LeafAccuracy]]:
    """The result's leaves kept where no reference could be made (numerics_effect.Kept): their
    references not a number, their accuracy not measured (`rel_fro_err`, `tolerance` and `ok`
    null), so only the compiler-effect question, against the baseline's outputs, is asked."""
    got = [np.asarray(leaf) for leaf in jax.tree.leaves(y)]
    leaves = [
        LeafAccuracy(
            path=path,
            dtype=str(jnp.dtype(g.dtype)),
            shape=tuple(int(d) for d in g.shape),
            rel_fro_err=None,
            tolerance=None,
            ok=None,
            max_abs_err=None,
            max_rel_err=None,
        )
        for path, g in zip(leaf_paths(y), got, strict=True)
    ]
    return got, [np.full(g.shape, np.nan) for g in got], leaves


def _as_numerics(leaf: LeafAccuracy) -> Numerics:
    return Numerics(leaf.max_abs_err, leaf.max_rel_err, leaf.rel_fro_err, leaf.tolerance, leaf.ok)


def numerics(y: Any, ref: tuple[np.ndarray, ...], computed_in: str = "float32") -> Numerics:
    """Returns the error of the result against the reference, leaf by leaf (judged_leaves).
    The record is the worst leaf's, named by its pytree path; `ok` only when every leaf
    passes."""
    judged = judged_leaves(y, ref, computed_in)
    if not judged:
        return Numerics(0.0, 0.0, 0.0, TOLERANCE[computed_in], True)
    worst = max(judged, key=lambda leaf: _badness(_as_numerics(leaf)))
    failed = tuple(leaf.path for leaf in judged if not leaf.ok)
    return dataclasses.replace(
        _as_numerics(worst),
        ok=not failed,
        worst_leaf=worst.path if len(judged) > 1 else None,
        failed_leaves=failed if len(judged) > 1 else (),
    )


def _dtypes(leaves: list[Any]) -> list[str]:
    return [dtype_name(a.dtype) for a in leaves]


def computed_in(args: ProgramArgs) -> str:
    """Returns the narrowest floating dtype among the inputs and the parameters (float32 when
    none is floating): no leaf is held to a tighter tolerance than its arguments allow."""
    return narrowest_float(_dtypes(jax.tree.leaves((args.params, args.inputs))))


def tolerance(args: ProgramArgs) -> float:
    """Returns the relative error allowed a result leaf of the arguments' narrowest dtype."""
    return TOLERANCE[computed_in(args)]


def gemm_dtypes(program: Program, seed: int) -> tuple[str, str]:
    """Returns the (x, W) dtypes a variant's GEMMs run in, for its ceiling: the narrowest
    floating input dtype and the narrowest floating parameter dtype (as ProgramRecord's)."""
    args = args_for(program, seed)
    return narrowest_float(_dtypes(jax.tree.leaves(args.inputs))), narrowest_float(
        _dtypes(jax.tree.leaves(args.params))
    )


# ---------------------------------------------------------------------------------------------
# What was studied


def _spec(a: Any) -> ArraySpec:
    return ArraySpec(shape=tuple(int(d) for d in a.shape), dtype=dtype_name(a.dtype))


def describe(
    program: Program,
    args: ProgramArgs,
    new_args: ProgramArgs | None,
    y: Any,
    ref: tuple[np.ndarray, ...] | None,
    flops_source: str,
    gemm_flops: float | None,
) -> ProgramRecord:
    """Returns the record of what a variant studied: the function, its arguments as called
    (every array leaf of the inputs), its parameters, its result, its keyword arguments, and
    where the FLOPs and the reference came from."""
    leaves = jax.tree.leaves(args.params)
    wide = {str(r.dtype) for r in ref or ()}
    return ProgramRecord(
        function=program.function,
        init=program.init,
        inputs=tuple(_spec(x) for x in jax.tree.leaves(args.inputs)),
        recompile_inputs=tuple(_spec(x) for x in jax.tree.leaves(new_args.inputs))
        if new_args
        else (),
        output=tuple(_spec(a) for a in jax.tree.leaves(y)),
        param_leaves=len(leaves),
        param_count=int(sum(int(np.prod(a.shape)) for a in leaves)),
        param_bytes=int(sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in leaves)),
        param_dtypes=tuple(sorted(set(_dtypes(leaves)))),
        param_bytes_by_dtype=_bytes_by_dtype(leaves),
        flops_source=flops_source,
        gemm_flops=gemm_flops,
        reference_dtypes=tuple(sorted(wide)),
        kwargs=dict(program.kwargs),
    )


def _bytes_by_dtype(leaves: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in leaves:
        name = dtype_name(a.dtype)
        out[name] = out.get(name, 0) + int(np.prod(a.shape)) * a.dtype.itemsize
    return dict(sorted(out.items()))


def hlo_flops(text: str) -> tuple[float, float]:
    """Returns (FLOPs, of which dots and convolutions) of one HLO module's text, by our cost
    model (harness.hlo.cost): what `flops_analytic` is when the config gives no formula."""

    module = parse_module(text)
    clusters = find_clusters(module)
    cost = module_cost(module, clusters)
    gemm = {c.name for c in clusters if c.gemm is not None or c.kind == "convolution"}
    return cost.flops, sum(c.flops * c.executions for c in cost.clusters if c.name in gemm)


def input_bytes(program: Program) -> int:
    """Returns the bytes of the inputs as a variant calls them (after its `dtype`)."""
    total = 0
    for _, s in input_leaves(program.inputs):
        dtype = spec_dtype(
            program.dtype if program.dtype and _is_float(spec_dtype(s.dtype)) else s.dtype
        )
        total += int(np.prod(s.shape)) * dtype.itemsize
    return total


def working_bytes(program: Program, seed: int) -> tuple[int, int]:
    """Returns (bytes of the inputs and parameters, bytes of one result) from their shapes
    alone (`jax.eval_shape`), so the preflight can refuse a program too large to fit."""
    init = load_callable(program.init)
    fn = bound(program)
    specs, extra = input_specs(program), init_kwargs(program)
    if program.dtype:
        specs = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, program.dtype) if _is_float(s.dtype) else s,
            specs,
        )
    params = jax.eval_shape(lambda k: init(k, *input_specs(program), **extra), jax.random.key(seed))
    if program.w_dtype:
        params = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, program.w_dtype) if _is_float(s.dtype) else s,
            params,
        )
    out = jax.eval_shape(fn, params, *specs)

    def nbytes(tree: Any) -> int:
        return sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in jax.tree.leaves(tree))

    return nbytes(params) + nbytes(specs), nbytes(out)
