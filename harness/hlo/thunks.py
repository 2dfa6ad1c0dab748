"""XLA:GPU's thunk files, read into what each command buffer holds.

XLA runs a GPU program as CUDA-graph command buffers by default, and then every profile event
says only `hlo_op=command_buffer_N`. Two dump files say what such a buffer holds:

- `module_*.thunk_sequence_after_thunk_passes.txt`: each `kCommandBuffer` (a line at the top
  level) and, indented below it, its commands in order: `NNN: <kind> [prev=PPP (d) | next=QQQ
  (d)] <kernel> grid: [...] threads: [...]`. XLA's own kernels carry the name they launch
  (`fusion_277`; a kernel XLA compiled once for several identical fusions carries the one
  name); library calls carry only their kind (`kCublasLtMatmul`, `kCuDnn`). Each side of the
  brackets prints one edge of the command DAG (`source`/`sink` when there is none), so the
  edges read here are a subset of the DAG's: orders they allow may be too many, never too few.
- `module_*.thunk_metadata.txt`: one `thunk_metadata { thunk_info { profile_annotation,
  thunk_id } thunk_kind }` per thunk, in sequence order: the HLO instruction of every command
  (`custom-call.6` for thunk 11, a `kCublasLtMatmul`), library calls included. Command number
  NNN is its `thunk_id`; the k-th `kCommandBuffer` thunk names the k-th buffer.

Pure functions over the files' text; `read_command_buffers` is the edge that reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness import userfiles

SEQUENCE_SUFFIX = "thunk_sequence_after_thunk_passes.txt"
METADATA_SUFFIX = "thunk_metadata.txt"
MAX_THUNK_FILE = 64 * 1024 * 1024  # bytes; a thunk file of a large program is well under 1 MB

_LINE = re.compile(
    r"^(?P<indent> *)(?P<id>\d{1,9}): (?P<kind>k\w{1,64})\s*\[(?P<prev>[^|\]]*)\|(?P<next>[^\]]*)\]"
    r"\s*(?P<rest>.*)$"
)
_EDGE = re.compile(r"(?:prev|next)=(\d{1,9})")
_TRIPLE = re.compile(r"(grid|threads): \[(\d+), (\d+), (\d+)\]")
_BLOCK = re.compile(r"thunk_metadata \{(?P<body>.*?)\n\}", re.S)
_ANNOTATION = re.compile(r'profile_annotation: "(?P<a>(?:[^"\\]|\\.)*)"')
_THUNK_ID = re.compile(r"thunk_id: (\d{1,9})")
_THUNK_KIND = re.compile(r'thunk_kind: "(\w{1,64})"')
# Commands whose bodies run a variable number of times: the DAG cannot order their events.
CONTROL_FLOW_KINDS = frozenset({"kWhile", "kConditional", "kDynamicSliceFusion", "kCommandBuffer"})


@dataclass(frozen=True)
class Command:
    """One command of a command buffer: its thunk id, kind, the kernel it launches (None for a
    library call), launch shape, DAG neighbours as printed, and its HLO instruction."""

    index: int
    kind: str
    kernel: str | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    prev: tuple[int, ...]
    next: tuple[int, ...]
    instruction: str | None
    nested: bool = False  # inside a control-flow command of the buffer


@dataclass(frozen=True)
class CommandBuffer:
    """A `kCommandBuffer` thunk: the name its events carry as `hlo_op` and its commands."""

    name: str
    commands: tuple[Command, ...]

    @property
    def has_control_flow(self) -> bool:
        """True when a command runs a body (while, conditional): its events repeat, so the
        buffer's events are matched by name, not placed on the DAG."""
        return any(c.nested or c.kind in CONTROL_FLOW_KINDS for c in self.commands)


@dataclass(frozen=True)
class ThunkInfo:
    """One `thunk_metadata` entry: the thunk's HLO instruction, id (None for containers) and kind."""

    annotation: str | None
    thunk_id: int | None
    kind: str


def parse_metadata(text: str, source: str) -> tuple[ThunkInfo, ...]:
    """Returns every thunk_metadata entry in file order; raises ValueError naming `source`."""
    out = []
    for n, m in enumerate(_BLOCK.finditer(text)):
        body = m["body"]
        kind = _THUNK_KIND.search(body)
        if kind is None:
            raise ValueError(f"{source}: thunk_metadata entry {n} has no thunk_kind")
        ann = _ANNOTATION.search(body)
        tid = _THUNK_ID.search(body)
        out.append(
            ThunkInfo(ann["a"] if ann else None, int(tid.group(1)) if tid else None, kind.group(1))
        )
    if text.strip() and not out:
        raise ValueError(f"{source}: no thunk_metadata entries")
    return tuple(out)


def _triple(rest: str, key: str) -> tuple[int, int, int] | None:
    for m in _TRIPLE.finditer(rest):
        if m.group(1) == key:
            return (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return None


def parse_sequence(
    text: str, source: str, metadata: tuple[ThunkInfo, ...] = ()
) -> tuple[CommandBuffer, ...]:
    """Returns the command buffers of a thunk sequence, each command with the HLO instruction
    `metadata` gives its thunk id. Raises ValueError naming `source` and the line."""
    by_id = {t.thunk_id: t for t in metadata if t.thunk_id is not None}
    buffer_names = [t.annotation for t in metadata if t.kind == "kCommandBuffer"]
    buffers: list[CommandBuffer] = []
    current: list[Command] | None = None
    top_indent = child_indent = 0

    def close() -> None:
        if current is not None:
            k = len(buffers)
            name = buffer_names[k] if k < len(buffer_names) and buffer_names[k] else None
            buffers.append(CommandBuffer(name or f"command_buffer_{k + 1}", tuple(current)))

    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"{source}: line {lineno}: not a thunk line: {line[:80]!r}")
        indent = len(m["indent"])
        if current is not None and indent > top_indent:
            child_indent = child_indent or indent
            rest = m["rest"].strip()
            name = rest.split(" ", 1)[0] if rest else ""
            tid = int(m["id"])
            info = by_id.get(tid)
            if info is not None and info.kind != m["kind"]:
                raise ValueError(
                    f"{source}: line {lineno}: thunk {tid} is {m['kind']} but "
                    f"thunk_metadata says {info.kind}"
                )
            current.append(
                Command(
                    index=tid,
                    kind=m["kind"],
                    kernel=name if name and name != m["kind"] else None,
                    grid=_triple(rest, "grid"),
                    block=_triple(rest, "threads"),
                    prev=tuple(int(x) for x in _EDGE.findall(m["prev"])),
                    next=tuple(int(x) for x in _EDGE.findall(m["next"])),
                    instruction=info.annotation if info is not None else None,
                    nested=indent > child_indent,
                )
            )
            continue
        close()
        current = [] if m["kind"] == "kCommandBuffer" else None
        top_indent, child_indent = indent, 0
    close()
    return tuple(buffers)


def _read(path: Path) -> str:
    return userfiles.read_text(
        path, userfiles.Kind("thunk sequence", MAX_THUNK_FILE), errors="replace"
    )  # Unreadable is a ValueError naming the file


def read_command_buffers(sequence: Path, metadata: Path | None) -> tuple[CommandBuffer, ...]:
    """Returns the command buffers of one module from its two thunk files (no metadata: the
    commands know no instruction). Raises ValueError naming the file."""
    infos = parse_metadata(_read(metadata), str(metadata)) if metadata is not None else ()
    return parse_sequence(_read(sequence), str(sequence), infos)


def thunk_files(after_optimizations: Path, key: str) -> tuple[Path | None, Path | None]:
    """Returns (sequence after thunk passes, metadata) beside a module's optimized HLO in an
    XLA dump folder (`<key>.<suffix>`, key being `module_NNNN.<name>`), None where absent."""
    folder = after_optimizations.parent
    found = []
    for suffix in (SEQUENCE_SUFFIX, METADATA_SUFFIX):
        path = folder / f"{key}.{suffix}"
        found.append(path if path.is_file() and not path.is_symlink() else None)
    return found[0], found[1]
