"""HTML checks shared by the report's tests: the prose of a page, and emphasis markers left
as text in it."""

from __future__ import annotations

import re
from html.parser import HTMLParser


class _Prose(HTMLParser):
    """The text of a page outside <code>, <pre>, <style> and <title>."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("code", "pre", "style", "title"):
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre", "style", "title"):
            self.depth -= 1

    def handle_data(self, text: str) -> None:
        if self.depth == 0:
            self.text.append(text)


def prose(page: str) -> str:
    parser = _Prose()
    parser.feed(page)
    return "".join(parser.text)


def stray_markers(page: str) -> list[str]:
    """Emphasis markers left as text outside code: `**x`, `x**`, or `*x*` around a word."""
    text = prose(page)
    return re.findall(r"\*\*\S|\S\*\*|(?<![\w*])\*\S(?:[^*\n]*\S)?\*(?![\w*])", text)
