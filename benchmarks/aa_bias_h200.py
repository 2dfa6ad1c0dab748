"""Where the GPU's A/A bias comes from, and which timing change removes it (issue 38, item 2).

A program timed against itself in interleaved rounds (the A/A pair) gave 1.0125× (95% CI
1.0060–1.0172) on an idle H200 at its software power cap: the two slots of one program did not
run alike. This times the same five programs of different power draw, plus the A/A pair, under
several ways of running the rounds, interleaved (arm after arm, then again), and reads NVML's SM
clock and power at the start of every slot (outside the timed span):

- `current`: the harness as it was (each slot's batch calibrated on its own, so the A/A pair's
  two slots can time different numbers of calls; `settle` 0.5);
- `same_calls`: the A/A pair's second slot times exactly the calls of its first (the harness's
  fix: harness.timing.rounds.time_rounds, `twins`);
- `settle2`: `same_calls` with four times the settling;
- `warm`: `same_calls` after 5 s of the baseline alone, so the rounds start at a steady clock.

Run on the H200 from the repo root (about 5 minutes):

    python benchmarks/aa_bias_h200.py [--rounds=24] [--repeats=2]

It prints, per arm and repeat, the A/A ratio with its interval, the calls each slot timed, and
the mean SM clock and power at the start of the A/A pair's two slots; a JSON of everything to
$OUT/aa_bias.json when OUT is set. Never changes the GPU's clocks or power settings.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.common import stats
from harness.timing import clocks, rounds


def programs(size: int) -> dict[str, Callable[[], Any]]:
    """Five programs of different power draw at the power cap, and their inputs made once."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (size, size), jnp.bfloat16)
    w = jax.random.normal(jax.random.fold_in(key, 1), (size, size), jnp.bfloat16) / size**0.5
    b = jnp.zeros((size,), jnp.bfloat16)
    xf = x.astype(jnp.float32)
    big = jax.random.normal(jax.random.fold_in(key, 2), (8 * size, size), jnp.float32)

    gelu = jax.jit(lambda x, w, b: jax.nn.gelu(x @ w + b))
    matmul = jax.jit(lambda x, w: x @ w)
    f32 = jax.jit(lambda x, w: jax.nn.gelu(x @ w.astype(jnp.float32)))
    copy = jax.jit(lambda a: a * 1.0001 + 1.0)
    small = jax.jit(lambda x: jnp.tanh(x[:256, :256]) + 1)
    return {
        "xla": lambda: gelu(x, w, b),
        "matmul": lambda: matmul(x, w),
        "f32_gemm": lambda: f32(xf, w),
        "copy": lambda: copy(big),
        "small": lambda: small(x),
    }


def slot_readings(read: Callable[[], dict[str, Any]] | None) -> tuple[list, Callable]:
    """A list of (name, clock, power) at each slot's start, and the announce hook filling it."""
    seen: list[tuple[str, Any, Any]] = []

    def announce(name: str) -> None:
        if read is not None:
            r = read()
            seen.append((name, r.get("sm_clock_mhz"), r.get("power_w")))

    return seen, announce


def arm(
    name: str,
    calls: dict[str, Callable[[], Any]],
    rounds_n: int,
    settle: float,
    warm_s: float,
    twins: bool,
    read: Callable[[], dict[str, Any]] | None,
) -> dict[str, Any]:
    import jax

    wait = jax.block_until_ready
    names = list(calls)
    timed = [rounds.Timed(n, calls[n], wait) for n in names]
    at = names.index("xla") + (len(names) + 1) // 2
    timed.insert(at % (len(timed) + 1), rounds.Timed("xla#again", calls["xla"], wait))
    if warm_s:
        end = time.perf_counter() + warm_s
        while time.perf_counter() < end:
            wait(calls["xla"]())
    seen, announce = slot_readings(read)
    result = rounds.time_rounds(
        timed,
        rounds_n,
        0.1,
        warmup=2,
        settle=settle,
        announce=announce,
        batches=3,
        twins={"xla#again": "xla"} if twins else None,
    )
    a, b = result.step_s["xla#again"], result.step_s["xla"]
    est = stats.ratio_estimate(a, b)

    def at_slot(n: str, i: int) -> float | None:
        xs = [s[i] for s in seen if s[0] == n and isinstance(s[i], int | float)]
        return statistics.mean(xs) if xs else None

    return {
        "arm": name,
        "aa_ratio": est.ratio,
        "aa_ci95": est.ci95,
        "calls": dict(result.calls_per_batch),
        "settle_calls": dict(result.settle_calls),
        "clock_at_slot": {n: at_slot(n, 1) for n in [t.name for t in timed]},
        "power_at_slot": {n: at_slot(n, 2) for n in [t.name for t in timed]},
        "ratios": {n: stats.ratio_estimate(result.step_s[n], b).ratio for n in names if n != "xla"},
        "wall_s": result.wall_s,
    }


def main() -> int:
    args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:])
    rounds_n, repeats = int(args.get("rounds", 24)), int(args.get("repeats", 2))
    size = int(args.get("size", 8192))
    import jax

    platform = jax.devices()[0].platform
    read, source = clocks.reader(platform)
    calls = programs(size)
    for f in calls.values():
        jax.block_until_ready(f())
    arms = (
        ("current", 0.5, 0.0, False),
        ("same_calls", 0.5, 0.0, True),
        ("settle2", 2.0, 0.0, True),
        ("warm", 0.5, 5.0, True),
    )
    out = []
    for rep in range(repeats):
        for name, settle, warm_s, twins in arms:
            r = arm(name, calls, rounds_n, settle, warm_s, twins, read)
            r["repeat"] = rep
            out.append(r)
            lo, hi = r["aa_ci95"]
            ca, cb = r["clock_at_slot"].get("xla"), r["clock_at_slot"].get("xla#again")
            pa, pb = r["power_at_slot"].get("xla"), r["power_at_slot"].get("xla#again")
            print(
                f"{name:10s} rep {rep}: A/A {r['aa_ratio']:.4f} ({lo:.4f}–{hi:.4f}) calls "
                f"{r['calls']['xla']}/{r['calls']['xla#again']} clock {ca}/{cb} MHz power "
                f"{pa}/{pb} W, {r['wall_s']:.0f} s",
                flush=True,
            )
    print(f"clock source: {source}")
    for name, *_ in arms:
        xs = [abs(r["aa_ratio"] - 1) for r in out if r["arm"] == name]
        print(f"{name:10s} mean |A/A − 1| {statistics.mean(xs) * 100:.3f}% over {len(xs)} runs")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "aa_bias.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
