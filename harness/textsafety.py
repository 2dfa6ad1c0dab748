"""Guards for user-supplied regular expressions, which otherwise can run for ever.

A pattern with a repeat inside a repeat (`(a+)+`, `(.*,)*x`) backtracks exponentially on a
string that almost matches; Python's `re` has no time limit, so such patterns are refused
before they are used.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse  # type: ignore[no-redef]

MAX_PATTERN = 500
_REPEATS = {
    sre_parse.MAX_REPEAT,
    sre_parse.MIN_REPEAT,
    getattr(sre_parse, "POSSESSIVE_REPEAT", None),
}
_UNBOUNDED = sre_parse.MAXREPEAT


class UnsafePattern(ValueError):
    """A regular expression refused because it could take exponential time."""


def _repeats_inside(items: object, depth: int) -> bool:
    """True when an unbounded repeat sits inside another repeat somewhere in `items`."""
    stack = [(items, depth)]
    while stack:
        node, inside = stack.pop()
        for op, arg in node:  # type: ignore[union-attr]
            if op in _REPEATS:
                _lo, hi, sub = arg
                unbounded = hi == _UNBOUNDED or hi > 100
                if unbounded and inside:
                    return True
                stack.append((sub, inside + (1 if hi > 1 else 0)))
            elif op is sre_parse.SUBPATTERN:
                stack.append((arg[-1], inside))
            elif op is sre_parse.BRANCH:
                stack.extend((branch, inside) for branch in arg[1])
            elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
                stack.append((arg[1], inside))
    return False


def safe_pattern(pattern: str) -> re.Pattern[str]:
    """Returns the compiled pattern; raises UnsafePattern (or re.error) when it is refused."""
    if len(pattern) > MAX_PATTERN:
        raise UnsafePattern(f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN}")
    compiled = re.compile(pattern)
    if _repeats_inside(sre_parse.parse(pattern), 0):
        raise UnsafePattern(
            "the pattern nests a repeat inside a repeat (like `(a+)+`), which can take "
            "exponential time; write it without the nesting"
        )
    return compiled
