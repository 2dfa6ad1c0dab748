"""A KV-cache decoder as a program study: the acceptance program of issue 58.

Greedy or sampled generation of up to `NEW` tokens after a prompt of `PROMPT`, batch `BATCH`:
- a prefill over the prompt, filling the per-layer key/value caches;
- a `lax.while_loop` over decode steps that stops early once every sequence has emitted EOS
  (a length bonus on EOS makes that happen, at a step the data decide);
- inside it a `lax.scan` over `LAYERS` stacked layers: attention over the cache, then a top-2
  mixture of `EXPERTS` experts (the two chosen experts' weights gathered per token);
- a `lax.cond` that picks sampling or greedy from the traced temperature.

It is not x64-clean, as real decoders often are not: a position read from `jnp.arange` (int64
under `jax.enable_x64`) meets the int32 loop counter in one `dynamic_update_slice`.

    python -m harness --config=benchmarks/programs/kv_decoder_cpu.yaml

`init(key, prompt, temperature)` makes the parameters; `generate(params, prompt,
temperature)` returns (tokens [BATCH, PROMPT + NEW], decode steps run, the last logits).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

VOCAB, WIDTH, HIDDEN, LAYERS, EXPERTS, TOP = 256, 64, 128, 2, 4, 2
PROMPT, NEW = 8, 24
LENGTH = PROMPT + NEW
EOS = 0
EOS_BONUS = 0.5  # added to EOS's logit per decode step


def init(key: jax.Array, prompt: jax.Array, temperature: jax.Array) -> dict:
    """The embedding, LAYERS stacked attention and expert layers, and the unembedding."""
    del prompt, temperature
    ks = jax.random.split(key, 9)

    def normal(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return jax.random.normal(k, shape, jnp.float32) / fan_in**0.5

    return {
        "embed": normal(ks[0], (VOCAB, WIDTH), 1),
        "layers": {
            "wq": normal(ks[1], (LAYERS, WIDTH, WIDTH), WIDTH),
            "wk": normal(ks[2], (LAYERS, WIDTH, WIDTH), WIDTH),
            "wv": normal(ks[3], (LAYERS, WIDTH, WIDTH), WIDTH),
            "wo": normal(ks[4], (LAYERS, WIDTH, WIDTH), WIDTH),
            "router": normal(ks[5], (LAYERS, WIDTH, EXPERTS), WIDTH),
            "w1": normal(ks[6], (LAYERS, EXPERTS, WIDTH, HIDDEN), WIDTH),
            "w2": normal(ks[7], (LAYERS, EXPERTS, HIDDEN, WIDTH), HIDDEN),
        },
        "unembed": normal(ks[8], (WIDTH, VOCAB), WIDTH),
    }


def _experts(w: dict, h: jax.Array) -> jax.Array:
    """Top-2 of EXPERTS: each token's two experts' weights gathered, their outputs mixed by
    the router's softmax over the two. h: [..., WIDTH]."""
    gates, chosen = lax.top_k(h @ w["router"], TOP)
    gates = jax.nn.softmax(gates, axis=-1)
    up = jnp.einsum("...d,...kdf->...kf", h, w["w1"][chosen])
    down = jnp.einsum("...kf,...kfd->...kd", jax.nn.gelu(up), w["w2"][chosen])
    return jnp.einsum("...k,...kd->...d", gates, down)


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """q: [B, Q, D] against k, v: [B, LENGTH, D] where mask [Q, LENGTH] allows."""
    scores = jnp.einsum("bqd,bsd->bqs", q, k) / WIDTH**0.5
    scores = jnp.where(mask, scores, -1e30)
    return jnp.einsum("bqs,bsd->bqd", jax.nn.softmax(scores, axis=-1), v)


def _layer(
    h: jax.Array, w: dict, k_cache: jax.Array, v_cache: jax.Array, at: jax.Array, mask: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One layer over h [B, Q, D] at positions at..at+Q: its keys and values written into the
    caches at `at`, attention, then the experts."""
    zero = jnp.int32(0)
    k_cache = lax.dynamic_update_slice(k_cache, h @ w["wk"], (zero, at, zero))
    v_cache = lax.dynamic_update_slice(v_cache, h @ w["wv"], (zero, at, zero))
    h = h + _attend(h @ w["wq"], k_cache, v_cache, mask) @ w["wo"]
    return h + _experts(w, h), k_cache, v_cache


def _stack(
    params: dict, h: jax.Array, caches: tuple[jax.Array, jax.Array], at: jax.Array, mask: jax.Array
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """The LAYERS layers by `lax.scan` over their stacked weights and caches."""

    def one(h: jax.Array, xs: tuple) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        w, k, v = xs
        h, k, v = _layer(h, w, k, v, at, mask)
        return h, (k, v)

    h, caches = lax.scan(one, h, (params["layers"], *caches))
    return h, caches


def _pick(logits: jax.Array, temperature: jax.Array, step: jax.Array) -> jax.Array:
    """Sampling at the temperature, or greedy where it is 0: a `lax.cond` on the traced value."""

    def sample(logits: jax.Array) -> jax.Array:
        key = jax.random.fold_in(jax.random.key(0), step)
        return jax.random.categorical(key, logits / temperature[:, None]).astype(jnp.int32)

    def greedy(logits: jax.Array) -> jax.Array:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)

    return lax.cond(jnp.all(temperature > 0), sample, greedy, logits)


def generate(
    params: dict, prompt: jax.Array, temperature: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(tokens [B, LENGTH], decode steps run, the last step's logits [B, VOCAB])."""
    batch = prompt.shape[0]
    positions = jnp.arange(LENGTH)  # int64 under x64: the program is not x64-clean
    dtype = params["embed"].dtype
    caches = (
        jnp.zeros((LAYERS, batch, LENGTH, WIDTH), dtype),
        jnp.zeros((LAYERS, batch, LENGTH, WIDTH), dtype),
    )
    causal = positions[:PROMPT, None] >= positions[None, :]
    h, caches = _stack(params, params["embed"][prompt], caches, jnp.int32(0), causal)
    logits = h[:, -1] @ params["unembed"]
    first = _pick(logits, temperature, jnp.int32(0))
    tokens = jnp.zeros((batch, LENGTH), jnp.int32).at[:, :PROMPT].set(prompt)
    tokens = tokens.at[:, PROMPT].set(first)

    def going(state: tuple) -> jax.Array:
        step, _, _, _, done, _ = state
        return jnp.logical_and(step < NEW - 1, jnp.logical_not(jnp.all(done)))

    def decode(state: tuple) -> tuple:
        step, tokens, caches, last, done, _ = state
        at = positions[PROMPT] + step  # int64 + int32 under x64, int32 without
        mask = (positions <= at)[None, :]
        h, caches = _stack(params, params["embed"][last][:, None], caches, at, mask)
        logits = h[:, 0] @ params["unembed"]
        logits = logits.at[:, EOS].add(EOS_BONUS * (step + 1).astype(jnp.float32))
        token = jnp.where(done, EOS, _pick(logits, temperature, step + 1))
        tokens = lax.dynamic_update_slice(tokens, token[:, None], (jnp.int32(0), at + 1))
        return step + 1, tokens, caches, token, done | (token == EOS), logits

    state = (jnp.int32(0), tokens, caches, first, first == EOS, logits)
    steps, tokens, _, _, _, logits = lax.while_loop(going, decode, state)
    return tokens, steps, logits
