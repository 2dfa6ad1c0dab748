"""The memory section of summary.json (schema version 5) and its migration, kept apart from
harness.records.summary, which is over its size limit.

Every figure names its source, because XLA's own figures disagree by design:
- the **peak** is XLA's live-range peak (`*-live-range.txt`, "Stack trace breakdown for peak
  usage"): what is live at once at the worst point of the schedule. It is the study's peak;
- the **total allocation** is the memory-usage report's "Total bytes": every allocation
  added up, values that never live together counted apart;
- `compiled.memory_analysis()` gives the compiler's argument, output, temp, generated-code
  and alias bytes;
- the **device peak** is measured on a GPU around the steady steps.

Version 5 only added keys (`memory`, and the capture record's `memory`), which read as
absent in an older summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.store import io
from harness.store.records import doc, from_json
from harness.store.runfolder import (
    MEMORY_FILE as MEMORY_FILE,  # the run folder's name, for its readers
)

PEAK_SOURCE = "XLA's live-range peak (*-live-range.txt)"
TOTAL_SOURCE = "XLA's memory-usage report, Total bytes (*-memory-usage-report.txt)"
COMPILER_SOURCE = "compiled.memory_analysis()"


@dataclass(frozen=True)
class PeakBuffer:
    """One buffer live at the peak: what it is and where it comes from."""

    value: str = doc("XLA's name of the value: `instruction{shape index}`")
    bytes: int = doc("its size")
    shape: str | None = doc("its shape, from the buffer assignment (`bf16[8192,8192]`)")
    dtype: str | None = doc("its element type (`bf16`; a tuple's index table: `tuple`)")
    instruction: str = doc("the instruction that defines it")
    opcode: str | None = doc("that instruction's opcode")
    cluster: str | None = doc("the cluster (fusion, library call, lone op) it is the output of")
    kind: str | None = doc("its allocation: `parameter`, `output`, `temp`, `constant`, ...")
    source_line: str | None = doc("the user's source line (the rankings' frame resolution)")
    scope: str | None = doc("its named scope (op_name without `jit(...)` and the op)")
    op_name: str | None = doc("the op_name XLA kept, or for an inserted buffer the op it feeds")
    inserted_by: str | None = doc("for a buffer XLA inserted (no op_name): the pass that did")
    feeds: str | None = doc("for an inserted buffer: the instruction and op it feeds")


@dataclass(frozen=True)
class CompilerMemory:
    """`compiled.memory_analysis()`'s figures, each as the compiler named it."""

    argument_bytes: int | None = doc("argument_size_in_bytes")
    output_bytes: int | None = doc("output_size_in_bytes")
    temp_bytes: int | None = doc("temp_size_in_bytes")
    generated_code_bytes: int | None = doc("generated_code_size_in_bytes")
    alias_bytes: int | None = doc("alias_size_in_bytes")
    peak_bytes: int | None = doc("peak_memory_in_bytes (jax's own peak; not the study's)")
    source: str = doc("where they come from", COMPILER_SOURCE)


@dataclass(frozen=True)
class DevicePeak:
    """One device's measured peak during the variant's steady steps."""

    device: str = doc("the device (`cuda:0`)")
    peak_bytes: int | None = doc(
        "`peak_bytes_in_use` after the steady steps minus `bytes_in_use` before the first call "
        "(torch: `torch.cuda.max_memory_allocated` minus the allocation before the first call)"
    )
    in_use_before: int | None = doc("`bytes_in_use` before the first call")
    peak_after: int | None = doc("`peak_bytes_in_use` after the steady steps")
    note: str | None = doc("why the figure is absent or only a bound")


@dataclass(frozen=True)
class MeasuredMemory:
    """What the capture measured (result.json's `memory`): the compiler's and the device's."""

    compiler: CompilerMemory | None = doc("compiled.memory_analysis()")
    devices: tuple[DevicePeak, ...] = doc("the device peak, per device (sharded: each)", ())
    note: str | None = doc("why there is no device peak (the CPU; torch on the CPU)")


@dataclass(frozen=True)
class ModulePeak:
    """One compiled module's live-range peak (eager dispatch runs one per primitive)."""

    module: str = doc("the module")
    peak_bytes: int | None = doc(PEAK_SOURCE)
    total_bytes: int | None = doc(TOTAL_SOURCE)


@dataclass(frozen=True)
class Memory:
    """Where the memory goes: the peak, what is live at it and why, each figure with its source."""

    peak_bytes: int | None = doc(f"the study's peak: {PEAK_SOURCE}")
    peak_source: str | None = doc("where the peak comes from")
    peak_at: int | None = doc("the schedule position of the peak")
    schedule_length: int | None = doc("instructions in the schedule")
    total_bytes: int | None = doc(f"the total allocation, not the peak: {TOTAL_SOURCE}")
    buffers_at_peak: int | None = doc("how many buffers are live at the peak")
    buffers_at_peak_bytes: int | None = doc("their bytes added up (equals the peak)")
    largest: tuple[PeakBuffer, ...] = doc("the 10 largest buffers live at the peak", ())
    compiler: CompilerMemory | None = doc("compiled.memory_analysis()")
    devices: tuple[DevicePeak, ...] = doc("the measured device peak, per device", ())
    modules: tuple[ModulePeak, ...] = doc("eager: each primitive module's peak", ())
    notes: tuple[str, ...] = doc("what is not measured and why", ())


@dataclass(frozen=True)
class MemoryFile:
    """variants/<name>/memory.json: the memory section, every buffer live at the peak, and the
    bytes live over the schedule, so the report needs no dump file (export drops those over
    1 MB)."""

    memory: Memory = doc("the summary's memory section")
    module: str | None = doc("the module the buffers and the timeline are of")
    buffers: tuple[PeakBuffer, ...] = doc("every buffer live at the peak, largest first", ())
    live_bytes: tuple[int, ...] = doc(
        "bytes live over the schedule (both ends of a live range counted, as XLA lists them): "
        "the maximum over each `live_step` positions",
        (),
    )
    live_step: int = doc("schedule positions per `live_bytes` entry", 1)


def read_memory_file(vdir: Path) -> MemoryFile | None:
    """Returns a variant's memory.json, or None when it has none or it is unreadable."""
    path = vdir / MEMORY_FILE
    if not path.is_file():
        return None
    try:
        return from_json(MemoryFile, io.read_json(path), str(path))
    except (OSError, ValueError):
        return None
