"""Two language-model train steps whose biggest levers are their own knobs, for issue 63's GPU
searches (configs/search_knobs_gpu_gpt.yaml, configs/search_knobs_gpu_scanned.yaml):

    python -m harness --config=configs/search_knobs_gpu_gpt.yaml
    python -m harness --config=configs/search_knobs_gpu_scanned.yaml
    # at a tiny size, on any machine (cuDNN's attention then fails, and is recorded):
    python -m harness --config=configs/search_knobs_gpu_gpt.yaml --config.program.kwargs.size=tiny

- `gpt_train_step(params, tokens, attention=..., remat=...)`: a GPT-style decoder (pre-norm
  blocks, causal attention, tied embeddings), its layers a Python loop, one SGD step.
  `attention` is jax.nn.dot_product_attention's `implementation` (`xla` or `cudnn`); `remat`
  wraps each block in jax.checkpoint.
- `scanned_train_step(params, tokens, layers=..., remat=...)`: the same model with its layers
  under lax.scan (`scan`) or the Python loop (`unrolled`); `remat` as above. Without remat
  every layer's attention weights are kept for the backward pass (the peak); with it only each
  layer's input is.

Both return (loss, new params) for next-token prediction on `tokens` [batch, seq + 1]. The
tokens are drawn at the GPU size; `size: tiny` takes their first rows and columns, modulo its
vocabulary, and shrinks the model with them.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Size:
    layers: int
    width: int
    heads: int
    seq: int
    batch: int
    vocab: int


SIZES = {
    "gpu": Size(layers=6, width=512, heads=8, seq=2048, batch=4, vocab=8192),
    "tiny": Size(layers=2, width=64, heads=4, seq=32, batch=2, vocab=256),
}
LEARNING_RATE = 1e-2
DTYPE = jnp.bfloat16


def init(key: jax.Array, tokens: jax.ShapeDtypeStruct, size: str = "gpu") -> dict:
    """Returns the parameters, each layer's stacked on a leading axis, in bfloat16."""
    del tokens
    s = SIZES[size]
    d, n = s.width, s.layers
    ks = jax.random.split(key, 5)

    def dense(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return (jax.random.normal(k, shape, jnp.float32) / jnp.sqrt(fan_in)).astype(DTYPE)

    return {
        "embed": dense(ks[0], (s.vocab, d), d),
        "qkv": dense(ks[1], (n, d, 3 * d), d),
        "proj": dense(ks[2], (n, d, d), d),
        "up": dense(ks[3], (n, d, 4 * d), d),
        "down": dense(ks[4], (n, 4 * d, d), 4 * d),
        "ln1": jnp.ones((n, d), DTYPE),
        "ln2": jnp.ones((n, d), DTYPE),
        "ln_f": jnp.ones((d,), DTYPE),
    }


def _norm(x: jax.Array, g: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return x32.astype(x.dtype) * g


def _block(x: jax.Array, p: dict, heads: int, attention: str) -> jax.Array:
    b, t, d = x.shape
    q, k, v = jnp.split(_norm(x, p["ln1"]) @ p["qkv"], 3, axis=-1)
    q, k, v = (a.reshape(b, t, heads, d // heads) for a in (q, k, v))
    o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=attention)
    x = x + o.reshape(b, t, d) @ p["proj"]
    h = jax.nn.gelu(_norm(x, p["ln2"]) @ p["up"], approximate=True)
    return x + h @ p["down"]


def _loss(
    params: dict, tokens: jax.Array, s: Size, attention: str, layers: str, remat: bool
) -> jax.Array:
    blocks = {k: v for k, v in params.items() if k not in ("embed", "ln_f")}

    def block(x: jax.Array, p: dict) -> jax.Array:
        return _block(x, p, s.heads, attention)

    step = jax.checkpoint(block) if remat else block
    x = params["embed"][tokens[:, :-1]]
    if layers == "scan":
        x, _ = jax.lax.scan(lambda h, p: (step(h, p), None), x, blocks)
    elif layers == "unrolled":
        for i in range(s.layers):
            x = step(x, jax.tree.map(lambda a, i=i: a[i], blocks))
    else:
        raise ValueError(f"layers={layers!r}: expected scan or unrolled")
    logits = (_norm(x, params["ln_f"]) @ params["embed"].T).astype(jnp.float32)
    targets = tokens[:, 1:]
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def _train_step(params: dict, tokens: jax.Array, size: str, **knobs: object) -> tuple:
    s = SIZES[size]
    tokens = tokens[: s.batch, : s.seq + 1] % s.vocab
    loss, grads = jax.value_and_grad(lambda p: _loss(p, tokens, s, **knobs))(params)
    new = jax.tree.map(
        lambda p, g: (p.astype(jnp.float32) - LEARNING_RATE * g.astype(jnp.float32)).astype(
            p.dtype
        ),
        params,
        grads,
    )
    return loss, new


def gpt_train_step(
    params: dict, tokens: jax.Array, attention: str = "xla", remat: bool = False, size: str = "gpu"
) -> tuple:
    """One SGD step of the GPT-style decoder, its layers a Python loop."""
    return _train_step(params, tokens, size, attention=attention, layers="unrolled", remat=remat)


def scanned_train_step(
    params: dict, tokens: jax.Array, layers: str = "scan", remat: bool = False, size: str = "gpu"
) -> tuple:
    """One SGD step of the same decoder, its layers under lax.scan or unrolled."""
    return _train_step(params, tokens, size, attention="xla", layers=layers, remat=remat)
