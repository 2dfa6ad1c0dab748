"""A classifier's loss over a batch of features and integer labels: a program study with two
inputs, and a keyword knob that changes the time (configs/two_input.yaml).

    python -m harness --config=configs/two_input.yaml

`loss(params, x, labels, *, logsumexp="vectorized")` takes x [batch, features] and labels
[batch] (int32 in [0, classes)). The knob `logits` picks how the logits are computed:
`vectorized` is one GEMM over the batch; `loop` is a loop over the classes (`lax.fori_loop`),
one matrix-vector product per class written into its column: x is read once per class instead
of once (3.4x the time at 512x256x64 on a 2-core CPU). `rows` (0: any) makes the function refuse any
other batch: a recompile probe that fails, for the harness's own tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

CLASSES = 64


def init(key: jax.Array, x: jax.ShapeDtypeStruct, labels: jax.ShapeDtypeStruct) -> dict:
    """Returns a linear classifier's parameters for features shaped like `x`."""
    del labels
    k1, _ = jax.random.split(key)
    features = x.shape[-1]
    w = jax.random.normal(k1, (features, CLASSES), jnp.float32) / jnp.sqrt(features)
    return {"w": w, "b": jnp.zeros((CLASSES,), jnp.float32)}


def _logits(params: dict, x: jax.Array, how: str) -> jax.Array:
    w, b = params["w"], params["b"]
    if how == "loop":  # one class at a time, as a loop over the output's columns computes it

        def column(c: jax.Array, z: jax.Array) -> jax.Array:
            col = x @ jax.lax.dynamic_slice_in_dim(w, c, 1, axis=1)
            return jax.lax.dynamic_update_slice_in_dim(z, col, c, axis=1)

        z = jnp.zeros((x.shape[0], w.shape[1]), x.dtype)
        return jax.lax.fori_loop(0, w.shape[1], column, z) + b
    if how != "vectorized":
        raise ValueError(f"logits must be 'vectorized' or 'loop', got {how!r}")
    return x @ w + b


def loss(
    params: dict, x: jax.Array, labels: jax.Array, *, logits: str = "vectorized", rows: int = 0
) -> jax.Array:
    """Returns the mean softmax cross-entropy of the classifier on (x, labels)."""
    if rows and x.shape[0] != rows:
        raise ValueError(f"this loss takes batches of exactly {rows} rows, got {x.shape[0]}")
    z = _logits(params, x, logits)
    picked = jnp.take_along_axis(z, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(jax.nn.logsumexp(z, axis=-1) - picked)
