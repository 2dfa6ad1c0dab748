"""A program study's variant on a mesh: the user's function with the harness's mesh, and its
arguments placed where the compiler wants them.

A program places nothing itself. The variant's `sharding` gives the mesh (`mesh`, `axes`);
the harness builds it over the process's devices (harness.variants.sharded.make_mesh) and
passes it to the function as its `mesh` keyword. The function states its layout with
`jax.lax.with_sharding_constraint` on that mesh (examples/sharded_mlp.py); with `mesh=None`,
as the float64 reference calls it, it runs unsharded on one device.

The arguments are placed once, before any timed call: the function is lowered on the
seeded, unplaced arguments and compiled, and each argument is put where the compiled
program's input shardings (the SPMD propagation of the program's own constraints) say.
Every later call then finds its arguments in place, so no call reshards its inputs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import jax

from harness.config.experiment import Variant
from harness.records.summary import MeshRecord
from harness.variants import sharded


def with_mesh(fn: Callable[..., Any], mesh: Any) -> Callable[..., Any]:
    """Returns `fn` with `mesh=mesh` bound, named as `fn` is (XLA names the module after it)."""

    def call(*args: Any) -> Any:
        return fn(*args, mesh=mesh)

    call.__name__ = getattr(fn, "__name__", "function")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    return call


def _spec(s: Any) -> str:
    spec = getattr(s, "spec", None)
    return str(spec) if spec is not None else str(s)


def spec_counts(shardings: Any) -> str:
    """Returns how many leaves take each layout, most common first (`P() ×4, P(None,
    'model') ×2`): one line for a pytree of any size."""
    counts = Counter(_spec(s) for s in jax.tree.leaves(shardings))
    return ", ".join(f"{spec} ×{n}" for spec, n in counts.most_common())


def put_all(values: tuple[Any, ...], shardings: Any) -> tuple[Any, ...]:
    """Puts each argument (a pytree) where its sharding (a pytree of the same shape) says."""
    return tuple(jax.tree.map(sharded.put, v, s) for v, s in zip(values, shardings, strict=True))


def place(
    variant: Variant,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    halved: Callable[[], tuple[Any, ...]],
) -> sharded.Placed:
    """Returns the program bound to the variant's mesh, its arguments placed as the compiled
    program takes them, and the mesh's record (specs: the layouts per argument). Raises
    ValueError when the process has fewer devices than the mesh needs."""
    mesh = sharded.make_mesh(variant.sharding)
    program = with_mesh(fn, mesh)
    compiled = jax.jit(program).lower(*args).compile()
    shardings, _ = compiled.input_shardings

    placed_args = jax.block_until_ready(put_all(args, shardings))

    def placed_halved() -> tuple[Any, ...]:
        # The new-shape call's inputs are placed by its own compile's input shardings.
        half = halved()
        return put_all(half, jax.jit(program).lower(*half).compile().input_shardings[0])

    names = ["params", *(f"input{i}" for i in range(len(args) - 1))]
    record = MeshRecord(
        mesh=tuple(variant.sharding.mesh),
        axes=tuple(variant.sharding.axes),
        devices=variant.sharding.devices,
        device_assignment=tuple(int(d.id) for d in mesh.devices.flat),
        device_kind=str(mesh.devices.flat[0].device_kind),
        specs={n: spec_counts(s) for n, s in zip(names, shardings, strict=True)},
        shard_map=None,
        output_sharding=None,
    )
    return sharded.Placed(
        fn=program, jit_kwargs={}, args=placed_args, halved=placed_halved, record=record
    )
