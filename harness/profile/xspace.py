"""The XSpace protobuf read as it is stored: planes, lines, events and their stats by id.

`jax.profiler.ProfileData` turns every stat of every event into a Python string or number as
it is touched, which is the whole cost of walking a long profile. The stored form keeps each
string once: an event names its metadata by id, a `ref_value` stat names a stat metadata
whose name is the string. Reading that form through protobuf's upb backend lets the event
table (harness.profile.table) keep ids, resolving each distinct string once per plane.

The schema is XProf's `xplane.proto` (package `tensorflow.profiler`), declared here field by
field because no installed package ships its Python module; jax's profiler writes this format.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from harness.common.protowire import varint

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tensorflow.profiler"
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_I64, _U64, _DBL = _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_DOUBLE
_STR, _BYTES, _MSG = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE

# (message, fields as (name, number, type, repeated, message type, oneof index), oneofs)
_Field = tuple[str, int, int, bool, str, int | None]
_MESSAGES: tuple[tuple[str, tuple[_Field, ...], tuple[str, ...]], ...] = (
    (
        "XSpace",
        (
            ("planes", 1, _MSG, True, "XPlane", None),
            ("errors", 2, _STR, True, "", None),
            ("warnings", 3, _STR, True, "", None),
            ("hostnames", 4, _STR, True, "", None),
        ),
        (),
    ),
    (
        "XPlane",
        (
            ("id", 1, _I64, False, "", None),
            ("name", 2, _STR, False, "", None),
            ("lines", 3, _MSG, True, "XLine", None),
            ("event_metadata", 4, _MSG, True, "XPlane.EventMetadataEntry", None),
            ("stat_metadata", 5, _MSG, True, "XPlane.StatMetadataEntry", None),
            ("stats", 6, _MSG, True, "XStat", None),
        ),
        (),
    ),
    (
        "XLine",
        (
            ("id", 1, _I64, False, "", None),
            ("display_id", 10, _I64, False, "", None),
            ("name", 2, _STR, False, "", None),
            ("display_name", 11, _STR, False, "", None),
            ("timestamp_ns", 3, _I64, False, "", None),
            ("duration_ps", 9, _I64, False, "", None),
            ("events", 4, _MSG, True, "XEvent", None),
        ),
        (),
    ),
    (
        "XEvent",
        (
            ("metadata_id", 1, _I64, False, "", None),
            ("offset_ps", 2, _I64, False, "", 0),
            ("num_occurrences", 5, _I64, False, "", 0),
            ("duration_ps", 3, _I64, False, "", None),
            ("stats", 4, _MSG, True, "XStat", None),
        ),
        ("data",),
    ),
    (
        "XStat",
        (
            ("metadata_id", 1, _I64, False, "", None),
            ("double_value", 2, _DBL, False, "", 0),
            ("uint64_value", 3, _U64, False, "", 0),
            ("int64_value", 4, _I64, False, "", 0),
            ("str_value", 5, _STR, False, "", 0),
            ("bytes_value", 6, _BYTES, False, "", 0),
            ("ref_value", 7, _U64, False, "", 0),
        ),
        ("value",),
    ),
    (
        "XEventMetadata",
        (
            ("id", 1, _I64, False, "", None),
            ("name", 2, _STR, False, "", None),
            ("display_name", 4, _STR, False, "", None),
            ("metadata", 3, _BYTES, False, "", None),
            ("stats", 5, _MSG, True, "XStat", None),
            ("child_id", 6, _I64, True, "", None),
        ),
        (),
    ),
    (
        "XStatMetadata",
        (
            ("id", 1, _I64, False, "", None),
            ("name", 2, _STR, False, "", None),
            ("description", 3, _STR, False, "", None),
        ),
        (),
    ),
)
_MAPS = {
    "XPlane": (("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata"))
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="harness_xplane.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields, oneofs in _MESSAGES:
        message = fd.message_type.add(name=name)
        for entry, value in _MAPS.get(name, ()):
            nested = message.nested_type.add(name=entry)
            nested.field.add(name="key", number=1, type=_I64, label=_OPTIONAL)
            nested.field.add(
                name="value", number=2, type=_MSG, label=_OPTIONAL, type_name=f".{_PACKAGE}.{value}"
            )
            nested.options.map_entry = True
        for fname, number, ftype, repeated, type_name, oneof in fields:
            field = message.field.add(
                name=fname, number=number, type=ftype, label=_REPEATED if repeated else _OPTIONAL
            )
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if oneof is not None:
                field.oneof_index = oneof
        for oneof_name in oneofs:
            message.oneof_decl.add(name=oneof_name)
    return fd


@cache
def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name, _, _ in _MESSAGES
    }


def parse(data: bytes) -> Any:
    """The XSpace message of a serialized profile (raises protobuf's DecodeError on bad bytes)."""
    return _classes()["XSpace"].FromString(data)


def message(name: str) -> Any:
    """The message class `name` (`XSpace`, `XPlane`, ...): for tools that write profiles."""
    return _classes()[name]


# --- reading a large profile a piece at a time ----------------------------------------------------
# The parsed form of an XSpace takes about seven times its serialized size; a profile of a few
# hundred megabytes is therefore walked plane by plane and line by line, and a line's events
# in chunks of CHUNK_EVENTS: consecutive events of a line are one contiguous run of bytes, a
# valid serialization of an XLine holding just them.
CHUNK_EVENTS = 65536
_LEN = 2
_PLANES, _LINES, _EVENTS = 1, 3, 4


def _fields(buf: Any, start: int, end: int) -> Any:
    """Yields (field number, start of its tag, start of its value, end) for each field."""
    pos = start
    while pos < end:
        tag_at = pos
        key, pos = varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, pos = varint(buf, pos)
            yield key >> 3, tag_at, pos, pos
            continue
        if wire == 1:
            value_at, pos = pos, pos + 8
        elif wire == 5:
            value_at, pos = pos, pos + 4
        elif wire == _LEN:
            size, value_at = varint(buf, pos)
            pos = value_at + size
        else:
            raise ValueError(f"wire type {wire} at byte {tag_at}")
        if pos > end:
            raise ValueError(f"field at byte {tag_at} runs past its message")
        yield key >> 3, tag_at, value_at, pos


class Line:
    """One line of a plane: its name, timestamp and events, parsed a chunk at a time."""

    def __init__(self, buf: Any, start: int, end: int) -> None:
        head = bytearray()
        self._runs: list[tuple[int, int]] = []
        run_start = run_end = -1
        count = 0
        for number, tag_at, _, stop in _fields(buf, start, end):
            if number != _EVENTS:
                head += buf[tag_at:stop]
                continue
            if tag_at != run_end or count == CHUNK_EVENTS:
                if run_start >= 0:
                    self._runs.append((run_start, run_end))
                run_start, count = tag_at, 0
            run_end = stop
            count += 1
        if run_start >= 0:
            self._runs.append((run_start, run_end))
        parsed = message("XLine").FromString(bytes(head))
        self.name: str = parsed.name
        self.timestamp_ns: int = parsed.timestamp_ns
        self._buf = buf

    @property
    def events(self) -> Any:
        """The line's events, in order; a chunk's parsed form is dropped once walked."""
        for run in range(len(self._runs)):
            yield from self.chunk(run)

    @property
    def chunks(self) -> int:
        return len(self._runs)

    def chunk(self, run: int) -> Any:
        """The events of the line's `run`-th chunk (at most CHUNK_EVENTS), parsed."""
        start, end = self._runs[run]
        return message("XLine").FromString(bytes(self._buf[start:end])).events


class Plane:
    """One plane: its name and metadata parsed, its lines parsed as they are walked."""

    def __init__(self, buf: Any, start: int, end: int) -> None:
        head = bytearray()
        self._lines: list[tuple[int, int]] = []
        for number, tag_at, value_at, stop in _fields(buf, start, end):
            if number == _LINES:
                self._lines.append((value_at, stop))
            else:
                head += buf[tag_at:stop]
        parsed = message("XPlane").FromString(bytes(head))
        self.name: str = parsed.name
        self.event_metadata = parsed.event_metadata
        self.stat_metadata = parsed.stat_metadata
        self._buf = buf

    @property
    def lines(self) -> Any:
        for start, end in self._lines:
            yield Line(self._buf, start, end)


def planes(buf: Any) -> list[Plane]:
    """The planes of a serialized XSpace (bytes or a memoryview), each read lazily."""
    return [
        Plane(buf, value_at, stop)
        for number, _, value_at, stop in _fields(buf, 0, len(buf))
        if number == _PLANES
    ]
