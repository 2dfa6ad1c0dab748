"""A program no test uses, for issue 57's real-size study: a Llama-style language model's train
step at 1B-class size (24 layers, width 2048, sequence 2048, bf16 by default), written for this
check and never for a fixture.

    python -m harness --config=benchmarks/programs/llama_1b_h200.yaml

Pre-norm blocks of RMSNorm, rotary-embedded causal attention (`attention`: "xla" or "cudnn",
jax.nn.dot_product_attention's implementation) and a SwiGLU MLP; an untied output projection;
softmax cross-entropy over next tokens; a bf16 SGD update. The blocks' parameters are stacked
along a leading axis and run by lax.scan (`layers: scan`) or by a Python loop over the same
stacked arrays (`layers: unrolled`); `remat` wraps each block in jax.checkpoint ("none",
"full", or "dots": keep the matmul outputs, recompute the rest). All sizes are keyword
arguments, so the same program runs on a CPU at a toy size.

`train_step(params, tokens)` returns (loss, new params) for tokens [batch, sequence + 1].
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def init(
    key: jax.Array,
    tokens: jax.ShapeDtypeStruct,
    *,
    depth: int = 24,
    width: int = 2048,
    heads: int = 16,
    ffn: int = 5632,
    vocab: int = 32000,
    layers: str = "scan",
    remat: str = "none",
    attention: str = "xla",
    dtype: str = "bfloat16",
) -> dict:
    """Returns the parameters: embeddings, the stacked blocks and the output projection."""
    del tokens, layers, remat, attention, heads
    dt = jnp.dtype(dtype)
    ks = jax.random.split(key, 8)

    def normal(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return (jax.random.normal(k, shape, jnp.float32) * fan_in**-0.5).astype(dt)

    return {
        "embed": normal(ks[0], (vocab, width), 1),
        "blocks": {
            "qkv": normal(ks[1], (depth, width, 3 * width), width),
            "out": normal(ks[2], (depth, width, width), width),
            "gate": normal(ks[3], (depth, width, ffn), width),
            "up": normal(ks[4], (depth, width, ffn), width),
            "down": normal(ks[5], (depth, ffn, width), ffn),
            "norm1": jnp.ones((depth, width), dt),
            "norm2": jnp.ones((depth, width), dt),
        },
        "norm": jnp.ones((width,), dt),
        "head": normal(ks[6], (width, vocab), width),
    }


def _rms_norm(x: jax.Array, g: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (x32 * scale).astype(x.dtype) * g


def _rotary(x: jax.Array) -> jax.Array:
    """Rotary position embedding over [batch, sequence, heads, head_dim]."""
    _, s, _, d = x.shape
    freq = 10000.0 ** (-jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    angle = jnp.arange(s, dtype=jnp.float32)[:, None] * freq[None, :]
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).astype(x.dtype)


def _block(x: jax.Array, p: dict, heads: int, attention: str) -> jax.Array:
    b, s, d = x.shape
    q, k, v = jnp.split(_rms_norm(x, p["norm1"]) @ p["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in (q, k, v))
    o = jax.nn.dot_product_attention(
        _rotary(q), _rotary(k), v, is_causal=True, implementation=attention
    )
    x = x + o.reshape(b, s, d) @ p["out"]
    h = _rms_norm(x, p["norm2"])
    return x + (jax.nn.silu(h @ p["gate"]) * (h @ p["up"])) @ p["down"]


def _loss(params: dict, tokens: jax.Array, heads: int, layers: str, remat: str, attention: str):
    x = params["embed"][tokens[:, :-1]]
    block = functools.partial(_block, heads=heads, attention=attention)
    if remat != "none":
        block = jax.checkpoint(block, policy=REMAT_POLICIES[remat])
    if layers == "scan":
        x, _ = jax.lax.scan(lambda h, p: (block(h, p), None), x, params["blocks"])
    else:
        depth = params["blocks"]["qkv"].shape[0]
        for i in range(depth):
            x = block(x, jax.tree.map(lambda a, i=i: a[i], params["blocks"]))
    logits = (_rms_norm(x, params["norm"]) @ params["head"]).astype(jnp.float32)
    target = tokens[:, 1:]
    picked = jnp.take_along_axis(jax.nn.log_softmax(logits), target[..., None], axis=-1)
    return -jnp.mean(picked)


def train_step(
    params: dict,
    tokens: jax.Array,
    *,
    depth: int = 24,
    width: int = 2048,
    heads: int = 16,
    ffn: int = 5632,
    vocab: int = 32000,
    layers: str = "scan",
    remat: str = "none",
    attention: str = "xla",
    dtype: str = "bfloat16",
) -> tuple:
    """Returns (loss, new params): one SGD step on the next-token cross-entropy."""
    del depth, width, ffn, vocab, dtype
    if layers not in ("scan", "unrolled"):
        raise ValueError(f"layers must be scan or unrolled, not {layers!r}")
    if remat not in REMAT_POLICIES:
        raise ValueError(f"remat must be one of {sorted(REMAT_POLICIES)}, not {remat!r}")
    loss, grads = jax.value_and_grad(_loss)(params, tokens, heads, layers, remat, attention)
    new = jax.tree.map(lambda p, g: (p - 1e-2 * g.astype(p.dtype)).astype(p.dtype), params, grads)
    return loss, new
