"""A program no test uses, for the H200 acceptance of issue 44 (a fast GPU study): a small
residual conv net's train step, written for this check and never for a fixture.

    python3 benchmarks/capture_overlap.py --config=benchmarks/programs/residual_convnet_h200.yaml

Three stages of two residual blocks (3x3 convolutions, RMS-normalized, stride 2 between
stages), global average pooling and a dense head, trained against soft targets with one SGD
step. Knobs: `layout` (NHWC or NCHW convolutions), `remat` (each block under jax.checkpoint).
`train_step(params, x, y)` returns (loss, new params) for images x [batch, h, w, c] and
logits-like targets y [batch, classes].
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

STAGES = 3
BLOCKS = 2


def init(
    key: jax.Array,
    x: jax.ShapeDtypeStruct,
    y: jax.ShapeDtypeStruct,
    layout: str = "NHWC",
    remat: bool = False,
) -> dict:
    del layout, remat
    c = x.shape[-1]
    keys = iter(jax.random.split(key, 2 * STAGES * BLOCKS + STAGES + 1))
    params = {}
    for s in range(STAGES):
        c_out = c * 2 if s else c
        if s:
            params[f"down{s}"] = _kernel(next(keys), c, c_out, x.dtype)
        for b in range(BLOCKS):
            params[f"s{s}b{b}a"] = _kernel(next(keys), c_out, c_out, x.dtype)
            params[f"s{s}b{b}b"] = _kernel(next(keys), c_out, c_out, x.dtype)
        c = c_out
    params["head"] = (jax.random.normal(next(keys), (c, y.shape[-1])) / jnp.sqrt(c)).astype(x.dtype)
    return params


def _kernel(key: jax.Array, c_in: int, c_out: int, dtype: Any) -> jax.Array:
    return (jax.random.normal(key, (3, 3, c_in, c_out)) / jnp.sqrt(9 * c_in)).astype(dtype)


def _conv(x: jax.Array, w: jax.Array, stride: int, layout: str) -> jax.Array:
    if layout == "NCHW":
        out = jax.lax.conv_general_dilated(
            x.transpose(0, 3, 1, 2),
            w.transpose(3, 2, 0, 1),
            (stride, stride),
            "SAME",
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )
        return out.transpose(0, 2, 3, 1)
    return jax.lax.conv_general_dilated(
        x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _norm(x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-5)).astype(x.dtype)


def forward(params: dict, x: jax.Array, layout: str = "NHWC", remat: bool = False) -> jax.Array:
    def block(h: jax.Array, wa: jax.Array, wb: jax.Array) -> jax.Array:
        r = jax.nn.relu(_norm(_conv(h, wa, 1, layout)))
        return h + _norm(_conv(r, wb, 1, layout))

    block = jax.checkpoint(block) if remat else block
    h = x
    for s in range(STAGES):
        if s:
            h = jax.nn.relu(_norm(_conv(h, params[f"down{s}"], 2, layout)))
        for b in range(BLOCKS):
            h = block(h, params[f"s{s}b{b}a"], params[f"s{s}b{b}b"])
    pooled = h.astype(jnp.float32).mean(axis=(1, 2))
    return pooled @ params["head"].astype(jnp.float32)


def train_step(
    params: dict, x: jax.Array, y: jax.Array, layout: str = "NHWC", remat: bool = False
) -> tuple:
    def loss_fn(params: dict) -> jax.Array:
        logits = forward(params, x, layout, remat)
        target = jax.nn.softmax(y.astype(jnp.float32), axis=-1)
        return -jnp.mean(jnp.sum(target * jax.nn.log_softmax(logits, axis=-1), axis=-1))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    new = jax.tree.map(
        lambda p, g: (p.astype(jnp.float32) - 0.05 * g).astype(p.dtype), params, grads
    )
    return loss, new
