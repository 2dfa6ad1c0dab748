"""A user's program that kills its process when run in bfloat16, as an XLA CHECK failure would:
the variant that dies in the crash-isolation tests (`program: {dtype: bfloat16}`), while its
float32 variants run normally. Tracing it is harmless (the preflight traces every variant); the
abort comes from a host callback, when the compiled program first runs. The harness has no
mode of its own for this."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    del key, x
    return {}


def step(params: dict, x: jax.Array) -> jax.Array:
    del params
    if x.dtype == jnp.bfloat16:
        jax.debug.callback(os.abort)
    return jnp.tanh(x @ x.T)
