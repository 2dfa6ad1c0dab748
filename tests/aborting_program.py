"""A user's program that kills its process when run in bfloat16, as an XLA CHECK failure would:
the variant that dies in the crash-isolation tests (`program: {dtype: bfloat16}`), while its
float32 variants run normally. Tracing it is harmless (the preflight traces every variant); the
abort comes from a host callback, when the compiled program first runs. The harness has no
mode of its own for this."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    del key, x
    return {}


def step(params: dict, x: jax.Array) -> jax.Array:
    del params
    if x.dtype == jnp.bfloat16:
        jax.debug.callback(os.abort)
    return jnp.tanh(x @ x.T)


HERE = Path(__file__).resolve()
# A study of it, `{experiment}` named, with the shared settings: its bfloat16 variant `dies`
# between variants that work (the tests add their own `capture:` and more variants after it).
STUDY = f"""\
experiment: {{experiment}}
program:
  function: {HERE}:step
  init: {HERE}:init
  inputs:
    - {{{{shape: [16, 32], dtype: float32}}}}
measure: {{{{warmup: 1, steps: 2}}}}
profile: {{{{enabled: false}}}}
timing: {{{{rounds: 3, budget_s: 0.3, max_budget_s: 0.3}}}}
{{more}}variants:
  - {{{{name: xla, mode: jit}}}}
  - {{{{name: dies, mode: jit, program: {{{{dtype: bfloat16}}}}, description: aborts its process}}}}
  - {{{{name: eager, mode: eager}}}}
"""
