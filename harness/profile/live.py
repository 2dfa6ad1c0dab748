"""Write the three profiles of one variant exactly as the harness's capture stage does.

The capture stage (spine) owns the real runs; this module replicates its
convention so the profile and match stages can be tested on live jax profiles:

- `<root>/first_call/`: the first call (trace, lower, compile, run) inside
  `StepTraceAnnotation("first_call", step_num=0)`;
- `<root>/steady/`: `steps` calls, each inside `StepTraceAnnotation("step", step_num=i)`
  and ending with `block_until_ready`;
- `<root>/recompile/`: one call with m halved inside `StepTraceAnnotation("recompile", step_num=0)`.

Each folder is written by its own `jax.profiler.trace(log_dir)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

PROFILE_KINDS = ("first_call", "steady", "recompile")


@dataclass(frozen=True)
class LiveCapture:
    """Where the three profiles went and the host wall time of each steady step."""

    root: Path
    steps: int
    steady_wall_s: tuple[float, ...]

    def folder(self, kind: str) -> Path:
        if kind not in PROFILE_KINDS:
            raise ValueError(f"profile kind must be one of {PROFILE_KINDS}, got {kind!r}")
        return self.root / kind


def gelu_linear(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    """Return gelu(x @ w + b), the expression every variant compiles."""
    return jax.nn.gelu(x @ w + b)


def _fresh(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """Return a new function object with fn's name, so jax's jit caches miss.

    jax caches traced and compiled functions per function object; without a
    fresh object a process that already ran `fn` would record a first call
    with no compile in it.
    """

    def call(*args: jax.Array) -> jax.Array:
        return fn(*args)

    call.__name__ = call.__qualname__ = fn.__name__
    return call


def profile_options() -> Any:
    """Return ProfileOptions that keep files small (no Python tracer), or None if unsupported."""
    options_type = getattr(jax.profiler, "ProfileOptions", None)
    if options_type is None:
        return None
    options = options_type()
    options.python_tracer_level = 0
    return options


def capture_profiles(
    root: Path,
    steps: int = 3,
    shape: tuple[int, int, int] = (8, 16, 16),
    fn: Callable[..., jax.Array] = gelu_linear,
) -> LiveCapture:
    """Run a fresh jit of `fn` on [m,k]x[k,n] and write first_call/steady/recompile profiles.

    Returns the capture with the steady steps' wall times (host, seconds).
    """
    if steps <= 0:
        raise ValueError(f"steps must be > 0, got {steps}")
    m, k, n = shape
    kx, kw, kb = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (m, k))
    w = jax.random.normal(kw, (k, n)) / jnp.sqrt(k)
    b = jax.random.normal(kb, (n,))
    jax.block_until_ready((x, w, b))
    compiled_fn = jax.jit(_fresh(fn))
    options = profile_options()

    with (
        jax.profiler.trace(str(root / "first_call"), profiler_options=options),
        jax.profiler.StepTraceAnnotation("first_call", step_num=0),
    ):
        compiled_fn(x, w, b).block_until_ready()

    walls = []
    with jax.profiler.trace(str(root / "steady"), profiler_options=options):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                start = time.perf_counter()
                compiled_fn(x, w, b).block_until_ready()
                walls.append(time.perf_counter() - start)

    with (
        jax.profiler.trace(str(root / "recompile"), profiler_options=options),
        jax.profiler.StepTraceAnnotation("recompile", step_num=0),
    ):
        compiled_fn(x[: m // 2], w, b).block_until_ready()

    return LiveCapture(root=root, steps=steps, steady_wall_s=tuple(walls))
