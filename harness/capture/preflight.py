"""Checks only the installed jaxlib and the device can make, before any run folder exists.

They run in the capture worker (harness.study.worker), which the supervisor starts before it creates
the run folder: each distinct XLA option set is compiled once into a trivial program, and the
problem sizes are checked against the device's memory. Most bad options raise, which becomes a
ConfigError naming the key; some abort the process instead (`xla_cpu_parallel_codegen_split_count:
-1` ends in SIGABRT), so the worker announces each set before trying it, through `announce`,
and the supervisor names the last one announced when the worker dies.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.capture import hostmem, xla_names
from harness.config.experiment import ConfigError, Experiment, Problem, Variant
from harness.config.sharding import Sharding, padded
from harness.variants import expression, program


def option_sets(exp: Experiment, platform: str) -> list[tuple[str, dict[str, Any]]]:
    """Returns (config key, options) to compile with, each distinct set once: every option
    alone, then each variant's full set, since some options are fine alone and abort XLA
    together (xla_disable_hlo_passes with xla_enable_hlo_passes_only fails a CHECK)."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[tuple[tuple[str, str], ...]] = set()

    def add(key: str, options: dict[str, Any]) -> None:
        ident = tuple(sorted((k, repr(v)) for k, v in options.items()))
        if ident not in seen:
            seen.add(ident)
            out.append((key, options))

    variants = [v for v in exp.selected_variants if platform in v.platforms]
    for v in variants:
        for name, value in v.xla_options.items():
            add(f"variants.{v.name}.xla_options.{name}", {name: value})
    for v in variants:
        if len(v.xla_options) > 1:
            add(f"variants.{v.name}.xla_options", dict(v.xla_options))
    if exp.search.base:
        for name, values in exp.search.space.xla_options.items():
            for value in values:
                add(f"search.space.xla_options.{name}", {name: value})
    return out


def check_options(
    exp: Experiment, platform: str, announce: Callable[[str, dict[str, Any]], None]
) -> None:
    """Compiles a trivial program with each option set; raises ConfigError for a rejected one."""
    import jax

    sets = option_sets(exp, platform)
    if not sets:
        return
    import jaxlib

    probe = jax.jit(lambda a: a + 1)
    arg = np.zeros((2,), np.float32)  # a NumPy argument: no eager compile of its own
    for key, options in sets:
        announce(key, options)
        try:
            probe.lower(arg).compile(compiler_options=options)
        except Exception as e:  # XLA raises a runtime error naming the option
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if "No such compile option" in first:
                first += unknown_option_hint(options)
            raise ConfigError(
                "config",
                key,
                f"rejected by the installed jaxlib {jaxlib.__version__}: {first[:300]}",
            ) from None


def unknown_option_hint(options: dict[str, Any]) -> str:
    """Returns what to add to XLA's "No such compile option": the closest names this jaxlib
    accepts (harness.capture.xla_names), or where the valid names are when none is close."""
    valid = xla_names.known()
    close = [
        f"{name!r} (did you mean {match[0]!r}?)"
        for name in options
        if name not in valid and (match := difflib.get_close_matches(name, valid, 1, 0.8))
    ]
    if close:
        return "; " + ", ".join(close)
    return "; valid names are the DebugOptions fields of this jaxlib"


def device_memory() -> tuple[int, str]:
    """Returns the memory a problem must fit in and where that number came from: a GPU's
    bytes_limit, else the host memory this process may still take (physical memory, its
    rlimits and its cgroup's limit, harness.capture.hostmem)."""
    import jax

    device = jax.devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # CPU devices may not implement memory_stats
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.device_kind} bytes_limit"
    bound = hostmem.available()
    return bound.left, bound.where


# Each XLA:CPU host device running a program costs this much beside its buffers (about 0.8
# MiB measured with 256 devices on jax 0.10; rounded up).
PER_DEVICE_BYTES = 2 << 20
_ITEM = {"float32": 4, "bfloat16": 2, "float16": 2}


def _cut(s: Sharding, spec: tuple[str | None, ...], rank: int) -> int:
    """Returns how many pieces a PartitionSpec cuts an array of `rank` dims into."""
    return math.prod(s.axis_size(e) for e in padded(spec, rank))


def mesh_bytes(p: Problem, s: Sharding) -> tuple[int, int]:
    """Returns (the placed inputs over all devices, the outputs, temporaries and per-device
    runtime over all devices) of the GELU problem on mesh `s`. A replicated array costs its
    full size on every device: 2048 forced host devices with a replicated 64 MB output need
    128 GB, however small the inputs."""
    rank = len(p.x_shape)
    xi, wi = _ITEM[p.dtype], _ITEM[p.weight_dtype]
    placed = (
        p.rows * p.k * xi // _cut(s, s.x, rank)
        + p.k * p.n * wi // _cut(s, s.w, 2)
        + p.n * wi // _cut(s, s.b, 1)
    )
    out = p.rows * p.n * 4 // _cut(s, s.out, rank)
    # Each device's own GEMM result: its rows of x by its columns of W, whatever `out` says
    # (a split K reduces full-size partial sums).
    rows_cut = math.prod(s.axis_size(e) for e in padded(s.x, rank)[:-1])
    local = p.rows * p.n * 4 // (rows_cut * s.axis_size(padded(s.w, 2)[1]))
    per_device = out + 2 * max(out, local) + PER_DEVICE_BYTES
    return s.devices * placed, s.devices * per_device


def check_program(exp: Experiment) -> None:
    """Imports a program study's function and init (validation only read their source) and
    traces them on the configured shapes; raises ConfigError naming the key when either cannot
    be imported, is not callable, or refuses the arguments."""
    if not exp.program.enabled:
        return
    try:
        program.check(exp.program, exp.seed)
    except program.ProgramError as e:
        raise ConfigError("config", e.key, str(e)) from None


def _sizes(v: Variant, seed: int) -> tuple[tuple, int, int]:
    """Returns (what identifies its inputs, their bytes, the bytes of its output and
    temporaries): the GELU problem's estimate, or a program's shapes (`jax.eval_shape`) with
    three results' worth of temporaries."""
    if v.program.enabled:
        p = v.program
        try:
            held, out = program.working_bytes(p, seed)
        except Exception:  # code jax cannot trace abstractly: the inputs alone are known
            held, out = program.input_bytes(p), 0
        return (p.init, p.inputs, p.dtype, p.w_dtype, seed), held, 3 * out
    p = v.problem
    held = expression.input_bytes(p)
    key = (p.x_shape, p.dtype, p.weight_dtype, p.k, p.n, seed)
    if v.sharding.enabled:  # the host's copy, plus every device's share of it and the rest
        placed, rest = mesh_bytes(p, v.sharding)
        return (*key, v.name), held + placed, rest
    return key, held, expression.problem_bytes(p) - held


def held_bytes(variants: list[Variant], seed: int) -> int:
    """Returns the bytes the timing stage holds at once: every distinct input set, plus the
    largest single variant's output and temporaries (outputs are transient, one at a time)."""
    inputs: dict[tuple, int] = {}
    largest = 0
    for v in variants:
        key, held, rest = _sizes(v, seed)
        inputs[key] = held
        largest = max(largest, rest)
    return sum(inputs.values()) + largest


def check_memory(exp: Experiment, platform: str) -> None:
    """Raises ConfigError when one variant, or all timed variants held at once, would need
    more than 80% of the device's memory: refused from an estimate, before any allocation."""
    limit, where = device_memory()
    variants = [v for v in exp.selected_variants if platform in v.platforms]
    for v in variants:
        _, held, rest = _sizes(v, exp.seed)
        need = held + rest
        if need > 0.8 * limit:
            # A program's inputs are the study's; a problem may be the variant's own.
            key, smaller = (
                ("program.inputs", "make the inputs smaller")
                if v.program.enabled
                else (
                    (
                        f"variants.{v.name}.sharding",
                        "make m, k, n or the mesh smaller, or replicate less",
                    )
                    if v.sharding.enabled
                    else (f"variants.{v.name}.problem", "make m, k or n smaller")
                )
            )
            raise ConfigError(
                "config",
                key,
                f"needs about {need / 2**30:.1f} GiB, more than 80% of the "
                f"{limit / 2**30:.1f} GiB of {where}; {smaller}",
            )
    need = held_bytes(variants, exp.seed)
    if need > 0.8 * limit:
        raise ConfigError(
            "config",
            "variants",
            f"the timed variants together hold about {need / 2**30:.1f} GiB, more than 80% of "
            f"the {limit / 2**30:.1f} GiB of {where}; select fewer variants or smaller problems",
        )
