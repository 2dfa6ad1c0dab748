"""Benchmark our HLO text parser against jaxlib's C++ parser on one large real module.

Run: python benchmarks/parse_hlo.py [--blocks=48] [--width=256] [--repeats=5] [--save=FILE]

The module is the CPU after-optimizations HLO of a deep flax transformer train step
(value_and_grad of a loss). Both parsers read the SAME text; the best of `--repeats`
runs is reported in MB/s, plus our peak traced memory as a multiple of the text size.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.hlo.parser import parse_module


def transformer_step(
    blocks: int, width: int, seq: int = 16, batch: int = 2
) -> tuple[Callable[..., object], tuple[object, ...]]:
    """The train step (value_and_grad of a mean-square loss) of a `blocks`-deep flax
    transformer of width `width`, and its (params, x) arguments, ready for `jax.jit`."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class Block(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            h = nn.LayerNorm()(x)
            h = nn.SelfAttention(num_heads=4, qkv_features=self.width)(h)
            x = x + h
            h = nn.LayerNorm()(x)
            h = nn.Dense(4 * self.width)(h)
            h = nn.gelu(h)
            return x + nn.Dense(self.width)(h)

    class Model(nn.Module):
        blocks: int
        width: int

        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            for _ in range(self.blocks):
                x = Block(self.width)(x)
            return nn.Dense(1)(nn.LayerNorm()(x))

    model = Model(blocks, width)
    x = jnp.ones((batch, seq, width), jnp.float32)
    params = model.init(jax.random.PRNGKey(0), x)

    def loss(p: dict, x: jax.Array) -> jax.Array:
        return jnp.mean(model.apply(p, x) ** 2)

    return jax.value_and_grad(loss), (params, x)


def transformer_step_hlo(
    blocks: int,
    width: int,
    seq: int = 16,
    batch: int = 2,
    compiler_options: dict[str, object] | None = None,
) -> str:
    """The after-optimizations HLO text of a `blocks`-deep transformer train step on CPU
    (compiled with `compiler_options`, e.g. `xla_dump_to`, when given)."""
    import jax

    step, args = transformer_step(blocks, width, seq, batch)
    return jax.jit(step, compiler_options=compiler_options).lower(*args).compile().as_text()


def cpp_parser() -> Callable[[str], object] | None:
    """jaxlib's C++ HLO text parser (jaxlib 0.10/0.11 `_hlo` or older `xla_client`), or None."""
    try:
        from jaxlib import _hlo

        return _hlo.hlo_module_from_text
    except (ImportError, AttributeError):
        pass
    try:
        from jax._src.lib import xla_client

        return xla_client._xla.hlo_module_from_text
    except (ImportError, AttributeError):
        return None


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Fastest wall time of `repeats` calls, with a GC before each."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def peak_memory_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes traced by tracemalloc while `fn` runs (its result kept alive)."""
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=48)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--text", type=Path, help="parse this HLO file instead of compiling")
    ap.add_argument("--save", type=Path, help="write the generated HLO text here")
    args = ap.parse_args()

    t0 = time.perf_counter()
    text = args.text.read_text() if args.text else transformer_step_hlo(args.blocks, args.width)
    gen_s = time.perf_counter() - t0
    if args.save:
        args.save.write_text(text)
    mb = len(text.encode()) / 1e6
    module = parse_module(text, "<benchmark>")
    count = module.instruction_count()
    print(
        f"module: {mb:.2f} MB, {count} instructions, {len(module.computations)} computations "
        f"(generated in {gen_s:.1f} s)"
    )
    if not args.text and (mb < 5.0 or count < 30_000):
        raise SystemExit(
            f"module too small: {mb:.2f} MB / {count} instructions (need >=5 MB, >=30k)"
        )

    ours = best_seconds(lambda: parse_module(text), args.repeats)
    print(f"ours : {ours * 1e3:8.1f} ms  {mb / ours:7.1f} MB/s")
    cpp = cpp_parser()
    if cpp is None:
        print("c++  : jaxlib HLO text parser not available")
    else:
        theirs = best_seconds(lambda: cpp(text), args.repeats)
        print(f"c++  : {theirs * 1e3:8.1f} ms  {mb / theirs:7.1f} MB/s")
        print(f"ratio ours/c++ throughput: {theirs / ours:.2f}x")
    peak = peak_memory_bytes(lambda: parse_module(text))
    print(f"peak memory (tracemalloc): {peak / 1e6:.1f} MB = {peak / len(text):.2f}x text size")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
