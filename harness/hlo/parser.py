"""A line-oriented parser for HLO text modules as XLA dumps them: the parsed module (its
header attributes, source tables and computations) and the scanner that reads it.

The scanner reads the structure eagerly (module header, source tables, computations,
instructions, operands, shapes); each instruction keeps its heavy attribute text raw, parsed
on first use (harness.hlo.instruction).

Input is untrusted, so the parser is linear in the length of every line (explicit scanning or
possessive regexes, nothing that backtracks), never recurses on input depth, and range-checks
every number it reads. Bad input is a ParseError naming the file, line and column, raised
either by `parse_module` or, for the lazy parts, by the accessor that reads them (each
instruction remembers its file and line for this). No other exception escapes for bad text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.common import userfiles
from harness.hlo.instruction import (
    MAX_ID,
    Instruction,
    ParseError,
    matching_close,
    parse_metadata,
    split_top_level,
    unquote,
)
from harness.hlo.shapes import Shape, ShapeError, clip, decimal, parse_shape, strip_comments


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A resolved source position: file, line and function name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# Numeric fields of the FileLocations and StackFrames table rows; checked when parsed.
_INT_TABLE_FIELDS = frozenset(
    {
        "file_name_id",
        "function_name_id",
        "line",
        "end_line",
        "column",
        "end_column",
        "file_location_id",
        "parent_frame_id",
    }
)


class Computation:
    """A named computation: its instructions in text order and whether it is ENTRY."""

    __slots__ = ("_by_name", "instructions", "is_entry", "name", "signature", "trailer")

    def __init__(
        self,
        name: str,
        is_entry: bool,
        signature: str,
        instructions: tuple[Instruction, ...],
        trailer: str,
        by_name: dict[str, Instruction],
    ) -> None:
        self.name = name
        self.is_entry = is_entry
        self.signature = signature
        self.instructions = instructions
        self.trailer = trailer
        self._by_name = by_name

    def __repr__(self) -> str:
        return f"Computation({self.name!r}, {len(self.instructions)} instructions)"

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def get(self, name: str) -> Instruction | None:
        """The instruction called `name` (a `#k` suffix is ignored), or None."""
        return self._by_name.get(name.partition("#")[0])

    @property
    def root(self) -> Instruction | None:
        """The ROOT instruction (the last one when none is marked)."""
        for inst in self.instructions:
            if inst.is_root:
                return inst
        return self.instructions[-1] if self.instructions else None


class HloModule:
    """A parsed HLO module: header attributes, source tables and computations."""

    __slots__ = (
        "attributes",
        "computations",
        "entry_name",
        "file_locations",
        "file_names",
        "function_names",
        "name",
        "path",
        "stack_frames",
        "tables_text",
    )

    def __init__(
        self,
        name: str,
        attributes: tuple[tuple[str, str], ...],
        computations: dict[str, Computation],
        entry_name: str,
        tables: dict[str, dict[int, str]],
        tables_text: tuple[str, ...],
        path: str,
    ) -> None:
        self.name = name
        self.attributes = attributes
        self.computations = computations
        self.entry_name = entry_name
        self.file_names = tables.get("FileNames", {})
        self.function_names = tables.get("FunctionNames", {})
        self.file_locations = tables.get("FileLocations", {})
        self.stack_frames = tables.get("StackFrames", {})
        self.tables_text = tables_text
        self.path = path

    def __repr__(self) -> str:
        return f"HloModule({self.name!r}, {len(self.computations)} computations)"

    @property
    def entry(self) -> Computation:
        """The ENTRY computation."""
        return self.computations[self.entry_name]

    @property
    def header(self) -> dict[str, str]:
        """Header attributes as raw strings."""
        return dict(self.attributes)

    def instruction_count(self) -> int:
        """Instructions across all computations."""
        return sum(len(c.instructions) for c in self.computations.values())

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        """Every (computation, instruction) pair in text order."""
        for comp in self.computations.values():
            for inst in comp.instructions:
                yield comp, inst

    def resolve_frame(self, frame_id: int) -> SourceLocation | None:
        """The innermost source location of a stack frame id, or None if unknown.

        Table rows were range-checked when parsed, so ids here are small integers.
        """
        frame = self.stack_frames.get(frame_id)
        if frame is None:
            return None
        loc_id = decimal(parse_metadata(frame).get("file_location_id", ""), MAX_ID)
        loc_text = self.file_locations.get(loc_id) if loc_id is not None else None
        if loc_text is None:
            return None
        loc = parse_metadata(loc_text)
        file_id = decimal(loc.get("file_name_id", ""), MAX_ID)
        func_id = decimal(loc.get("function_name_id", ""), MAX_ID)
        return SourceLocation(
            file=self.file_names.get(file_id, "?") if file_id is not None else "?",
            line=decimal(loc.get("line", ""), MAX_ID) or 0,
            function=self.function_names.get(func_id, "?") if func_id is not None else "?",
        )

    def source_location(self, inst: Instruction) -> SourceLocation | None:
        """Where an instruction came from: stack frame tables first, then source_file/line.

        Raises ParseError (located) for metadata numbers out of range (see `metadata`).
        """
        meta = inst.metadata
        frame = decimal(meta.get("stack_frame_id", ""), MAX_ID)
        if frame is not None:
            loc = self.resolve_frame(frame)
            if loc is not None:
                return loc
        if "source_file" in meta:
            line = decimal(meta.get("source_line", ""), MAX_ID) or 0
            return SourceLocation(meta["source_file"], line, "?")
        return None


# Every regex below is anchored (used with .match) and built so that each quantified piece is
# followed by a character it cannot contain; possessive quantifiers (`*+`, `++`) make that
# explicit, so a match or a failure costs one pass over the line. The computation header,
# whose old regex backtracked cubically, is scanned by hand in `_computation_header`.
_HEADER = re.compile(r"HloModule\s++([^\s,]++)\s*+(?:,\s*+(.*))?$")
_ENTRY = re.compile(r"ENTRY\s++")
_COMP_NAME = re.compile(r"[^\s(){}]++")
_FAST = re.compile(
    r"\s++(ROOT\s++)?%?([^\s=%]++) = ([a-z][a-z0-9]*+\[[^\]]*+\](?:\{[^{}]*+\})?) "
    r"([a-z][a-z0-9\-_]*+)\(([^(){}\"\[]*+)\)(?:, (.*))?$"
)
_HEAD = re.compile(r"\s++(ROOT\s++)?%?([^\s=%]++)\s*+=\s*+")
_ARRAY_SHAPE = re.compile(r"[a-z][a-z0-9]*+\[[^\]]*+\](?:\{[^{}]*+\})?")
_OPCODE = re.compile(r"\s*+([a-z][a-z0-9\-_]*+)\(")
_TABLE_ROW = re.compile(r"([0-9]++)\s++(.*)$")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_NO_OPERANDS = frozenset({"parameter", "constant"})


def _computation_header(line: str) -> tuple[bool, str, str] | None:
    r"""(is_entry, name, signature) of `[ENTRY] [%]name signature {`, or None.

    Same reading as the regex `(ENTRY\s+)?%?([^\s(){}]+)\s*(.*?)\s*\{\s*$`, scanned in one
    pass: that regex backtracked cubically on long runs of blanks (an 8 KB line took minutes).
    """
    body = line.rstrip()
    if not body.endswith("{"):
        return None
    head = body[:-1]
    pos = 0
    is_entry = False
    em = _ENTRY.match(head)
    if em is not None and _COMP_NAME.match(head, em.end()) is not None:
        is_entry, pos = True, em.end()
    if head.startswith("%", pos) and _COMP_NAME.match(head, pos + 1) is not None:
        pos += 1
    nm = _COMP_NAME.match(head, pos)
    if nm is None:
        return None
    return is_entry, nm.group(), head[nm.end() :].strip()


def _tuple_index_error(operands: tuple[str, ...]) -> str:
    """Why a `name#k` operand's tuple index is bad, or '' when every index is fine."""
    for op in operands:
        _, hash_, index = op.partition("#")
        if hash_ and decimal(index, MAX_ID) is None:
            return f"operand {clip(op)}: tuple index is not an integer in 0..2**62"
    return ""


def _table_row_error(table: str, value: str) -> str:
    """Why a FileLocations/StackFrames row value is bad, or '' (other tables hold strings)."""
    if table not in ("FileLocations", "StackFrames"):
        return ""
    for key, v in parse_metadata(value).items():
        if key in _INT_TABLE_FIELDS and decimal(v, MAX_ID) is None:
            return f"{table} row field {key}={clip(v)} is not an integer in 0..2**62"
    return ""


def _split_operands(text: str) -> tuple[str, ...]:
    if "/*" in text:
        text = strip_comments(text)
    if not text.strip():
        return ()
    pieces = text.split(",") if "{" not in text and "[" not in text else split_top_level(text)
    if pieces is None:
        raise ValueError("unbalanced operand list")
    out = []
    for piece in pieces:
        name = piece.rpartition(" ")[2].lstrip("%")
        if not name:
            raise ValueError("empty operand")
        out.append(name)
    return tuple(out)


def _parse_slow(line: str, path: str, lineno: int) -> Instruction:
    """Instruction parsing for lines the fast regex rejects (tuples, literals, old syntax).

    Raises ValueError or ShapeError saying what is wrong; the caller locates it.
    """
    m = _HEAD.match(line)
    if m is None:
        raise ValueError("expected `%name = shape opcode(...)`")
    pos = m.end()
    if line.startswith("(", pos):
        end = matching_close(line, pos)
        if end < 0:
            raise ValueError("unterminated tuple shape")
        end += 1
    else:
        sm = _ARRAY_SHAPE.match(line, pos)
        if sm is None:
            raise ValueError("expected a shape")
        end = sm.end()
    shape_text = line[pos:end]
    shape = parse_shape(shape_text)
    om = _OPCODE.match(line, end)
    if om is None:
        raise ValueError("expected an opcode followed by `(`")
    opcode = om.group(1)
    close = matching_close(line, om.end() - 1)
    if close < 0:
        raise ValueError("unterminated operand list")
    inner = line[om.end() : close]
    rest = line[close + 1 :].strip()
    if rest.startswith(","):
        rest = rest[1:].strip()
    elif rest:
        raise ValueError("expected `,` before attributes")
    # `rest` is a suffix of the right-stripped line: its start column follows from lengths.
    col = len(line.rstrip()) - len(rest) + 1 if rest else 0
    name, is_root = m.group(2), bool(m.group(1))
    if opcode in _NO_OPERANDS:
        return Instruction(
            name, opcode, shape_text, (), rest, is_root, inner, shape, path, lineno, col
        )
    operands = _split_operands(inner)
    if "#" in inner and (why := _tuple_index_error(operands)):
        raise ValueError(why)
    return Instruction(
        name, opcode, shape_text, operands, rest, is_root, None, shape, path, lineno, col
    )


def _scan(lines: list[str], path: str) -> HloModule:
    """Reads a module's lines: its header, then its source tables and its computations, each
    checked as it closes; the last computation is the entry where none is marked ENTRY."""
    n = len(lines)
    i, hm, attributes = _module_header(lines, path)
    tables: dict[str, dict[int, str]] = {}
    tables_text: list[str] = []
    computations: dict[str, Computation] = {}
    entry_name = ""
    table: dict[int, str] | None = None
    table_name = ""
    # Shapes repeat: parse each distinct text once per module.
    shapes: dict[str, Shape] = {}
    while i < n:
        line = lines[i]
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            table = None
            continue
        if stripped in _TABLES:
            table = tables.setdefault(stripped, {})
            table_name = stripped
            tables_text.append(stripped)
            continue
        if table is not None:
            _table_row(table, table_name, stripped, line, path, i)
            tables_text.append(stripped)
            continue
        header = _computation_header(line)
        if header is None or line[0] in " \t":
            raise ParseError(
                path, i, 1, "expected a computation header `%name (...) -> ... {`", line
            )
        comp_line = i
        comp, i = _scan_computation(lines, i, header, path, shapes)
        if comp.name in computations:
            raise ParseError(
                path,
                comp_line,
                1,
                f"duplicate computation {clip(comp.name)}",
                lines[comp_line - 1],
            )
        computations[comp.name] = comp
        if comp.is_entry:
            entry_name = comp.name
    if not computations:
        raise ParseError(path, n, 1, "module has no computations", lines[-1] if lines else "")
    if not entry_name:
        entry_name = next(reversed(computations))
        computations[entry_name].is_entry = True
    return HloModule(
        hm.group(1), attributes, computations, entry_name, tables, tuple(tables_text), path
    )


def _module_header(
    lines: list[str], path: str
) -> tuple[int, re.Match[str], tuple[tuple[str, str], ...]]:
    """Returns the index of the line after `HloModule name, attributes`, its match and its
    attributes; blank lines before it are skipped."""
    n = len(lines)
    i = 0
    while i < n and not lines[i].strip():
        i += 1
    if i >= n:
        raise ParseError(path, 1, 1, "empty input, expected `HloModule`", "")
    hm = _HEADER.match(lines[i].rstrip())
    if hm is None:
        raise ParseError(path, i + 1, 1, "expected `HloModule name`", lines[i])
    attr_parts = split_top_level(hm.group(2) or "")
    if attr_parts is None:
        raise ParseError(path, i + 1, hm.start(2) + 1, "unbalanced module attributes", lines[i])
    attributes = tuple((k.strip(), v.strip()) for k, _, v in (p.partition("=") for p in attr_parts))
    return i + 1, hm, attributes


def _table_row(
    table: dict[int, str], table_name: str, stripped: str, line: str, path: str, lineno: int
) -> None:
    """Files one row of a source table (`id value`) into `table`."""
    rm = _TABLE_ROW.match(stripped)
    if rm is None:
        raise ParseError(path, lineno, 1, "bad source-table row", line)
    row_id = decimal(rm.group(1), MAX_ID)
    if row_id is None:
        raise ParseError(
            path, lineno, 1, f"{table_name} id {clip(rm.group(1))} is out of range", line
        )
    value = rm.group(2)
    if why := _table_row_error(table_name, value):
        raise ParseError(path, lineno, rm.start(2) + 1, why, line)
    table[row_id] = unquote(value) if value.startswith('"') else value


def _scan_computation(
    lines: list[str],
    i: int,
    header: tuple[bool, str, str],
    path: str,
    shapes: dict[str, Shape],
) -> tuple[Computation, int]:
    """Reads the computation whose header is line `i` (1-based) up to its closing `}`;
    returns it, checked (closed, not empty, every operand defined in it), and the index of
    the line after it."""
    n = len(lines)
    comp_line = i
    is_entry, comp_name, signature = header
    insts: list[Instruction] = []
    by_name: dict[str, Instruction] = {}
    trailer = None
    fast = _FAST.match
    while i < n:
        line = lines[i]
        i += 1
        fm = fast(line)
        if fm is not None:
            inst = _fast_instruction(fm, line, path, i, shapes)
        else:
            s = line.strip()
            if s.startswith("}"):
                trailer = s[1:].strip()
                break
            if not s or s.startswith("//"):
                continue
            try:
                inst = _parse_slow(line, path, i)
            except (ValueError, ShapeError) as e:
                raise ParseError(path, i, 1, str(e), line) from None
        if inst.name in by_name:
            raise ParseError(path, i, 1, f"duplicate instruction name {clip(inst.name)}", line)
        by_name[inst.name] = inst
        insts.append(inst)
    if trailer is None:
        last = n
        while last > 1 and not lines[last - 1].strip():
            last -= 1
        raise ParseError(
            path,
            last,
            1,
            f"computation {clip(comp_name)} is not closed by `}}`",
            lines[last - 1],
        )
    if not insts:
        raise ParseError(
            path, comp_line, 1, f"computation {clip(comp_name)} is empty", lines[comp_line - 1]
        )
    _check_operands(insts, by_name, comp_name, lines, path)
    return Computation(comp_name, is_entry, signature, tuple(insts), trailer, by_name), i


def _fast_instruction(
    fm: re.Match[str], line: str, path: str, lineno: int, shapes: dict[str, Shape]
) -> Instruction:
    """Returns the instruction of a line the fast pattern matched (most lines), its shape
    parsed once per distinct text (`shapes`)."""
    shape_text = fm.group(3)
    shape = shapes.get(shape_text)
    if shape is None:
        try:
            shape = shapes[shape_text] = parse_shape(shape_text)
        except ShapeError as e:
            raise ParseError(path, lineno, fm.start(3) + 1, str(e), line) from None
    op = fm.group(4)
    inner = fm.group(5)
    attr_text = fm.group(6) or ""
    # The attributes run to the end of the line.
    col = len(line) - len(attr_text) + 1 if attr_text else 0
    if op in _NO_OPERANDS:
        return Instruction(
            fm.group(2),
            op,
            shape_text,
            (),
            attr_text,
            bool(fm.group(1)),
            inner,
            shape,
            path,
            lineno,
            col,
        )
    if "/*" in inner or " " in inner.replace(", ", ""):
        try:
            operands = _split_operands(inner)
        except ValueError as e:
            raise ParseError(path, lineno, fm.start(5) + 1, str(e), line) from None
    elif inner:
        operands = tuple(inner.replace("%", "").split(", "))
        if "" in operands:
            raise ParseError(path, lineno, fm.start(5) + 1, "empty operand", line)
    else:
        operands = ()
    if "#" in inner and (why := _tuple_index_error(operands)):
        raise ParseError(path, lineno, fm.start(5) + 1, why, line)
    return Instruction(
        fm.group(2),
        op,
        shape_text,
        operands,
        attr_text,
        bool(fm.group(1)),
        None,
        shape,
        path,
        lineno,
        col,
    )


def _check_operands(
    insts: list[Instruction],
    by_name: Mapping[str, Instruction],
    comp_name: str,
    lines: list[str],
    path: str,
) -> None:
    """Raises on the first operand that names no instruction of its computation."""
    for inst in insts:
        for op in inst.operands:
            if op.partition("#")[0] not in by_name:
                at = inst.line
                raise ParseError(
                    path,
                    at,
                    max(1, lines[at - 1].find(op) + 1),
                    f"instruction {clip(inst.name)} uses unknown operand {clip(op)} "
                    f"in {clip(comp_name)}",
                    lines[at - 1],
                )


def parse_module(text: str, path: str = "<string>") -> HloModule:
    """Parse one HLO text module. Raises ParseError (and nothing else) for bad input."""
    if not isinstance(text, str):
        raise ParseError(path, 1, 1, f"expected str, got {type(text).__name__}", "")
    if not text.isascii():
        # A str can hold lone surrogates, which no file can (parse_file decodes strictly) and
        # which break every later encode (fingerprints, JSON output).
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            line = text.count("\n", 0, e.start) + 1
            col = e.start - text.rfind("\n", 0, e.start)
            shown = text.split("\n")[line - 1].encode("utf-8", "backslashreplace").decode()
            raise ParseError(path, line, col, f"not Unicode text: {e.reason}", shown) from None
    lines = text.split("\n")
    try:
        return _scan(lines, path)
    except ParseError:
        raise
    except (
        ValueError,
        IndexError,
        KeyError,
        TypeError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as e:
        # A last resort: every check above should have named the line already.
        raise ParseError(
            path, 1, 1, f"internal parser error: {type(e).__name__}: {e}", lines[0]
        ) from None


def parse_file(path: str | Path) -> HloModule:
    """Read and parse an HLO text file; undecodable bytes become ParseError too."""
    p = Path(path)
    try:
        text = userfiles.read_bytes(p, userfiles.DUMP).decode("utf-8")
    except userfiles.Unreadable as e:
        raise ParseError(str(p), 1, 1, str(e).removeprefix(f"{p}: "), "") from None
    except UnicodeDecodeError as e:
        raise ParseError(str(p), 1, e.start + 1, f"not UTF-8 text: {e.reason}", "") from None
    return parse_module(text, str(p))


def print_module(module: HloModule) -> str:
    """HLO text for `module` that parse_module reads back to the same structure."""
    head = f"HloModule {module.name}"
    if module.attributes:
        head += ", " + ", ".join(f"{k}={v}" if v or k else k for k, v in module.attributes)
    out = [head, ""]
    if module.tables_text:
        for row in module.tables_text:
            if row in _TABLES and out[-1] != "":
                out.append("")
            out.append(row)
        out.append("")
    for comp in module.computations.values():
        entry = "ENTRY " if comp.is_entry else ""
        sig = f" {comp.signature}" if comp.signature else ""
        out.append(f"{entry}%{comp.name}{sig} {{")
        out.extend("  " + inst.text() for inst in comp.instructions)
        out.append("}" + (comp.trailer and " " + comp.trailer))
        out.append("")
    return "\n".join(out)
