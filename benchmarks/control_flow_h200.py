"""Attribution through control flow inside command buffers on a GPU (issue 40), checked
against the same program without command buffers.

The program is examples/scan_cond.py: gated blocks in `lax.scan`, a `lax.cond` in each, a
`lax.fori_loop` after, SGD (bf16, width 1024, batch 4096 on a GPU). It is dumped (optimized
HLO and the thunk files) and profiled for STEPS marked steps twice, each run in its own
process (XLA reads XLA_FLAGS once):

1. with command buffers (XLA's default), dumping its autotune results to a file;
2. with `--xla_gpu_enable_command_buffer=` and those autotune results loaded
   (`--xla_gpu_load_autotune_results_from`), so both compile the same program and the second
   run's events carry their real `hlo_op`.

Then `python -m harness.analyze` runs on both, and this prints each run's attributed fraction
and the per-cluster compute-kernel counts side by side (memsets, copies and the branch-choice
kernel aside: those differ between the two by design), and whether they are equal. Exit 0 when
the first run attributes >= 99.9% of its events and the counts are equal.

Run from the repo root (outputs under $OUT if set, else /tmp/control_flow):

    python3 benchmarks/control_flow_h200.py            # on the H200: under 5 minutes
    python3 benchmarks/control_flow_h200.py --small    # tiny shapes; runs on a CPU too
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from analyze_pair import analyze_run  # benchmarks/, beside this script

STEPS = 4
GPU_SHAPE, SMALL_SHAPE = (4096, 1024), (64, 32)
NOT_COMPUTE = ("memset", "memcpy", "set_case_condition", "set_while_condition")


def child(trace_dir: str, rows: int, width: int) -> None:
    """Compile, warm up, then profile STEPS marked steps (XLA_FLAGS set by the parent)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import jax
    import jax.numpy as jnp

    from examples.scan_cond import init, step

    dtype = jnp.bfloat16 if jax.default_backend() == "gpu" else jnp.float32
    x = jax.random.normal(jax.random.key(1), (rows, width), jnp.float32).astype(dtype)
    params = init(jax.random.key(0), x)
    train_step = jax.jit(step)
    for _ in range(3):
        params, loss = train_step(params, x)
    loss.block_until_ready()
    with jax.profiler.trace(trace_dir):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = train_step(params, x)
                loss.block_until_ready()
    print(f"loss {float(loss):.4f}")


def compute_counts(kernels_json: Path) -> tuple[float, Counter[str], Counter[str]]:
    """(attributed fraction, compute kernels per cluster, attribution rules) of one analysis."""
    doc = json.loads(kernels_json.read_text())
    counts: Counter[str] = Counter()
    import pyarrow.parquet as pq  # every event and its attribution, beside kernels.json

    for e in pq.read_table(kernels_json.with_name("events.parquet")).to_pylist():
        compute = e["kind"] in ("kernel", "host_thunk") and e["matched"]
        if compute and not e["name"].lower().startswith(NOT_COMPUTE):
            counts[str(e["cluster"])] += 1
    return doc["match"]["matched_fraction"], counts, Counter(doc["match"]["rules"])


def run_flags(work: Path, name: str, gpu: bool) -> str:
    """XLA_FLAGS of one run: the dump the analyzer reads, and on a GPU the command-buffer
    switch and the autotune results shared between the two runs."""
    autotune = work / "autotune.textproto"
    flags = (
        f"--xla_dump_to={work / name / 'dump'} --xla_dump_hlo_as_text "
        "--xla_dump_hlo_module_re=.*step.*"
    )
    if gpu and name == "cmdbuf":
        flags += f" --xla_gpu_dump_autotune_results_to={autotune}"
    if gpu and name == "nocmdbuf":
        flags += (
            f" --xla_gpu_enable_command_buffer= --xla_gpu_load_autotune_results_from={autotune}"
        )
    return flags


def platform() -> str:
    """jax's default backend, asked in a process of its own: a parent holding the GPU (and
    XLA's preallocated memory) would starve the children."""
    probe = "import jax; print(jax.default_backend())"
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()


def main(work: Path, small: bool) -> int:
    backend = platform()
    gpu = backend == "gpu"
    rows, width = SMALL_SHAPE if small or not gpu else GPU_SHAPE
    results = {}
    for name in ("cmdbuf", "nocmdbuf"):
        env = {**os.environ, "XLA_FLAGS": run_flags(work, name, gpu)}
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(work / name / "trace"),
                str(rows),
                str(width),
            ],
            env=env,
            check=True,
        )
        kernels = analyze_run(work, name, tail=1200)
        if kernels is None:
            return 1
        results[name] = compute_counts(kernels)
    (on_frac, on, on_rules), (off_frac, off, _) = results["cmdbuf"], results["nocmdbuf"]
    print(f"rules with command buffers: {dict(on_rules)}")
    print(f"{'cluster':48} {'cmdbuf':>8} {'nocmdbuf':>8}")
    for k in sorted(set(on) | set(off)):
        mark = "" if on[k] == off[k] else "  <- differs"
        print(f"{k[:48]:48} {on[k]:>8} {off[k]:>8}{mark}")
    equal = on == off
    print(
        f"attributed: cmdbuf {on_frac:.4f}, nocmdbuf {off_frac:.4f}; compute kernels "
        f"{sum(on.values())} vs {sum(off.values())} in {len(on)} vs {len(off)} clusters; "
        f"per-cluster counts equal: {equal}"
    )
    (work / "control_flow.json").write_text(
        json.dumps(
            {
                "platform": backend,
                "shape": [rows, width],
                "attributed": {"cmdbuf": on_frac, "nocmdbuf": off_frac},
                "counts": {"cmdbuf": dict(on), "nocmdbuf": dict(off)},
                "equal": equal,
            },
            indent=1,
        )
    )
    if not gpu:
        return 0  # no command buffers on a CPU: the comparison says nothing there
    return 0 if on_frac >= 0.999 and equal else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        root = Path(os.environ.get("OUT") or "/tmp/control_flow").resolve() / "control_flow"
        sys.exit(main(root, "--small" in sys.argv[1:]))
