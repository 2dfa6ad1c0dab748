"""A program no test uses, for the H200 measurements of issue 44 (a fast GPU study): a scanned
pre-norm attention encoder's train step, written for this check and never for a fixture.

    python3 benchmarks/capture_overlap.py --config=benchmarks/programs/scanned_encoder_h200.yaml

Six blocks are stacked and run under lax.scan (`unroll`: how many per iteration); a lax.cond
picks the learning rate by the loss; a lax.fori_loop takes a few Newton steps for an RMS scale.
`train_step(params, x, y)` returns (loss, new params) for x and y [batch, tokens, width].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HEADS = 8


def init(
    key: jax.Array,
    x: jax.ShapeDtypeStruct,
    y: jax.ShapeDtypeStruct,
    depth: int = 6,
    unroll: int = 1,
) -> dict:
    del y, unroll
    d = x.shape[-1]

    def dense(k: jax.Array, n_in: int, n_out: int) -> jax.Array:
        return (jax.random.normal(k, (depth, n_in, n_out), jnp.float32) / jnp.sqrt(n_in)).astype(
            x.dtype
        )

    ks = jax.random.split(key, 6)
    return {
        "qkv": dense(ks[0], d, 3 * d),
        "proj": dense(ks[1], d, d),
        "up": dense(ks[2], d, 4 * d),
        "down": dense(ks[3], 4 * d, d),
        "ln1": jnp.ones((depth, d), x.dtype),
        "ln2": jnp.ones((depth, d), x.dtype),
    }


def _ln(x: jax.Array, g: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    mu = x32.mean(-1, keepdims=True)
    var = ((x32 - mu) ** 2).mean(-1, keepdims=True)
    return ((x32 - mu) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype) * g


def _block(x: jax.Array, p: dict) -> tuple:
    b, s, d = x.shape
    h = _ln(x, p["ln1"])
    q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, HEADS, d // HEADS) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(d // HEADS)
    att = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
    x = x + o @ p["proj"]
    h = _ln(x, p["ln2"])
    return x + jax.nn.gelu(h @ p["up"], approximate=True) @ p["down"], None


def _rms_scale(y: jax.Array) -> jax.Array:
    target = jnp.mean(y.astype(jnp.float32) ** 2)

    def newton(_: jax.Array, s: jax.Array) -> jax.Array:
        return 0.5 * (s + target / s)

    return jnp.sqrt(jax.lax.fori_loop(0, 4, newton, jnp.float32(1.0)))


def train_step(params: dict, x: jax.Array, y: jax.Array, depth: int = 6, unroll: int = 1) -> tuple:
    del depth

    def loss_fn(params: dict) -> jax.Array:
        out, _ = jax.lax.scan(_block, x, params, unroll=unroll)
        out = out.astype(jnp.float32) / _rms_scale(y)
        err = out - y.astype(jnp.float32)
        return jnp.mean(err**2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    lr = jax.lax.cond(loss > 1.0, lambda: jnp.float32(1e-3), lambda: jnp.float32(1e-2))
    new = jax.tree.map(
        lambda p, g: (p.astype(jnp.float32) - lr * g.astype(jnp.float32)).astype(p.dtype),
        params,
        grads,
    )
    return loss, new
