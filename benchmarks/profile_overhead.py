"""Does profiling, or blocking after every step, change what the device time of a step is?

The harness reports a step's wall time (blocking after each call), a pipelined wall time
(N calls, one block) and the device time of profiled, blocked steps. On an H200 the profiled
device time came out about 9% above the pipelined wall time, which a faithful profile cannot
do. This benchmark separates the two suspects on one jitted GEMM:

    wall, blocked        median of N timed calls, each followed by block_until_ready
    wall, pipelined      N calls back to back, one block, divided by N
    device, blocked      kernel time per step from a profile of N blocked calls
    device, pipelined    kernel time per step from a profile of N pipelined calls

    python benchmarks/profile_overhead.py --size=8192 --dtype=bfloat16 --steps=30
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from absl import app, flags

_SIZE = flags.DEFINE_integer("size", 8192, "m = k = n of the GEMM.")
_DTYPE = flags.DEFINE_enum(
    "dtype", "bfloat16", ["float32", "bfloat16", "float16"], "Operand dtype."
)
_STEPS = flags.DEFINE_integer("steps", 30, "Calls per measurement.")


def device_time_per_step(profile_dir: Path, steps: int) -> float:
    """Returns the summed duration of the profile's device events, per step."""
    from harness.profile.events import find_xplane
    from harness.profile.reader import read_device_events

    events = read_device_events(find_xplane(profile_dir))
    return sum(e.duration_ns for e in events) * 1e-9 / steps


def main(argv: Sequence[str]) -> int:
    del argv
    import jax

    from harness.capture import timing

    n, steps = _SIZE.value, _STEPS.value
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (n, n), _DTYPE.value)
    w = jax.random.normal(kw, (n, n), _DTYPE.value)
    matmul = jax.jit(lambda a, b: a @ b)
    call = lambda: matmul(x, w)  # noqa: E731
    blocked = statistics.median(timing.step_times(call, warmup=3, steps=steps))
    pipelined = timing.pipelined_step_time(call, steps)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(f"{tmp}/blocked"):
            for _ in range(steps):
                jax.block_until_ready(call())
        with jax.profiler.trace(f"{tmp}/pipelined"):
            timing.pipelined_step_time(call, steps)
        dev_blocked = device_time_per_step(Path(tmp) / "blocked", steps)
        dev_pipelined = device_time_per_step(Path(tmp) / "pipelined", steps)
    flops = 2 * n**3
    print(f"{jax.devices()[0].device_kind}, {n}^3 {_DTYPE.value} GEMM, {steps} steps")
    for label, seconds in (
        ("wall, blocked (median)", blocked),
        ("wall, pipelined", pipelined),
        ("device, profiled blocked steps", dev_blocked),
        ("device, profiled pipelined steps", dev_pipelined),
    ):
        print(f"  {label:34} {seconds * 1e3:9.3f} ms  {flops / seconds / 1e12:8.1f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    app.run(lambda argv: sys.exit(main(argv)))
