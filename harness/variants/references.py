"""What a program's result is judged against: its float64 reference where that is the same
computation, else the program in float32 on the CPU, stated with the reason (issue 58).

The float64 reference (harness.variants.program.reference) runs the program under
`jax.enable_x64` on the CPU. Two things make it no reference:
- it fails: a program that is not x64-clean (`jnp.arange` and Python ints widen to int64
  under x64, and a `dynamic_update_slice` given int64 and int32 indices together raises);
- it computes something else: `jax.random` draws its floats at the default float width, so
  under x64 `bernoulli`, `uniform` and `normal` draw 64 bits an element, and a dropout mask
  from the same key is another mask (a Flax train step's agreed on 50% of its entries). The
  program's random draws are compared by tracing it both ways (the random primitives and
  the shapes and dtypes of what they draw): where they differ, the reference is not used.
Either way the reference is then the program as the user wrote it, in float32 (narrower
floats widened), without x64, on the CPU at the highest matmul precision: the same random
bits and integer paths as the program, and each leaf is judged at its dtype's tolerance, of
which the float32 reference's own rounding (about 1e-6 of a float32 leaf) is a small part.
Only when that fails too is the accuracy question not answered (the `numerics` probe says
why).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.config.experiment import Program
from harness.variants import program as programs

# The primitives a program draws random numbers with (jax.random's, and XLA's own).
RANDOM_PRIMITIVES = frozenset(
    {
        "random_bits",
        "random_seed",
        "random_split",
        "random_fold_in",
        "random_wrap",
        "threefry2x32",
        "rng_bit_generator",
        "rng_uniform",
    }
)

FLOAT32_REFERENCE = (
    "the reference is the program in float32 on the CPU at the highest matmul precision, "
    "without x64 (the same random bits and integer paths as the program): each leaf is held "
    "to its dtype's tolerance, of which this reference's own rounding (about 1e-6 of a "
    "float32 leaf) is a small part"
)


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"


@contextlib.contextmanager
def _x64(on: bool) -> Iterator[jax.Device]:
    """The block with x64 `on` or off and the CPU device as the default; yields it."""
    if on:
        with programs.float64_on_cpu() as cpu:
            yield cpu
        return
    enable = getattr(jax, "enable_x64", None)
    context = enable(False) if enable is not None else contextlib.nullcontext()
    cpu = jax.devices("cpu")[0]
    with context, jax.default_device(cpu):
        yield cpu


def _sub_jaxprs(value: Any) -> Iterator[Any]:
    """The jaxprs a primitive's parameter holds (a closed jaxpr's inner one, or a list's)."""
    if hasattr(value, "eqns"):
        yield value
    elif hasattr(getattr(value, "jaxpr", None), "eqns"):
        yield value.jaxpr
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _sub_jaxprs(v)


def _draws_of(jaxpr: Any, out: Counter[str]) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in RANDOM_PRIMITIVES:
            params = sorted(
                (k, str(v)) for k, v in eqn.params.items() if k in ("bit_width", "shape")
            )
            avals = [str(v.aval) for v in eqn.outvars]
            out[f"{eqn.primitive.name}{params}->{avals}"] += 1
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                _draws_of(sub, out)


def random_draws(program: Program, args: programs.ProgramArgs, x64: bool) -> Counter[str]:
    """The program's random draws, traced with x64 `on` (its floats widened to float64, as the
    float64 reference runs it) or off: each random primitive with what it draws."""
    fn = programs.bound(program)
    with _x64(x64):
        widen = np.float64 if x64 else None
        params, inputs = jax.tree.map(lambda a: _cast(a, widen), (args.params, args.inputs))
        jaxpr = jax.make_jaxpr(fn)(params, *inputs)
    found: Counter[str] = Counter()
    _draws_of(jaxpr.jaxpr, found)
    return found


def differing_draws(program: Program, args: programs.ProgramArgs) -> str | None:
    """Why the float64 reference draws other random numbers than the program, or None when it
    draws the same (or none)."""
    narrow = random_draws(program, args, False)
    if not narrow:
        return None
    wide = random_draws(program, args, True)
    if wide == narrow:
        return None
    only = sorted((wide - narrow).elements())[:1] or sorted((narrow - wide).elements())[:1]
    return f"under x64 it draws {only[0] if only else 'otherwise'}"


def _cast(a: Any, dtype: Any) -> Any:
    """A floating leaf as `dtype` (None: float32 where narrower, else as it is); a typed key
    as it is."""
    if programs.is_key(getattr(a, "dtype", None)):
        return a
    x = np.asarray(a)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    if dtype is None:
        return x if x.dtype.itemsize >= 4 else x.astype(np.float32)
    return x.astype(dtype)


def float32_reference(program: Program, args: programs.ProgramArgs) -> tuple[np.ndarray, ...]:
    """The leaves of the program in float32 (narrower floats widened), without x64, on the CPU
    at the highest matmul precision."""
    fn = programs.bound(program)

    def float32_reference(*a: Any) -> Any:  # its own function: jit's cache keeps it apart
        return fn(*a)

    with _x64(False) as cpu, jax.default_matmul_precision("highest"):
        params, inputs = jax.tree.map(
            lambda a: jax.device_put(_cast(a, None), cpu), (args.params, args.inputs)
        )
        out = jax.jit(float32_reference)(params, *inputs)
        return tuple(programs.host_leaf(leaf) for leaf in jax.tree.leaves(out))


class ReferenceTooCostly(RuntimeError):
    """No reference is made: one call costs more than the CPU is given for it."""


def call_flops(program: Program, args: programs.ProgramArgs) -> float | None:
    """Returns one call's FLOPs from XLA's analysis of its lowering (traced, never compiled),
    or None where the analysis gives none."""
    try:
        cost = jax.jit(programs.bound(program)).lower(*args.args).cost_analysis()
    except Exception:  # an estimate only: without one the reference is tried as before
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = cost.get("flops") if isinstance(cost, Mapping) else None
    return float(flops) if flops is not None and flops > 0 else None


def check_cost(program: Program, args: programs.ProgramArgs, max_flops: float) -> None:
    """Raises ReferenceTooCostly where one call of the program costs more than `max_flops`
    (measure.reference_max_flops): its float64 reference on the CPU would hold the study for
    minutes or hours (a 1B-parameter train step at sequence 2048 is about 70 TFLOP), and the
    float32 one is no cheaper. The accuracy question then reads "not measured" with this
    reason; the compiler-effect question, against the baseline's outputs, is still asked."""
    flops = call_flops(program, args)
    if flops is not None and flops > max_flops:
        raise ReferenceTooCostly(
            f"not measured: one call is {flops / 1e12:.3g} TFLOP, over "
            f"measure.reference_max_flops ({max_flops / 1e12:.3g} TFLOP) for a CPU reference"
        )


def reference_for(
    program: Program,
    default_kwargs: Mapping[str, Any],
    args: programs.ProgramArgs,
    seed: int,
    max_flops: float | None = None,
) -> tuple[tuple[np.ndarray, ...], str | None]:
    """Returns the reference a program's result is judged against and, where it is not the
    float64 reference of the variant's own function, why and what it is instead. With
    `max_flops`, a program that costs more a call gets none (ReferenceTooCostly)."""
    if max_flops is not None:
        check_cost(program, args, max_flops)
    try:
        ref, note = programs.reference_for(program, default_kwargs, args, seed)
    except Exception as e:
        why = f"the float64 reference failed ({_first_line(e)})"
    else:
        try:
            other = differing_draws(program, args)
        except Exception as e:  # the trace that failed is the x64 one: as the reference's
            other = f"its x64 trace fails ({_first_line(e)})"
        if other is None:
            return ref, note
        why = f"the float64 reference is not the same computation: {other}"
    return float32_reference(program, args), f"{why}; {FLOAT32_REFERENCE}"
