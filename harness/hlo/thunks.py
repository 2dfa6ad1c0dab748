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

The sequence nests (`parse_tree`): a `kWhile` prints `condition:` and `body:` blocks, a
`kConditional` its `branch_N:` blocks, and a command buffer, an async start
(`stream=computation_stream[i]`) or a `kDynamicSliceFusion` the thunks it runs, indented below
it; a command buffer may sit in a while body. A line the reader does not know is skipped and
counted (`ThunkTree.skipped`), never a stop. Each `kCommandBuffer`, wherever it sits, becomes a
`CommandBuffer` of every thunk below it, each command knowing the while or conditional block it
sits in (`owner`, `branch`).

Pure functions over the files' text; `read_command_buffers` is the edge that reads them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.common import userfiles

log = logging.getLogger(__name__)

SEQUENCE_SUFFIX = "thunk_sequence_after_thunk_passes.txt"
METADATA_SUFFIX = "thunk_metadata.txt"
MAX_THUNK_FILE = 64 * 1024 * 1024  # bytes; a thunk file of a large program is well under 1 MB
# Read by its own name compressed or not: a study gzips its ir/ in place once captured.
THUNK_FILE = userfiles.Kind("thunk file", MAX_THUNK_FILE, gzipped_beside=True)

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
    nested: bool = False  # inside a control-flow or wrapper command of the buffer
    owner: int | None = None  # the while or conditional whose block holds it
    branch: str | None = None  # that block's label: `body`, `condition`, `branch_1`, ...


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


@dataclass(frozen=True)
class ThunkBlock:
    """A labelled group of thunks a thunk holds: `condition`, `body`, `branch_N`,
    `true_branch`/`false_branch`, or "" for a wrapper's own thunks (a command buffer's
    commands, the thunk an async start runs, the copy a dynamic-slice fusion wraps)."""

    label: str
    thunks: tuple[ThunkNode, ...]


@dataclass(frozen=True)
class ThunkNode:
    """One line of a thunk sequence with the blocks nested below it."""

    thunk_id: int
    kind: str
    kernel: str | None  # the kernel an XLA-emitted thunk launches; None for library calls
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    prev: tuple[int, ...]
    next: tuple[int, ...]
    stream: int | None  # `computation_stream[i]` of an async start
    line: int
    blocks: tuple[ThunkBlock, ...] = ()

    def walk(self) -> Iterator[ThunkNode]:
        """This node and every node below it, in file order."""
        yield self
        for b in self.blocks:
            for t in b.thunks:
                yield from t.walk()


@dataclass(frozen=True)
class ThunkTree:
    """A whole thunk sequence: its top-level thunks and the lines it could not read."""

    thunks: tuple[ThunkNode, ...]
    skipped: tuple[str, ...]  # "line N: <text>", one per line skipped

    def walk(self) -> Iterator[ThunkNode]:
        for t in self.thunks:
            yield from t.walk()


class _Open:
    """A node being read: its fields and the blocks filled so far (mutable while parsing)."""

    def __init__(self, fields: dict[str, object], indent: int) -> None:
        self.fields, self.indent = fields, indent
        self.blocks: list[tuple[str, list[_Open]]] = []

    def add(self, child: _Open) -> None:
        if not self.blocks:
            self.blocks.append(("", []))
        self.blocks[-1][1].append(child)

    def freeze(self) -> ThunkNode:
        blocks = tuple(
            ThunkBlock(label, tuple(c.freeze() for c in kids)) for label, kids in self.blocks
        )
        return ThunkNode(**self.fields, blocks=blocks)  # type: ignore[arg-type]


_NODE = re.compile(
    r"^(?P<indent> *)(?P<id>\d{1,9}): (?P<kind>k\w{1,64})"
    r"(?:\s*\[(?P<prev>[^|\]]*)\|(?P<next>[^\]]*)\])?\s*(?P<rest>.*)$"
)
_LABEL = re.compile(r"^(?P<indent> *)(?P<label>[A-Za-z_]\w{0,63}):\s*$")
_STREAM = re.compile(r"computation_stream\[(\d{1,4})\]")
_KERNEL_NAME = re.compile(r"^[A-Za-z_][\w.$-]{0,255}$")
MAX_SKIPPED_KEPT = 20  # skipped lines quoted in the tree; all are counted


def parse_tree(text: str, source: str = "") -> ThunkTree:
    """Returns the thunk sequence as a tree, as XLA's printers nest it (`WhileThunk::ToString`
    prints `condition:` and `body:` at its own indent and their thunks one level deeper;
    `ConditionalThunk::ToString` prints `branch_N:` or `false_branch:`/`true_branch:`; a
    command buffer, an async start and a dynamic-slice fusion print their thunks indented
    below them). A line that is neither a thunk nor a block label is skipped and counted in
    `skipped`, never fatal: a newer XLA may print more."""
    roots: list[_Open] = []
    stack: list[_Open] = []
    skipped: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        label = _LABEL.match(line)
        if label is not None:
            indent = len(label["indent"])
            while stack and stack[-1].indent > indent:
                stack.pop()
            if stack:
                stack[-1].blocks.append((label["label"], []))
            else:
                skipped.append(f"line {lineno}: block label outside a thunk: {line[:80]!r}")
            continue
        m = _NODE.match(line)
        if m is None:
            skipped.append(f"line {lineno}: {line[:80]!r}")
            continue
        indent = len(m["indent"])
        node = _Open(_node_fields(m, lineno), indent)
        while stack and stack[-1].indent >= indent:
            stack.pop()
        (stack[-1].add(node) if stack else roots.append(node))
        stack.append(node)
    if skipped:
        log.warning(
            "%s: %d thunk line(s) not understood, skipped", source or "thunks", len(skipped)
        )
    return ThunkTree(tuple(r.freeze() for r in roots), _kept(skipped))


def _node_fields(m: re.Match[str], lineno: int) -> dict[str, object]:
    """A thunk line's fields (ThunkNode's, but its blocks): its id, kind, kernel, launch
    dimensions, DAG edges and stream."""
    rest = m["rest"].strip()
    first = rest.split(" ", 1)[0] if rest else ""
    stream = _STREAM.search(rest)
    return {
        "thunk_id": int(m["id"]),
        "kind": m["kind"],
        "kernel": first if first != m["kind"] and _KERNEL_NAME.match(first) else None,
        "grid": _triple(rest, "grid"),
        "block": _triple(rest, "threads"),
        "prev": tuple(int(x) for x in _EDGE.findall(m["prev"] or "")),
        "next": tuple(int(x) for x in _EDGE.findall(m["next"] or "")),
        "stream": int(stream.group(1)) if stream else None,
        "line": lineno,
    }


def _kept(skipped: Sequence[str]) -> tuple[str, ...]:
    """The skipped lines quoted in the tree: the first MAX_SKIPPED_KEPT, then how many more."""
    more = len(skipped) - MAX_SKIPPED_KEPT
    return tuple(skipped[:MAX_SKIPPED_KEPT]) + ((f"... and {more} more",) if more > 0 else ())


# Kinds whose nested thunks run zero, one or many times per execution of the buffer.
_REPEATING = frozenset({"kWhile", "kConditional"})


def _commands_of(
    buffer: ThunkNode, by_id: Mapping[int, ThunkInfo], source: str
) -> tuple[Command, ...]:
    """Every thunk below a command buffer (not below a command buffer nested in it), in file
    order, each with the control-flow command and branch it sits in."""
    out: list[Command] = []

    def visit(
        node: ThunkNode, nested: bool, owner: int | None, branch: str | None, outer: str | None
    ) -> None:
        for b in node.blocks:
            inner = nested or (node is not buffer and node.kind in CONTROL_FLOW_KINDS)
            own = node.thunk_id if node.kind in _REPEATING else owner
            label = b.label if node.kind in _REPEATING else branch
            for t in b.thunks:
                if t.kind == "kCommandBuffer":
                    continue
                info = by_id.get(t.thunk_id)
                # A thunk a wrapper runs (the copy of a dynamic-slice fusion) has no entry of
                # its own: it runs for the wrapper's instruction.
                instruction = info.annotation if info is not None else outer
                if info is not None and info.kind != t.kind:
                    raise ValueError(
                        f"{source}: line {t.line}: thunk {t.thunk_id} is {t.kind} but "
                        f"thunk_metadata says {info.kind}"
                    )
                out.append(
                    Command(
                        index=t.thunk_id,
                        kind=t.kind,
                        kernel=t.kernel,
                        grid=t.grid,
                        block=t.block,
                        prev=t.prev,
                        next=t.next,
                        instruction=instruction,
                        nested=inner,
                        owner=own,
                        branch=label,
                    )
                )
                visit(t, inner, own, label, instruction)

    visit(buffer, False, None, None, None)
    return tuple(out)


def parse_sequence(
    text: str, source: str, metadata: tuple[ThunkInfo, ...] = ()
) -> tuple[CommandBuffer, ...]:
    """Returns the command buffers of a thunk sequence, wherever they sit (at the top, in a
    while body, in a branch), in file order, each command with the HLO instruction `metadata`
    gives its thunk id. The k-th `kCommandBuffer` of the metadata names the k-th buffer.
    Raises ValueError naming `source` and the line only where the two files disagree."""
    by_id = {t.thunk_id: t for t in metadata if t.thunk_id is not None}
    buffer_names = [t.annotation for t in metadata if t.kind == "kCommandBuffer"]
    tree = parse_tree(text, source)
    buffers = []
    for node in tree.walk():
        if node.kind != "kCommandBuffer":
            continue
        k = len(buffers)
        name = buffer_names[k] if k < len(buffer_names) and buffer_names[k] else None
        buffers.append(
            CommandBuffer(name or f"command_buffer_{k + 1}", _commands_of(node, by_id, source))
        )
    return tuple(buffers)


def _read(path: Path) -> str:
    return userfiles.read_text(path, THUNK_FILE, errors="replace")  # Unreadable: a ValueError


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
        found.append(path if userfiles.is_file(path) else None)
    return found[0], found[1]
