"""A stack of dense layers, scanned over its stacked weights or unrolled (issue 60: the scan's
dynamic-slice copies of the stacked weights should lead its "why" against the unrolled form).
`step(params, x, scan=True)` returns (new params, loss)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

LAYERS = 8


def init(key: jax.Array, x: jax.ShapeDtypeStruct | jax.Array) -> dict:
    d = x.shape[-1]
    w = jax.random.normal(key, (LAYERS, d, d), jnp.float32) / d**0.5
    return {"w": w.astype(x.dtype)}


def _layer(h: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(h @ w)


def _loss(params: dict, x: jax.Array, scan: bool) -> jax.Array:
    if scan:
        h, _ = jax.lax.scan(lambda h, w: (_layer(h, w), None), x, params["w"])
    else:
        h = x
        for i in range(LAYERS):
            h = _layer(h, params["w"][i])
    return jnp.mean(jnp.square(h.astype(jnp.float32)))


def step(params: dict, x: jax.Array, scan: bool = True) -> tuple[dict, jax.Array]:
    loss, grads = jax.value_and_grad(_loss)(params, x, scan)
    new = jax.tree.map(lambda p, g: p - (1e-3 * g).astype(p.dtype), params, grads)
    return new, loss
