"""An optax train step as a program study: a small MLP regressor, Adam, one step a call
(configs/train_step.yaml).

    python -m harness --config=configs/train_step.yaml

`train_step(params, opt_state, batch)` is written as a training loop calls it: it takes the
parameters, the optimizer's state and a batch dict {x, y}, and returns a tuple (new params,
new optimizer state, loss). The harness calls `function(params, *inputs)` with `params` from
`init`, so the config names `step(state, batch)`, which unpacks `state = (params, opt_state)`
(made once by `init`) into train_step; the batch is one pytree input of two arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

HIDDEN = 64
OPTIMIZER = optax.adam(1e-3)


def _net_init(key: jax.Array, features: int, targets: int) -> dict:
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (features, HIDDEN), jnp.float32) / jnp.sqrt(features),
        "b1": jnp.zeros((HIDDEN,), jnp.float32),
        "w2": jax.random.normal(k2, (HIDDEN, targets), jnp.float32) / jnp.sqrt(HIDDEN),
        "b2": jnp.zeros((targets,), jnp.float32),
    }


def _loss(params: dict, batch: dict) -> jax.Array:
    h = jax.nn.gelu(batch["x"] @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return jnp.mean((out - batch["y"]) ** 2)


def train_step(params: dict, opt_state: optax.OptState, batch: dict) -> tuple:
    """Returns (new params, new optimizer state, the batch's loss before the update)."""
    loss, grads = jax.value_and_grad(_loss)(params, batch)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def init(key: jax.Array, batch: dict) -> tuple:
    """Returns (params, opt_state) for batches shaped like `batch` (ShapeDtypeStructs)."""
    params = _net_init(key, batch["x"].shape[-1], batch["y"].shape[-1])
    return params, OPTIMIZER.init(params)


def step(state: tuple, batch: dict) -> tuple:
    """The study's function: one train step from `state = (params, opt_state)`."""
    params, opt_state = state
    return train_step(params, opt_state, batch)
