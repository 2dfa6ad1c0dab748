"""A two-layer MLP train step with one elementwise op that can be planted on a line of its own
(issue 60: compare must find it, first). `step(params, x, plant=0)` returns (new params,
loss); with `plant=n` n extra multiplies over the hidden activations run, each a kernel of its
own (an optimization barrier keeps XLA from fusing them away), all on one source line: one is
about 3% of the step at the GPU size of benchmarks/compare_aa_gpu.py; a CPU, whose step is
mostly its GEMMs and whose floor is 5-10%, needs several to be past what a run resolves."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def init(key: jax.Array, x: jax.ShapeDtypeStruct | jax.Array) -> dict:
    d = x.shape[-1]
    k1, k2 = jax.random.split(key)
    return {
        "w1": (jax.random.normal(k1, (d, 4 * d), jnp.float32) / d**0.5).astype(x.dtype),
        "w2": (jax.random.normal(k2, (4 * d, d), jnp.float32) / (4 * d) ** 0.5).astype(x.dtype),
    }


def _loss(params: dict, x: jax.Array, plant: int) -> jax.Array:
    h = jnp.tanh(x @ params["w1"])
    for _ in range(int(plant)):  # each pass a kernel of its own, all on the planted line
        h = jax.lax.optimization_barrier(h)
        h = h * jnp.asarray(1.0001, h.dtype)  # PLANTED: one elementwise pass over h
    y = h @ params["w2"]
    return jnp.mean(jnp.square(y.astype(jnp.float32)))


def step(params: dict, x: jax.Array, plant: int = 0) -> tuple[dict, jax.Array]:
    loss, grads = jax.value_and_grad(_loss)(params, x, plant)
    new = jax.tree.map(lambda p, g: p - (1e-3 * g).astype(p.dtype), params, grads)
    return new, loss
