"""A user's program for the analyze tests: a 2-layer flax MLP with layernorm, profiled on CPU.

Run: XLA_FLAGS="--xla_dump_to=DUMP --xla_dump_hlo_as_text" python tests/mlp_program.py OUT

Writes two profiles of STEPS steps each under OUT: `marked/` with every step inside
`jax.profiler.StepTraceAnnotation`, and `plain/` without markers. Each step runs the jitted
train step and an eager `jax.random.split` (an RNG helper module, as real programs have).
Lines tagged `# line:<name>` are where the tests expect the clusters' source lines.
"""

from __future__ import annotations

import sys

import flax.linen as nn
import jax
import jax.numpy as jnp

STEPS = 3


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        with jax.named_scope("layer1"):
            x = nn.gelu(nn.Dense(512)(nn.LayerNorm()(x)))  # line:layer1
        with jax.named_scope("layer2"):
            x = nn.Dense(128)(nn.LayerNorm()(x))  # line:layer2
        return x


def main(out: str) -> None:
    model = MLP()
    x = jnp.ones((256, 128), jnp.float32)
    key = jax.random.PRNGKey(0)
    params = jax.jit(model.init)(key, x)

    @jax.jit
    def step(p: dict, x: jax.Array) -> jax.Array:
        return jnp.mean(model.apply(p, x) ** 2)

    step(params, x).block_until_ready()
    jax.random.split(key)[0].block_until_ready()
    for name, marked in (("marked", True), ("plain", False)):
        jax.profiler.start_trace(f"{out}/{name}")
        for i in range(STEPS):
            if marked:
                with jax.profiler.StepTraceAnnotation("step", step_num=i):
                    key = jax.random.split(key)[0]
                    step(params, x).block_until_ready()
            else:
                key = jax.random.split(key)[0]
                step(params, x).block_until_ready()
        jax.profiler.stop_trace()


if __name__ == "__main__":
    main(sys.argv[1])
