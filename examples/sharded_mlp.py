"""A data- and tensor-parallel train step as a program study: a residual MLP regressor, Adam,
one step a call, on the mesh the harness gives it (configs/train_sharded.yaml).

    python -m harness --config=configs/train_sharded.yaml

The harness builds each variant's mesh from its `sharding: {mesh, axes}` and passes it as
the `mesh` keyword (harness.variants.program_mesh). The layout is Megatron's, stated with
sharding constraints on that mesh:
- `data`: the batch is split on it, so the gradients are all-reduced over it;
- `model`: each block's first matrix is split by columns and its second by rows, so the
  hidden activations stay split and each block's output (and, backwards, the input's
  gradient) is all-reduced over it;
an axis the mesh lacks leaves that dimension whole. With `mesh=None` (the float64 reference)
the step runs unsharded on one device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding, PartitionSpec

HIDDEN = 128
BLOCKS = 2
OPTIMIZER = optax.adam(1e-3)


def _constrain(a: jax.Array, mesh: jax.sharding.Mesh | None, *spec: str | None) -> jax.Array:
    """Returns `a` constrained to `spec` on `mesh`, each axis the mesh lacks left whole."""
    if mesh is None:
        return a
    kept = tuple(s if s in mesh.axis_names else None for s in spec)
    return jax.lax.with_sharding_constraint(a, NamedSharding(mesh, PartitionSpec(*kept)))


def _layout(params: dict, mesh: jax.sharding.Mesh | None) -> dict:
    """Returns the parameters constrained to the tensor-parallel layout."""
    return {
        "blocks": [
            {
                "w1": _constrain(b["w1"], mesh, None, "model"),
                "b1": _constrain(b["b1"], mesh, "model"),
                "w2": _constrain(b["w2"], mesh, "model", None),
                "b2": _constrain(b["b2"], mesh, None),
            }
            for b in params["blocks"]
        ],
        "head": _constrain(params["head"], mesh, None, None),
    }


def _loss(params: dict, batch: dict, mesh: jax.sharding.Mesh | None) -> jax.Array:
    h = _constrain(batch["x"], mesh, "data", None)
    for b in params["blocks"]:
        inner = jax.nn.gelu(h @ b["w1"] + b["b1"])
        inner = _constrain(inner, mesh, "data", "model")
        h = _constrain(h + inner @ b["w2"] + b["b2"], mesh, "data", None)
    out = h @ params["head"]
    y = _constrain(batch["y"], mesh, "data", None)
    return jnp.mean((out - y) ** 2)


def train_step(
    params: dict, opt_state: optax.OptState, batch: dict, mesh: jax.sharding.Mesh | None
) -> tuple:
    """Returns (new params, new optimizer state, the batch's loss before the update)."""
    params = _layout(params, mesh)
    loss, grads = jax.value_and_grad(_loss)(params, batch, mesh)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return _layout(optax.apply_updates(params, updates), mesh), opt_state, loss


def init(key: jax.Array, batch: dict) -> tuple:
    """Returns (params, opt_state) for batches shaped like `batch` (ShapeDtypeStructs)."""
    features, targets = batch["x"].shape[-1], batch["y"].shape[-1]
    keys = jax.random.split(key, 2 * BLOCKS + 1)
    blocks = [
        {
            "w1": jax.random.normal(keys[2 * i], (features, HIDDEN)) / jnp.sqrt(features),
            "b1": jnp.zeros((HIDDEN,)),
            "w2": jax.random.normal(keys[2 * i + 1], (HIDDEN, features)) / jnp.sqrt(HIDDEN),
            "b2": jnp.zeros((features,)),
        }
        for i in range(BLOCKS)
    ]
    head = jax.random.normal(keys[-1], (features, targets)) / jnp.sqrt(features)
    params = {"blocks": blocks, "head": head}
    return params, OPTIMIZER.init(params)


def step(state: tuple, batch: dict, mesh: jax.sharding.Mesh | None = None) -> tuple:
    """The study's function: one train step from `state = (params, opt_state)`."""
    params, opt_state = state
    return train_step(params, opt_state, batch, mesh)
