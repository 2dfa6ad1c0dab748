"""XLA's memory files read into frozen records: live ranges, the buffer assignment and the
memory-usage report of one compiled module.

XLA writes three files beside the optimized module (`--xla_dump_to`, on the CPU and the GPU):

    *-live-range.txt            the schedule, each value's live range, the values live at the
                                peak and the peak itself ("Stack trace breakdown for peak usage")
    *-buffer-assignment.txt     each allocation and the values it holds, with their shapes
    *-memory-usage-report.txt   per memory space, "Total bytes": every allocation added up

They disagree by design: the report's total is the allocation (values that share a slice
count once, values never live together count apart), the live-range peak is what is live at
once. The study's peak is the live-range one (harness.analyze.memory names every source).

Every parser is pure and raises ValueError naming the file and the line it could not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Bounds, so that a doctored file costs bounded work (real modules stay far below).
MAX_VALUES = 1_000_000
MAX_BYTES = 1 << 60

_HEADER = re.compile(r"^HloLiveRange \(max (\d{1,12})\):\s*$")
_SCHEDULED = re.compile(r"^\s+(\d{1,12}):(\S{1,1024})\s*$")
_RANGE = re.compile(r"^\s+(\S{1,1024}\{[\d,]{0,256}\}):(\d{1,12})-(\d{1,12})\s*$")
_PEAK_AT = re.compile(r"^\s+Live ranges at (\d{1,12}) \(peak\):\s*$")
_PEAK_VALUE = re.compile(r"^\s+(\S{1,1024}\{[\d,]{0,256}\}): (\d{1,20}) bytes \(cumulative")
_PEAK_TOTAL = re.compile(r"^\s+Stack trace breakdown for peak usage: ([\d ]{1,40}) bytes\s*$")
# An allocation holding a program's output tuple names every shape of it: lines of tens of kB.
_ALLOCATION = re.compile(r"^allocation (\d{1,12}): size (\d{1,20}), (.{0,1000000})$")
_VALUE = re.compile(
    # A value merged at a control-flow join prints ` (phi)` after its name.
    r"^ value: <(\d{1,12}) (\S{1,1024}?)(\{[\d,]{0,256}\})?(?: \([a-z]{1,16}\))? @\d{1,6}> "
    r"\(size=(\d{1,20}),offset=(\d{1,20})\): (.{1,1000000})$"
)
_SPACE = re.compile(r"^Memory Space: (.{1,256})$")
_TOTAL = re.compile(r"^Total bytes: (\d{1,20})\b")


@dataclass(frozen=True)
class LiveRange:
    """One value's live range: live from schedule position `start` to `end`, both included."""

    value: str  # `instruction{shape index}`, as XLA names it: `custom-call.6{0}`, `x.1{}`
    start: int
    end: int


@dataclass(frozen=True)
class LiveRanges:
    """What `*-live-range.txt` says: the schedule, the live ranges, and the peak."""

    schedule: tuple[str, ...]
    ranges: tuple[LiveRange, ...]
    peak_at: int | None
    at_peak: tuple[tuple[str, int], ...]  # (value, bytes), as XLA lists them (largest first)
    peak_bytes: int | None  # XLA's own figure, "Stack trace breakdown for peak usage"


@dataclass(frozen=True)
class Value:
    """One value of the buffer assignment: its allocation, size and shape."""

    value: str  # `instruction{shape index}`, the live-range file's name
    instruction: str
    allocation: int
    size: int
    offset: int
    shape: str  # `bf16[8192,8192]` (layout dropped); a tuple's `(…)`


@dataclass(frozen=True)
class Allocation:
    """One allocation: its size and what kind it is (`parameter`, `output`, `constant`,
    `temp`, `thread-local` or `other`)."""

    index: int
    size: int
    kind: str


@dataclass(frozen=True)
class BufferAssignment:
    allocations: tuple[Allocation, ...]
    values: tuple[Value, ...]

    def by_value(self) -> dict[str, Value]:
        return {v.value: v for v in self.values}

    def kinds(self) -> dict[int, str]:
        return {a.index: a.kind for a in self.allocations}


@dataclass(frozen=True)
class MemoryUsage:
    """What `*-memory-usage-report.txt` says: "Total bytes" per memory space, in file order."""

    spaces: tuple[tuple[str, int], ...]

    @property
    def total_bytes(self) -> int | None:
        """The default memory space's total (the first the report lists)."""
        return self.spaces[0][1] if self.spaces else None


def _bad(path: str, number: int, what: str, line: str) -> ValueError:
    return ValueError(f"{path}:{number}: {what}: {line.strip()[:120]!r}")


def _int(text: str, path: str, number: int, line: str) -> int:
    value = int(text.replace(" ", ""))
    if value > MAX_BYTES:
        raise _bad(path, number, "a size beyond any device", line)
    return value


def parse_live_range(text: str, path: str = "<live-range>") -> LiveRanges:
    """Returns the live ranges of one `*-live-range.txt`; raises ValueError naming the file
    and line when it is not one."""
    lines = text.splitlines()
    if not lines or not _HEADER.match(lines[0]):
        raise ValueError(f"{path}:1: not an XLA live-range file (no 'HloLiveRange (max N):')")
    schedule: list[str] = []
    ranges: list[LiveRange] = []
    at_peak: list[tuple[str, int]] = []
    peak_at: int | None = None
    peak_bytes: int | None = None
    part = ""
    for number, line in enumerate(lines[1:], 2):
        stripped = line.strip()
        if stripped in ("InstructionSequence:", "BufferLiveRange:"):
            part = stripped
            continue
        if m := _PEAK_AT.match(line):
            part, peak_at = "peak", int(m[1])
            continue
        if m := _PEAK_TOTAL.match(line):
            part, peak_bytes = "stack", _int(m[1], path, number, line)
            continue
        if part == "stack" or not stripped:
            continue  # the stack-trace tree: the same bytes by op_name, read from the HLO instead
        if len(schedule) + len(ranges) + len(at_peak) > MAX_VALUES:
            raise _bad(path, number, f"more than {MAX_VALUES} entries", line)
        if part == "InstructionSequence:" and (m := _SCHEDULED.match(line)):
            schedule.append(m[2])
        elif part == "BufferLiveRange:" and (m := _RANGE.match(line)):
            ranges.append(LiveRange(m[1], int(m[2]), int(m[3])))
        elif part == "peak" and (m := _PEAK_VALUE.match(line)):
            at_peak.append((m[1], _int(m[2], path, number, line)))
        else:
            raise _bad(path, number, f"unreadable line in {part or 'the header'}", line)
    return LiveRanges(tuple(schedule), tuple(ranges), peak_at, tuple(at_peak), peak_bytes)


def _allocation_kind(rest: str) -> str:
    if "parameter" in rest:
        return "parameter"
    if "maybe-live-out" in rest or "output shape" in rest:
        return "output"
    if "constant" in rest:
        return "constant"
    if "thread-local" in rest:
        return "thread-local"
    if "temp" in rest:
        return "temp"
    return "other"


def _shape(text: str) -> str:
    """`bf16[8192,8192]{1,0}` -> `bf16[8192,8192]`: the layout says nothing of the size."""
    return re.sub(r"\{[\d,]*\}", "", text.strip())


def parse_buffer_assignment(text: str, path: str = "<buffer-assignment>") -> BufferAssignment:
    """Returns the allocations and values of one `*-buffer-assignment.txt`; raises ValueError
    naming the file and line when it is not one. Only the `BufferAssignment:` part is read
    (what follows, per-value details and the memory stats, repeats it)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "BufferAssignment:":
        raise ValueError(f"{path}:1: not an XLA buffer assignment (no 'BufferAssignment:')")
    allocations: list[Allocation] = []
    values: list[Value] = []
    for number, line in enumerate(lines[1:], 2):
        if m := _ALLOCATION.match(line):
            size = _int(m[2], path, number, line)
            allocations.append(Allocation(int(m[1]), size, _allocation_kind(m[3])))
        elif m := _VALUE.match(line):
            if not allocations:
                raise _bad(path, number, "a value before any allocation", line)
            index = m[3] or "{}"
            size, offset = _int(m[4], path, number, line), _int(m[5], path, number, line)
            at = allocations[-1].index
            values.append(Value(m[2] + index, m[2], at, size, offset, _shape(m[6])))
        elif line.startswith(("allocation ", " value:")):
            raise _bad(path, number, "unreadable allocation or value", line)
        elif line.strip() and not line.startswith(" "):
            break  # the end of the allocation list ("Total bytes used:", "Used values:", ...)
        if len(values) + len(allocations) > MAX_VALUES:
            raise _bad(path, number, f"more than {MAX_VALUES} entries", line)
    return BufferAssignment(tuple(allocations), tuple(values))


def parse_memory_usage(text: str, path: str = "<memory-usage-report>") -> MemoryUsage:
    """Returns each memory space's "Total bytes" from one `*-memory-usage-report.txt`; raises
    ValueError naming the file when it holds none."""
    spaces: list[tuple[str, int]] = []
    space = "default"
    for number, line in enumerate(text.splitlines(), 1):
        if m := _SPACE.match(line):
            space = m[1].strip()
        elif m := _TOTAL.match(line):
            spaces.append((space, _int(m[1], path, number, line)))
    if not spaces:
        raise ValueError(f"{path}: not an XLA memory-usage report (no 'Total bytes:')")
    return MemoryUsage(tuple(spaces))


def live_bytes(ranges: LiveRanges, sizes: dict[str, int]) -> tuple[int, ...]:
    """Returns the bytes live at each schedule position (both ends of a range included, as
    XLA counts them), from each value's size (`sizes`, by value name). A difference array:
    linear in values plus positions, however long the ranges."""
    length = max([len(ranges.schedule), *(r.end + 1 for r in ranges.ranges)], default=0)
    length = min(length, MAX_VALUES)
    delta = [0] * (length + 1)
    for r in ranges.ranges:
        size = sizes.get(r.value, 0)
        start, end = min(r.start, length), min(r.end, length - 1)
        if size and start <= end:
            delta[start] += size
            delta[end + 1] -= size
    out, live = [], 0
    for d in delta[:length]:
        live += d
        out.append(live)
    return tuple(out)
