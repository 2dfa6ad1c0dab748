"""Two small programs for the numerics chapter (configs/numerics_cpu.yaml, configs/bf16_cpu.yaml).

`rounded_apply` is a float32 layer whose activations are stored in bfloat16 and read back
(`.astype(bfloat16).astype(float32)`, as a bf16 activation cache does): a compiler that keeps
the float32 value instead of the rounded one computes a different result. On the CPU with jax
0.10, XLA's `dot-library-rewriter` puts the dot, its tanh and the round trip into one YNNPACK
fusion that does not round, so the default jit moves from eager's result by the bf16 rounding
(about 3e-4) while XLA's own emitters (`xla_cpu_experimental_ynn_fusion_type: ""`) keep it.

`mlp_loss_and_grads` is a two-layer MLP's softmax cross-entropy loss and its gradients, in
whatever dtype the variant gives it: in bfloat16 its own rounding (eager's too) is beyond the
bf16 tolerance on some gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def rounded_init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    """Returns one layer's weights for inputs shaped like `x`."""
    features = x.shape[-1]
    return {"w": jax.random.normal(key, (features, features), x.dtype) * 0.1}


def rounded_apply(params: dict, x: jax.Array) -> jax.Array:
    """Returns the row sums of the squared tanh layer, its activations rounded to bf16."""
    h = jnp.tanh(x @ params["w"])
    h = h.astype(jnp.bfloat16).astype(x.dtype)
    return jnp.sum(h * h, axis=-1)


def mlp_init(key: jax.Array, x: jax.ShapeDtypeStruct, labels: jax.ShapeDtypeStruct) -> dict:
    """Returns a two-layer MLP's weights: features -> 4 x features -> 16 classes."""
    del labels
    k1, k2 = jax.random.split(key)
    features = x.shape[-1]
    return {
        "w1": jax.random.normal(k1, (features, 4 * features), x.dtype) / features**0.5,
        "w2": jax.random.normal(k2, (4 * features, 16), x.dtype) / (4 * features) ** 0.5,
    }


def _loss(params: dict, x: jax.Array, labels: jax.Array) -> jax.Array:
    h = jax.nn.gelu(x @ params["w1"])
    logits = h @ params["w2"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None] % 16, axis=-1))


def mlp_loss_and_grads(params: dict, x: jax.Array, labels: jax.Array) -> tuple:
    """Returns the loss and its gradients with respect to the weights."""
    return jax.value_and_grad(_loss)(params, x, labels)
