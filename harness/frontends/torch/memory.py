"""A PyTorch variant's memory: torch.cuda's allocator peak over the capture."""

from __future__ import annotations

from harness.records.memory import DevicePeak, MeasuredMemory


def before(device: str) -> int | None:
    """On CUDA: resets torch's peak and returns the bytes allocated before the first call."""
    if device != "cuda":
        return None
    import torch

    torch.cuda.reset_peak_memory_stats()
    return int(torch.cuda.memory_allocated())


def measured(device: str, start: int | None) -> MeasuredMemory:
    """Returns a torch variant's memory: `torch.cuda.max_memory_allocated` over the capture
    minus what was allocated before it, or on the CPU a note that it is not measured."""
    if device != "cuda" or start is None:
        return MeasuredMemory(note="memory is not measured for PyTorch variants on the CPU")
    import torch

    peak = int(torch.cuda.max_memory_allocated())
    name = f"cuda:{torch.cuda.current_device()}"
    return MeasuredMemory(devices=(DevicePeak(name, peak - start, start, peak, None),))
