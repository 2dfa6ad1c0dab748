"""The full configs/gelu_h200.yaml study against a bare script doing the same compiles,
recompiles, profiles and timed rounds, back to back (issue 44's acceptance: ratio <= 1.25).

Run on the H200: python3 benchmarks/gpu_study_overhead.py [--pairs=2] [--config.KEY=VALUE ...]

It is benchmarks/study_overhead.py with the H200 config: each pair runs the bare script
(`bare stages:` its first calls, steady steps, profiles, recompiles, references and timing
rounds) and then the harness (`time:` its capture, ceilings, timing, analysis and report), and prints
each pair's ratio and the medians'.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import study_overhead

if __name__ == "__main__":
    study_overhead.main(config="gelu_h200.yaml")
