"""benchmarks/control_flow_h200.py on the CPU (issue 40): the GPU check's own program, dumped,
profiled and analysed twice in fresh processes at tiny shapes. The CPU has no command
buffers, so both runs must agree exactly; the H200 run is the lead's (see the script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "control_flow_h200.py"


@pytest.mark.slow
def test_the_gpu_check_runs_whole_on_the_cpu(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--small"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "control_flow" / "control_flow.json").read_text())
    assert result["platform"] == "cpu" and result["shape"] == [64, 32]
    assert result["attributed"] == {"cmdbuf": 1.0, "nocmdbuf": 1.0}
    assert result["equal"] and sum(result["counts"]["cmdbuf"].values()) > 0
    # Both runs dumped the optimized HLO with its scan, whose trip count the cost model reads.
    dump = next((tmp_path / "control_flow" / "cmdbuf" / "dump").glob("*after_optimizations.txt"))
    assert "while" in dump.read_text()
