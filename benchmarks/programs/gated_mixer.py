"""A program no test uses, for the H200 acceptance of issue 38 (graded conclusions): the loss
and gradients of a small token-mixing / channel-mixing stack (an MLP-Mixer with gated channel
MLPs and RMSNorm), written for this check and never for a fixture.

    python -m harness --config=benchmarks/programs/gated_mixer_h200.yaml

`loss_and_grads(params, x, y)` returns (loss, grads) for x [batch, tokens, channels] and a
regression target y of the same shape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LAYERS = 4
TOKEN_EXPAND = 2
CHANNEL_EXPAND = 4


def init(key: jax.Array, x: jax.ShapeDtypeStruct, y: jax.ShapeDtypeStruct) -> dict:
    """Returns the stack's parameters for x shaped [batch, tokens, channels]."""
    del y
    tokens, channels = x.shape[-2], x.shape[-1]

    def dense(k: jax.Array, n_in: int, n_out: int) -> jax.Array:
        w = jax.random.normal(k, (n_in, n_out), jnp.float32) / jnp.sqrt(n_in)
        return w.astype(x.dtype)

    layers = []
    for k in jax.random.split(key, LAYERS):
        ks = jax.random.split(k, 5)
        layers.append(
            {
                "tok_in": dense(ks[0], tokens, TOKEN_EXPAND * tokens),
                "tok_out": dense(ks[1], TOKEN_EXPAND * tokens, tokens),
                "gate": dense(ks[2], channels, CHANNEL_EXPAND * channels),
                "up": dense(ks[3], channels, CHANNEL_EXPAND * channels),
                "down": dense(ks[4], CHANNEL_EXPAND * channels, channels),
                "norm": jnp.ones((channels,), x.dtype),
            }
        )
    return {"layers": layers}


def _rms(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32**2, -1, keepdims=True) + 1e-6)).astype(x.dtype) * scale


def forward(params: dict, x: jax.Array) -> jax.Array:
    for p in params["layers"]:
        h = _rms(x, p["norm"])
        t = jnp.swapaxes(h, -1, -2)  # [batch, channels, tokens]
        t = jax.nn.gelu(t @ p["tok_in"]) @ p["tok_out"]
        x = x + jnp.swapaxes(t, -1, -2)
        h = _rms(x, p["norm"])
        x = x + (jax.nn.silu(h @ p["gate"]) * (h @ p["up"])) @ p["down"]
    return x


def loss_and_grads(params: dict, x: jax.Array, y: jax.Array) -> tuple:
    def loss(params: dict) -> jax.Array:
        out = forward(params, x).astype(jnp.float32)
        return jnp.mean((out - y.astype(jnp.float32)) ** 2)

    return jax.value_and_grad(loss)(params)
