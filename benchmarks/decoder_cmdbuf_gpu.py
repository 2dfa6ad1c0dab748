"""Issue 58's GPU acceptance: the KV-cache decoder with and without command buffers, attributed.

    python benchmarks/decoder_cmdbuf_gpu.py --out=DIR

benchmarks/programs/kv_decoder.py (a data-dependent `while_loop`, a layer `scan` inside it, a
`cond` choosing sampling or greedy, top-2 experts) is dumped and profiled over 5 marked steps
by its own script, greedy (temperature 0: the sampling branch never runs), twice in two
processes: with XLA's default command buffers, dumping its autotune results, and without
command buffers, loading them, so both compile the same program. Each is analysed by `python -m
harness.analyze`; the compute kernels a step of each cluster (memsets, graph copies and
branch-choice kernels aside) must be equal between the two runs, which also means no kernel of
the command-buffer run went to a cluster the run without them never launched (the branch
that did not run). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from absl import app, flags

_OUT = flags.DEFINE_string("out", None, "Folder for both runs.")
_ROLE = flags.DEFINE_enum("role", "drive", ["drive", "run"], "drive: the whole; run: one run.")
_STEPS = 5


def _run(out: Path) -> None:
    """One run: compile, warm up, profile _STEPS marked calls (XLA_FLAGS set by the driver)."""
    import jax
    import jax.numpy as jnp

    from benchmarks.programs import kv_decoder as d

    prompt = jax.random.randint(jax.random.key(1), (4, d.PROMPT), 1, d.VOCAB, jnp.int32)
    temperature = jnp.zeros((4,), jnp.float32)  # greedy: the sampling branch never runs
    params = d.init(jax.random.key(0), prompt, temperature)
    fn = jax.jit(d.generate)
    jax.block_until_ready(fn(params, prompt, temperature))
    with jax.profiler.trace(str(out / "trace")):
        for i in range(_STEPS):
            with jax.profiler.StepTraceAnnotation("decode", step_num=i):
                jax.block_until_ready(fn(params, prompt, temperature))


def _compute(name: str | None) -> bool:
    text = (name or "").lower()
    return not text.startswith(("memset", "memcpy")) and not text.endswith("condition")


def _kernels_a_step(analysis: Path) -> tuple[Counter, dict]:
    import pyarrow.parquet as pq

    rows = pq.read_table(analysis / "events.parquet").to_pylist()
    match = json.loads((analysis / "kernels.json").read_text())["match"]
    counts: Counter = Counter(
        r["cluster"] for r in rows if r["kind"] in ("kernel", "host_thunk") and _compute(r["name"])
    )
    steps = match["steps"]
    return Counter({k: v / steps for k, v in counts.items()}), match


def _drive(out: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    autotune = out / "autotune.textproto"
    runs = {
        "cmdbuf": f"--xla_gpu_dump_autotune_results_to={autotune}",
        "nocmdbuf": f"--xla_gpu_enable_command_buffer= --xla_gpu_load_autotune_results_from={autotune}",
    }
    figures: dict = {}
    counts = {}
    for name, extra in runs.items():
        folder = out / name
        flags_ = (
            f"--xla_dump_to={folder / 'dump'} --xla_dump_hlo_as_text "
            f"--xla_dump_hlo_module_re=.*generate.* {extra}"
        )
        subprocess.run(
            [sys.executable, __file__, f"--out={folder}", "--role=run"],
            env=dict(env, XLA_FLAGS=flags_),
            check=True,
        )
        trace = next((folder / "trace").rglob("*.xplane.pb"))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.analyze",
                f"--dump={folder / 'dump'}",
                f"--xplane={trace}",
                f"--out={folder / 'analysis'}",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        figures[name + "_analyze"] = (proc.stdout + proc.stderr)[-700:]
        counts[name], match = _kernels_a_step(folder / "analysis")
        figures[name] = {
            "events": match["events_in_window"],
            "matched": match["matched_fraction"],
            "ambiguous": match.get("ambiguous_fraction"),
            "steps": match["steps"],
            "compute_kernels_a_step": sum(counts[name].values()),
            "clusters": len(counts[name]),
        }
    a, b = counts["cmdbuf"], counts["nocmdbuf"]
    differ = {
        str(k): (a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b) if a.get(k, 0) != b.get(k, 0)
    }
    figures["clusters_that_differ"] = len(differ)
    figures["differ"] = dict(sorted(differ.items())[:20])
    figures["only_in_cmdbuf"] = sorted(str(k) for k in set(a) - set(b))[:20]
    print(json.dumps(figures))


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    out.mkdir(parents=True, exist_ok=True)
    if _ROLE.value == "run":
        _run(out)
    else:
        _drive(out)


if __name__ == "__main__":
    flags.mark_flags_as_required(["out"])
    app.run(main)
