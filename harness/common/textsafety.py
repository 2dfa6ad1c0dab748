"""User-supplied regular expressions, matched in time linear in the text they search.

Python's `re` backtracks: `^(a+)+$` against `'a' * 40 + '!.txt'`, or `(a|a)*c` against a run
of a's, takes exponential time, and nothing stops it. A pattern the user passes (analyze's
`--module`) is compiled by RE2 instead, whose automaton never backtracks, so any pattern ends
on any text. RE2 leaves out the features that need backtracking (backreferences, lookaround);
a pattern using them is refused with one line, as is one too long or too costly to compile.

Where google-re2 is not installed (a GPU image the harness runs on from the repo root, with no
install), patterns go to `re`, but only those with no repeat over a repeat or an alternation:
the shapes that backtrack exponentially. Others are refused, naming the missing package.
"""

from __future__ import annotations

import re
from typing import Any

try:
    import re2
except ImportError:  # pragma: no cover - the CPU install has it (pyproject.toml)
    re2 = None

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse  # type: ignore[no-redef]

MAX_PATTERN = 1000  # characters: a module filter, not a program
MAX_MEMORY = 8 << 20  # bytes RE2 may spend on the compiled automaton


class UnsafePattern(ValueError):
    """A user's regular expression that cannot be matched in linear time here."""


def user_pattern(pattern: str, engine: Any = re2) -> Any:
    """Returns `pattern` compiled so that `.search(text)` runs in time linear in the text: by
    RE2, or (without it) by `re` when the pattern cannot backtrack.

    Raises UnsafePattern, with the reason in one line, for a pattern that is too long, uses a
    feature RE2 lacks, is malformed, or (without RE2) could backtrack.
    """
    if len(pattern) > MAX_PATTERN:
        raise UnsafePattern(f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN}")
    if engine is None:
        return _backtrack_free(pattern)
    options = engine.Options()
    options.log_errors = False  # RE2 would print each error to stderr, beside our one line
    options.max_mem = MAX_MEMORY
    try:
        return engine.compile(pattern, options=options)
    except engine.error as e:
        first = e.args[0] if e.args else ""
        reason = first.decode(errors="replace") if isinstance(first, bytes) else str(first)
        raise UnsafePattern(
            f"{reason.splitlines()[0] if reason else 'malformed'} (patterns are RE2 syntax: no "
            "backreferences or lookaround)"
        ) from None


_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT}
_REPEATS.add(getattr(sre_parse, "POSSESSIVE_REPEAT", sre_parse.MAX_REPEAT))


def _backtrack_free(pattern: str) -> re.Pattern[str]:
    """`re.compile(pattern)` when no unbounded repeat holds a repeat or an alternation."""
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise UnsafePattern(f"{e} (not a regular expression)") from None
    stack = [(sre_parse.parse(pattern), False)]
    while stack:
        items, inside = stack.pop()
        for op, arg in items:
            if op in _REPEATS:
                _lo, hi, sub = arg
                unbounded = hi == sre_parse.MAXREPEAT or hi > 100
                stack.append((sub, inside or unbounded))
                if unbounded and inside:
                    break
            elif op is sre_parse.BRANCH and inside:
                break
            elif op is sre_parse.SUBPATTERN:
                stack.append((arg[-1], inside))
            elif op is sre_parse.BRANCH:
                stack.extend((branch, inside) for branch in arg[1])
            elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
                stack.append((arg[1], inside))
        else:
            continue
        raise UnsafePattern(
            "it repeats a repeat or an alternation, which Python's re can take exponential "
            "time on; install google-re2 to use such a pattern"
        )
    return compiled
