"""The harness's copy ceiling beside torch's `clone`, in one process on one GPU.

    python benchmarks/copy_ceiling_check.py [--out=FILE.json]

Prints (and writes) the harness's measurement (harness.capture.ceilings.measure_copy at 1 GiB)
and torch's clone of 1 GiB timed over batches of 20 back-to-back calls (best of 30 batches),
both as bytes read + written per second, and their ratio. Needs a GPU.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the GPU


def torch_clone(nbytes: int, calls: int = 20, batches: int = 30) -> float:
    """Best bytes/s of `clone` over batches of `calls` back-to-back calls."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    out = src.clone()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = src.clone()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls)
    del out
    return 2.0 * nbytes / best


def main(argv: list[str]) -> int:
    from harness.capture.ceilings import COPY_METHOD, measure_copy

    nbytes = 1 << 30
    harness_bps = measure_copy(nbytes, 2.0, "gpu")
    clone_bps = torch_clone(nbytes)
    found = {
        "bytes": nbytes,
        "method": COPY_METHOD,
        "harness_bytes_per_s": harness_bps,
        "torch_clone_bytes_per_s": clone_bps,
        "ratio": harness_bps / clone_bps,
    }
    print(json.dumps(found, indent=1))
    for arg in argv:
        if arg.startswith("--out="):
            with open(arg.split("=", 1)[1], "w") as f:
                json.dump(found, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
