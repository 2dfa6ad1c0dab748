"""A line-oriented parser for HLO text modules as XLA dumps them.

The parser reads the structure eagerly (module header, source tables, computations,
instructions, operands) and keeps heavy attribute text raw: `attrs`, `metadata`,
`backend_config` and `frontend_attributes` are parsed on first use and cached.
Lazy attribute parsing never raises; text it cannot split is kept as one raw entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.hlo.shapes import Shape, ShapeError, parse_shape


class ParseError(ValueError):
    """Bad HLO text, located as `path:line:col: what (offending line)`."""

    def __init__(self, path: str, line: int, column: int, what: str, text: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.text = text
        self.what = what
        shown = text if len(text) <= 200 else text[:200] + "..."
        super().__init__(f"{path}:{line}:{column}: {what} ({shown})")


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A resolved source position: file, line and function name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[()\[\]{},]')
_META_ITEM = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|[^\s}]*)')
_OPENERS = {"(": ")", "[": "]", "{": "}"}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        body = value[1:-1]
        if "\\" in body:
            try:
                return json.loads(value)
            except ValueError:
                return body.replace('\\"', '"').replace("\\\\", "\\")
        return body
    return value


def split_top_level(text: str, start: int = 0) -> list[str] | None:
    """Split `text[start:]` at commas outside brackets and quoted strings.

    Returns the stripped pieces, or None when brackets or quotes do not balance.
    """
    parts: list[str] = []
    stack: list[str] = []
    last = start
    for m in _TOKEN.finditer(text, start):
        tok = m.group()
        if tok[0] == '"':
            continue
        if tok in _OPENERS:
            stack.append(_OPENERS[tok])
        elif tok == ",":
            if not stack:
                parts.append(text[last : m.start()].strip())
                last = m.end()
        elif not stack or stack.pop() != tok:
            return None
    if stack:
        return None
    tail = text[last:].strip()
    if tail or parts:
        parts.append(tail)
    return parts


def _matching_close(text: str, open_pos: int) -> int:
    """Index of the bracket closing the one at `open_pos`, or -1 if it never closes."""
    stack: list[str] = []
    for m in _TOKEN.finditer(text, open_pos):
        tok = m.group()
        if tok[0] == '"' or tok == ",":
            continue
        if tok in _OPENERS:
            stack.append(_OPENERS[tok])
        elif not stack or stack.pop() != tok:
            return -1
        elif not stack:
            return m.start()
    return -1


def parse_attributes(text: str) -> dict[str, str]:
    """Parse `k=v, k2={...}` into raw string values; unsplittable text goes under `""`."""
    if not text:
        return {}
    parts = split_top_level(text)
    if parts is None:
        return {"": text}
    out: dict[str, str] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if eq and key.strip() == "device_ids" and out.get("replica_groups", "").startswith("mesh"):
            # The mesh form `replica_groups=mesh[...], device_ids=(...) {...}` is one value
            # with a top-level comma inside it.
            out["replica_groups"] += f", {part.strip()}"
        elif eq:
            out[key.strip()] = value.strip()
        elif part:
            out[part] = ""
    return out


def parse_metadata(text: str) -> dict[str, str]:
    """Parse `{op_name="..." source_line=3 ...}` into unquoted string values."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    return {k: _unquote(v) for k, v in _META_ITEM.findall(body)}


def parse_json_config(text: str) -> dict[str, Any]:
    """Parse a backend_config value (JSON, possibly inside a quoted string); {} if not JSON."""
    value = text.strip()
    if value.startswith('"'):
        value = _unquote(value)
    if not value.startswith("{"):
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Instruction:
    """One HLO instruction. Structure is eager; attributes parse lazily and are cached."""

    __slots__ = (
        "_attrs",
        "_backend",
        "_meta",
        "attr_text",
        "is_root",
        "literal",
        "name",
        "opcode",
        "operands",
        "shape_text",
    )

    def __init__(
        self,
        name: str,
        opcode: str,
        shape_text: str,
        operands: tuple[str, ...],
        attr_text: str,
        is_root: bool,
        literal: str | None,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.shape_text = shape_text
        self.operands = operands
        self.attr_text = attr_text
        self.is_root = is_root
        self.literal = literal
        self._attrs: dict[str, str] | None = None
        self._meta: dict[str, str] | None = None
        self._backend: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Instruction({self.name!r}, {self.opcode!r}, {self.shape_text!r})"

    @property
    def shape(self) -> Shape:
        """The parsed output shape (cached per distinct shape text)."""
        return parse_shape(self.shape_text)

    @property
    def operand_names(self) -> tuple[str, ...]:
        """Operand instruction names with any `#k` tuple index removed."""
        return tuple(o.partition("#")[0] for o in self.operands)

    @property
    def attrs(self) -> dict[str, str]:
        """All attributes as raw strings, e.g. {'kind': 'kLoop', 'calls': '%fused'}."""
        if self._attrs is None:
            self._attrs = parse_attributes(self.attr_text)
        return self._attrs

    def attr(self, key: str, default: str | None = None) -> str | None:
        """One raw attribute value, or `default`."""
        return self.attrs.get(key, default)

    @property
    def metadata(self) -> dict[str, str]:
        """The parsed `metadata={...}` entries (op_name, source_file, stack_frame_id, ...)."""
        if self._meta is None:
            raw = self.attrs.get("metadata")
            self._meta = parse_metadata(raw) if raw else {}
        return self._meta

    @property
    def op_name(self) -> str:
        """The metadata op_name, or '' when absent."""
        return self.metadata.get("op_name", "")

    @property
    def backend_config(self) -> dict[str, Any]:
        """The backend_config JSON as a dict ({} when absent or not JSON)."""
        if self._backend is None:
            raw = self.attrs.get("backend_config")
            self._backend = parse_json_config(raw) if raw else {}
        return self._backend

    @property
    def frontend_attributes(self) -> dict[str, str]:
        """The `frontend_attributes={k="v",...}` entries."""
        raw = self.attrs.get("frontend_attributes")
        return parse_metadata(raw) if raw else {}

    @property
    def called_computations(self) -> tuple[str, ...]:
        """Names of computations referenced by calls/to_apply/condition/body/branches."""
        out: list[str] = []
        for key in (
            "calls",
            "to_apply",
            "condition",
            "body",
            "branch_computations",
            "true_computation",
            "false_computation",
        ):
            raw = self.attrs.get(key)
            if raw:
                out.extend(p.strip().lstrip("%") for p in raw.strip("{}").split(",") if p.strip())
        return tuple(out)

    @property
    def custom_call_target(self) -> str:
        """The custom_call_target, unquoted, or ''."""
        raw = self.attrs.get("custom_call_target")
        return _unquote(raw) if raw else ""

    def text(self) -> str:
        """This instruction as one line of HLO text (without indentation)."""
        head = "ROOT " if self.is_root else ""
        if self.literal is not None:
            inner = self.literal
        else:
            inner = ", ".join("%" + o for o in self.operands)
        tail = ", " + self.attr_text if self.attr_text else ""
        return f"{head}%{self.name} = {self.shape_text} {self.opcode}({inner}){tail}"


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
        """The innermost source location of a stack frame id, or None if unknown."""
        frame = self.stack_frames.get(frame_id)
        if frame is None:
            return None
        loc_id = parse_metadata(frame).get("file_location_id")
        loc_text = self.file_locations.get(int(loc_id)) if loc_id and loc_id.isdigit() else None
        if loc_text is None:
            return None
        loc = parse_metadata(loc_text)
        file_id, func_id, line = (
            loc.get("file_name_id", ""),
            loc.get("function_name_id", ""),
            loc.get("line", ""),
        )
        return SourceLocation(
            file=self.file_names.get(int(file_id), "?") if file_id.isdigit() else "?",
            line=int(line) if line.isdigit() else 0,
            function=self.function_names.get(int(func_id), "?") if func_id.isdigit() else "?",
        )

    def source_location(self, inst: Instruction) -> SourceLocation | None:
        """Where an instruction came from: stack frame tables first, then source_file/line."""
        meta = inst.metadata
        frame = meta.get("stack_frame_id", "")
        if frame.isdigit():
            loc = self.resolve_frame(int(frame))
            if loc is not None:
                return loc
        if "source_file" in meta:
            line = meta.get("source_line", "")
            return SourceLocation(meta["source_file"], int(line) if line.isdigit() else 0, "?")
        return None


_HEADER = re.compile(r"HloModule\s+([^\s,]+)\s*(?:,\s*(.*))?$")
_COMP = re.compile(r"(ENTRY\s+)?%?([^\s(){}]+)\s*(.*?)\s*\{\s*$")
_FAST = re.compile(
    r"\s+(ROOT\s+)?%?([^\s=%]+) = ([a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?) "
    r"([a-z][a-z0-9\-_]*)\(([^(){}\"\[]*)\)(?:, (.*))?$"
)
_HEAD = re.compile(r"\s+(ROOT\s+)?%?([^\s=%]+)\s*=\s*")
_ARRAY_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\(")
_TABLE_ROW = re.compile(r"(\d+)\s+(.*)$")
_COMMENT = re.compile(r"/\*.*?\*/")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_NO_OPERANDS = frozenset({"parameter", "constant"})


def _split_operands(text: str) -> tuple[str, ...]:
    if "/*" in text:
        text = _COMMENT.sub("", text)
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


def _parse_slow(line: str) -> Instruction:
    """Instruction parsing for lines the fast regex rejects (tuples, literals, old syntax)."""
    m = _HEAD.match(line)
    if m is None:
        raise ValueError("expected `%name = shape opcode(...)`")
    pos = m.end()
    if line.startswith("(", pos):
        end = _matching_close(line, pos)
        if end < 0:
            raise ValueError("unterminated tuple shape")
        end += 1
    else:
        sm = _ARRAY_SHAPE.match(line, pos)
        if sm is None:
            raise ValueError("expected a shape")
        end = sm.end()
    shape_text = line[pos:end]
    parse_shape(shape_text)
    om = _OPCODE.match(line, end)
    if om is None:
        raise ValueError("expected an opcode followed by `(`")
    opcode = om.group(1)
    close = _matching_close(line, om.end() - 1)
    if close < 0:
        raise ValueError("unterminated operand list")
    inner = line[om.end() : close]
    rest = line[close + 1 :].strip()
    if rest.startswith(","):
        rest = rest[1:].strip()
    elif rest:
        raise ValueError("expected `,` before attributes")
    if opcode in _NO_OPERANDS:
        return Instruction(m.group(2), opcode, shape_text, (), rest, bool(m.group(1)), inner)
    operands = _split_operands(inner)
    return Instruction(m.group(2), opcode, shape_text, operands, rest, bool(m.group(1)), None)


def _scan(lines: list[str], path: str) -> HloModule:
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
    tables: dict[str, dict[int, str]] = {}
    tables_text: list[str] = []
    computations: dict[str, Computation] = {}
    entry_name = ""
    table: dict[int, str] | None = None
    fast = _FAST.match
    i += 1
    while i < n:
        line = lines[i]
        i += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            table = None
            continue
        if stripped in _TABLES:
            table = tables.setdefault(stripped, {})
            tables_text.append(stripped)
            continue
        if table is not None:
            rm = _TABLE_ROW.match(stripped)
            if rm is None:
                raise ParseError(path, i, 1, "bad source-table row", line)
            value = rm.group(2)
            table[int(rm.group(1))] = _unquote(value) if value.startswith('"') else value
            tables_text.append(stripped)
            continue
        cm = _COMP.match(line)
        if cm is None or line[0] in " \t":
            raise ParseError(
                path, i, 1, "expected a computation header `%name (...) -> ... {`", line
            )
        comp_line = i
        comp_name = cm.group(2)
        is_entry = bool(cm.group(1))
        insts: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        inst_lines: list[int] = []
        trailer = None
        while i < n:
            line = lines[i]
            i += 1
            fm = fast(line)
            if fm is not None:
                op = fm.group(4)
                inner = fm.group(5)
                if op in _NO_OPERANDS:
                    inst = Instruction(
                        fm.group(2),
                        op,
                        fm.group(3),
                        (),
                        fm.group(6) or "",
                        bool(fm.group(1)),
                        inner,
                    )
                else:
                    if "/*" in inner or " " in inner.replace(", ", ""):
                        try:
                            operands = _split_operands(inner)
                        except ValueError as e:
                            raise ParseError(path, i, fm.start(5) + 1, str(e), line) from None
                    elif inner:
                        operands = tuple(inner.replace("%", "").split(", "))
                        if "" in operands:
                            raise ParseError(path, i, fm.start(5) + 1, "empty operand", line)
                    else:
                        operands = ()
                    inst = Instruction(
                        fm.group(2),
                        op,
                        fm.group(3),
                        operands,
                        fm.group(6) or "",
                        bool(fm.group(1)),
                        None,
                    )
            else:
                s = line.strip()
                if s.startswith("}"):
                    trailer = s[1:].strip()
                    break
                if not s or s.startswith("//"):
                    continue
                try:
                    inst = _parse_slow(line)
                except (ValueError, ShapeError) as e:
                    raise ParseError(path, i, 1, str(e), line) from None
            if inst.name in by_name:
                raise ParseError(path, i, 1, f"duplicate instruction name {inst.name!r}", line)
            by_name[inst.name] = inst
            insts.append(inst)
            inst_lines.append(i)
        if trailer is None:
            last = n
            while last > 1 and not lines[last - 1].strip():
                last -= 1
            raise ParseError(
                path, last, 1, f"computation {comp_name!r} is not closed by `}}`", lines[last - 1]
            )
        if not insts:
            raise ParseError(
                path, comp_line, 1, f"computation {comp_name!r} is empty", lines[comp_line - 1]
            )
        for inst, at in zip(insts, inst_lines, strict=True):
            for op in inst.operands:
                if op.partition("#")[0] not in by_name:
                    raise ParseError(
                        path,
                        at,
                        max(1, lines[at - 1].find(op) + 1),
                        f"instruction {inst.name!r} uses unknown operand {op!r} in {comp_name!r}",
                        lines[at - 1],
                    )
        if comp_name in computations:
            raise ParseError(
                path, comp_line, 1, f"duplicate computation {comp_name!r}", lines[comp_line - 1]
            )
        computations[comp_name] = Computation(
            comp_name, is_entry, cm.group(3), tuple(insts), trailer, by_name
        )
        if is_entry:
            entry_name = comp_name
    if not computations:
        raise ParseError(path, n, 1, "module has no computations", lines[-1] if lines else "")
    if not entry_name:
        entry_name = next(reversed(computations))
        computations[entry_name].is_entry = True
    return HloModule(
        hm.group(1), attributes, computations, entry_name, tables, tuple(tables_text), path
    )


def parse_module(text: str, path: str = "<string>") -> HloModule:
    """Parse one HLO text module. Raises ParseError (and nothing else) for bad input."""
    if not isinstance(text, str):
        raise ParseError(path, 1, 1, f"expected str, got {type(text).__name__}", "")
    lines = text.split("\n")
    try:
        return _scan(lines, path)
    except ParseError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ParseError(
            path, 1, 1, f"internal parser error: {type(e).__name__}: {e}", lines[0]
        ) from None


def parse_file(path: str | Path) -> HloModule:
    """Read and parse an HLO text file; undecodable bytes become ParseError too."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
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
