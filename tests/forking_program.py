"""A user's program whose host callback starts processes that try to outlive their variant:
each call forks a child that `setsid`s (leaving the worker's process group and session) and
forks again; the grandchild then sleeps for a minute, and the child returns into the code that
called it (a copy of the worker running on). With `program: {dtype: bfloat16}` the callback
instead sends SIGTERM to the supervisor (the worker's parent). tests/test_containment.py runs
studies of it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import jax
import jax.numpy as jnp


def _escape() -> None:
    child = os.fork()
    if child:
        return  # the worker: goes on
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)  # the grandchild: in no group of the worker's, outlives it unless ended
        os._exit(0)
    # The child returns into the harness's code, as a copy of the worker.


def _signal_supervisor() -> None:
    os.kill(os.getppid(), signal.SIGTERM)


def init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    del key, x
    return {}


def step(params: dict, x: jax.Array) -> jax.Array:
    del params
    fn = _signal_supervisor if x.dtype == jnp.bfloat16 else _escape
    jax.debug.callback(fn)
    return jnp.tanh(x @ x.T)


HERE = Path(__file__).resolve()
STUDY = f"""\
experiment: {{experiment}}
program:
  function: {HERE}:step
  init: {HERE}:init
  inputs:
    - {{{{shape: [8, 16], dtype: {{dtype}}}}}}
measure: {{{{warmup: 1, steps: 2}}}}
profile: {{{{enabled: false}}}}
timing: {{{{rounds: 2, budget_s: 0.2, max_budget_s: 0.2}}}}
variants:
  - {{{{name: xla, mode: jit}}}}
"""
