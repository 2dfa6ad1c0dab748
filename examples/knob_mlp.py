"""A small MLP with three knobs of its own: the program `configs/search_knobs_cpu.yaml` searches.

    python -m harness --config=configs/search_knobs_cpu.yaml

`apply(params, x, approximate=..., remat=..., chunks=...)` is GELU(x @ up) @ down over rows of x:

- `approximate`: the tanh GELU instead of the exact (erf) one. It changes the result by about
  1e-3, far past what two correct compiles of one function differ by: the search reports it
  as a trade, never as the best.
- `remat`: `jax.checkpoint` around the hidden layer. Without a gradient nothing is recomputed,
  so both values compile to one program: the search times it once.
- `chunks`: the rows in that many chunks under `lax.map`, so only one chunk's hidden layer is
  live at a time: the same result with a smaller peak. A count that does not divide the rows is
  refused by the reshape, and the search records the reason and goes on.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

EXPAND = 16  # hidden width = EXPAND x the input's features: the hidden layer is the peak


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    """Returns the MLP's parameters for inputs shaped like `x` (rows of features)."""
    d = x.shape[-1]
    k_up, k_down = jax.random.split(key)
    return {
        "up": jax.random.normal(k_up, (d, EXPAND * d), jnp.float32) / jnp.sqrt(d),
        "down": jax.random.normal(k_down, (EXPAND * d, d), jnp.float32) / jnp.sqrt(EXPAND * d),
    }


def apply(
    params: dict, x: jax.Array, approximate: bool = False, remat: bool = False, chunks: int = 1
) -> jax.Array:
    """Returns the MLP applied to the rows of `x`, in `chunks` chunks of rows."""

    def hidden(rows: jax.Array) -> jax.Array:
        return jax.nn.gelu(rows @ params["up"].astype(rows.dtype), approximate=approximate)

    layer = jax.checkpoint(hidden) if remat else hidden

    def mlp(rows: jax.Array) -> jax.Array:
        return layer(rows) @ params["down"].astype(rows.dtype)

    if chunks == 1:
        return mlp(x)
    rows, d = x.shape
    if rows % chunks:  # the shape a chunked reshape refuses: a real error, not a config check
        raise ValueError(f"chunks={chunks} does not divide the {rows} rows of x")
    return jax.lax.map(mlp, x.reshape(chunks, rows // chunks, d)).reshape(rows, d)
