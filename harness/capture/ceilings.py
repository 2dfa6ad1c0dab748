"""Device ceilings measured at capture: the GEMM rate per precision, the copy bandwidth, and
with several devices the link bandwidth between them (harness.capture.link).

A variant's fraction of peak is only meaningful against the ceiling of the arithmetic its
GEMM actually used: bf16 and f16 dense on tensor cores; float32 at JAX's default precision
runs on TF32 tensor cores on NVIDIA GPUs; float32 at HIGHEST precision (and float32 on a CPU)
is true f32. So the ceiling is measured per precision, with XLA's own GEMM (`x @ w` under
`jax.jit`), best of many batches: at a large square size and at each distinct GEMM shape of
the run, the largest rate found being the ceiling. A variant's GEMM can then not beat its
own ceiling except by noise, which the analysis withholds rather than prints. The copy
bandwidth is measured the same way, best of batches of back-to-back calls (~20 ms each).

The measurement is cached under the results root (`.cache/ceilings.json`), keyed by host,
CPU count, device kind and the jax, jaxlib and GPU plugin versions, each entry by what it
measures and how (`copy:v2`), with its age; it is re-measured when stale, measured another
way, or asked (`capture.remeasure_ceilings`), and an entry that is not what its key says
(io.cache_refusal, valid_entry) is measured again. The report says the ceilings' age.
Written to the run as ceilings.json; the report only reads it.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import math
import os
import platform as pyplatform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.capture import turn
from harness.capture.link import measure_link
from harness.capture.turn import DeviceTurn
from harness.common.precision import NOTE as PRECISION_NOTE
from harness.common.precision import gemm_dtype, precision
from harness.store import io, records

CACHE_MAX_AGE_S = 7 * 24 * 3600
# The copy measurement's method, part of its cache key: a figure measured another way (the
# old key `copy`: one call per batch) is measured again rather than reused.
COPY_METHOD = "v2"
COPY_KEY = f"copy:{COPY_METHOD}"
_ITEM = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ProbeGemm:
    m: int
    k: int
    n: int
    x_dtype: str
    w_dtype: str


def _best_batch(
    fn: Callable[[], Any], wait: Callable[[Any], Any], budget_s: float, calls: int
) -> float:
    """Returns the fastest per-call time over batches of `calls` that fit in `budget_s`."""
    best = float("inf")
    start = time.perf_counter()
    n = 0
    while n < 3 or (time.perf_counter() - start < budget_s and n < 200):
        t0 = time.perf_counter()
        out = None
        for _ in range(calls):
            out = fn()
        wait(out)
        best = min(best, (time.perf_counter() - t0) / calls)
        n += 1
    return best


def measure_gemm(shape: ProbeGemm, budget_s: float, phases: DeviceTurn | None = None) -> float:
    """Returns the best FLOP/s of XLA's `x @ w` at this shape and these dtypes.

    The operands are standard normals drawn on the device (a GPU at its power cap runs a GEMM
    of ones faster than one of random values; NumPy drew 2×64 M of them in 1.5 s on the
    H200's host, most of the ceilings' time)."""
    import jax  # imports JAX: loaded only when called

    phases = phases or turn.free()
    with phases.compiling():
        kx, kw = jax.random.split(jax.random.key(0))
        x = jax.random.normal(kx, (shape.m, shape.k), np.float32).astype(shape.x_dtype)
        w = jax.random.normal(kw, (shape.k, shape.n), np.float32).astype(shape.w_dtype)
        f = jax.jit(lambda a, b: a @ b)
        jax.block_until_ready(f(x, w))
    flops = 2.0 * shape.m * shape.k * shape.n
    with phases.alone():
        return flops / _back_to_back(lambda: f(x, w), jax.block_until_ready, budget_s)


def _back_to_back(fn: Callable[[], Any], wait: Callable[[Any], Any], budget_s: float) -> float:
    """Returns the best per-call time over batches of back-to-back calls of ~20 ms each: one
    call per batch also times its launch and the wait for it, which a call that follows
    another hides (on the H200 a 1 GiB copy timed alone reads 3.1-3.3 TB/s, in batches of 20
    calls 4.1-4.3 TB/s, as another framework's device copy also does)."""
    one = _best_batch(fn, wait, budget_s / 4, 1)
    calls = max(1, min(1000, int(0.02 / max(one, 1e-7))))  # batches of ~20 ms
    return _best_batch(fn, wait, budget_s, calls)


def measure_copy(
    nbytes: int, budget_s: float, platform: str, phases: DeviceTurn | None = None
) -> float:
    """Returns the best bytes/s (read + written) of a copy of `nbytes` in device memory.

    On a CPU, NumPy's copy (one memcpy) is also timed: XLA's elementwise kernel there is
    not always the fastest way through host memory, and a ceiling is the best one found.
    """
    import jax  # imports JAX: loaded only when called
    import jax.numpy as jnp  # imports JAX: loaded only when called

    phases = phases or turn.free()
    with phases.compiling():
        a = jnp.ones((nbytes // 4,), jnp.float32)
        f = jax.jit(lambda v: v * 2.0)
        jax.block_until_ready(f(a))
    with phases.alone():
        best = 2.0 * a.nbytes / _back_to_back(lambda: f(a), jax.block_until_ready, budget_s)
    if platform == "cpu":
        src = np.ones(nbytes // 4, np.float32)
        dst = np.empty_like(src)
        t = _back_to_back(lambda: np.copyto(dst, src), lambda out: out, budget_s)
        best = max(best, 2.0 * src.nbytes / t)
    return best


def _host_key(environment: dict[str, Any]) -> str:
    found = {**environment, **(environment.get("versions") or {})}  # the versions by package
    plugins = "".join(f"|{p}" for p in _device_plugins())  # a GPU's libraries: cuBLAS's GEMMs
    return (
        "|".join(str(found.get(k)) for k in ("device_kind", "jax", "jaxlib", "platform"))
        + f"|{pyplatform.node()}|{os.cpu_count()}{plugins}"
    )


def _device_plugins() -> list[str]:
    """The installed JAX device plugins and their versions (jax-cuda13-plugin==0.11.2):
    their CUDA libraries make the GEMMs a GPU's ceiling measures. None on a CPU."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata.get("Name") or "").lower().replace("_", "-")
        if name.startswith(("jax-cuda", "jax-rocm", "jax-tpu")):
            found.add(f"{name}=={dist.version}")
    return sorted(found)


def _shape_key(shape: ProbeGemm) -> str:
    return f"{shape.m}x{shape.k}x{shape.n}:{shape.x_dtype}:{shape.w_dtype}"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def valid_entry(key: str, value: Any, now: float) -> bool:
    """True when a cached measurement may stand for `key`: recorded under that key (an entry
    moved under another shape's key is not), with a finite positive rate, measured within
    CACHE_MAX_AGE_S and not in the future."""
    if not isinstance(value, dict) or value.get("key") != key:
        return False
    at = value.get("at")
    if not _number(at) or not now - CACHE_MAX_AGE_S < at <= now + 60:
        return False
    field = "bytes_per_s" if key.startswith(("copy", "link:")) else "flops_per_s"
    rate = value.get(field)
    if not _number(rate) or rate <= 0:
        return False
    return not key.startswith("link:") or isinstance(value.get("source"), str)


def read_cache(cache: Path, host: str, now: float) -> dict[str, Any]:
    """The usable entries of the ceilings cache: none when it is unreadable, refused by
    io.read_cache_file (a link, outside the results root), of another host, jax or jaxlib,
    and only those entries valid_entry accepts. Anything else is measured again."""
    data = io.read_cache_file(cache.parent, cache.name)
    if data is None:
        return {}
    try:
        stored = records.loads(data, str(cache))  # the typed load: bounded, no NaN
    except ValueError:
        return {}
    if not isinstance(stored, dict) or stored.get("host") != host:
        return {}
    found = stored.get("entries")
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if valid_entry(k, v, now)}


def square_side(platform: str) -> int:
    """Returns the side of the square GEMM every precision's ceiling is measured at."""
    return 8192 if platform == "gpu" else 1024


def _wanted_shapes(shapes: Iterable[ProbeGemm], square: int) -> list[ProbeGemm]:
    """The GEMMs to measure: the variants' shapes, then a square one of each precision's
    dtype (the ceiling every precision is measured at)."""
    wanted = list(dict.fromkeys(shapes))
    for dtype in {gemm_dtype(s.x_dtype, s.w_dtype) for s in wanted}:
        wanted.append(ProbeGemm(square, square, square, dtype, dtype))
    return wanted


def _measure_missing(
    entries: dict[str, Any],
    wanted: Sequence[ProbeGemm],
    platform: str,
    devices: int,
    now: float,
    budget_s: float,
    phases: DeviceTurn | None,
) -> list[str]:
    """Measures what `entries` (the cache's) lacks: each wanted GEMM, the copy bandwidth and,
    over several devices, the link; adds each to `entries` and returns their keys."""
    measured = []
    for shape in wanted:
        key = _shape_key(shape)
        if key not in entries:
            rate = measure_gemm(shape, budget_s, phases)
            entries[key] = {"flops_per_s": rate, "at": now, "key": key}
            measured.append(key)
    entries.pop("copy", None)  # the old method's figure: an underestimate on a GPU
    if COPY_KEY not in entries:
        nbytes = (1 << 30) if platform == "gpu" else (64 << 20)
        rate = measure_copy(nbytes, budget_s, platform, phases)
        entries[COPY_KEY] = {"bytes_per_s": rate, "at": now, "key": COPY_KEY}
        measured.append(COPY_KEY)
    link_key = f"link:{devices}"
    if devices > 1 and link_key not in entries:
        with (phases or turn.free()).alone():
            found = measure_link(platform, budget_s, _best_batch)
        if found is not None:
            entries[link_key] = {**found, "at": now, "key": link_key}
            measured.append(link_key)
    return measured


def _peaks(
    wanted: Sequence[ProbeGemm], entries: Mapping[str, Any], platform: str
) -> dict[str, dict[str, Any]]:
    """Per precision, the best GEMM rate among the wanted shapes and where it was measured."""
    peaks: dict[str, dict[str, Any]] = {}
    for shape in wanted:
        p = precision(platform, shape.x_dtype, shape.w_dtype)
        rate = float(entries[_shape_key(shape)]["flops_per_s"])
        if rate > peaks.get(p, {}).get("flops_per_s", 0.0):
            peaks[p] = {
                "flops_per_s": rate,
                "source": f"best XLA GEMM measured at {shape.m}×{shape.k}×{shape.n} "
                f"({shape.x_dtype} × {shape.w_dtype}); {PRECISION_NOTE[p]}",
            }
    return peaks


def measure(
    environment: dict[str, Any],
    shapes: Iterable[ProbeGemm],
    cache: Path | None,
    remeasure: bool = False,
    budget_s: float = 0.5,
    phases: DeviceTurn | None = None,
) -> dict[str, Any]:
    """Returns ceilings.json: per precision the best GEMM rate found, and the copy bandwidth.

    `cache` (CPU only) holds earlier measurements of this host; entries younger than
    CACHE_MAX_AGE_S are reused unless `remeasure`. `phases`: how the device is shared with
    variants captured meanwhile (none: it is this process's alone).
    """
    platform = str(environment.get("platform"))
    host = _host_key(environment)
    now = time.time()
    cached = read_cache(cache, host, now) if cache is not None and not remeasure else {}
    entries = dict(cached)
    wanted = _wanted_shapes(shapes, square_side(platform))
    devices = int(environment.get("device_count") or 1)
    link_key = f"link:{devices}"
    # The keys measured in this run, not found in the cache.
    measured = _measure_missing(entries, wanted, platform, devices, now, budget_s, phases)
    if cache is not None:
        text = io.dumps({"host": host, "entries": entries})
        io.write_cache_file(cache.parent, cache.name, text.encode())
    peaks = _peaks(wanted, entries, platform)
    oldest = min(float(v.get("at", now)) for v in entries.values())
    link = entries.get(link_key) if devices > 1 else None
    return {
        "device": environment.get("device_kind"),
        "platform": platform,
        "peaks": peaks,
        "peak_bytes_per_s": float(entries[COPY_KEY]["bytes_per_s"]),
        "bytes_source": "best device copy (bytes read + written) measured at capture, over "
        f"batches of back-to-back calls (method {COPY_METHOD})",
        "link_bytes_per_s": float(link["bytes_per_s"]) if link else None,
        "link_source": str(link["source"]) if link else f"{devices} device: no link to measure",
        "measured_at": datetime.datetime.fromtimestamp(oldest, datetime.UTC).isoformat(
            timespec="seconds"
        ),
        "age_s": now - oldest,
        "cache": str(cache) if cache is not None and cached else None,
        "measured": measured,
        # Where variants shared the device meanwhile: when the measurement held it.
        "held": sorted([*phases.compiles, *phases.alone_spans]) if phases is not None else [],
    }
