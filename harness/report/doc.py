"""A tiny document model rendered to both Markdown and self-contained HTML.

The report is built once as a tuple of blocks; report.md and report.html are two renderings of
the same blocks, so they cannot state different figures.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    """A paragraph; `code` spans are written with backticks and links as [text](href)."""

    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    wrap: bool = False  # long prose in every cell: let the HTML cells wrap


@dataclass(frozen=True)
class Code:
    text: str
    lang: str = ""


@dataclass(frozen=True)
class Image:
    src: str  # relative to the report
    alt: str
    caption: str = ""


Block = Heading | Para | Bullets | Table | Code | Image

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


# A scheme is letters, digits, `+ . -` before a colon (RFC 3986); only these may be linked.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
LINK_SCHEMES = ("http", "https")


def safe_href(href: str) -> bool:
    """True for a link target the report may make live: an http or https URL, or a path
    relative to the page (`plots/x.png`, `../../index.html`, `#top`).

    Anything else (`javascript:`, `data:`, `vbscript:`, `file:`, a path from the root, a
    `//host` that would inherit the page's `file:` scheme) is refused, and so is any target a
    browser would read differently from the text: one holding character references, which
    the HTML parser decodes (`javascript&#58;`), control characters or non-printing ones,
    which URL parsing strips (`java\tscript:`), or a backslash, which it reads as a slash.
    """
    if not href or not href.isprintable() or "\\" in href or "&" in href:
        return False
    bare = href.strip()
    scheme = _SCHEME.match(bare)
    if scheme:
        return scheme.group(1).lower() in LINK_SCHEMES
    # No scheme: a relative path, unless it starts at the root or names a host; a colon
    # before the first / ? # would make a browser read a scheme after all.
    return not bare.startswith("/") and ":" not in re.split(r"[/?#]", bare, maxsplit=1)[0]


def _md_text(text: str) -> str:
    """Returns prose for report.md with what a Markdown viewer would make live neutralised
    outside code spans: a link to a refused target keeps its text but not its brackets, and a
    `<` that could open raw HTML or an autolink (`<javascript:...>`) is escaped."""
    parts: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        parts.append(_md_plain(text[pos : m.start()]))
        parts.append(m.group(0))
        pos = m.end()
    parts.append(_md_plain(text[pos:]))
    return "".join(parts)


def _md_plain(text: str) -> str:
    text = _LINK.sub(
        lambda m: m.group(0) if safe_href(m.group(2)) else f"\\[{m.group(1)}\\]({m.group(2)})",
        text,
    )
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)


def _md_cell(text: str) -> str:
    return _md_text(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: tuple[Block, ...]) -> str:
    """Returns the blocks as GitHub-flavoured Markdown."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + _md_text(b.text), ""]
        elif isinstance(b, Para):
            out += [_md_text(b.text), ""]
        elif isinstance(b, Bullets):
            out += [f"- {_md_text(item)}" for item in b.items] + [""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_md_cell(h) for h in b.header) + " |")
            out.append("|" + "---|" * len(b.header))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Code):
            fence = "~~~~" if "```" in b.text else "```"
            out += [fence + b.lang, b.text.rstrip("\n"), fence, ""]
        elif isinstance(b, Image):
            alt = _md_text(b.alt)
            out += [f"![{alt}]({b.src})" if safe_href(b.src) else alt, ""]
            if b.caption:
                out += [f"*{_md_text(b.caption)}*", ""]
    return "\n".join(out)


def inline_html(text: str) -> str:
    """Returns `text` escaped, with `code`, **bold** and [links](href) turned into HTML."""
    parts: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        parts.append(_links(text[pos : m.start()]))
        parts.append(f"<code>{html.escape(m.group(1))}</code>")
        pos = m.end()
    parts.append(_links(text[pos:]))
    return "".join(parts)


def _links(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(text):
        out.append(_bold(html.escape(text[pos : m.start()])))
        if safe_href(m.group(2)):
            href = html.escape(m.group(2), quote=True)
            out.append(f'<a href="{href}">{html.escape(m.group(1))}</a>')
        else:  # a refused target stays visible, as text nothing can click
            out.append(html.escape(m.group(0)))
        pos = m.end()
    out.append(_bold(html.escape(text[pos:])))
    return "".join(out)


def _bold(escaped: str) -> str:
    return _BOLD.sub(r"<strong>\1</strong>", escaped)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#1d1d1f}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}h3{margin-top:1.3em}
table{border-collapse:collapse;margin:.6em 0;font-size:12.5px;display:block;overflow-x:auto}
th,td{border:1px solid #d0d0d0;padding:3px 6px;text-align:left;vertical-align:top;white-space:nowrap}
td:nth-child(2){white-space:normal;min-width:6em}
table.wrap td{white-space:normal;min-width:16em}
th{background:#f2f2f4;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f3f3f5;padding:0 2px;border-radius:3px}
pre{background:#f6f6f8;border:1px solid #e2e2e6;padding:.6em;overflow-x:auto;font-size:12px}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:12.5px}
.verdict-yes{color:#176f2c;font-weight:600}.verdict-no{color:#a4161a;font-weight:600}
nav a{margin-right:1em}
"""

_VERDICT = re.compile(r"reproduced: (yes|no)")


def to_html(blocks: tuple[Block, ...], title: str) -> str:
    """Returns a self-contained HTML page: inline CSS, no scripts, no external requests."""
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            anchor = f' id="{html.escape(b.anchor, quote=True)}"' if b.anchor else ""
            body.append(f"<h{b.level}{anchor}>{inline_html(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            text = inline_html(b.text)
            text = _VERDICT.sub(r'<span class="verdict-\1">reproduced: \1</span>', text)
            body.append(f"<p>{text}</p>")
        elif isinstance(b, Bullets):
            items = "".join(f"<li>{inline_html(i)}</li>" for i in b.items)
            body.append(f"<ul>{items}</ul>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{inline_html(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in row) + "</tr>"
                for row in b.rows
            )
            cls = ' class="wrap"' if b.wrap else ""
            body.append(f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Code):
            body.append(f"<pre><code>{html.escape(b.text.rstrip())}</code></pre>")
        elif isinstance(b, Image):
            cap = f"<figcaption>{inline_html(b.caption)}</figcaption>" if b.caption else ""
            img = (
                f'<img src="{html.escape(b.src, quote=True)}" '
                f'alt="{html.escape(b.alt, quote=True)}">'
                if safe_href(b.src)
                else html.escape(b.alt)
            )
            body.append(f"<figure>{img}{cap}</figure>")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
