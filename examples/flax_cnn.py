"""A Flax CNN train step as a user writes it (configs/flax_cnn.yaml): two convolutions with
BatchNorm, dropout, a `flax.training.train_state.TrainState` carrying the BatchNorm
statistics, the dropout key (a typed `jax.random.key`) and Adam's state.

    python -m harness --config=configs/flax_cnn.yaml

The harness calls `step(state, batch)` with `state` from `init(key, batch_spec)`; the batch is
one pytree input {image, label}. The step returns (new state, loss): every leaf of the new
state (parameters, Adam's moments, BatchNorm's statistics, the step count and the next key) is
compared with the same step run in float64, the key's data exactly.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

CLASSES = 10


class CNN(nn.Module):
    """Two 3x3 convolutions, each with BatchNorm and ReLU, dropout, one dense layer."""

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        for features in (8, 16):
            x = nn.Conv(features, (3, 3), use_bias=False)(x)  # BatchNorm adds the bias
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            x = nn.relu(x)
        x = jnp.mean(x, axis=(1, 2))
        x = nn.Dropout(0.1, deterministic=not train)(x)
        return nn.Dense(CLASSES)(x)


class TrainState(train_state.TrainState):
    """The standard train state with BatchNorm's statistics and the dropout key beside it."""

    batch_stats: Any
    key: jax.Array


MODEL = CNN()
OPTIMIZER = optax.adam(1e-3)


def init(key: jax.Array, batch: dict) -> TrainState:
    """Returns the train state for batches shaped like `batch` (ShapeDtypeStructs)."""
    params_key, dropout_key = jax.random.split(key)
    image = jnp.zeros(batch["image"].shape, batch["image"].dtype)
    variables = MODEL.init(params_key, image, train=False)
    return TrainState.create(
        apply_fn=MODEL.apply,
        params=variables["params"],
        tx=OPTIMIZER,
        batch_stats=variables["batch_stats"],
        key=dropout_key,
    )


def step(state: TrainState, batch: dict) -> tuple[TrainState, jax.Array]:
    """One train step: returns (the new state, the batch's loss before the update)."""
    dropout_key, next_key = jax.random.split(state.key)

    def loss_fn(params: Any) -> tuple[jax.Array, Any]:
        logits, updates = state.apply_fn(
            {"params": params, "batch_stats": state.batch_stats},
            batch["image"],
            train=True,
            rngs={"dropout": dropout_key},
            mutable=["batch_stats"],
        )
        labels = jax.nn.one_hot(batch["label"], CLASSES, dtype=logits.dtype)
        loss = optax.softmax_cross_entropy(logits, labels).mean()
        return loss, updates["batch_stats"]

    (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    state = state.apply_gradients(grads=grads, batch_stats=batch_stats, key=next_key)
    return state, loss
