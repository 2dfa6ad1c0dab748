"""A gated recurrent stack with control flow, as a program study and as the H200 check of
issue 40 (benchmarks/control_flow_h200.py):

- `LAYERS` gated residual blocks (a GRU-like update gate over a two-GEMM MLP) run by
  `lax.scan` over stacked weights;
- each block holds a `lax.cond`: odd layers normalise their input (RMS), even layers do not;
- a `lax.fori_loop` of `SMOOTH` clipping steps follows the stack;
- SGD on `value_and_grad`, one step a call.

    python -m harness --config=configs/scan_cond.yaml

`init(key, batch)` makes the stacked parameters for a batch shaped like `batch` (a
ShapeDtypeStruct, or an array); `step(params, x)` returns (new params, loss).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LAYERS = 4
SMOOTH = 2
LR = 1e-3


def init(key: jax.Array, x: jax.ShapeDtypeStruct | jax.Array) -> dict:
    """Stacked weights of LAYERS blocks for inputs of x's width, in x's dtype."""
    width, dtype = x.shape[-1], x.dtype
    hidden = 2 * width
    k1, k2, k3 = jax.random.split(key, 3)

    def normal(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return (jax.random.normal(k, shape, jnp.float32) / fan_in**0.5).astype(dtype)

    return {
        "w_in": normal(k1, (LAYERS, width, hidden), width),
        "w_out": normal(k2, (LAYERS, hidden, width), hidden),
        "w_gate": normal(k3, (LAYERS, width, width), width),
        "scale": jnp.ones((LAYERS, width), dtype),
    }


def _rms(x: jax.Array, scale: jax.Array) -> jax.Array:
    h = x.astype(jnp.float32)
    h = h * jax.lax.rsqrt(jnp.mean(h * h, -1, keepdims=True) + 1e-6)
    return h.astype(x.dtype) * scale


def _block(carry: tuple[jax.Array, jax.Array], w: dict) -> tuple[tuple[jax.Array, jax.Array], None]:
    x, i = carry
    w = jax.tree.map(lambda a: a.astype(x.dtype), w)  # a carry keeps its dtype
    h = jax.lax.cond(i % 2 == 1, _rms, lambda x, _: x, x, w["scale"])
    update = jax.nn.gelu(h @ w["w_in"]) @ w["w_out"]
    gate = jax.nn.sigmoid(h @ w["w_gate"])
    return (x + gate * update, i + 1), None


def _loss(params: dict, x: jax.Array) -> jax.Array:
    (y, _), _ = jax.lax.scan(_block, (x, jnp.int32(0)), params)
    y = jax.lax.fori_loop(0, SMOOTH, lambda _, y: jnp.clip(y, -4.0, 4.0) * 0.99, y)
    return jnp.mean(jnp.square(y.astype(jnp.float32)))


def step(params: dict, x: jax.Array) -> tuple[dict, jax.Array]:
    """One SGD step: (new params, the loss before the update)."""
    loss, grads = jax.value_and_grad(_loss)(params, x)
    return jax.tree.map(lambda p, g: p - LR * g.astype(p.dtype), params, grads), loss
