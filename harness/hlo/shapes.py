"""HLO shape text: parsing into frozen values and byte/element arithmetic."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

DTYPE_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1,
    "u1": 1,
    "s2": 2,
    "u2": 2,
    "s4": 4,
    "u4": 4,
    "s8": 8,
    "u8": 8,
    "s16": 16,
    "u16": 16,
    "s32": 32,
    "u32": 32,
    "s64": 64,
    "u64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "c64": 64,
    "c128": 128,
    "f4e2m1fn": 4,
    "f8e8m0fnu": 8,
    "f8e5m2": 8,
    "f8e4m3": 8,
    "f8e4m3fn": 8,
    "f8e4m3b11fnuz": 8,
    "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8,
    "f8e3m4": 8,
    "token": 0,
    "opaque": 0,
}


@dataclass(frozen=True, slots=True)
class ArrayShape:
    """An array (or token) shape: dtype, dims, and the raw layout text inside `{}`.

    `dims` holds bounds for dynamic dimensions (`<=8` gives 8) and -1 for unbounded `?`.
    """

    dtype: str
    dims: tuple[int, ...]
    layout: str | None = None
    dynamic: tuple[bool, ...] = ()

    @property
    def elements(self) -> int:
        """Number of elements; 0 when any dimension is unbounded."""
        if any(d < 0 for d in self.dims):
            return 0
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        """Dense size in bytes (sub-byte types rounded up); 0 for tokens and unknown dtypes."""
        return (self.elements * DTYPE_BITS.get(self.dtype, 0) + 7) // 8

    def __str__(self) -> str:
        dims = ",".join(
            ("<=" if dyn else "") + ("?" if d < 0 else str(d))
            for d, dyn in zip(self.dims, self.dynamic or (False,) * len(self.dims), strict=True)
        )
        layout = "" if self.layout is None else "{" + self.layout + "}"
        return f"{self.dtype}[{dims}]{layout}"


@dataclass(frozen=True, slots=True)
class TupleShape:
    """A (possibly nested) tuple shape."""

    elements: tuple[ArrayShape | TupleShape, ...]

    @property
    def bytes(self) -> int:
        """Sum of the element sizes (tuple index tables are not counted)."""
        return sum(e.bytes for e in self.elements)

    def leaves(self) -> tuple[ArrayShape, ...]:
        """All array shapes in depth-first order."""
        out: list[ArrayShape] = []
        for e in self.elements:
            out.extend(e.leaves() if isinstance(e, TupleShape) else (e,))
        return tuple(out)

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


Shape = ArrayShape | TupleShape

_ARRAY = re.compile(r"\s*([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^{}]*)\})?\s*")
_COMMENT = re.compile(r"/\*.*?\*/")


class ShapeError(ValueError):
    """Raised for shape text that is not an HLO shape."""


def _parse_dims(text: str, whole: str) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if not text.strip():
        return (), ()
    dims: list[int] = []
    dyn: list[bool] = []
    for part in text.split(","):
        p = part.strip()
        is_dyn = p.startswith("<=")
        if is_dyn:
            p = p[2:]
        if p == "?":
            dims.append(-1)
        elif p.isdigit():
            dims.append(int(p))
        else:
            raise ShapeError(f"bad dimension {part!r} in shape {whole!r}")
        dyn.append(is_dyn)
    return tuple(dims), tuple(dyn) if any(dyn) else ()


def _parse_at(text: str, pos: int, whole: str) -> tuple[Shape, int]:
    if pos < len(text) and text[pos] == "(":
        pos += 1
        elems: list[Shape] = []
        while True:
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos < len(text) and text[pos] == ")":
                return TupleShape(tuple(elems)), pos + 1
            elem, pos = _parse_at(text, pos, whole)
            elems.append(elem)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
            elif pos < len(text) and text[pos] == ")":
                return TupleShape(tuple(elems)), pos + 1
            else:
                raise ShapeError(f"unterminated tuple shape {whole!r}")
    m = _ARRAY.match(text, pos)
    if m is None:
        raise ShapeError(f"not a shape: {whole!r}")
    dims, dyn = _parse_dims(m.group(2), whole)
    return ArrayShape(m.group(1), dims, m.group(3), dyn), m.end()


@functools.lru_cache(maxsize=4096)
def parse_shape(text: str) -> Shape:
    """Parse HLO shape text such as `bf16[8,16]{1,0:T(8,128)S(1)}` or a nested tuple.

    Returns frozen shape values; cached because real modules repeat a few shapes many times.
    Raises ShapeError (a ValueError) for anything else.
    """
    clean = _COMMENT.sub("", text) if "/*" in text else text
    shape, end = _parse_at(clean, 0, text)
    if clean[end:].strip():
        raise ShapeError(f"trailing text after shape {text!r}")
    return shape


def shape_bytes(shape: Shape) -> int:
    """Total bytes of a shape (tuple elements summed)."""
    return shape.bytes


def leaves(shape: Shape) -> tuple[ArrayShape, ...]:
    """The array shapes of `shape`: itself for an array, the flattened elements for a tuple."""
    return shape.leaves() if isinstance(shape, TupleShape) else (shape,)
