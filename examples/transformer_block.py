"""A pre-norm transformer block whose attention is a keyword knob: `attention="xla"` (XLA's
own attention, from jnp ops) or `attention="cudnn"` (cuDNN's fused kernel), both through
`jax.nn.dot_product_attention` (configs/attention_h200.yaml).

    python -m harness --config=configs/attention_h200.yaml

The `cudnn` value runs only on an NVIDIA GPU: on a CPU its variant is skipped with the reason.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HEADS = 16
EXPAND = 4


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    """Returns the block's parameters for x shaped [batch, seq, model]."""
    model = x.shape[-1]
    ks = jax.random.split(key, 4)

    def dense(k: jax.Array, n_in: int, n_out: int) -> jax.Array:
        return (jax.random.normal(k, (n_in, n_out), jnp.float32) / jnp.sqrt(n_in)).astype(x.dtype)

    return {
        "qkv": dense(ks[0], model, 3 * model),
        "out": dense(ks[1], model, model),
        "up": dense(ks[2], model, EXPAND * model),
        "down": dense(ks[3], EXPAND * model, model),
        "norm1": jnp.ones((model,), x.dtype),
        "norm2": jnp.ones((model,), x.dtype),
    }


def _rms(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32**2, -1, keepdims=True) + 1e-6)).astype(x.dtype) * scale


def block(params: dict, x: jax.Array, *, attention: str = "xla") -> jax.Array:
    """Returns x after causal self-attention and an MLP, each with a residual."""
    b, s, d = x.shape
    qkv = _rms(x, params["norm1"]) @ params["qkv"]
    q, k, v = (t.reshape(b, s, HEADS, d // HEADS) for t in jnp.split(qkv, 3, axis=-1))
    a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=attention)
    x = x + a.reshape(b, s, d) @ params["out"]
    h = jax.nn.gelu(_rms(x, params["norm2"]) @ params["up"])
    return x + h @ params["down"]
