"""A line-oriented parser for HLO text modules as XLA dumps them.

The parser reads the structure eagerly (module header, source tables, computations,
instructions, operands, shapes) and keeps heavy attribute text raw: `attrs`, `metadata`,
`backend_config` and `frontend_attributes` are parsed on first use and cached.

Input is untrusted, so the parser is linear in the length of every line (explicit scanning or
possessive regexes, nothing that backtracks), never recurses on input depth, and range-checks
every number it reads. Bad input is a ParseError naming the file, line and column, raised
either by `parse_module` or, for the lazy parts, by the accessor that reads them (each
instruction remembers its file and line for this). No other exception escapes for bad text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.hlo.shapes import (
    ArrayShape,
    Shape,
    ShapeError,
    clip,
    decimal,
    leaves,
    parse_shape,
    strip_comments,
)


class _Bad(ValueError):
    """What is wrong with a lazy part of an instruction (and the attribute it is in)."""

    def __init__(self, what: str, key: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.key = key


class ParseError(ValueError):
    """Bad HLO text, located as `path:line:col: what (offending line)`."""

    def __init__(self, path: str, line: int, column: int, what: str, text: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.text = text
        # Messages quote input (names, values); a hostile file must not make them megabytes.
        self.what = what if len(what) <= 400 else what[:400] + "..."
        shown = text if len(text) <= 200 else text[:200] + "..."
        super().__init__(f"{path}:{line}:{column}: {self.what} ({shown})")


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A resolved source position: file, line and function name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# Largest id, index or line number accepted anywhere (XLA's are int64).
MAX_ID = 2**62

# A quoted string, possessively, with group 1 set only when it closes: an unclosed quote
# takes the rest of the text in one linear step (and makes the text unbalanced) instead of
# being retried from every later quote, which was quadratic.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(")?|[()\[\]{},]')
# `key=value` items. The lookbehind starts a key only at the start of a word, so a long run of
# word characters without `=` is rejected once, not once per character (quadratic before).
_META_ITEM = re.compile(r'(?<![\w.])([\w.]++)=("[^"\\]*+(?:\\.[^"\\]*+)*+"|[^\s}]*+)')
# The same without commas, for `_matching_close`, which only follows brackets.
_BRACKET = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(")?|[()\[\]{}]')
_OPENERS = {"(": ")", "[": "]", "{": "}"}
# Attributes that hold a list of dimension numbers (`dimensions={0,1}`); checked on access.
_INT_LIST_ATTRS = frozenset(
    {
        "dimensions",
        "lhs_contracting_dims",
        "rhs_contracting_dims",
        "lhs_batch_dims",
        "rhs_batch_dims",
    }
)
# Attributes that name called computations, in the order `called_computations` lists them.
CALL_ATTRS = (
    "calls",
    "to_apply",
    "condition",
    "body",
    "branch_computations",
    "true_computation",
    "false_computation",
)
# Metadata fields that hold numbers (stack frame id, source position); checked on access.
_INT_METADATA = frozenset(
    {"stack_frame_id", "source_line", "source_end_line", "source_column", "source_end_column"}
)
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

    Returns the stripped pieces, or None when brackets or quotes do not balance. Linear, and
    nesting depth only grows a list.
    """
    parts: list[str] = []
    stack: list[str] = []
    last = start
    for m in _TOKEN.finditer(text, start):
        tok = m.group()
        if tok[0] == '"':
            if m.group(1) is None:
                return None
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
    for m in _BRACKET.finditer(text, open_pos):
        tok = m.group()
        if tok[0] == '"':
            if m.group(1) is None:
                return -1
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
    return _attribute_dict(parts)


def _attribute_dict(parts: list[str]) -> dict[str, str]:
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
    """Parse a backend_config value: a JSON object, possibly inside a quoted string.

    Returns the object ({} for empty text). Raises ValueError saying what is wrong when the
    text is not a JSON object, including JSON nested too deeply for the decoder and integers
    too long to convert.
    """
    value = text.strip()
    if value.startswith('"'):
        value = _unquote(value).strip()
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except RecursionError:
        raise ValueError("backend_config JSON is nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"backend_config is not valid JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"backend_config is JSON {type(parsed).__name__}, not an object")
    return parsed


def _looks_like_json(text: str) -> bool:
    """Whether a backend_config text is meant as JSON: an object whose first key is quoted.

    XLA writes its own configs as JSON protos; a custom-call's config belongs to its target,
    and typed-FFI targets write MLIR attribute dictionaries such as `{index = 0 : ui64}`.
    """
    value = text.strip()
    if value.startswith('"'):
        value = _unquote(value).strip()
    return value == "{}" or (value.startswith("{") and value[1:].lstrip().startswith('"'))


def _json_index(value: object, what: str) -> int:
    """A dimension number from proto JSON (an int, or a string since int64 prints as one)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID:
        return value
    if isinstance(value, str) and (n := decimal(value, MAX_ID)) is not None:
        return n
    raise ValueError(f"{what} holds {clip(str(value))}, not a dimension number")


def _json_indices(dnums: dict[str, Any], key: str) -> tuple[int, ...]:
    value = dnums.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"dot_dimension_numbers.{key} is {type(value).__name__}, not a list")
    return tuple(_json_index(v, f"dot_dimension_numbers.{key}") for v in value)


@dataclass(frozen=True, slots=True)
class GemmConfig:
    """The fields of a library GEMM's `gemm_backend_config` that cost and cluster code read.

    Dimension numbers come from `dot_dimension_numbers` (absent lists are empty); `epilogue`
    is the proto's enum name, DEFAULT when absent.
    """

    lhs_contracting_dims: tuple[int, ...]
    rhs_contracting_dims: tuple[int, ...]
    lhs_batch_dims: tuple[int, ...]
    rhs_batch_dims: tuple[int, ...]
    epilogue: str


def _gemm_config(gemm: object) -> GemmConfig:
    """The typed GEMM config, or ValueError naming the first field of the wrong type."""
    if not isinstance(gemm, dict):
        raise ValueError(f"gemm_backend_config is {type(gemm).__name__}, not an object")
    dnums = gemm.get("dot_dimension_numbers", {})
    if not isinstance(dnums, dict):
        raise ValueError(f"dot_dimension_numbers is {type(dnums).__name__}, not an object")
    epilogue = gemm.get("epilogue", "DEFAULT")
    if not isinstance(epilogue, str):
        raise ValueError(f"gemm_backend_config.epilogue is {type(epilogue).__name__}, not a string")
    return GemmConfig(
        _json_indices(dnums, "lhs_contracting_dimensions"),
        _json_indices(dnums, "rhs_contracting_dimensions"),
        _json_indices(dnums, "lhs_batch_dimensions"),
        _json_indices(dnums, "rhs_batch_dimensions"),
        epilogue,
    )


def _fusion_kind(cfg: dict[str, Any]) -> str:
    """The fusion backend kind of a parsed backend_config, '' if none; ValueError if mistyped."""
    for key in ("fusion_backend_config", "fusion_config"):
        sub = cfg.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            raise ValueError(f"{key} is {type(sub).__name__}, not an object")
        kind = sub.get("kind")
        if kind is None:
            continue
        if not isinstance(kind, str):
            raise ValueError(f"{key}.kind is {type(kind).__name__}, not a string")
        return kind
    return ""


def parse_int_list(text: str) -> tuple[int, ...]:
    """`{0,2}` (or `0,2`) as (0, 2); raises ValueError unless every entry is in 0..MAX_ID."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    if not body.strip():
        return ()
    out = []
    for part in body.split(","):
        n = decimal(part.strip(), MAX_ID)
        if n is None:
            raise ValueError(f"{clip(part.strip())} is not an integer in 0..2**62")
        out.append(n)
    return tuple(out)


class Instruction:
    """One HLO instruction. Structure and shape are eager; attributes parse lazily and cache.

    `path` and `line` say where it was read, and `attr_col` the 1-based column where its
    attribute text starts on that line, so lazy accessors raise a located ParseError.
    """

    __slots__ = (
        "_attrs",
        "_backend",
        "_bad",
        "_called",
        "_meta",
        "attr_col",
        "attr_text",
        "is_root",
        "line",
        "literal",
        "name",
        "opcode",
        "operands",
        "path",
        "shape",
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
        shape: Shape | None = None,
        path: str = "<string>",
        line: int = 0,
        attr_col: int = 0,
    ) -> None:
        self.name = name
        self.opcode = opcode
        self.shape_text = shape_text
        self.operands = operands
        self.attr_text = attr_text
        self.is_root = is_root
        self.literal = literal
        self.shape: Shape = parse_shape(shape_text) if shape is None else shape
        self.path = path
        self.line = line
        self.attr_col = attr_col
        self._attrs: dict[str, str] | None = None
        self._meta: dict[str, str] | None = None
        self._backend: dict[str, Any] | None = None
        self._called: tuple[str, ...] | None = None
        # Lazy parts that failed: part -> (what, attribute key) of their ParseError.
        self._bad: dict[str, tuple[str, str]] | None = None

    def __repr__(self) -> str:
        return f"Instruction({self.name!r}, {self.opcode!r}, {self.shape_text!r})"

    def error(self, what: str, key: str = "") -> ParseError:
        """A ParseError at this instruction, at attribute `key` when given (not raised)."""
        col = self.attr_col
        if key:
            at = self.attr_text.find(key + "=")
            col = col + at if col and at >= 0 else col
        return ParseError(self.path, max(self.line, 1), max(col, 1), what, self.text())

    @property
    def operand_names(self) -> tuple[str, ...]:
        """Operand instruction names with any `#k` tuple index removed."""
        return tuple(o.partition("#")[0] for o in self.operands)

    def _lazy(self, part: str, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """`read()`, with its failure (a _Bad) raised as a located ParseError and remembered,
        so that the next access raises again without re-reading a possibly huge text."""
        bad = self._bad
        if bad is not None and part in bad:
            raise self.error(*bad[part])
        try:
            return read()
        except _Bad as e:
            self._bad = {**(bad or {}), part: (e.what, e.key)}
            raise self.error(e.what, e.key) from None

    @property
    def attrs(self) -> dict[str, str]:
        """All attributes as raw strings, e.g. {'kind': 'kLoop', 'calls': '%fused'}.

        Raises ParseError when the text does not split (a bracket or quote left open, so
        every attribute after it would be lost) or a dimension-list attribute (`dimensions`,
        `*_contracting_dims`, `*_batch_dims`) holds anything but integers in 0..2**62.
        """
        if self._attrs is None:
            self._attrs = self._lazy("attrs", self._read_attrs)
        return self._attrs

    def _read_attrs(self) -> dict[str, str]:
        parts = split_top_level(self.attr_text) if self.attr_text else []
        if parts is None:
            raise _Bad("attributes do not balance: a bracket or quote is left open")
        attrs = _attribute_dict(parts)
        for key in _INT_LIST_ATTRS.intersection(attrs):
            try:
                parse_int_list(attrs[key])
            except ValueError as e:
                raise _Bad(f"{key}: {e}", key) from None
        return attrs

    def attr(self, key: str, default: str | None = None) -> str | None:
        """One raw attribute value, or `default`."""
        return self.attrs.get(key, default)

    def int_list_attr(self, key: str) -> tuple[int, ...]:
        """A dimension-list attribute such as `lhs_contracting_dims={1}` as (1,); () if absent.

        Raises ParseError (located) unless every entry is an integer in 0..2**62.
        """
        raw = self.attrs.get(key)
        if not raw:
            return ()
        try:
            return parse_int_list(raw)
        except ValueError as e:
            raise self.error(f"{key}: {e}", key) from None

    @property
    def metadata(self) -> dict[str, str]:
        """The parsed `metadata={...}` entries (op_name, source_file, stack_frame_id, ...).

        Raises ParseError when a numeric entry (stack_frame_id, source_line, ...) is not an
        integer in 0..2**62.
        """
        if self._meta is None:
            self._meta = self._lazy("metadata", self._read_metadata)
        return self._meta

    def _read_metadata(self) -> dict[str, str]:
        raw = self.attrs.get("metadata")
        meta = parse_metadata(raw) if raw else {}
        for key in _INT_METADATA.intersection(meta):
            if decimal(meta[key], MAX_ID) is None:
                what = f"metadata {key}={clip(meta[key])} is not an integer in 0..2**62"
                raise _Bad(what, "metadata")
        return meta

    @property
    def op_name(self) -> str:
        """The metadata op_name, or '' when absent."""
        return self.metadata.get("op_name", "")

    @property
    def backend_config(self) -> dict[str, Any]:
        """The backend_config JSON object ({} when absent or empty).

        XLA writes backend configs as JSON protos, so anything else is a ParseError, except on
        a custom-call whose config is not meant as JSON (see `_looks_like_json`): that config
        belongs to the call's target (typed-FFI calls write `{index = 0 : ui64}`) and reads as
        {}. The sub-configs cost and cluster code read are type-checked here too, so a present
        `gemm_backend_config` is a valid GemmConfig on an instruction with an output array, and
        a fusion `kind` is a string; violations are ParseErrors.
        """
        if self._backend is None:
            self._backend = self._lazy("backend_config", self._read_backend)
        return self._backend

    def _read_backend(self) -> dict[str, Any]:
        raw = self.attrs.get("backend_config")
        if not raw:
            return {}
        try:
            cfg = parse_json_config(raw)
        except ValueError as e:
            if self.opcode != "custom-call" or _looks_like_json(raw):
                raise _Bad(str(e), "backend_config") from None
            return {}
        try:
            if cfg.get("gemm_backend_config") is not None:
                _gemm_config(cfg["gemm_backend_config"])
                if not leaves(self.shape):
                    shape = clip(self.shape_text)
                    raise ValueError(f"GEMM {self.opcode} has no output array (shape {shape})")
            _fusion_kind(cfg)
        except ValueError as e:
            raise _Bad(str(e), "backend_config") from None
        return cfg

    def gemm_config(self) -> GemmConfig | None:
        """The typed `gemm_backend_config` of a library GEMM call, or None when there is none.

        Raises ParseError (located) when backend_config or its GEMM fields are malformed.
        """
        gemm = self.backend_config.get("gemm_backend_config")
        return None if gemm is None else _gemm_config(gemm)

    def fusion_backend_kind(self) -> str:
        """The fusion backend kind (`__triton_gemm`, `__ynn_fusion`, ...) or ''.

        Raises ParseError (located) when backend_config is malformed or `kind` is not a string.
        """
        return _fusion_kind(self.backend_config)

    def output_array(self) -> ArrayShape:
        """The first array of the output: the result of a GEMM call that returns
        (result, workspace), or the output itself when it is an array.

        Raises ParseError (located) when the output is a tuple without arrays, such as `()`.
        """
        found = leaves(self.shape)
        if not found:
            raise self.error(f"{self.opcode} {clip(self.name)} has no output array")
        return found[0]

    @property
    def frontend_attributes(self) -> dict[str, str]:
        """The `frontend_attributes={k="v",...}` entries."""
        raw = self.attrs.get("frontend_attributes")
        return parse_metadata(raw) if raw else {}

    @property
    def called_computations(self) -> tuple[str, ...]:
        """Names of computations referenced by calls/to_apply/condition/body/branches.

        Cached: every walk over the call graph reads it for every instruction.
        """
        if self._called is None:
            attrs = self.attrs
            out: list[str] = []
            for key in CALL_ATTRS:
                raw = attrs.get(key)
                if raw:
                    out.extend(
                        p.strip().lstrip("%") for p in raw.strip("{}").split(",") if p.strip()
                    )
            self._called = tuple(out)
        return self._called

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
    shape = parse_shape(shape_text)
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
    table_name = ""
    # Shapes repeat: parse each distinct text once per module.
    shapes: dict[str, Shape] = {}
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
            table_name = stripped
            tables_text.append(stripped)
            continue
        if table is not None:
            rm = _TABLE_ROW.match(stripped)
            if rm is None:
                raise ParseError(path, i, 1, "bad source-table row", line)
            row_id = decimal(rm.group(1), MAX_ID)
            if row_id is None:
                raise ParseError(
                    path, i, 1, f"{table_name} id {clip(rm.group(1))} is out of range", line
                )
            value = rm.group(2)
            if why := _table_row_error(table_name, value):
                raise ParseError(path, i, rm.start(2) + 1, why, line)
            table[row_id] = _unquote(value) if value.startswith('"') else value
            tables_text.append(stripped)
            continue
        header = _computation_header(line)
        if header is None or line[0] in " \t":
            raise ParseError(
                path, i, 1, "expected a computation header `%name (...) -> ... {`", line
            )
        comp_line = i
        is_entry, comp_name, signature = header
        insts: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        trailer = None
        while i < n:
            line = lines[i]
            i += 1
            fm = fast(line)
            if fm is not None:
                shape_text = fm.group(3)
                shape = shapes.get(shape_text)
                if shape is None:
                    try:
                        shape = shapes[shape_text] = parse_shape(shape_text)
                    except ShapeError as e:
                        raise ParseError(path, i, fm.start(3) + 1, str(e), line) from None
                op = fm.group(4)
                inner = fm.group(5)
                attr_text = fm.group(6) or ""
                # The attributes run to the end of the line.
                col = len(line) - len(attr_text) + 1 if attr_text else 0
                if op in _NO_OPERANDS:
                    inst = Instruction(
                        fm.group(2),
                        op,
                        shape_text,
                        (),
                        attr_text,
                        bool(fm.group(1)),
                        inner,
                        shape,
                        path,
                        i,
                        col,
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
                    if "#" in inner and (why := _tuple_index_error(operands)):
                        raise ParseError(path, i, fm.start(5) + 1, why, line)
                    inst = Instruction(
                        fm.group(2),
                        op,
                        shape_text,
                        operands,
                        attr_text,
                        bool(fm.group(1)),
                        None,
                        shape,
                        path,
                        i,
                        col,
                    )
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
        if comp_name in computations:
            raise ParseError(
                path,
                comp_line,
                1,
                f"duplicate computation {clip(comp_name)}",
                lines[comp_line - 1],
            )
        computations[comp_name] = Computation(
            comp_name, is_entry, signature, tuple(insts), trailer, by_name
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
