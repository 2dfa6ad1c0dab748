"""Typed JSON records: frozen dataclasses written as JSON and read back with validation.

Every file a run writes is one of these records (harness.records.summary defines them). A field
documents itself through `doc(...)`, so the key tables in results/README.md are generated
from the same classes the writers and readers use, and a reader names the file and the key
of any value that does not have the declared type.

This is the harness's one JSON<->dataclass layer: `to_json` writes records and the config
alike, and `from_json` reads both, the config through its own `Dialect` (its ConfigError and
the fields it reads itself, harness.config.schema). An unknown key is named with the closest
valid one ("did you mean"), and every mistake is one line naming the file and the dotted key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

# A value the schema leaves open (a config mapping, a plain dict of figures).
Plain = Any
# The default of a mapping field: a new empty dict per record.
EMPTY = object()


class SchemaError(ValueError):
    """A record that does not match its schema; names the file and the dotted key."""

    def __init__(self, source: str, key: str, problem: str):
        self.source, self.key, self.problem = source, key, problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


# What a harness-written JSON file can hold. The writers never nest deeper than a few levels,
# write NaN or infinities (they become null) or integers longer than a byte count, so anything
# past these bounds is a damaged or planted file: refused here, in one line, before a deep
# structure can exhaust the stack or a huge number overflow a float in a report.
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40


class _Refused(ValueError):
    """A JSON value outside what a harness writes (raised inside the decoder's hooks)."""


def _no_constant(name: str) -> Any:
    raise _Refused(f"holds {name}, which is not standard JSON (the harness writes null)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"holds the number {text[:40]}, too large for a float")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"holds an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _depth_exceeds(data: Any, limit: int) -> bool:
    """True when lists and objects nest deeper than `limit` (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            items = node.values() if isinstance(node, dict) else node
            stack.extend((v, depth + 1) for v in items if isinstance(v, dict | list))
    return False


def loads(text: str | bytes, source: str) -> Any:
    """Returns the data of JSON `text`; raises SchemaError naming `source` for text that is not
    JSON or holds what no harness writes: NaN or infinities, a number too large for a float,
    an integer of more than MAX_INT_DIGITS digits, nesting deeper than MAX_JSON_DEPTH."""
    try:
        data = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except RecursionError:
        raise SchemaError(source, "", f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except _Refused as e:
        raise SchemaError(source, "", str(e)) from None
    except ValueError as e:  # JSONDecodeError, a bad encoding
        raise SchemaError(source, "", f"not JSON: {e}") from None
    if _depth_exceeds(data, MAX_JSON_DEPTH):
        raise SchemaError(source, "", f"nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def doc(text: str, default: Any = None) -> Any:
    """Returns a dataclass field with a default and its documentation for the key tables."""
    if default is EMPTY:
        return dataclasses.field(default_factory=dict, metadata={"doc": text})
    if isinstance(default, list | dict | set):
        raise TypeError("mutable defaults are not allowed; use a tuple, None or EMPTY")
    return dataclasses.field(default=default, metadata={"doc": text})


def to_json(obj: Any) -> Any:
    """Returns plain JSON data for a record or a config: dataclasses become dicts, tuples and
    lists lists, mappings dicts with string keys, NaN and infinities None.

    The one serializer of the harness (summary files, the config in the manifest and the
    worker's hello, analysis.json). It walks the fields itself: dataclasses.asdict deep-copies
    every leaf, which costs seconds on thousands of cluster rows.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if _non_finite(value):
                _refuse_non_finite(type(obj), f.name, value)
            out[f.name] = to_json(value)
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


class NonFinite(SchemaError):
    """A record holding NaN or an infinity where its schema has no room for null."""


def _non_finite(value: Any) -> bool:
    """True for a NaN or an infinity, or a tuple of a few numbers (an interval) holding one."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, tuple) and len(value) <= 4:
        return any(isinstance(v, float) and not math.isfinite(v) for v in value)
    return False


def _refuse_non_finite(cls: type, name: str, value: Any) -> None:
    """Raises NonFinite when field `name` of record `cls` holds NaN or an infinity where null
    would not read back: a field typed `float`, or an element of a tuple of floats (an
    interval `[0.0, null]` broke every later reader of the run). A field that may be null is
    written as null, as before."""
    hint = _hints(cls).get(name)
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members = typing.get_args(hint) if union else (hint,)
    float_tuple = any(
        typing.get_origin(m) is tuple and all(a in (float, ...) for a in typing.get_args(m))
        for m in members
    )
    # A null in place of a float field reads back where the field may be null; inside an
    # interval it never does.
    if hint is float or (isinstance(value, tuple) and float_tuple):
        raise NonFinite(
            cls.__name__, name, f"holds {value!r}; a record never writes NaN or infinity"
        )


def _type_name(tp: Any) -> str:
    """The JSON type of an annotation, as the key tables name it."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "list"
    if origin is dict or tp is dict:
        return "object"
    if dataclasses.is_dataclass(tp):
        return "object"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # Cached: resolving the string annotations is most of the cost of reading a summary.
    return typing.get_type_hints(cls)


@functools.cache
def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


# --- reading: JSON (or YAML) data into records, one error naming the file and the key --------

# Reads one field whose data is not its annotation's plain form (a config's program inputs, a
# study's variants): (value, source, dotted key, the mapping the field is in) -> the value.
FieldReader = Callable[[Any, str, str, Mapping[str, Any]], Any]
# Completes a record's keyword arguments once its fields are read (a program's inputs decide
# how its new shapes read): (kwargs, source, dotted key of the record, defaults) -> kwargs.
Finisher = Callable[[dict[str, Any], str, str, Any], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Dialect:
    """How one family of files is read into records: the error every mistake raises (a class
    taking source, key, problem), and the fields whose data needs a reader of its own.

    The records of a run read with RECORDS; the config (harness.config.schema) with its own
    error, ConfigError, and readers for its program and variants. The walk, the types, the
    messages and the "did you mean" suggestions are this module's, for both.
    """

    error: type[ValueError] = SchemaError
    fields: Mapping[tuple[type, str], FieldReader] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    finish: Mapping[type, Finisher] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    # Given, the walk reads on past a mistake and raises every one of a record at once, as
    # this makes them one error (a config lists all its mistakes); without, the first.
    combine: Callable[[list[Any]], ValueError] | None = None


RECORDS = Dialect()


def from_json(
    cls: type,
    data: Any,
    source: str,
    key: str = "",
    dialect: Dialect = RECORDS,
    defaults: Any = None,
) -> Any:
    """Returns `cls` built from JSON `data`; raises the dialect's error naming `source` and the
    dotted key of the first mistake: an unknown key (with the closest valid one), a value of
    another type, a required key left out.

    `defaults`, an instance of `cls`, fills the keys `data` leaves out (a config's variant
    starts from the study's problem and program).
    """
    return _record(cls, data, source, key, dialect, defaults)


def decode(tp: Any, value: Any, source: str, key: str, dialect: Dialect = RECORDS) -> Any:
    """Returns `value` checked against the annotation `tp` (lists become tuples, mappings of
    records records); raises the dialect's error naming `source` and `key`."""
    return _value(tp, value, source, key, dialect)


def suggest(key: str, valid: Iterable[str]) -> str:
    """Returns ' (did you mean X?)' for the closest valid key, or '; valid: ...' listing them all."""
    valid = [str(v) for v in valid]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; valid: {', '.join(valid)}" if valid else ""


def shown(value: Any) -> str:
    """Returns a value for an error message, cut short: a 10**23 seed is printed, not a novel."""
    if isinstance(value, int) and value.bit_length() > 128:
        # repr() of a long integer is slow, and past 4300 digits it raises ValueError.
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _wanted(tp: Any) -> str:
    """What an annotation asks for, as an error message says it: `list of int`, `str or null`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_wanted(a) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list of {_wanted(args[0])}"
        return f"list of {len(args)}"
    if _is_mapping(tp) or dataclasses.is_dataclass(tp):
        return "a mapping"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _got(value: Any) -> str:
    return "null" if value is None else shown(value)


def _is_mapping(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin in (dict, Mapping)


def _value(tp: Any, value: Any, source: str, key: str, d: Dialect) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_value(tp, value, source, key, d)
    if origin is tuple:
        return _tuple_value(tp, value, source, key, d)
    if _is_mapping(tp):
        if not isinstance(value, Mapping):
            raise d.error(source, key, f"expected a mapping, got {_got(value)}")
        args = typing.get_args(tp) or (str, Any)
        return {str(k): _value(args[1], v, source, f"{key}.{k}", d) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _record(tp, value, source, key, d, None)
    if not _is_scalar(tp):
        raise TypeError(f"unsupported schema type {tp!r} at {key}")
    return _scalar_value(tp, value, source, key, d)


def _union_value(tp: Any, value: Any, source: str, key: str, d: Dialect) -> Any:
    """Returns `value` as the first of a union's types that takes it."""
    args = typing.get_args(tp)
    if value is None and type(None) in args:
        return None
    options = [a for a in args if a is not type(None)]
    if len(options) == 1 and value is not None and not _is_scalar(options[0]):
        # An optional record or list: its own error names the key inside it.
        return _value(options[0], value, source, key, d)
    for arg in options:
        try:
            return _value(arg, value, source, key, d)
        except d.error:
            continue
    raise d.error(source, key, f"expected {_wanted(tp)}, got {_got(value)}")


def _tuple_value(tp: Any, value: Any, source: str, key: str, d: Dialect) -> tuple[Any, ...]:
    """Returns a list as the tuple `tp` asks for: any length of one type (`tuple[int, ...]`),
    or exactly one item per type."""
    if not isinstance(value, list | tuple):
        raise d.error(source, key, f"expected {_wanted(tp)}, got {_got(value)}")
    args = typing.get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_value(args[0], v, source, f"{key}[{i}]", d) for i, v in enumerate(value))
    if len(value) != len(args):
        raise d.error(source, key, f"expected a list of {len(args)}, got {len(value)}")
    return tuple(
        _value(a, v, source, f"{key}[{i}]", d)
        for i, (a, v) in enumerate(zip(args, value, strict=True))
    )


def _scalar_value(tp: Any, value: Any, source: str, key: str, d: Dialect) -> Any:
    """Returns a scalar checked by `scalar`, its refusal as the dialect's error."""
    try:
        return scalar(tp, value)
    except ValueError:
        if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
            # scalar refuses a NaN, an infinity and an integer past a float's range
            raise d.error(source, key, f"must be a finite number, got {_got(value)}") from None
        raise d.error(source, key, f"expected {_wanted(tp)}, got {_got(value)}") from None


SCALARS = (bool, int, float, str)


def _is_scalar(tp: Any) -> bool:
    return tp in SCALARS


def scalar(tp: type, value: Any) -> Any:
    """Returns a JSON or YAML scalar checked against one of SCALARS (an int is a float, a
    bool is never a number); raises ValueError when it is not one."""
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp in (int, float):
        ok = isinstance(value, int | float if tp is float else int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    if not ok:
        raise ValueError(value)
    if tp is float:
        # float() of a 400-digit integer overflows, and an infinity or NaN would reach the
        # arithmetic of every reader: neither is a value any field means.
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(value) from None
        if not math.isfinite(value):
            raise ValueError(value)
    return value


def _record(cls: type, value: Any, source: str, key: str, d: Dialect, defaults: Any) -> Any:
    if not isinstance(value, Mapping):
        raise d.error(source, key or "<top level>", f"expected a mapping, got {_got(value)}")
    fields = _fields(cls)
    kwargs: dict[str, Any] = {}
    errors: list[ValueError] = []
    for name, raw in value.items():
        sub = f"{key}.{name}" if key else str(name)
        try:
            kwargs[name] = _field(cls, name, raw, value, source, sub, d, defaults)
        except d.error as e:
            if d.combine is None:
                raise
            errors.append(e)
    for name, f in fields.items():
        if (
            defaults is None
            and name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ):
            errors.append(d.error(source, f"{key}.{name}" if key else name, "is required"))
    if errors:
        raise errors[0] if d.combine is None else d.combine(errors)
    finish = d.finish.get(cls)
    if finish is not None:
        kwargs = finish(kwargs, source, key, defaults)
    if defaults is not None:
        return dataclasses.replace(defaults, **kwargs)
    return cls(**kwargs)


def _field(
    cls: type,
    name: Any,
    raw: Any,
    value: Mapping[str, Any],
    source: str,
    sub: str,
    d: Dialect,
    defaults: Any,
) -> Any:
    """Returns one key of a record read; raises the dialect's error naming `sub`."""
    fields = _fields(cls)
    if name not in fields:
        raise d.error(source, sub, "unknown key" + suggest(str(name), fields))
    reader = d.fields.get((cls, name))
    tp = _hints(cls)[name]
    if reader is not None:
        return reader(raw, source, sub, value)
    if defaults is not None and dataclasses.is_dataclass(tp):
        return _record(tp, raw, source, sub, d, getattr(defaults, name))
    return _value(tp, raw, source, sub, d)


def _element(tp: Any) -> tuple[Any, str]:
    """Returns the record type inside an optional/tuple/dict annotation and the key suffix."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not type(None):
                inner, suffix = _element(arg)
                if dataclasses.is_dataclass(inner):
                    return inner, suffix
        return tp, ""
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            inner, suffix = _element(args[0])
            return inner, "[]" + suffix
    if origin is dict:
        inner, suffix = _element(typing.get_args(tp)[1])
        return inner, ".<name>" + suffix
    return tp, ""


def documented_keys(cls: type, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """Yields (dotted key, JSON type, documentation) for every field, nested records expanded."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        inner, suffix = _element(hints[f.name])
        yield key, _type_name(hints[f.name]), f.metadata.get("doc", "")
        if dataclasses.is_dataclass(inner):
            yield from documented_keys(inner, f"{key}{suffix}.")


def emitted_keys(cls: type, data: Any, prefix: str = "") -> set[str]:
    """Returns the dotted keys present in JSON `data` of record `cls`, in documented_keys' notation.

    Walks the data and the class together, so the keys inside open mappings (a config's
    problem, per-cluster counts) are not expanded, while nested records are; a key the class
    does not know is returned as it is, for the caller to flag. A record field written as
    null (or a list of records written empty) is emitted with all its keys: the writer wrote
    the field, and there was nothing in it this time.
    """
    out: set[str] = set()
    if not isinstance(data, dict):
        return out
    hints = _hints(cls)
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.add(key)
        if k not in hints:
            continue
        inner, suffix = _element(hints[k])
        if not dataclasses.is_dataclass(inner):
            continue
        if v is None or v == [] or v == {}:
            out |= {key for key, _, _ in documented_keys(inner, f"{key}{suffix}.")}
        elif suffix == "":
            out |= emitted_keys(inner, v, f"{key}.")
        elif suffix.startswith("[]"):
            for item in v if isinstance(v, list) else ():
                out |= emitted_keys(inner, item, f"{key}[].")
        elif suffix.startswith(".<name>"):
            for item in v.values() if isinstance(v, dict) else ():
                out |= emitted_keys(inner, item, f"{key}.<name>.")
    return out


def markdown_table(cls: type, prefix: str = "") -> str:
    """Returns the Markdown key table of a record: key, JSON type, meaning."""
    rows = ["| key | type | meaning |", "|---|---|---|"]
    for key, kind, text in documented_keys(cls, prefix):
        rows.append(f"| `{key}` | {kind} | {text} |")
    return "\n".join(rows)


def first_difference(a: Any, b: Any, path: str) -> str | None:
    """Returns the dotted key where two plain values first differ, or None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            found = first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else path
