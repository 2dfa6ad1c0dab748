"""A small flax MLP with layernorm: the program `configs/mlp.yaml` studies.

    python -m harness --config=mlp.yaml

The harness calls `init(jax.random.key(seed), *input_specs)` once for the parameters (each spec
a `jax.ShapeDtypeStruct` of one configured input) and then `apply(params, *inputs)` in every
variant: op by op (eager), under jit, with XLA options, and with other dtypes. Any function of
this shape can be studied the same way (README: "Studying your own function").
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

EXPAND = 2  # hidden width = EXPAND x the input's features


class MLP(nn.Module):
    """Dense -> LayerNorm -> GELU -> Dense, back to the input's width."""

    expand: int = EXPAND

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        features = x.shape[-1]
        h = nn.Dense(self.expand * features, name="up")(x)
        h = nn.LayerNorm(name="norm")(h)
        h = nn.gelu(h)
        return nn.Dense(features, name="down")(h)


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    """Returns the MLP's parameters for inputs shaped like `x`."""
    return MLP().init(key, jnp.zeros(x.shape, x.dtype))["params"]


def apply(params: dict, x: jax.Array) -> jax.Array:
    """Returns the MLP applied to `x` (rows of features)."""
    return MLP().apply({"params": params}, x)
