"""The XLA option names the installed jaxlib accepts, for a "did you mean" on a misspelled one.

XLA sets a compile option by reflection on its `DebugOptions` proto and answers an unknown
name with "No such compile option", naming no alternative. jaxlib's Python bindings expose a
few dozen of its fields (`_jax.DebugOptions`), and `XLA_FLAGS=--help` is cut at 15,000
bytes by the log, so the names are read where XLA itself reads them: the serialized
descriptor of xla/xla.proto that protobuf embeds in the library for reflection. Read only
when a compile has refused an option, and cached.
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Iterator
from pathlib import Path

from harness.common.protowire import varint

# A FileDescriptorProto starts with its name, field 1: tag 0x0a, length 13.
_MARKER = b"\n\rxla/xla.proto"
_WALK_BYTES = 8 << 20  # the walk stops here: the descriptor of xla.proto is a few hundred KB
_MESSAGE_TYPE, _NAME, _FIELD = 4, 1, 2  # FileDescriptorProto.message_type, .name, .field


def _fields(buf: bytes | mmap.mmap, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Yields (field number, bytes) of each length-delimited field in buf[start:end], skipping
    varints, until the end or the first thing that is not protobuf wire format."""
    pos = start
    while pos < end:
        tag, pos = varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = varint(buf, pos)
        elif wire == 2:
            size, pos = varint(buf, pos)
            if pos + size > end:
                return
            yield number, bytes(buf[pos : pos + size])
            pos += size
        else:
            return


def debug_option_names(descriptor: bytes | mmap.mmap, start: int = 0) -> frozenset[str]:
    """Returns the field names of message DebugOptions in the serialized FileDescriptorProto
    at `start`, or an empty set when it holds none."""
    end = min(len(descriptor), start + _WALK_BYTES)
    for number, message in _fields(descriptor, start, end):
        if number != _MESSAGE_TYPE:
            continue
        parts = list(_fields(message, 0, len(message)))
        if (_NAME, b"DebugOptions") not in parts:
            continue
        names = set()
        for part_number, field in parts:
            if part_number == _FIELD:
                names.update(v.decode() for n, v in _fields(field, 0, len(field)) if n == _NAME)
        return frozenset(names)
    return frozenset()


@functools.cache
def known() -> frozenset[str]:
    """Returns the DebugOptions field names of the installed jaxlib, or an empty set when its
    library holds no descriptor this reader understands (a suggestion is then left out)."""
    import jaxlib

    for library in sorted(Path(jaxlib.__file__).parent.glob("*.so*")):
        try:
            with library.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                at = m.find(_MARKER)
                if at >= 0:
                    return debug_option_names(m, at)
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            continue
    return frozenset()
