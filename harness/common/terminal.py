"""Text printed to the user's terminal, made inert.

Names the harness prints come from files it did not write: a module name from a dump, a
variant's failure reason, a path. An escape sequence in one (ESC `]` sets the window title,
ESC `[2J` clears the screen, a carriage return overwrites the line before it) would be
obeyed by the terminal. Every CLI prints such text through `shown` (one name) or `lines`
(a table), which write each control or non-printing character as its Python escape.
"""

from __future__ import annotations


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: object) -> str:
    """Returns `text` (or str() of it) with every non-printing character escaped: ESC, CR,
    newlines, C1 controls, bidirectional overrides and other format characters."""
    s = str(text)
    if s.isprintable():  # the common case, one pass in C
        return s
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in s)


def lines(text: object) -> str:
    """Returns multi-line `text` with each line passed through `shown`, the newlines kept."""
    return "\n".join(shown(line) for line in str(text).split("\n"))


def one_line(e: BaseException) -> str:
    """Returns an exception as one printable line, bounded in length."""
    text = str(e) or type(e).__name__
    text = " ".join(text.split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 2000 else text[:1997] + "..."
