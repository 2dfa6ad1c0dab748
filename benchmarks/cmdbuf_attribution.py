"""Attribution inside command buffers on a GPU, checked against the same program without them.

A 3-layer residual MLP train step (LayerNorm, two GEMMs and GELU a layer, bf16) is dumped and
profiled for 3 marked steps twice, each in its own process (XLA reads XLA_FLAGS once):

1. with command buffers (XLA's default), dumping its autotune results;
2. with `--xla_gpu_enable_command_buffer=` and the first run's autotune results loaded, so
   both compile the same program and the second one's events carry their real `hlo_op`.

Then `python -m harness.analyze` runs on both, and this prints the first run's matched and
ambiguous fractions and whether its per-cluster kernel counts (memsets aside) equal the
second's. Run from the repo root on a GPU machine:

    python3 benchmarks/cmdbuf_attribution.py /tmp/cmdbuf     # prints the figures, exit 1 on a miss
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from analyze_pair import analyze_run  # benchmarks/, beside this script

LAYERS, ROWS, WIDTH, HIDDEN, STEPS = 3, 4096, 1024, 4096, 3


def train(trace_dir: str) -> None:
    """The child: compile, warm up, then profile STEPS marked steps."""
    import jax
    import jax.numpy as jnp

    def init(key):
        params = []
        for k in jax.random.split(key, LAYERS):
            k1, k2 = jax.random.split(k)
            params.append(
                {
                    "g": jnp.ones((WIDTH,), jnp.bfloat16),
                    "w1": (jax.random.normal(k1, (WIDTH, HIDDEN)) / WIDTH**0.5).astype(
                        jnp.bfloat16
                    ),
                    "w2": (jax.random.normal(k2, (HIDDEN, WIDTH)) / HIDDEN**0.5).astype(
                        jnp.bfloat16
                    ),
                }
            )
        return params

    def forward(params, x):
        for p in params:
            h = x.astype(jnp.float32)
            h = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-6)
            h = (h.astype(jnp.bfloat16) * p["g"]) @ p["w1"]
            x = x + jax.nn.gelu(h) @ p["w2"]
        return x

    def loss(params, x, y):
        return jnp.mean((forward(params, x).astype(jnp.float32) - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 1e-3 * g.astype(p.dtype), params, grads), value

    key = jax.random.key(0)
    params = init(key)
    x = jax.random.normal(key, (ROWS, WIDTH)).astype(jnp.bfloat16)
    y = jax.random.normal(jax.random.key(1), (ROWS, WIDTH))
    for _ in range(3):
        params, value = train_step(params, x, y)
    value.block_until_ready()
    with jax.profiler.trace(trace_dir):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, value = train_step(params, x, y)
                value.block_until_ready()


def cluster_counts(kernels_json: Path) -> tuple[float, float, Counter[str]]:
    doc = json.loads(kernels_json.read_text())
    counts = Counter(
        str(e["cluster"]) for e in doc["events"] if e["kind"] == "kernel" and e["matched"]
    )
    return doc["match"]["matched_fraction"], doc["match"]["ambiguous_fraction"], counts


def main(work: Path) -> int:
    autotune = work / "autotune.txt"
    common = "--xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    runs = {
        "on": f"--xla_dump_to={work}/on/dump {common} --xla_gpu_dump_autotune_results_to={autotune}",
        "off": f"--xla_dump_to={work}/off/dump {common} --xla_gpu_enable_command_buffer= "
        f"--xla_gpu_load_autotune_results_from={autotune}",
    }
    results = {}
    for name, flags in runs.items():
        env = {**os.environ, "XLA_FLAGS": flags}
        subprocess.run(
            [sys.executable, __file__, "--child", str(work / name / "trace")], env=env, check=True
        )
        kernels = analyze_run(work, name)
        if kernels is None:
            return 1
        results[name] = cluster_counts(kernels)
    (on_frac, on_amb, on), (off_frac, _, off) = results["on"], results["off"]
    print(
        f"command buffers on:  matched {on_frac:.4f}, ambiguous {on_amb:.4f}, "
        f"{sum(on.values())} kernels in {len(on)} clusters"
    )
    print(
        f"command buffers off: matched {off_frac:.4f}, {sum(off.values())} kernels in {len(off)} clusters"
    )
    diff = {k: (on[k], off[k]) for k in set(on) | set(off) if on[k] != off[k]}
    print(
        f"per-cluster kernel counts equal: {not diff}"
        + (f"; differ: {sorted(diff.items())[:20]}" if diff else "")
    )
    return 0 if on_frac >= 0.999 and not diff else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        train(sys.argv[2])
    else:
        sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/cmdbuf").resolve()))
