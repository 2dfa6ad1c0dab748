"""A program that takes a typed PRNG key as an input (`{dtype: key}`) and keeps one in its
parameters and its result, for tests/test_flax_train_state.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def init(
    key: jax.Array, noise_key: jax.ShapeDtypeStruct, x: jax.ShapeDtypeStruct, _: object
) -> dict:
    """Returns a scale and a key of its own, beside the inputs' shapes."""
    return {"scale": jnp.ones(x.shape[-1:], jnp.float32), "key": jax.random.fold_in(key, 7)}


def noisy(params: dict, noise_key: jax.Array, x: jax.Array, counts: jax.Array) -> tuple:
    """Returns (x scaled plus noise from both keys, a dropout-like mask's sum, the next key)."""
    noise = jax.random.normal(noise_key, x.shape) + jax.random.normal(params["key"], x.shape)
    keep = jax.random.bernoulli(params["key"], 0.75, x.shape)
    y = jnp.where(keep, x * params["scale"] + 0.1 * noise, 0.0)
    return y, jnp.sum(counts.astype(jnp.uint32)), jax.random.split(params["key"])[0]
