"""HLO shape text: parsing into frozen values and byte/element arithmetic.

Shape text comes from untrusted files, so parsing is linear in the text (no backtracking
regex, no recursion: tuples are parsed with an explicit stack) and every number is range
checked: a dimension above MAX_DIM, an element count that does not fit int64, or tuples nested
deeper than MAX_TUPLE_DEPTH are ShapeErrors, never OverflowError or RecursionError later on.
"""

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
        if self.dims and min(self.dims) < 0:
            return 0
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        """Dense size in bytes (sub-byte types rounded up); 0 for tokens and unknown dtypes."""
        return (self.elements * DTYPE_BITS.get(self.dtype, 0) + 7) // 8

    def __str__(self) -> str:
        if not self.dynamic and (not self.dims or min(self.dims) >= 0):
            dims = ",".join(map(str, self.dims))
        else:
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
        return sum(leaf.bytes for leaf in self.leaves())

    def leaves(self) -> tuple[ArrayShape, ...]:
        """All array shapes in depth-first order; () for an empty tuple such as `()`."""
        out: list[ArrayShape] = []
        stack = [iter(self.elements)]
        while stack:
            element = next(stack[-1], None)
            if element is None:
                stack.pop()
            elif isinstance(element, TupleShape):
                stack.append(iter(element.elements))
            else:
                out.append(element)
        return tuple(out)

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


Shape = ArrayShape | TupleShape

# Bounds on what shape text may say. XLA's dimensions and element counts are int64, so a
# dimension above 2**62 or a product above 2**63-1 cannot come from XLA; refusing them keeps
# every later product and float conversion (flops, bytes) finite. Real tuples nest a few
# levels; 64 keeps the recursive dataclass methods (==, hash, repr, str) far from the limit.
MAX_DIM = 2**62
MAX_ELEMENTS = 2**63 - 1
MAX_TUPLE_DEPTH = 64

# Possessive quantifiers: every piece is followed by a character it cannot contain, so the
# match is linear and a failure never backtracks.
_ARRAY = re.compile(r"\s*+([a-z][a-z0-9]*+)\[([^\]]*+)\](?:\{([^{}]*+)\})?\s*+")
_BLANKS = re.compile(r"[ \t]*+")
_PLAIN_DIMS = re.compile(r"[0-9]{1,19}+(?:,[0-9]{1,19}+)*+")
_CACHED_TEXT = 256


class ShapeError(ValueError):
    """Raised for shape text that is not an HLO shape."""


def clip(text: str, limit: int = 60) -> str:
    """`repr(text)`, shortened to about `limit` characters, for error messages about big input."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"...({len(text)} chars)"


def decimal(text: str, limit: int) -> int | None:
    """The value of `text` when it is ASCII digits denoting at most `limit`, else None.

    The one way the HLO modules turn text into a number: int() alone accepts Unicode digits,
    signs, underscores and 4300-digit strings (or raises ValueError on longer ones).
    """
    if not text.isascii() or not text.isdigit() or len(text.lstrip("0")) > 20:
        return None
    value = int(text)
    return value if value <= limit else None


def strip_comments(text: str) -> str:
    """`text` without its `/*...*/` comments; an unclosed `/*` and what follows are kept.

    Explicit scanning rather than a lazy regex, which rescans to the end for every unclosed
    `/*` (quadratic on a line of them).
    """
    start = text.find("/*")
    if start < 0:
        return text
    out: list[str] = []
    pos = 0
    while start >= 0:
        end = text.find("*/", start + 2)
        if end < 0:
            break
        out.append(text[pos:start])
        pos = end + 2
        start = text.find("/*", pos)
    out.append(text[pos:])
    return "".join(out)


def _check_elements(dims: tuple[int, ...], whole: str) -> None:
    """ShapeError unless the product of the (non-negative) dims fits int64."""
    if len(dims) < 64:
        if math.prod(dims) > MAX_ELEMENTS:
            raise ShapeError(f"shape {clip(whole)} has more than 2**63-1 elements")
        return
    if 0 in dims:
        return
    big = [d for d in dims if d > 1]
    # Every factor is >= 2, so more than 63 of them overflow without multiplying huge ints.
    if len(big) > 63 or math.prod(big) > MAX_ELEMENTS:
        raise ShapeError(f"shape {clip(whole)} has more than 2**63-1 elements")


def _parse_dims(text: str, whole: str) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if _PLAIN_DIMS.fullmatch(text):
        # Static dims, the common case: converted and checked at C speed.
        dims = tuple(map(int, text.split(",")))
        if max(dims) > MAX_DIM:
            raise ShapeError(f"a dimension of shape {clip(whole)} is above 2**62")
        _check_elements(dims, whole)
        return dims, ()
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
        else:
            d = decimal(p, MAX_DIM)
            if d is None:
                raise ShapeError(
                    f"bad dimension {clip(part)} in shape {clip(whole)}: "
                    f"expected an integer in 0..2**62, `<=N` or `?`"
                )
            dims.append(d)
        dyn.append(is_dyn)
    _check_elements(tuple(d for d in dims if d >= 0), whole)
    return tuple(dims), tuple(dyn) if any(dyn) else ()


def _parse_at(text: str, pos: int, whole: str) -> tuple[Shape, int]:
    """The shape starting at `pos` and the position after it.

    Iterative: `open_tuples` holds the elements read so far of each tuple not yet closed.
    """
    n = len(text)
    open_tuples: list[list[Shape]] = []
    # Wide tuples repeat their element shapes: parse each distinct one once.
    arrays: dict[tuple[str, str, str | None], ArrayShape] = {}
    blanks = _BLANKS.match
    while True:
        if open_tuples:
            pos = blanks(text, pos).end()
        if pos < n and text[pos] == "(":
            if len(open_tuples) >= MAX_TUPLE_DEPTH:
                raise ShapeError(
                    f"tuple shape nested deeper than {MAX_TUPLE_DEPTH} levels: {clip(whole)}"
                )
            open_tuples.append([])
            pos += 1
            continue
        shape: Shape
        if open_tuples and pos < n and text[pos] == ")":
            # `()` or a trailing comma: the tuple closes where an element could start.
            shape = TupleShape(tuple(open_tuples.pop()))
            pos += 1
        else:
            m = _ARRAY.match(text, pos)
            if m is None:
                raise ShapeError(f"not a shape: {clip(whole)}")
            key = m.group(1, 2, 3)
            array = arrays.get(key)
            if array is None:
                dims, dyn = _parse_dims(key[1], whole)
                array = arrays[key] = ArrayShape(key[0], dims, key[2], dyn)
            shape = array
            pos = m.end()
        while open_tuples:
            open_tuples[-1].append(shape)
            pos = blanks(text, pos).end()
            if pos < n and text[pos] == ",":
                pos += 1
                break
            if pos < n and text[pos] == ")":
                shape = TupleShape(tuple(open_tuples.pop()))
                pos += 1
                continue
            raise ShapeError(f"unterminated tuple shape {clip(whole)}")
        else:
            return shape, pos


def _parse_shape(text: str) -> Shape:
    clean = strip_comments(text)
    shape, end = _parse_at(clean, 0, text)
    if clean[end:].strip():
        raise ShapeError(f"trailing text after shape {clip(text)}")
    return shape


_parse_cached = functools.lru_cache(maxsize=4096)(_parse_shape)


def parse_shape(text: str) -> Shape:
    """Parse HLO shape text such as `bf16[8192,8192]{1,0:T(8,128)S(1)}` or a nested tuple.

    Returns frozen shape values; cached because real modules repeat a few shapes many times
    (only short texts, so a hostile file cannot pin megabytes in the cache).
    Raises ShapeError (a ValueError) for anything else, including out-of-range numbers.
    """
    if len(text) > _CACHED_TEXT:
        return _parse_shape(text)
    return _parse_cached(text)


def shape_bytes(shape: Shape) -> int:
    """Total bytes of a shape (tuple elements summed)."""
    return shape.bytes


def leaves(shape: Shape) -> tuple[ArrayShape, ...]:
    """The array shapes of `shape`: itself for an array, the flattened elements for a tuple.

    Empty for an empty tuple `()`: callers that need an output array must check.
    """
    return shape.leaves() if isinstance(shape, TupleShape) else (shape,)
