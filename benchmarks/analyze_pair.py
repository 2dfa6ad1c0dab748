"""One step the GPU checks of command-buffer attribution share (benchmarks/cmdbuf_attribution.py,
benchmarks/control_flow_h200.py): `python -m harness.analyze` on one run's dump and trace,
its tail printed, its kernels.json returned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def analyze_run(work: Path, name: str, tail: int = 1500) -> Path | None:
    """Runs `python -m harness.analyze` on `work/name/{dump,trace}` into `work/name/analysis`;
    returns its kernels.json, or None when the analysis failed (its output printed)."""
    out = work / name / "analysis"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.analyze",
            f"--dump={work / name / 'dump'}",
            f"--xplane={work / name / 'trace'}",
            f"--out={out}",
        ],
        capture_output=True,
        text=True,
    )
    print(f"[{name}] analyze rc={proc.returncode}\n{proc.stdout[-tail:]}{proc.stderr[-tail:]}")
    return out / "kernels.json" if proc.returncode == 0 else None
