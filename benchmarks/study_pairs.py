"""What compare_aa_gpu.py and scan_vs_unrolled_gpu.py share: a study of one program written as
a config and run as a user would (`python -m harness`), its run folder returned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def program_config(
    experiment: str,
    function: str,
    shape: list[int],
    dtype: str,
    variants: list[dict],
    profile_steps: int,
    rounds: int,
) -> dict:
    """A study config of one program (JSON is YAML): its variants, profiled and timed."""
    module = function.rsplit(":", 1)[0]
    return {
        "experiment": experiment,
        "description": f"issue 60: {experiment}",
        "seed": 0,
        "baseline": variants[0]["name"],
        "program": {
            "function": function,
            "init": f"{module}:init",
            "inputs": [{"shape": shape, "dtype": dtype}],
        },
        "measure": {"warmup": 2, "steps": 10, "recompile": False},
        "profile": {"enabled": True, "steps": profile_steps},
        "dump": {"passes": False, "emitters": False},
        "timing": {"rounds": rounds, "batch_s": 0.02, "budget_s": 3.0, "max_budget_s": 3.0},
        "variants": variants,
    }


def study(config: dict, out: Path, name: str) -> Path:
    """Runs the study of `config` under out/name and returns its run folder."""
    root = out / name
    root.mkdir(parents=True, exist_ok=True)
    path = root / "config.yaml"
    path.write_text(json.dumps(config, indent=1))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", f"--results_root={root / 'results'}", f"--config={path}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"study {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return (root / "results" / config["experiment"] / "latest").resolve()
