"""Time the analysis of a deep transformer train step: the HLO phases, then the whole CLI.

Run: python benchmarks/analyze_transformer.py [--blocks=48] [--width=256] [--dump=DIR]
    [--cli-runs=1]

Compiles the train step of `benchmarks/parse_hlo.py`'s flax transformer on CPU with
`xla_dump_to` a temporary folder (15-40 s; nothing is kept), then times, on the
before/after-optimization pair XLA dumped: parsing both modules, `find_clusters`,
`reverse_map` and `module_cost`. Prints each phase's wall and CPU seconds and their totals
(CPU time is what the analysis costs on a shared machine), then how the reverse map placed
the ops. Then it runs what a user runs, `python -m harness.analyze --dump=<the pair>
--out=<tmp>`, `--cli-runs` times in fresh processes (interpreter start, imports, every JSON
file, report.md, report.html and the PNG figures included), prints each run's wall and CPU
seconds and the report's top table. `--keep=DIR` copies the dumped pair; `--dump=DIR`
analyses such a folder without compiling. The target for the default 48-block model is at
most 10 s for the CLI, report included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse_hlo import transformer_step_hlo

from harness.hlo.clusters import find_clusters
from harness.hlo.cost import module_cost
from harness.hlo.parser import parse_file
from harness.hlo.reverse_map import reverse_map

T = TypeVar("T")


def dump_pair(blocks: int, width: int, out: Path) -> tuple[Path, Path]:
    """Compile the transformer step with XLA dumping into `out`; returns the (before, after)
    optimization HLO files of the train-step module."""
    transformer_step_hlo(
        blocks,
        width,
        compiler_options={
            "xla_dump_to": str(out),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_module_re": ".*loss.*",
        },
    )
    return find_pair(out)


def find_pair(dump: Path) -> tuple[Path, Path]:
    """The largest module's before- and after-optimization files in an XLA dump folder."""
    after = max(dump.glob("*cpu_after_optimizations.txt"), key=lambda p: p.stat().st_size)
    prefix = after.name.removesuffix("cpu_after_optimizations.txt")
    before = dump / f"{prefix}before_optimizations.txt"
    if not before.is_file():
        raise SystemExit(f"{dump}: no {before.name} beside {after.name}")
    return before, after


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=48)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--dump", type=Path, help="analyse this XLA dump folder instead of compiling")
    ap.add_argument("--keep", type=Path, help="copy the dumped pair into this folder")
    ap.add_argument("--cli-runs", type=int, default=1, help="full CLI runs to time (0: none)")
    args = ap.parse_args()

    if args.dump:
        before_path, after_path = find_pair(args.dump)
        tmp = None
    else:
        tmp = Path(tempfile.mkdtemp(prefix="analyze_transformer_"))
        t0 = time.perf_counter()
        before_path, after_path = dump_pair(args.blocks, args.width, tmp)
        print(f"compile + dump: {time.perf_counter() - t0:.1f} s (not part of the total)")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for p in (before_path, after_path):
                shutil.copy(p, args.keep / p.name)
    mb = (before_path.stat().st_size + after_path.stat().st_size) / 1e6
    try:
        phases: list[tuple[str, float, float]] = []

        def timed(name: str, fn: Callable[[], T]) -> T:
            wall, cpu = time.perf_counter(), time.process_time()
            result = fn()
            phases.append((name, time.perf_counter() - wall, time.process_time() - cpu))
            return result

        before = timed("parse before", lambda: parse_file(before_path))
        after = timed("parse after", lambda: parse_file(after_path))
        clusters = timed("find_clusters", lambda: find_clusters(after))
        rmap = timed("reverse_map", lambda: reverse_map(before, after, clusters))
        cost = timed("module_cost", lambda: module_cost(after, clusters))
        cli = [time_cli(before_path, after_path) for _ in range(args.cli_runs)]
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"modules: {before.instruction_count()} instructions before, "
        f"{after.instruction_count()} after ({mb:.1f} MB); {len(clusters)} clusters"
    )
    print(f"{'phase':14} {'wall s':>7} {'cpu s':>7}")
    for name, wall, cpu in phases:
        print(f"{name:14} {wall:7.2f} {cpu:7.2f}")
    total_wall, total_cpu = sum(p[1] for p in phases), sum(p[2] for p in phases)
    print(f"{'total':14} {total_wall:7.2f} {total_cpu:7.2f}")
    print(
        f"reverse map ({rmap.method}): {len(rmap.mapping)} ops, "
        f"{len(rmap.folded_away)} held by none"
    )
    for note in rmap.notes:
        print(f"  {note}")
    print(
        f"cost: {cost.flops:.3g} flops, {cost.transcendentals:.3g} transcendentals, "
        f"{cost.bytes:.3g} bytes; uncosted {dict(cost.uncosted) or 'none'}"
    )
    for i, (wall, cpu, mapped, _) in enumerate(cli, 1):
        print(
            f"CLI run {i}: python -m harness.analyze on the pair, report included: "
            f"{wall:.2f} s wall, {cpu:.2f} s CPU; reverse map in fusions.json: {mapped} ops"
        )
    if cli:
        print(f"load average now: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("report's top table (first 10 rows):")
        print(cli[-1][3])
    return 0


def time_cli(before: Path, after: Path) -> tuple[float, float, int, str]:
    """Runs the analyze CLI on a folder holding just the pair, in a fresh process; returns its
    wall and CPU seconds (itself and its children), the ops in fusions.json's reverse map, and
    the first rows of report.md's first table."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="analyze_cli_") as work:
        dump, out = Path(work) / "dump", Path(work) / "out"
        dump.mkdir()
        for p in (before, after):
            shutil.copyfile(p, dump / p.name)  # the analysis never follows links
        start = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "harness.analyze", f"--dump={dump}", f"--out={out}"],
            cwd=repo,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(repo)},
        )
        wall = time.perf_counter() - t0
        end = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"analyze CLI failed ({proc.returncode}): {proc.stderr.strip()}")
        cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
        fusions = next(out.glob("*/fusions.json"))
        mapped = len(json.loads(fusions.read_text())["modules"][0].get("reverse_map", {}))
        lines = (out / "report.md").read_text().splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("| "))
        table = "\n".join(lines[first : first + 12])
    return wall, cpu, mapped, table


if __name__ == "__main__":
    raise SystemExit(main())
