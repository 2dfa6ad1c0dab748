"""The expression placed on devices: the program a variant compiles, its arguments, its new shape.

Every jit variant goes through `place`. Unsharded, it is the function and the inputs as they
are. Sharded (the variant's `sharding` key, harness.config.sharding), the function is compiled
with `jax.jit(fn, in_shardings=..., out_shardings=...)` over a `jax.sharding.Mesh` whose axes
are Auto, so the SPMD partitioner decides the collectives; `jax.make_mesh` would default to
Explicit axes, which refuse a sharded contraction without an explicit output sharding. With a
`shard_map` body the per-device program is written by hand, its collective included.

The inputs are the unsharded variants' seeded data (`expression.inputs_for`), put on the mesh
with `jax.device_put` (across processes, each process places its own shards: `put`), so every
variant computes on bit-identical values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from harness.config.experiment import Variant
from harness.config.sharding import Sharding, entry_axes
from harness.records.summary import MeshRecord
from harness.variants import expression


@dataclasses.dataclass(frozen=True)
class Placed:
    """What `jax.jit` compiles and calls for one variant.

    `fn` keeps the expression's name (XLA names the module after it); `jit_kwargs` holds the
    in/out shardings; `args` are x, W and b on their devices; `halved` makes the arguments
    of the new-shape call (m halved, placed like x); `record` describes the mesh (None when
    unsharded).
    """

    fn: Callable[..., Any]
    jit_kwargs: dict[str, Any]
    args: tuple[Any, ...]
    halved: Callable[[], tuple[Any, ...]]
    record: MeshRecord | None = None


def partition_spec(spec: tuple[str | None, ...]) -> PartitionSpec:
    """Returns the PartitionSpec of a config spec: None, one axis, or a tuple of axes."""
    entries: list[Any] = []
    for entry in spec:
        axes = entry_axes(entry)
        entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*entries)


def make_mesh(s: Sharding) -> Mesh:
    """Returns the mesh of the first `s.devices` devices, in id order, with Auto axes.

    Raises ValueError when the process has fewer devices than the mesh needs.
    """
    devices = jax.devices()
    if len(devices) < s.devices:
        raise ValueError(
            f"the mesh {list(s.mesh)} needs {s.devices} devices; this process has {len(devices)}"
        )
    return Mesh(np.array(devices[: s.devices]).reshape(s.mesh), tuple(s.axes))


def put(value: Any, sharding: NamedSharding) -> jax.Array:
    """Returns `value` laid out as `sharding`. Across processes (a mesh holding other
    processes' devices) each process places only its own shards, cut from its copy of the
    value: every process made the same seeded inputs."""
    if sharding.is_fully_addressable:
        return jax.device_put(value, sharding)
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def gathered(y: Any) -> Any:
    """Returns a result whole in this process: a result spread over other processes' devices
    is gathered from all of them (a collective: every process calls it, in the same order)."""
    if getattr(y, "is_fully_addressable", True):
        return y
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(y, tiled=True)


def _body(variant: Variant, k_axes: tuple[str, ...]) -> Callable[..., Any]:
    """Returns the per-device body of a shard_map variant, named like the expression."""
    p = variant.problem
    axis = k_axes[0] if len(k_axes) == 1 else k_axes
    scatter = variant.sharding.shard_map == "psum_scatter"

    def gelu_linear(x, w, b):
        partial = x @ w  # this device's share of the contraction over k
        if scatter:
            # Each device keeps its block of rows of the sum: a reduce-scatter.
            h = jax.lax.psum_scatter(partial, axis, scatter_dimension=x.ndim - 2, tiled=True)
        else:
            h = jax.lax.psum(partial, axis)
        if p.bias:
            h = h + b
        return expression.gelu(h, p.gelu)

    return gelu_linear


def place(variant: Variant, fn: Callable[..., Any], inputs: expression.Inputs) -> Placed:
    """Returns the program and arguments of a jit variant, sharded as its config says."""
    s = variant.sharding
    if not s.enabled:
        return Placed(
            fn=fn,
            jit_kwargs={},
            args=(inputs.x, inputs.w, inputs.b),
            halved=lambda: (expression.halve_rows(inputs.x), inputs.w, inputs.b),
        )
    mesh = make_mesh(s)
    specs = tuple(partition_spec(spec) for spec in (s.x, s.w, s.b))
    out_spec = partition_spec(s.out)
    shardings = tuple(NamedSharding(mesh, spec) for spec in specs)
    out_sharding = NamedSharding(mesh, out_spec)
    args = tuple(
        put(a, sh) for a, sh in zip((inputs.x, inputs.w, inputs.b), shardings, strict=True)
    )
    if s.shard_map:
        k_axes = entry_axes(s.x[-1])
        body = jax.shard_map(_body(variant, k_axes), mesh=mesh, in_specs=specs, out_specs=out_spec)
        program, kwargs = body, {}
    else:
        program = fn
        kwargs = {"in_shardings": shardings, "out_shardings": out_sharding}

    def halved() -> tuple[Any, ...]:
        # The half-size x is cut on the host (no eager compile) and placed like x, so the
        # new-shape call sees the same sharding and only the shape changes.
        x = np.asarray(inputs.x)
        x_half = x[..., : x.shape[-2] // 2, :]
        return (put(x_half, shardings[0]), args[1], args[2])

    record = MeshRecord(
        mesh=tuple(s.mesh),
        axes=tuple(s.axes),
        devices=s.devices,
        device_assignment=tuple(int(d.id) for d in mesh.devices.flat),
        device_kind=str(mesh.devices.flat[0].device_kind),
        specs={
            "x": str(specs[0]),
            "w": str(specs[1]),
            "b": str(specs[2]),
            "out": str(out_spec),
        },
        shard_map=s.shard_map or None,
    )
    return Placed(fn=program, jit_kwargs=kwargs, args=args, halved=halved, record=record)


def output_sharding(y: Any) -> str | None:
    """Returns how the result is laid out on the devices, as jax describes it."""
    sharding = getattr(y, "sharding", None)
    spec = getattr(sharding, "spec", None)
    return str(spec) if spec is not None else None
