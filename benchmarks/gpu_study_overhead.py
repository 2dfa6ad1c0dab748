"""The full configs/gelu_h200.yaml study against a bare script doing the same compiles,
recompiles, profiles and timed rounds, back to back (issue 44's acceptance: ratio <= 1.25).

Run on the H200: python3 benchmarks/gpu_study_overhead.py [--pairs=2] [--config.KEY=VALUE ...]

It is benchmarks/study_overhead.py with the H200 config: each pair runs the bare script
(`bare stages:` its first calls, steady steps, profiles, recompiles, references and timing
rounds) and then the harness (`time:` its capture, ceilings, timing, analysis and report), and prints
each pair's ratio and the medians'.

The bare script replays JAX variants only, so the study is the config's 13 JAX variants; issue
44's figures (README) used a 20 s timing budget, after one study that cached the ceilings, in
one device command (`-u`: a command cut off by its time limit still shows its pairs):

    JAX=eager,xla,xla_no_fusion,xla_exact_gelu,xla_host_callback,xla_mixed_dtype,\
    xla_flax_linen,xla_flax_nnx,xla_python_branch,xla_lax_cond,matmul_only,\
    xla_library_epilogue,xla_small_gemm
    python3 -m harness --config=gelu_h200.yaml --config.select=$JAX \
        --config.timing.budget_s=20 --results_root=/tmp/gso > /dev/null
    python3 -u benchmarks/gpu_study_overhead.py --pairs=2 --results_root=/tmp/gso \
        --config.select=$JAX --config.timing.budget_s=20

Without the selection the study also runs the PyTorch variants (torch.compile with
max-autotune) and a 120 s timing budget: on 2026-12-04 its first study had not ended after
385 s, and the command printed nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import study_overhead

if __name__ == "__main__":
    study_overhead.main(config="gelu_h200.yaml")
