"""Where the memory goes: a compiled module's peak, the buffers live at it and why.

Reads XLA's live ranges, buffer assignment and memory-usage report (harness.hlo.memory)
beside the optimized module, and names each buffer live at the peak by its defining
instruction, its cluster, its source line and named scope (the rankings' frame resolution,
harness.program.sources). A buffer XLA inserted carries no op_name; it is named by the pass
that inserted it and the op it feeds.

Shared by the run's analysis (the `memory` section and memory.json of every compiled JAX
variant) and by `python -m harness.analyze` on any dump folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from harness.common import userfiles
from harness.hlo import memory as xm
from harness.hlo.instruction import Instruction
from harness.hlo.parser import HloModule
from harness.program import modules as hlo_files
from harness.program.sources import Frames, cluster_lines, scope_of
from harness.records import ladder
from harness.records.memory import (
    MEMORY_FILE,
    PEAK_SOURCE,
    MeasuredMemory,
    Memory,
    MemoryFile,
    ModulePeak,
    PeakBuffer,
)
from harness.store import io
from harness.store.records import to_json

TOP_BUFFERS = 10
TIMELINE_POINTS = 400
# Instructions that define no new data: a buffer of theirs is named after what they forward.
_FORWARDS = frozenset({"bitcast", "get-tuple-element", "tuple", "copy-start", "copy-done"})
_NO_SOURCE = frozenset({"parameter", "constant"})
# The pass that inserts an op without metadata, by the op (XLA's pass names).
_INSERTING_PASS = {
    "convert": "float-normalization",
    "copy": "copy-insertion",
    "transpose": "layout-assignment",
    "broadcast": "algsimp",
    "reshape": "layout-assignment",
}


@dataclasses.dataclass(frozen=True)
class ModuleMemory:
    """One module's memory: the live-range peak, every buffer at it, and the live bytes."""

    module: str
    peak_bytes: int | None
    peak_at: int | None
    schedule_length: int
    total_bytes: int | None
    buffers: tuple[PeakBuffer, ...]
    live_bytes: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class MemoryFiles:
    """The memory files XLA wrote beside one optimized module (None: not dumped)."""

    after: Path
    live_range: Path | None
    buffer_assignment: Path | None
    memory_usage: Path | None


def dump_files(after: Path) -> MemoryFiles:
    """The memory files beside an optimized module in XLA's dump folder (same prefix)."""
    stem = after.name.removesuffix(".txt")

    def beside(suffix: str) -> Path | None:
        path = after.with_name(f"{stem}-{suffix}.txt")
        return path if userfiles.is_file(path) else None

    return MemoryFiles(
        after, beside("live-range"), beside("buffer-assignment"), beside("memory-usage-report")
    )


def ladder_files(lad: ladder.Ladder) -> list[MemoryFiles]:
    """The memory files of a ladder's optimized modules: one, or one per eager primitive
    (files of the same name in each stage's folder)."""
    found = []
    for after in lad.hlo_files("hlo_after"):
        paths = []
        for stage in ("live_range", "buffer_assignment", "memory_usage"):
            base = lad.path(stage)
            if base is None:
                paths.append(None)
            elif base.is_dir():
                path = base / after.name
                paths.append(path if userfiles.is_file(path) else None)
            else:
                paths.append(base)
        found.append(MemoryFiles(after, *paths))
    return found


def _dtype(shape: str | None) -> str | None:
    if not shape:
        return None
    return "tuple" if shape.startswith("(") else shape.split("[", 1)[0]


def _inner_op(module: HloModule, inst: Instruction) -> Instruction:
    """A fusion XLA's fusion wrapper made around one op (`wrapped_convert`): that op."""
    if inst.opcode == "fusion" and inst.name.startswith("wrapped_"):
        for name in inst.called_computations:
            comp = module.computations.get(name)
            root = comp.root if comp is not None else None
            if root is not None:
                return root
    return inst


def inserting_pass(module: HloModule, inst: Instruction, operand_dtype: str | None) -> str:
    """The pass that inserted an instruction without metadata, named from the op it holds:
    a convert from bf16 is float normalization's upcast of an op the backend runs in f32."""
    inner = _inner_op(module, inst)
    name = _INSERTING_PASS.get(inner.opcode, f"an XLA pass (a {inner.opcode} without op_name)")
    if inner.opcode == "convert" and operand_dtype in ("bf16", "f16"):
        name = f"float-normalization-{operand_dtype}"
    if inner is not inst:
        name += ", wrapped in a fusion by fusion-wrapper"
    return name


class _Users:
    """Each instruction's readers, by name, within its computation."""

    def __init__(self, module: HloModule) -> None:
        self.by_name: dict[str, Instruction] = {}
        self.users: dict[str, list[Instruction]] = {}
        for comp, inst in module.instructions():
            self.by_name.setdefault(inst.name, inst)
            for operand in inst.operands:
                base = operand.partition("#")[0].lstrip("%")
                self.users.setdefault(base, []).append(inst)
            del comp

    def fed(self, name: str) -> Instruction | None:
        """The first reader with an op_name, looking through forwarding instructions."""
        queue, seen = [name], {name}
        while queue:
            for user in self.users.get(queue.pop(0), ()):
                if user.op_name and user.opcode not in _FORWARDS:
                    return user
                if user.name not in seen and len(seen) < 64:
                    seen.add(user.name)
                    queue.append(user.name)
        return None


def _op(op_name: str) -> str:
    return op_name.rsplit("/", 1)[-1]


@dataclasses.dataclass(frozen=True)
class _Origin:
    """Where a buffer at the peak comes from: the op_name it carries (or that of the op it
    feeds, for an instruction a pass inserted), its source line, the pass that inserted it,
    and the reader it feeds ("name (op)")."""

    op_name: str = ""
    line: str | None = None
    inserted_by: str | None = None
    feeds: str | None = None


@dataclasses.dataclass(frozen=True)
class _Sources:
    """What `buffers_at_peak` resolves each buffer's origin from, built once per module."""

    module: HloModule
    lines: Mapping[str, tuple[str, ...]]
    frames: Frames
    users: _Users
    values: Mapping[str, xm.Value]

    def origin(self, inst: Instruction, cluster: str | None) -> _Origin:
        """Where `inst`'s buffer comes from: its cluster's first source line, else its own;
        an instruction without op_name that a pass inserted is named by the op it feeds."""
        line: str | None = None
        if cluster is not None:
            line = (self.lines.get(cluster) or (None,))[0]
        if line is None and inst.opcode not in _NO_SOURCE:
            line = self.frames.line_of(inst)
        if inst.op_name or inst.opcode in _NO_SOURCE | _FORWARDS:
            return _Origin(inst.op_name, line)
        return self._inserted(inst, line)

    def _inserted(self, inst: Instruction, line: str | None) -> _Origin:
        operand = (
            self.values.get(inst.operands[0].partition("#")[0] + "{}") if inst.operands else None
        )
        inserted_by = inserting_pass(self.module, inst, _dtype(operand.shape) if operand else None)
        reader = self.users.fed(inst.name)
        if reader is None:
            return _Origin(inst.op_name, line, inserted_by)
        feeds = f"{reader.name} ({_op(reader.op_name)})"
        return _Origin(reader.op_name, line or self.frames.line_of(reader), inserted_by, feeds)


def buffers_at_peak(
    module: HloModule, live: xm.LiveRanges, assignment: xm.BufferAssignment | None
) -> tuple[PeakBuffer, ...]:
    """Returns every buffer live at the peak, largest first, each named and placed."""
    clusters = hlo_files.clusters_of(module)
    names = {c.name for c in clusters}
    users = _Users(module)
    values = assignment.by_value() if assignment is not None else {}
    kinds = assignment.kinds() if assignment is not None else {}
    # Frames: the rankings' own resolution, one cache for the module.
    sources = _Sources(module, cluster_lines(module, clusters), Frames(module), users, values)
    out = []
    for value, size in live.at_peak:
        instruction = value.split("{", 1)[0]
        inst = users.by_name.get(instruction)
        found = values.get(value)
        shape = found.shape if found is not None else None
        cluster = instruction if instruction in names else None
        origin = sources.origin(inst, cluster) if inst is not None else _Origin()
        op_name = origin.op_name
        scope = (
            scope_of(op_name)
            if op_name and inst is not None and inst.opcode not in _NO_SOURCE
            else None
        )
        out.append(
            PeakBuffer(
                value=value,
                bytes=size,
                shape=shape,
                dtype=_dtype(shape),
                instruction=instruction,
                opcode=inst.opcode if inst is not None else None,
                cluster=cluster,
                kind=kinds.get(found.allocation) if found is not None else None,
                source_line=origin.line,
                scope=scope or None,
                op_name=op_name or None,
                inserted_by=origin.inserted_by,
                feeds=origin.feeds,
            )
        )
    return tuple(sorted(out, key=lambda b: (-b.bytes, b.value)))


Report = TypeVar("Report")  # one of XLA's memory reports, parsed


def _parsed(path: Path | None, parse: Callable[[str, str], Report]) -> Report | None:
    """`parse` of one of XLA's memory reports (its text and its path, for the errors), or
    None where the dump has no such file."""
    if path is None:
        return None
    return parse(userfiles.read_text(path, userfiles.DUMP, errors="replace"), str(path))


def module_memory(files: MemoryFiles) -> ModuleMemory | None:
    """Returns one module's memory, or None when XLA wrote no live ranges for it. Raises
    ValueError naming the file that is not what XLA writes."""
    live = _parsed(files.live_range, xm.parse_live_range)
    if live is None:
        return None
    assignment = _parsed(files.buffer_assignment, xm.parse_buffer_assignment)
    usage = _parsed(files.memory_usage, xm.parse_memory_usage)
    module = hlo_files.parsed(files.after)
    sizes = {v.value: v.size for v in assignment.values} if assignment is not None else {}
    sizes.update(dict(live.at_peak))
    peak = live.peak_bytes if live.peak_bytes is not None else sum(b for _, b in live.at_peak)
    return ModuleMemory(
        module=module.name,
        peak_bytes=peak,
        peak_at=live.peak_at,
        schedule_length=len(live.schedule),
        total_bytes=usage.total_bytes if usage is not None else None,
        buffers=buffers_at_peak(module, live, assignment),
        live_bytes=xm.live_bytes(live, sizes),
    )


def downsampled(
    values: Sequence[int], points: int = TIMELINE_POINTS
) -> tuple[tuple[int, ...], int]:
    """Returns (the maximum over each window, the window), at most `points` windows: the peak
    survives any downsampling."""
    step = max(1, -(-len(values) // points))
    return tuple(max(values[i : i + step]) for i in range(0, len(values), step)), step


def section(
    found: Sequence[ModuleMemory], measured: MeasuredMemory | None, eager: bool
) -> tuple[Memory, ModuleMemory | None]:
    """Returns the memory section of a variant's modules (eager: one per primitive; the peak
    is the largest module's), and the module its buffers are of."""
    notes: list[str] = []
    if measured is not None and measured.note:
        notes.append(measured.note)
    top = max(found, key=lambda m: m.peak_bytes or 0, default=None)
    if top is None:
        notes.append("XLA wrote no live ranges for this variant's module")
    if eager and top is not None:
        notes.append(
            "eager: one module per primitive; the peak is the largest module's, not counting "
            "the arrays held between primitives"
        )
    memory = Memory(
        peak_bytes=top.peak_bytes if top else None,
        peak_source=PEAK_SOURCE if top else None,
        peak_at=top.peak_at if top else None,
        schedule_length=top.schedule_length if top else None,
        total_bytes=top.total_bytes if top else None,
        buffers_at_peak=len(top.buffers) if top else None,
        buffers_at_peak_bytes=sum(b.bytes for b in top.buffers) if top else None,
        largest=top.buffers[:TOP_BUFFERS] if top else (),
        compiler=measured.compiler if measured else None,
        devices=measured.devices if measured else (),
        modules=tuple(ModulePeak(m.module, m.peak_bytes, m.total_bytes) for m in found)
        if eager
        else (),
        notes=tuple(notes),
    )
    return memory, top


def memory_file(memory: Memory, top: ModuleMemory | None) -> MemoryFile:
    live, step = downsampled(top.live_bytes) if top is not None else ((), 1)
    return MemoryFile(
        memory=memory,
        module=top.module if top else None,
        buffers=top.buffers if top else (),
        live_bytes=live,
        live_step=step,
    )


def variant_memory(
    vdir: Path, lad: ladder.Ladder, op_by_op: bool, measured: MeasuredMemory | None
) -> Memory:
    """Returns a JAX variant's memory section and writes its memory.json."""
    found = [m for f in ladder_files(lad) if (m := module_memory(f)) is not None]
    memory, top = section(found, measured, op_by_op)
    io.write_json(vdir / MEMORY_FILE, to_json(memory_file(memory, top)), compact=True)
    return memory


def measured_only(measured: MeasuredMemory | None) -> Memory | None:
    """Returns the memory section of a variant without XLA's files (PyTorch): what the
    capture measured, or None when it measured nothing."""
    if measured is None:
        return None
    return Memory(
        compiler=measured.compiler,
        devices=measured.devices,
        notes=(measured.note,) if measured.note else (),
    )
