"""How the report stages grow with a run's size: variants, and ops and clusters per program.

Run: python benchmarks/report_scaling.py --run=results/gelu/latest [--variants=20000] [--ops=3000]

It widens a saved run (a copy, in a temporary folder) to many variants, each a copy of the
baseline's summary, and the baseline's fusions.json to many ops and clusters (a program that
returns thousands of arrays), then times `write_report` and counts the Python calls each size
makes; linear stages make about twice the calls at twice the size. The test suite checks the
same counts on small sizes (tests/test_report_scaling.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Folders of a run the report never reads; left out of the copies so a widening stays cheap.
_UNREAD = shutil.ignore_patterns("dump", "profile", "30-passes", "70-llvm", "torch", "logs")


def widen_run(template: Path, dest: Path, variants: int = 0, ops: int = 0) -> Path:
    """Copies the run at `template` to `dest` (a run folder path) with `variants` extra
    variants (copies of the baseline, not baselines themselves) and, when `ops` > 0, the
    baseline's fusions.json replaced by one module of `ops` ops in `ops` clusters."""
    shutil.copytree(template, dest, symlinks=True, ignore=_UNREAD)
    summary = json.loads((dest / "summary.json").read_text())
    base = summary["baseline"]
    entry = summary["variants"][base]
    for i in range(variants):
        copy_ = copy.deepcopy(entry)
        copy_["identity"]["roles"] = [r for r in copy_["identity"]["roles"] if r != "baseline"]
        copy_["identity"]["description"] = f"copy {i} of the baseline"
        summary["variants"][f"v{i:05d}"] = copy_
    (dest / "summary.json").write_text(json.dumps(summary))
    if ops:
        fusions = dest / "variants" / base / "fusions.json"
        data = json.loads(fusions.read_text())
        module = data["modules"][0]
        module["clusters"] = [_cluster(module["clusters"][-1], i) for i in range(ops)]
        module["reverse_map"] = {
            f"out.{i} (jit(f)/out_{i})": [f"fusion.{i}", f"fusion.{(i + 1) % ops}"]
            for i in range(ops)
        }
        fusions.write_text(json.dumps(data))
    for stale in (".index-row.json", "report.md", "report.html"):
        (dest / stale).unlink(missing_ok=True)
    return dest


def _cluster(like: dict[str, Any], i: int) -> dict[str, Any]:
    c = copy.deepcopy(like)
    c.update(name=f"fusion.{i}", computation=f"fused_computation.{i}")
    c["source_ops"] = [f"jit(f)/out_{i}"]
    return c


def count_calls(fn: Callable[[], Any]) -> int:
    """Returns how many Python function calls `fn()` makes (its measure of work: unlike
    seconds, it does not depend on the machine or what else runs on it)."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness.report import write_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="results/gelu/latest")
    parser.add_argument("--variants", type=int, default=20000)
    parser.add_argument("--ops", type=int, default=3000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="report-scaling-"))
    try:
        for variants, ops in ((args.variants // 4, 0), (args.variants, 0), (0, args.ops)):
            run = widen_run(Path(args.run).resolve(), work / f"r{variants}-{ops}", variants, ops)
            start = time.perf_counter()
            write_report(run)
            print(f"{variants:6} variants {ops:5} ops: {time.perf_counter() - start:6.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
