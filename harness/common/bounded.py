"""Text a user's code prints, kept to a bound: a callback printing 100 MB a call wrote a 954 MB
callback_output.txt (issue 59). `BoundedText` stands in for stdout while a variant runs: it keeps
the first `limit` characters, counts the rest and their lines, and says what it left out in
the text it returns, so the run states its cap where the output is read."""

from __future__ import annotations

import io
import typing

CALLBACK_OUTPUT_CHARS = 8 << 20  # 8 Mi characters of a variant's printed output are kept


class BoundedText(io.TextIOBase):
    """A writable text stream that keeps at most `limit` characters (the rest counted)."""

    def __init__(self, limit: int = CALLBACK_OUTPUT_CHARS) -> None:
        super().__init__()
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0
        self.lines = 0
        self._last = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        self._last = text[-1:] or self._last
        room = self.limit - self._kept
        if room > 0:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        """What was printed, the part past the limit replaced by one line saying so."""
        text = "".join(self._parts)
        if self.dropped:
            text += (
                f"\n[harness: {self.dropped} more characters not kept; a variant's printed "
                f"output is kept to its first {self.limit} characters]\n"
            )
        return text

    def line_count(self) -> int:
        """Lines printed in all, those past the limit included, as str.splitlines counts
        them (a last line without a newline counts)."""
        return self.lines + (1 if self._last and self._last != "\n" else 0)


# A worker's log kept in the run folder (logs/): its first and last 1 MiB. A program that
# prints in every step would otherwise make a log the size of everything it printed.
LOG_BYTES = 2 << 20


def head_and_tail(stream: typing.BinaryIO, limit: int = LOG_BYTES) -> bytes:
    """The whole of a seekable `stream` when it holds at most `limit` bytes; else its first
    and last `limit // 2` bytes with a line between saying how many were left out."""
    stream.seek(0, io.SEEK_END)
    size = stream.tell()
    stream.seek(0)
    if size <= limit:
        return stream.read()
    half = limit // 2
    head = stream.read(half)
    stream.seek(size - half)
    tail = stream.read(half)
    note = f"\n[... {size - 2 * half} bytes of this log left out: its first and last {half} kept ...]\n"
    return head + note.encode() + tail
