"""Protobuf's wire format read by hand, where a message is too large to parse whole (a
profile of hundreds of megabytes) or sits inside other bytes (the descriptor in a library)."""

from __future__ import annotations

from typing import Any

_MAX_SHIFT = 63  # a varint holds at most 64 bits: ten bytes


def varint(buf: Any, pos: int) -> tuple[int, int]:
    """Returns the varint starting at buf[pos] and the position after it; ValueError for one
    longer than ten bytes, IndexError for one cut off by the end of `buf` (bytes, mmap)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > _MAX_SHIFT:
            raise ValueError("varint too long")
