"""Issue 58's GPU acceptance: the KV-cache decoder with and without command buffers, attributed.

    PYTHONPATH=$PWD python benchmarks/decoder_cmdbuf_gpu.py --out=DIR
    PYTHONPATH=$PWD python benchmarks/decoder_cmdbuf_gpu.py --out=DIR --platform=cpu  # plumbing

benchmarks/programs/kv_decoder.py (a data-dependent `while_loop`, a layer `scan` inside it, a
`cond` choosing sampling or greedy, top-2 experts) is dumped and profiled over `--steps` marked
calls by its own script, greedy (temperature 0: the sampling branch never runs), twice in two
processes: with XLA's default command buffers, dumping its autotune results, and without
command buffers, loading them, so both compile the same program. Each is analysed by `python -m
harness.analyze`. The two acceptance lines of issue 58 are computed, printed one a line
(PASS/FAIL) and written to DIR/acceptance.json with the figures behind them:
- the compute kernels a step of each cluster (memsets, copies and branch-choice kernels aside)
  are equal with command buffers on and off;
- no kernel of either run went to a cluster of a conditional's branch that did not run: the
  branches that ran are read from the run without command buffers, where each kernel names its
  own fusion, and every cluster reachable from a branch that did not run must have none.
Exits 1 when a check fails. On the CPU (`--platform=cpu`) there are no command buffers, so the
run checks the plumbing only; on an H100 it takes about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from absl import app, flags

from harness.hlo.clusters import find_clusters
from harness.hlo.control_flow import taken_branches
from harness.hlo.parser import HloModule, parse_module
from harness.program.modules import launches_of

_OUT = flags.DEFINE_string("out", None, "Folder for both runs.")
_ROLE = flags.DEFINE_enum("role", "drive", ["drive", "run"], "drive: the whole; run: one run.")
_STEPS = flags.DEFINE_integer("steps", 5, "Marked calls profiled a run.")
_PLATFORM = flags.DEFINE_enum(
    "platform", None, ["cpu", "cuda"], "JAX_PLATFORMS for both runs (default: JAX's choice)."
)


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
        for i in range(_STEPS.value):
            with jax.profiler.StepTraceAnnotation("decode", step_num=i):
                jax.block_until_ready(fn(params, prompt, temperature))


def _compute(name: str | None) -> bool:
    text = (name or "").lower()
    return not text.startswith(("memset", "memcpy")) and not text.endswith("condition")


Key = tuple[str, str]  # (module, cluster)


def _kernels_a_step(analysis: Path) -> tuple[Counter[Key], dict[str, Any]]:
    """The compute kernels a step of each (module, cluster) of one analysis, and its match."""
    import pyarrow.parquet as pq

    rows = pq.read_table(analysis / "events.parquet").to_pylist()
    match = json.loads((analysis / "kernels.json").read_text())["match"]
    counts: Counter[Key] = Counter(
        (r["module"], r["cluster"])
        for r in rows
        if r["matched"] and r["kind"] in ("kernel", "host_thunk") and _compute(r["name"])
    )
    steps = match["steps"]
    return Counter({k: v / steps for k, v in counts.items()}), match


def _reachable(module: HloModule, roots: list[str]) -> set[str]:
    """The computations `roots` run, themselves included (their loops, branches, calls)."""
    seen, stack = set(roots), list(roots)
    while stack:
        comp = module.computations.get(stack.pop())
        for inst in comp.instructions if comp is not None else ():
            for callee in inst.called_computations:
                if callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
    return seen


def _branches_not_run(analysis: Path, launches: dict[str, float]) -> dict[Key, str]:
    """(module, cluster) -> the conditional branch it lies in, for every cluster of a branch
    that did not run: the branches that ran are those whose own clusters launched in this
    analysis (`launches`, its match's launches a step; read in the run without command buffers,
    where a kernel names its own fusion). A conditional none of whose branches launched says
    nothing and is left out."""
    out: dict[Key, str] = {}
    for folder in sorted(p for p in analysis.iterdir() if (p / "hlo.txt").is_file()):
        module = parse_module((folder / "hlo.txt").read_text())
        taken = taken_branches(module, launches_of(module, launches))
        for _, inst in module.instructions():
            ran = taken.get(inst.name)
            if inst.opcode != "conditional" or ran is None:
                continue
            branches = inst.called_computations
            idle = [
                b
                for i, b in enumerate(branches)
                if (ran != i if isinstance(ran, int) else not ran[i])
            ]
            for branch in idle:
                where = f"{inst.name} branch {branches.index(branch)} ({branch})"
                inside = _reachable(module, [branch])
                for c in find_clusters(module):
                    if c.computation in inside:
                        out[(module.name, c.name)] = where
    return out


def _checks(
    counts: dict[str, Counter[Key]], idle: dict[Key, str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Issue 58's two acceptance lines as computed checks, and the figures behind them."""
    a, b = counts["cmdbuf"], counts["nocmdbuf"]
    differ = {
        f"{m}:{c}": [a.get((m, c), 0.0), b.get((m, c), 0.0)]
        for m, c in sorted(set(a) | set(b))
        if a.get((m, c), 0.0) != b.get((m, c), 0.0)
    }
    equal = not differ and bool(a)
    given = {
        name: {f"{m}:{c}": n for (m, c), n in sorted(run.items()) if (m, c) in idle}
        for name, run in counts.items()
    }
    branches = sorted(set(idle.values()))
    clean = bool(branches) and not any(given.values())
    checks = [
        {
            "check": "per-cluster compute kernels a step equal with command buffers on and off",
            "passed": equal,
            "detail": (
                f"{len(a)} clusters, {sum(a.values()):g} compute kernels a step in each run"
                if equal
                else f"{len(differ)} clusters differ (on, off): {dict(list(differ.items())[:10])}"
                if differ
                else "no compute kernel was attributed"
            ),
        },
        {
            "check": "no kernel given to a branch that did not run",
            "passed": clean,
            "detail": (
                f"{sum(1 for k in idle)} clusters in {len(branches)} branches that did not run "
                f"({', '.join(branches[:4])}) got no kernel"
                if clean
                else (
                    f"kernels a step given to clusters of branches that did not run: {given}"
                    if branches
                    else "no conditional branch was seen not to run: the check tests nothing"
                )
            ),
        },
    ]
    return checks, {"clusters_that_differ": differ, "given_to_idle_branches": given}


def _drive(out: Path) -> bool:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    if _PLATFORM.value:
        env["JAX_PLATFORMS"] = _PLATFORM.value
    autotune = out / "autotune.textproto"
    runs = {
        "cmdbuf": f"--xla_gpu_dump_autotune_results_to={autotune}",
        "nocmdbuf": "--xla_gpu_enable_command_buffer= "
        f"--xla_gpu_load_autotune_results_from={autotune}",
    }
    figures: dict[str, Any] = {}
    counts: dict[str, Counter[Key]] = {}
    launches: dict[str, float] = {}
    for name, extra in runs.items():
        folder = out / name
        flags_ = (
            f"--xla_dump_to={folder / 'dump'} --xla_dump_hlo_as_text "
            f"--xla_dump_hlo_module_re=.*generate.* {extra}"
        )
        if name == "nocmdbuf" and not autotune.exists():  # the CPU autotunes nothing
            flags_ = flags_.replace(f"--xla_gpu_load_autotune_results_from={autotune}", "")
        subprocess.run(
            [sys.executable, __file__, f"--out={folder}", "--role=run", f"--steps={_STEPS.value}"],
            env=dict(env, XLA_FLAGS=flags_),
            check=True,
        )
        trace = next((folder / "trace").rglob("*.xplane.pb"))
        analysis = folder / "analysis"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.analyze",
                f"--dump={folder / 'dump'}",
                f"--xplane={trace}",
                f"--out={analysis}",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{name}: python -m harness.analyze failed: {proc.stderr[-2000:]}")
        counts[name], match = _kernels_a_step(analysis)
        if name == "nocmdbuf":
            launches = match["launches_per_cluster"]
        costs = [json.loads(p.read_text()) for p in sorted(analysis.glob("*/cost.json"))]
        figures[name] = {
            "analyze": proc.stdout[-700:],
            "events": match["events_in_window"],
            "matched": match["matched_fraction"],
            "ambiguous": match.get("ambiguous_fraction"),
            "steps": match["steps"],
            "compute_kernels_a_step": sum(counts[name].values()),
            "clusters": len(counts[name]),
            "flops_a_call": sum(c["modules"][0]["flops"] for c in costs),
        }
    checks, detail = _checks(counts, _branches_not_run(out / "nocmdbuf" / "analysis", launches))
    figures.update(detail)
    result = {"checks": checks, "figures": figures}
    (out / "acceptance.json").write_text(json.dumps(result, indent=1) + "\n")
    shown = {k: {f: x for f, x in v.items() if f != "analyze"} for k, v in figures.items()}
    print(json.dumps(shown))
    for c in checks:
        print(f"{'PASS' if c['passed'] else 'FAIL'}: {c['check']}: {c['detail']}")
    print(f"written: {out / 'acceptance.json'}")
    return all(c["passed"] for c in checks)


def main(argv: list[str]) -> None:
    del argv
    out = Path(_OUT.value)
    out.mkdir(parents=True, exist_ok=True)
    if _ROLE.value == "run":
        _run(out)
    elif not _drive(out):
        sys.exit(1)


if __name__ == "__main__":
    flags.mark_flags_as_required(["out"])
    app.run(main)
