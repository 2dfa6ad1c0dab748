"""Two small programs for the numerics chapter (configs/numerics_cpu.yaml, configs/bf16_cpu.yaml).

`rounded_apply` is a float32 layer whose activations are stored in bfloat16 and read back
(`.astype(bfloat16).astype(float32)`, as a bf16 activation cache does): a compiler that keeps
the float32 value instead of the rounded one computes a different result. On the CPU with jax
0.10, XLA's `dot-library-rewriter` puts the dot, its tanh and the round trip into one YNNPACK
fusion that does not round, so the default jit moves from eager's result by the bf16 rounding
(about 3e-4) while XLA's own emitters (`xla_cpu_experimental_ynn_fusion_type: ""`) keep it.

`attention_loss_and_grads` is a stack of LAYERS self-attention layers (residual, RMS-normed)
and its gradients, in whatever dtype the variant gives it: in bfloat16 its own rounding,
eager's too, is beyond the bf16 tolerance on the q and k gradients (about 2.1% on the CPU).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LAYERS = 4
SHARPNESS = 2.0  # the attention logits' scale over 1/sqrt(d): sharper softmaxes, more rounding


def rounded_init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    """Returns one layer's weights for inputs shaped like `x`."""
    features = x.shape[-1]
    return {"w": jax.random.normal(key, (features, features), x.dtype) * 0.1}


def rounded_apply(params: dict, x: jax.Array) -> jax.Array:
    """Returns the row sums of the squared tanh layer, its activations rounded to bf16."""
    h = jnp.tanh(x @ params["w"])
    h = h.astype(jnp.bfloat16).astype(x.dtype)
    return jnp.sum(h * h, axis=-1)


def attention_init(key: jax.Array, x: jax.ShapeDtypeStruct) -> list:
    """Returns LAYERS attention layers' q, k and v projections for tokens shaped like `x`."""
    d = x.shape[-1]
    keys = jax.random.split(key, 3 * LAYERS)
    return [
        {
            name: jax.random.normal(keys[3 * i + j], (d, d), x.dtype) / d**0.5
            for j, name in enumerate(("q", "k", "v"))
        }
        for i in range(LAYERS)
    ]


def _attention_loss(params: list, x: jax.Array) -> jax.Array:
    h = x
    for layer in params:
        q, k, v = h @ layer["q"], h @ layer["k"], h @ layer["v"]
        a = jax.nn.softmax(SHARPNESS * (q @ k.T) / q.shape[-1] ** 0.5, axis=-1)
        h = h + a @ v
        h = h / jnp.sqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    return jnp.mean(jax.nn.logsumexp(h, axis=-1))


def attention_loss_and_grads(params: list, x: jax.Array) -> tuple:
    """Returns the loss and its gradients with respect to every projection."""
    return jax.value_and_grad(_attention_loss)(params, x)
