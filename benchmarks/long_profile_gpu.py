"""A long real profile on a GPU, analysed: issue 57's acceptance for `python -m harness.analyze`.

    python benchmarks/long_profile_gpu.py --out=DIR [--steps=550] [--layers=24]

The program is our own: a pre-norm transformer LM's train step (embedding, `--layers` blocks of
causal attention and a GELU MLP, unrolled, tied output, softmax cross-entropy, SGD) in bf16,
small enough that a step takes milliseconds and launches thousands of kernels, so a few hundred
steps make a profile of millions of device events (XLA's default command buffers on). It is
dumped once, then profiled twice in one process: over 3 marked steps and over `--steps` marked
steps. Each profile is analysed by `python -m harness.analyze` in a child process whose wall
time and peak resident memory are measured, beside jaxlib's own reader walking every event and
stat of the long one (the anchor). Prints one JSON line of figures and the comparison of each
cluster's launches a step between the two.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from absl import app, flags
from peak import PEAK, measured  # benchmarks/, beside this script

_OUT = flags.DEFINE_string("out", None, "Folder for the dump, profiles and analyses.")
_STEPS = flags.DEFINE_integer("steps", 550, "Marked steps of the long profile.")
_LAYERS = flags.DEFINE_integer("layers", 24, "Transformer blocks.")
_WIDTH = flags.DEFINE_integer("width", 256, "Model width.")


def _train_step(layers: int, width: int):
    import jax
    import jax.numpy as jnp

    vocab, heads = 512, 4

    def init(key: jax.Array) -> dict:
        keys = jax.random.split(key, 4 * layers + 1)
        scale = width**-0.5
        blocks = [
            {
                "qkv": jax.random.normal(keys[4 * i], (width, 3 * width), jnp.bfloat16) * scale,
                "out": jax.random.normal(keys[4 * i + 1], (width, width), jnp.bfloat16) * scale,
                "up": jax.random.normal(keys[4 * i + 2], (width, 4 * width), jnp.bfloat16) * scale,
                "down": jax.random.normal(keys[4 * i + 3], (4 * width, width), jnp.bfloat16)
                * scale,
                "g1": jnp.ones((width,), jnp.bfloat16),
                "g2": jnp.ones((width,), jnp.bfloat16),
            }
            for i in range(layers)
        ]
        return {
            "embed": jax.random.normal(keys[-1], (vocab, width), jnp.bfloat16),
            "blocks": blocks,
        }

    def norm(x: jax.Array, g: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        return (x32 * jax.lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6)).astype(x.dtype) * g

    def loss(params: dict, tokens: jax.Array) -> jax.Array:
        x = params["embed"][tokens[:, :-1]]
        b, t, _ = x.shape
        mask = jnp.tril(jnp.ones((t, t), bool))
        for blk in params["blocks"]:
            h = norm(x, blk["g1"]) @ blk["qkv"]
            q, k, v = (z.reshape(b, t, heads, -1) for z in jnp.split(h, 3, -1))
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / (width // heads) ** 0.5
            p = jax.nn.softmax(jnp.where(mask, s, -1e9), -1).astype(x.dtype)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, width) @ blk["out"]
            x = x + jax.nn.gelu(norm(x, blk["g2"]) @ blk["up"]) @ blk["down"]
        logits = (x @ params["embed"].T).astype(jnp.float32)
        target = tokens[:, 1:]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), target[..., None], -1).mean()

    @jax.jit
    def train_step(params: dict, tokens: jax.Array) -> tuple[dict, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, tokens)
        return jax.tree.map(lambda p, g: p - 0.01 * g.astype(p.dtype), params, grads), value

    return init, train_step, vocab


def _profile(train_step, params, tokens, steps: int, where: Path):
    import jax

    with jax.profiler.trace(str(where)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = train_step(params, tokens)
        loss.block_until_ready()
    return params


def _walk_with_profile_data(path: Path) -> dict:
    code = (
        "import sys,time;from jax.profiler import ProfileData;t=time.perf_counter();"
        "p=ProfileData.from_file(sys.argv[1]);n=s=0\n"
        "for pl in p.planes:\n for ln in pl.lines:\n  for e in ln.events:\n"
        "   n+=1;e.name;e.start_ns;e.duration_ns\n   for st in e.stats: s+=1\n"
        "print(n,s,time.perf_counter()-t)\n"
        "print('VmHWM_kB', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
    )
    return measured([sys.executable, "-c", code, str(path)])


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    dump = out / "dump"
    os.environ["XLA_FLAGS"] = (
        f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    )
    import jax
    import jax.numpy as jnp

    init, train_step, vocab = _train_step(_LAYERS.value, _WIDTH.value)
    params = init(jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(1), (8, 129), 0, vocab)
    for _ in range(3):
        params, loss = train_step(params, tokens)
    loss.block_until_ready()
    short, long = out / "trace3", out / "trace_long"
    params = _profile(train_step, params, tokens, 3, short)
    start = time.perf_counter()
    _profile(train_step, params, tokens, _STEPS.value, long)
    traced = time.perf_counter() - start
    del jnp
    from harness.profile.events import find_xplane

    xplane = find_xplane(long)
    figures: dict = {
        "steps": _STEPS.value,
        "xplane_mb": round(xplane.stat().st_size / 1e6, 1),
        "trace_s": round(traced, 1),
        "profile_data_walk": _walk_with_profile_data(xplane),
    }
    for name, trace in (("short", short), ("long", long)):
        target = out / f"analysis_{name}"
        figures[name] = measured(
            [
                sys.executable,
                "-c",
                PEAK,
                "harness.analyze",
                f"--dump={dump}",
                f"--xplane={find_xplane(trace)}",
                f"--out={target}",
            ]
        )
        kernels = json.loads((target / "kernels.json").read_text())["match"]
        figures[name] |= {
            "events": kernels["events_in_window"],
            "matched": kernels["matched_fraction"],
            "steps_found": kernels["steps"],
            "events_parquet_mb": round((target / "events.parquet").stat().st_size / 1e6, 2),
        }
        figures[name + "_launches"] = kernels["launches_per_cluster"]
    a, b = figures.pop("short_launches"), figures.pop("long_launches")
    differ = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
    figures["clusters"] = len(a)
    figures["clusters_whose_launches_a_step_differ"] = len(differ)
    figures["differ_sample"] = dict(sorted(differ.items())[:10])
    print(json.dumps(figures))


if __name__ == "__main__":
    flags.mark_flags_as_required(["out"])
    app.run(main)
