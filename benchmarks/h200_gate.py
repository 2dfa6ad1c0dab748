"""Prints the A/A gate and the verdicts of every study under a results root, one block a run:
the H200 check of issue 24 runs `--config.select=[xla,xla_library_epilogue,matmul_only]` three
times and reads the ratio CV across runs from this.

Run: python benchmarks/h200_gate.py RESULTS_ROOT
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def main(root: Path) -> int:
    ratios: dict[str, list[float]] = {}
    for run in sorted(p.parent for p in root.glob("*/*/summary.json") if not p.parent.is_symlink()):
        s = json.loads((run / "summary.json").read_text())
        n = s.get("noise") or {}
        m = n.get("machine") or {}
        print(
            f"{run.name}: floor {n.get('floor', 0) * 100:.2f}%, resolved {n.get('resolved')}, "
            f"others {m.get('others_share')}, reasons {n.get('reasons')}"
        )
        for name, v in s["variants"].items():
            for kind in ("vs_baseline", "vs_lower_bound"):
                x = (v.get("comparison") or {}).get(kind)
                if x and x.get("ratio") is not None and x["against"] != name:
                    lo, hi = x["ci95"]
                    spread = x.get("between_runs")
                    spread = "" if spread is None else f" run-to-run spread {spread * 100:.2f}%"
                    print(
                        f"  {name} {kind} {x['against']}: {x['ratio']:.4f} [{lo:.4f}, {hi:.4f}] "
                        f"{x['verdict']}{spread}"
                    )
                    ratios.setdefault(f"{name}/{x['against']}", []).append(x["ratio"])
    for pair, xs in ratios.items():
        if len(xs) > 1:
            cv = statistics.stdev(xs) / statistics.mean(xs)
            print(f"CV {pair} over {len(xs)} runs: {cv * 100:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
