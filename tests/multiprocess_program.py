"""A user's program for the study across processes: with `crash: true` (a keyword knob of
one variant, `program.kwargs`) process 1 aborts its own process while the function is traced,
as an XLA CHECK failure in one host of a job would, and process 0 goes on; with `hang: true`
process 1 stops there instead, as a host that hangs. The other variants, and process 0
always, compute `tanh(x @ x.T)`. The harness has no mode for this."""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    del key, x
    return {}


def step(params: dict, x: jax.Array, *, crash: bool = False, hang: bool = False) -> jax.Array:
    del params
    if crash and jax.process_index() == 1:
        os.abort()
    if hang and jax.process_index() == 1:
        time.sleep(3600)
    return jnp.tanh(x @ x.T)
