"""Memory in the report: the peak per variant and the largest buffers at it.

Reads only what the run wrote: each variant's `memory` summary section and memory.json
(harness.analyze.memory). The memory findings are a rule of the analysis stage
(harness.findings.memory), rendered with the other findings.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.records.memory import read_memory_file
from harness.records.summary import VariantSummary
from harness.report.doc import Block, Heading, Para, Table, code
from harness.saved.run import SavedRun, SavedVariant
from harness.store.runfolder import RunFolder


def peak(s: VariantSummary) -> int | None:
    return s.memory.peak_bytes if s.memory is not None else None


def peak_cell(s: VariantSummary) -> str:
    value = peak(s)
    return fmt.si(value, "B") if value is not None else MISSING


def _buffer_row(b: object) -> tuple[str, ...]:
    origin = getattr(b, "inserted_by", None)
    feeds = getattr(b, "feeds", None)
    made = f"inserted by {origin}; feeds {feeds}" if origin else (getattr(b, "op_name", "") or "")
    return (
        code(getattr(b, "instruction", "")),
        fmt.si(getattr(b, "bytes", None), "B"),
        getattr(b, "shape", None) or MISSING,
        getattr(b, "kind", None) or MISSING,
        f"`{getattr(b, 'source_line', '')}`" if getattr(b, "source_line", None) else MISSING,
        made or MISSING,
    )


def _buffers_table(buffers: Iterable[object]) -> Table:
    """The buffers live at the peak, one row each (a variant's or a module's)."""
    columns = ("buffer", "bytes", "shape", "allocation", "source line", "op (or who inserted it)")
    return Table(columns, tuple(_buffer_row(b) for b in buffers))


def _sources_row(m: object) -> tuple[str, ...]:
    """A variant's peak beside the other sources' figures."""
    c = getattr(m, "compiler", None)
    device = ", ".join(
        f"{d.device}: {fmt.si(d.peak_bytes, 'B')}"
        for d in getattr(m, "devices", ())
        if d.peak_bytes is not None
    )
    notes = getattr(m, "notes", ())
    peak_bytes, total = getattr(m, "peak_bytes", None), getattr(m, "total_bytes", None)
    return (
        fmt.si(peak_bytes, "B") if peak_bytes is not None else MISSING,
        fmt.si(total, "B") if total is not None else MISSING,
        fmt.si(c.temp_bytes, "B") if c and c.temp_bytes is not None else MISSING,
        fmt.si(c.output_bytes, "B") if c and c.output_bytes is not None else MISSING,
        fmt.si(c.argument_bytes, "B") if c and c.argument_bytes is not None else MISSING,
        device or "; ".join(notes[:1]) or MISSING,
    )


SOURCES = (
    "**Peak**: XLA's live-range peak, what is live at once (the summary's peak memory). **Total "
    "allocation**: the memory-usage report's total (not the peak). **Temp, output, argument**: "
    "`compiled.memory_analysis()`. **Device peak**: the allocator's peak over the steady steps."
)


def memory_blocks(run: SavedRun) -> list[Block]:
    """The leading page's Memory section: what the peaks are, and the largest and smallest
    beside the baseline's; each variant's page has its figures and the buffers at its peak."""
    peaks = [(v, p) for v in run.variants if (p := peak(v.summary)) is not None]
    if not peaks:
        return []
    high = max(peaks, key=lambda x: x[1])
    low = min(peaks, key=lambda x: x[1])
    base = run.variant(run.baseline)
    line = (
        f"Largest peak `{high[0].name}` {fmt.si(high[1], 'B')}, smallest `{low[0].name}` "
        f"{fmt.si(low[1], 'B')}"
        + (
            f", the baseline `{base.name}` {peak_cell(base.summary)}"
            if base is not None and peak(base.summary) is not None
            else ""
        )
        + ". Each variant's page has its figures by source and the buffers live at its peak."
    )
    return [Heading(2, "Memory", "memory"), Para(line), Para(SOURCES)]


def variant_memory_blocks(v: SavedVariant) -> list[Block]:
    """A variant's page's Memory section: its peak beside the other sources, and the largest
    buffers live at the peak, by source line."""
    m = v.summary.memory
    if m is None:
        return []
    out: list[Block] = [
        Heading(2, "Memory", "memory"),
        Para(SOURCES),
        Table(
            ("peak", "total allocation", "temp", "output", "argument", "device peak"),
            (_sources_row(m),),
        ),
    ]
    if m.largest:
        out += [
            Para(
                f"The {len(m.largest)} largest of {m.buffers_at_peak} buffers live at the peak "
                f"(position {m.peak_at} of {m.schedule_length}):"
            ),
            _buffers_table(m.largest),
        ]
    return out


def memory_pair(run: SavedRun) -> tuple[SavedVariant, SavedVariant] | None:
    """The baseline and the variant whose peak differs most from it, for the live-bytes plot."""
    base = run.variant(run.baseline)
    if base is None or peak(base.summary) is None:
        return None
    others = [
        v
        for v in run.variants
        if v is not base and peak(v.summary) is not None and v.same_size(base)
    ]
    if not others:
        return None
    far = max(others, key=lambda v: abs((peak(v.summary) or 0) - (peak(base.summary) or 0)))
    return base, far


def live_series(run: SavedRun, v: SavedVariant) -> tuple[tuple[int, ...], int]:
    """A variant's live bytes over the schedule from its memory.json, and positions per point."""
    found = read_memory_file(RunFolder(run.path).variant(v.name).root)
    return (found.live_bytes, found.live_step) if found is not None else ((), 1)


def module_blocks(found: list[tuple[str, object]]) -> list[Block]:
    """`python -m harness.analyze`'s Memory section: per module (key, ModuleMemory) the peak
    and total with their sources, and the 10 largest buffers at the peak."""
    out: list[Block] = [Heading(2, "Memory", "memory")]
    for key, m in found:
        peak_bytes, total = getattr(m, "peak_bytes", None), getattr(m, "total_bytes", None)
        buffers = getattr(m, "buffers", ())
        out.append(
            Para(
                f"`{key}`: peak {fmt.si(peak_bytes, 'B')} (XLA's live-range peak, position "
                f"{getattr(m, 'peak_at', None)}); total allocation "
                f"{fmt.si(total, 'B') if total is not None else MISSING} (memory-usage report, "
                f"Total bytes); {len(buffers)} buffers live at the peak"
            )
        )
        if buffers:
            out.append(_buffers_table(buffers[:10]))
    return out if found else []
