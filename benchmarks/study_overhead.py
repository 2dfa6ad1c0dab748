"""What the harness costs beyond the work it measures: the study against a bare JAX script.

Run: python benchmarks/study_overhead.py [--config=gelu.yaml] [--pairs=2] [--results_root=DIR]
     [--config.KEY=VALUE ...]

The bare script (`--bare`, below) does what the harness's capture does, written plainly: for each
variant of the config that runs on this platform, the same function and inputs
(harness.variants.expression: that is the expression under study, not the harness), compiled
with the same dump options (per-pass HLO, emitters on a GPU), the first call inside a profiled
window, the warm-up and blocked steps, the profiled steady steps, the recompile with m halved
in its own profiled window; eager variants dispatch op by op; the Python-branch variant is
traced once. Both run as fresh processes, interleaved (harness, bare, harness, bare, ...), and
the benchmark prints each wall time, the medians and their ratio. The harness's own breakdown
line (capture, ceilings, timing, analysis, report) is printed too: a first study in a results
root measures the ceilings (4.6 s on the 2-core VM), which the bare script never does.

After capture the bare script also does the measuring the study reports: each variant's result
checked against the float64 reference, and every variant timed in interleaved rounds with none
of the harness's records. Each pair runs the harness first, and the bare script then makes the
very calls of that run's timing rounds (its timing.json: each round's order, each slot's
settling calls and batches of calls), so both spend the same device time timing and the ratio
is what the harness costs beyond that. (Until 2026-12 the bare script planned its own rounds
in 0.8 x `timing.budget_s`, while the harness fits its rounds to the whole budget: about 4 s
of every H200 pair's difference was that, not overhead.) Run alone (`--bare` without
`--rounds_from`), it plans rounds as the harness does before calibrating.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.config.experiment import Experiment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import study_breakdown  # noqa: E402  (beside this file)


def bare(config: str, out: Path, overrides: list[str], rounds_from: Path | None = None) -> None:
    """The study's capture work as a plain script: no worker, no files beyond XLA's and the
    profiler's, no analysis, no report; the timing rounds are plain loops. Prints one line,
    `bare stages: ...`, the seconds of each kind of work."""
    import jax

    stages: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            stages[name] = stages.get(name, 0.0) + time.perf_counter() - start

    from harness.config import load
    from harness.variants import accuracy, expression

    exp = load(config, overrides).experiment
    platform = jax.default_backend()
    m = exp.measure
    timed: dict[str, Callable[[], object]] = {}

    def profiled(name: str):
        return jax.profiler.trace(str(out / name))

    for v in exp.selected_variants:
        if platform not in v.platforms:
            continue
        jax.clear_caches()
        fn = expression.build_function(v)
        inputs = expression.inputs_for(v.problem, exp.seed)
        args = (inputs.x, inputs.w, inputs.b)
        if v.mode == "jit_python_branch":
            with contextlib.suppress(jax.errors.ConcretizationTypeError):
                jax.jit(fn).trace(*args)
            continue
        compiled = None
        if v.mode == "eager":
            call = lambda fn=fn, args=args: fn(*args)  # noqa: E731
            jitted = None
        else:
            # Dumped once, on the first compile; the new-shape call compiles without dumps.
            dump = {
                "xla_dump_to": str(out / v.name / "dump"),
                "xla_dump_hlo_as_text": True,
                "xla_dump_hlo_module_re": ".*",
                **({"xla_dump_hlo_pass_re": ".*"} if exp.dump.passes else {}),
                **(
                    {"xla_dump_emitter_re": ".*"} if exp.dump.emitters and platform == "gpu" else {}
                ),
            }
            dump = {k: x for k, x in dump.items() if k not in v.xla_options}
            jitted = jax.jit(fn, compiler_options=dict(v.xla_options))
        with stage("first_call"), profiled(f"{v.name}/first_call"):
            if jitted is not None:
                compiled = jitted.trace(*args).lower().compile(compiler_options=dump)
                call = lambda compiled=compiled, args=args: compiled(*args)  # noqa: E731
            y = jax.block_until_ready(call())
        with stage("steady"):
            for _ in range(m.warmup):
                jax.block_until_ready(call())
            for _ in range(m.steps):
                jax.block_until_ready(call())
        with stage("profile"), profiled(f"{v.name}/steady"):
            for i in range(exp.profile.steps):
                with jax.profiler.StepTraceAnnotation("step", step_num=i):
                    jax.block_until_ready(call())
        if m.recompile:
            half = jax.block_until_ready(expression.halve_rows(inputs.x))
            target = jitted if jitted is not None else fn
            with stage("recompile"), profiled(f"{v.name}/recompile"):
                jax.block_until_ready(target(half, inputs.w, inputs.b))
        with stage("reference"):
            rows = accuracy.sample_rows(v.problem.m, m.numerics_rows)
            ref = accuracy.reference(v.problem, v.mode_spec, inputs, rows)
            accuracy.numerics(y, ref, rows, accuracy.tolerance(v.problem))
        timed[v.name] = call
    with stage("timing"):
        if rounds_from is not None:
            replay_rounds(timed, json.loads(rounds_from.read_text()))
        else:
            time_in_rounds(timed, exp)
    print("bare stages: " + ", ".join(f"{k} {x:.2f} s" for k, x in stages.items()), flush=True)


def time_in_rounds(calls: dict[str, Callable[[], object]], exp: Experiment) -> None:
    """Times every variant in interleaved rounds, as the study's timing stage does: the
    baseline twice a round, each batch about `batch_s` long, shrunk to fit the budget, and
    preceded by `timing.settle` of a batch of untimed calls."""
    import jax

    names = list(calls) + ([exp.baseline] if exp.baseline in calls else [])
    rounds = exp.timing.rounds or 10
    settle = exp.timing.settle
    slots = len(names) * rounds * (1.0 + settle)
    batch_s = min(exp.timing.batch_s, 0.8 * exp.timing.budget_s / slots)
    per_batch = {}
    for name in set(names):
        jax.block_until_ready(calls[name]())
        start = time.perf_counter()
        jax.block_until_ready(calls[name]())
        per_batch[name] = max(1, round(batch_s / max(time.perf_counter() - start, 1e-7)))
    for r in range(rounds):
        order = names[r:] + names[:r]
        for name in reversed(order) if r % 2 else order:
            for calls_now in (math.ceil(per_batch[name] * settle), per_batch[name]):
                out = None
                for _ in range(calls_now):
                    out = calls[name]()
                jax.block_until_ready(out)


def replay_rounds(calls: dict[str, Callable[[], object]], timing: dict) -> None:
    """Makes the calls of a harness run's timing rounds (its timing.json), plainly: a warm-up
    call and a timed call of each variant, then each round's slots in that round's order, each
    slot its settling calls and then its short batches, every batch blocked once."""
    import jax

    def base(name: str) -> str:
        return name.split("#", 1)[0]  # the A/A pair's second slot times the baseline again

    for name in {base(n) for n in timing["variants"]} & set(calls):
        jax.block_until_ready(calls[name]())
        jax.block_until_ready(calls[name]())
    batches = int(timing.get("batches") or 1)
    for order in timing["orders"]:
        for name in order:
            slot = timing["variants"].get(name)
            if slot is None or base(name) not in calls:
                continue
            call = calls[base(name)]
            settling = [slot["settle_calls"]] if slot["settle_calls"] else []
            for count in settling + [slot["calls_per_batch"]] * batches:
                out = None
                for _ in range(count):
                    out = call()
                jax.block_until_ready(out)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, proc.stdout


def main(config: str = "gelu.yaml") -> tuple[float, float]:
    """Runs the pairs; returns the bare and the harness medians, seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=config)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--results_root", default=None, help="default: a temporary folder")
    parser.add_argument("--bare", action="store_true", help="run the bare script once (internal)")
    parser.add_argument("--out", default=None, help="the bare script's output folder (internal)")
    parser.add_argument(
        "--rounds_from", default=None, help="a harness run's timing.json to replay (internal)"
    )
    # --config.KEY=VALUE overrides go to both the bare script and the harness.
    args, overrides = parser.parse_known_args()
    unknown = [o for o in overrides if not o.startswith("--config.")]
    if unknown:
        parser.error(f"unknown arguments {unknown}; overrides look like --config.problem.m=64")
    if args.bare:
        bare(
            args.config,
            Path(args.out),
            overrides,
            Path(args.rounds_from) if args.rounds_from else None,
        )
        return 0.0, 0.0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("XLA_FLAGS", None)
    scratch = Path(tempfile.mkdtemp(prefix="study_overhead."))
    root = Path(args.results_root) if args.results_root else scratch / "results"
    walls: dict[str, list[float]] = {"bare": [], "harness": []}
    breakdown = ""
    try:
        for i in range(args.pairs):
            started = time.time()
            wall, stdout = timed(
                [
                    sys.executable,
                    "-m",
                    "harness",
                    f"--config={args.config}",
                    f"--results_root={root}",
                    *overrides,
                ],
                env,
            )
            walls["harness"].append(wall)
            found = re.search(r"^time: .*\(total ([0-9.]+) s\)$", stdout, re.M)
            breakdown = found.group(0) if found else "(no breakdown line)"
            share = (
                f"; its parts are {float(found.group(1)) / wall:.0%} of the wall" if found else ""
            )
            print(f"harness {wall:6.2f} s   {breakdown}{share}", flush=True)
            # The run this pair's harness wrote: its rounds are what the bare script replays.
            runs = [t for t in root.glob("*/latest/timing.json") if t.stat().st_mtime >= started]
            if not runs:
                raise SystemExit(f"the harness wrote no timing.json under {root}")
            latest = max(runs, key=lambda t: t.stat().st_mtime)
            wall, stdout = timed(
                [
                    sys.executable,
                    str(Path(__file__).resolve().with_name("study_overhead.py")),
                    "--bare",
                    f"--config={args.config}",
                    f"--out={scratch / f'bare{i}'}",
                    f"--rounds_from={latest}",
                    *overrides,
                ],
                env,
            )
            walls["bare"].append(wall)
            found = re.search(r"^bare stages: .*$", stdout, re.M)
            print(f"bare    {wall:6.2f} s   {found.group(0) if found else ''}", flush=True)
            # The per-variant capture's compiles are cold and one at a time (the bare script's
            # share one process's autotuning): what they held is the capture's serial path.
            phases = study_breakdown.compile_phases(latest.parent)
            held = (
                f"held {study_breakdown.union(phases):.2f} s in {len(phases)} compile phases"
                if phases
                else "not recorded (no variant shared the device with another's worker)"
            )
            stages = dict(re.findall(r"(\w+) ([0-9.]+) s", found.group(0) if found else ""))
            compiled = sum(float(stages.get(k, 0.0)) for k in ("first_call", "recompile"))
            against = (
                f" (the bare script's first calls and recompiles {compiled:.2f} s, in one "
                "process that autotunes each GEMM once)"
                if phases and stages
                else ""
            )
            print(f"harness compile slot {held}{against}", flush=True)
            print(f"pair {i + 1}: ratio {walls['harness'][-1] / wall:.2f}x", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    b, h = statistics.median(walls["bare"]), statistics.median(walls["harness"])
    print(
        f"\nconfig {args.config}: bare median {b:.2f} s, harness median {h:.2f} s, ratio {h / b:.2f}x"
    )
    return b, h


if __name__ == "__main__":
    main()
