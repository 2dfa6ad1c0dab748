"""One HLO instruction and its attribute text, as harness.hlo.parser reads them.

Structure and shape are read eagerly by the scanner; heavy attribute text stays raw: `attrs`,
`metadata`, `backend_config` and `frontend_attributes` are parsed on first use and cached.

Input is untrusted, so every reading here is linear in the text (explicit scanning or
possessive regexes, nothing that backtracks), never recurses on input depth, and range-checks
every number. Bad text is a ParseError naming the file, line and column: each instruction
remembers where it was read, so a lazy accessor raises it located. No other exception
escapes for bad text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.hlo.shapes import ArrayShape, Shape, clip, decimal, leaves, parse_shape


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


# Largest id, index or line number accepted anywhere (XLA's are int64).
MAX_ID = 2**62

# A quoted string, possessively, with group 1 set only when it closes: an unclosed quote
# takes the rest of the text in one linear step (and makes the text unbalanced) instead of
# being retried from every later quote, which was quadratic.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(")?|[()\[\]{},]')
# `key=value` items. The lookbehind starts a key only at the start of a word, so a long run of
# word characters without `=` is rejected once, not once per character (quadratic before).
_META_ITEM = re.compile(r'(?<![\w.])([\w.]++)=("[^"\\]*+(?:\\.[^"\\]*+)*+"|[^\s}]*+)')
# The same without commas, for `matching_close`, which only follows brackets.
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


def unquote(value: str) -> str:
    """A quoted value without its quotes, escapes decoded; any other text as it is."""
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


def matching_close(text: str, open_pos: int) -> int:
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
    return {k: unquote(v) for k, v in _META_ITEM.findall(body)}


def parse_json_config(text: str) -> dict[str, Any]:
    """Parse a backend_config value: a JSON object, possibly inside a quoted string.

    Returns the object ({} for empty text). Raises ValueError saying what is wrong when the
    text is not a JSON object, including JSON nested too deeply for the decoder and integers
    too long to convert.
    """
    value = text.strip()
    if value.startswith('"'):
        value = unquote(value).strip()
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
        value = unquote(value).strip()
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
        return unquote(raw) if raw else ""

    def text(self) -> str:
        """This instruction as one line of HLO text (without indentation)."""
        head = "ROOT " if self.is_root else ""
        if self.literal is not None:
            inner = self.literal
        else:
            inner = ", ".join("%" + o for o in self.operands)
        tail = ", " + self.attr_text if self.attr_text else ""
        return f"{head}%{self.name} = {self.shape_text} {self.opcode}({inner}){tail}"
