"""What a variant's capture measures of memory: the compiler's figures and the device's peak.

The device peak is `peak_bytes_in_use` after the steady steps minus `bytes_in_use` before the
first call, per device the variant runs on. XLA's allocator keeps one peak per process and
jax cannot reset it, so the figure is the variant's own only in a process that captured it
alone and measured no ceilings (the GPU's per-variant workers: ceilings are measured after the
capture); otherwise it is not given, and the note says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.records.memory import CompilerMemory, DevicePeak, MeasuredMemory

_FIELDS = (
    ("argument_bytes", "argument_size_in_bytes"),
    ("output_bytes", "output_size_in_bytes"),
    ("temp_bytes", "temp_size_in_bytes"),
    ("generated_code_bytes", "generated_code_size_in_bytes"),
    ("alias_bytes", "alias_size_in_bytes"),
    ("peak_bytes", "peak_memory_in_bytes"),
)


def compiler_memory(compiled: Any) -> CompilerMemory | None:
    """Returns `compiled.memory_analysis()`'s figures, or None where the backend has none."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # a backend that does not implement it
        return None
    if isinstance(stats, list | tuple):
        stats = stats[0] if stats else None
    if stats is None:
        return None

    def value(name: str) -> int | None:
        v = getattr(stats, name, None)
        return int(v) if isinstance(v, int) and v >= 0 else None

    return CompilerMemory(**{ours: value(theirs) for ours, theirs in _FIELDS})


def _stats(device: Any) -> dict[str, Any] | None:
    try:
        found = device.memory_stats()
    except Exception:  # a backend without allocator statistics
        return None
    return found if isinstance(found, dict) else None


def before(devices: Sequence[Any]) -> list[tuple[str, dict[str, Any] | None]]:
    """Reads each device's allocator statistics before the first call."""
    return [(str(d), _stats(d)) for d in devices]


def device_peaks(
    devices: Sequence[Any],
    read_before: list[tuple[str, dict[str, Any] | None]],
    own_process: bool,
) -> tuple[tuple[DevicePeak, ...], str | None]:
    """Returns each device's peak during the variant (after its steady steps), and a note when
    there is none: the CPU reports no allocator statistics; a process shared with other
    variants holds their peak too."""
    if all(s is None for _, s in read_before):
        return (), "no device peak: this backend (the CPU) reports no allocator statistics"
    if not own_process:
        return (), (
            "no device peak: the variant shared its process with others, and XLA's allocator "
            "keeps one peak per process (capture.isolation=per_variant measures it)"
        )
    out = []
    for device, (name, start) in zip(devices, read_before, strict=True):
        end = _stats(device)
        if start is None or end is None:
            out.append(DevicePeak(name, None, None, None, "no allocator statistics"))
            continue
        in_use = start.get("bytes_in_use")
        peak_before = start.get("peak_bytes_in_use")
        peak = end.get("peak_bytes_in_use")
        if not all(isinstance(v, int) for v in (in_use, peak_before, peak)):
            out.append(DevicePeak(name, None, None, None, "no bytes_in_use/peak_bytes_in_use"))
            continue
        note = None
        if peak <= peak_before:
            note = (
                f"the process reached its peak ({peak_before} B) before the first call (making "
                "the inputs): the variant's own peak is at most this figure"
            )
        out.append(DevicePeak(name, peak - in_use, in_use, peak, note))
    return tuple(out), None


def measured(
    compiled: Any,
    devices: Sequence[Any],
    read_before: list[tuple[str, dict[str, Any] | None]],
    own_process: bool,
) -> MeasuredMemory:
    """Returns what the capture measured of a compiled JAX variant's memory."""
    peaks, note = device_peaks(devices, read_before, own_process)
    return MeasuredMemory(compiler=compiler_memory(compiled), devices=peaks, note=note)


def devices_of(args: Sequence[Any]) -> list[Any]:
    """The devices the arguments live on (a sharded variant's: every device of its mesh)."""
    import jax

    found: dict[int, Any] = {}
    for leaf in jax.tree_util.tree_leaves(args):
        for d in getattr(leaf, "devices", lambda: ())():
            found.setdefault(d.id, d)
    return [found[k] for k in sorted(found)] or list(jax.local_devices()[:1])
