"""A tiny document model rendered to Markdown, and from that Markdown to self-contained HTML.

The report is built once as a tuple of blocks. report.md is their Markdown; report.html is the
same Markdown of each block rendered by markdown-it-py (CommonMark, with GFM tables), so the
two cannot state different figures and no emphasis, code span or link is parsed by hand. The
HTML adds only what Markdown has no words for: heading anchors, a figure's caption, a class on
tables of long prose, and a diff shown side by side.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from harness.store.runfolder import DETAILS_FILE, REPORT_FILE


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    """A paragraph of Markdown: `code` spans, **bold**, [text](href) links."""

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


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: `op` is " " (both texts), "-" (the left only) or "+" (the right
    only), with its line number in each text that holds it."""

    op: str
    text: str
    left: int | None = None
    right: int | None = None


@dataclass(frozen=True)
class DiffHunk:
    header: str  # "@@ -3,7 +3,8 @@"
    lines: tuple[DiffLine, ...]


@dataclass(frozen=True)
class Diff:
    """Two texts' differences with their context: report.md shows a unified diff, report.html
    the same hunks side by side."""

    left: str  # each side's label (a file name)
    right: str
    hunks: tuple[DiffHunk, ...]


Block = Heading | Para | Bullets | Table | Code | Image | Diff

_LINK = re.compile(r"(?<!\\)\[([^\]]+)(?<!\\)\]\(([^)\s]+)\)")  # not an escaped one
_CODE = re.compile(r"`([^`]+)`")


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


# Control characters but tab and newline: an error's raw ESC sequences and BELs (issue 59),
# which a terminal showing report.md would act on and a page would carry as bytes.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """`text` with its control characters left out (tab and newline kept)."""
    return _CONTROLS.sub("", text)


def _md_text(text: str) -> str:
    """Returns prose for report.md with what a Markdown viewer would make live neutralised
    outside code spans: a link to a refused target keeps its text but not its brackets, and a
    `<` that could open raw HTML or an autolink (`<javascript:...>`) is escaped."""
    text = _visible(text)  # a raw ESC or BEL of an error's text never reaches a page
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
    # `![x](url)` would be an image a viewer fetches; `<http://...>` an autolink. A mark that
    # literal() escaped already (an odd run of backslashes before it) stays as it is: escaped
    # again, `\\<` would read as an escaped backslash and a live `<` (issue 59).
    text = _UNESCAPED_BANG.sub(r"\1\\!", text)
    return _UNESCAPED_LT.sub(r"\1\\<", text)


_UNESCAPED_BANG = re.compile(r"(?<!\\)((?:\\\\)*)!(?=\[)")
_UNESCAPED_LT = re.compile(r"(?<!\\)((?:\\\\)*)<(?=[A-Za-z/!?])")


# The marks that open Markdown anywhere in a line (emphasis, code, links, images, raw HTML,
# autolinks, entities, GFM strikethrough, a backslash; `_` only at a word's edge, since
# CommonMark never reads `gelu_h200` as emphasis; `]` only where a link or a definition
# would follow, `](`, `][` or `]:`, so `f32[8,8]` stays as it is), and those that do only
# at its start (a heading, a list, a quote, a rule); a backslash escapes any of them.
_INLINE = re.compile(r"([\\`*<>!&~]|\](?=[(\[:])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_OPENS = re.compile(r"\\\][(\[:]")  # an escaped `]` before `(`, `[` or `:`
_LEADING = re.compile(r"^(\s*)(\d{1,9}(?=[.)](?:\s|$))|)(#|>|[+*-](?=\s|$)|(?<=\d)[.)])")


def literal(text: str) -> str:
    """User-controlled text (a name, a description, an option value, an exception message, an
    op_name, a folder name, an index row) as Markdown that renders to exactly that text: every
    mark that could open Markdown escaped and line breaks flattened, so nothing in it is a
    link, an image, emphasis, a code span or HTML. A table cell escapes `|` itself."""
    flat = _INLINE.sub(r"\\\1", " ".join(_visible(str(text)).split()))
    if _OPENS.search(flat):  # a link's brackets: both escaped, for viewers that read one alone
        flat = re.sub(r"(?<!\\)\[", r"\\[", flat)
    return _LEADING.sub(lambda m: f"{m.group(1)}{m.group(2)}\\{m.group(3)}", flat)


def code(text: str) -> str:
    """User-controlled text as a code span no backtick inside it can close (line breaks
    flattened): what it says, shown as code, never Markdown."""
    flat = " ".join(_visible(str(text)).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


# An image the report shows: a PNG or SVG of the run folder's own plots/, nothing else.
_OWN_IMAGE = re.compile(r"^plots/[A-Za-z0-9_][A-Za-z0-9_.-]*\.(png|svg)$")


def own_image(src: str) -> bool:
    """True for an image source in the run folder's own plots/ (no link out, no URL)."""
    return bool(_OWN_IMAGE.match(src)) and ".." not in src


def _md_cell(text: str) -> str:
    return _md_text(text).replace("|", "\\|").replace("\n", " ")


def _fence(text: str, lang: str = "") -> list[str]:
    """A fenced code block whose fence no run of backticks in `text` can close; its
    control characters (a raw ESC, a BEL) left out."""
    text = _visible(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, text.rstrip("\n"), fence]


def unified(d: Diff) -> list[str]:
    """Returns the diff's lines in unified format, headers included."""
    out = [f"--- {d.left}", f"+++ {d.right}"]
    for h in d.hunks:
        out.append(h.header)
        out += [line.op + line.text for line in h.lines]
    return out


def block_markdown(b: Block) -> list[str]:
    """Returns one block's Markdown lines, without the blank line after it."""
    if isinstance(b, Heading):
        return ["#" * b.level + " " + _md_text(b.text)]
    if isinstance(b, Para):
        return [_md_text(b.text)]
    if isinstance(b, Bullets):
        return [f"- {_md_text(item)}" for item in b.items]
    if isinstance(b, Table):
        return [
            "| " + " | ".join(_md_cell(h) for h in b.header) + " |",
            "|" + "---|" * len(b.header),
            *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows),
        ]
    if isinstance(b, Code):
        return _fence(b.text, b.lang)
    if isinstance(b, Diff):
        return _fence("\n".join(unified(b)), "diff")
    alt = literal(b.alt)
    out = [f"![{alt}]({b.src})" if own_image(b.src) else alt]
    return out + (["", f"*{_md_text(b.caption)}*"] if b.caption else [])


def to_markdown(blocks: tuple[Block, ...]) -> str:
    """Returns the blocks as GitHub-flavoured Markdown."""
    out: list[str] = []
    for b in blocks:
        out += [*block_markdown(b), ""]
    return "\n".join(out)


@functools.cache
def _parser() -> MarkdownIt:
    """CommonMark with GFM tables; raw HTML is text, only safe_href targets are links, and no
    Markdown makes an image (the Image block alone does, from the run's own plots/)."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable("image")
    md.validateLink = safe_href  # type: ignore[method-assign]  # one policy for both renderings
    return md


def page_href(href: str) -> str:
    """A link to another report page, written to its .md (a report.md, the run's details.md),
    goes to its .html."""
    path, sep, fragment = href.partition("#")
    if path.endswith((REPORT_FILE, DETAILS_FILE)) and not _SCHEME.match(path):
        return path.removesuffix(".md") + ".html" + sep + fragment
    return href


def _walk(tokens: list[Token]) -> list[Token]:
    out = []
    for t in tokens:
        out.append(t)
        out += _walk(t.children or [])
    return out


def render_markdown(src: str, anchor: str = "", table_class: str = "") -> str:
    """Returns `src` rendered by markdown-it, with `anchor` as the heading's id, `table_class`
    on its table, and links to report pages turned into links to their HTML."""
    md = _parser()
    tokens = md.parse(src)
    for t in _walk(tokens):
        if t.type == "heading_open" and anchor:
            t.attrSet("id", anchor)
        elif t.type == "table_open" and table_class:
            t.attrSet("class", table_class)
        elif t.type == "link_open":
            t.attrSet("href", page_href(str(t.attrGet("href") or "")))
    return md.renderer.render(tokens, md.options, {})


def side_by_side(lines: tuple[DiffLine, ...]) -> list[tuple[DiffLine | None, DiffLine | None]]:
    """A hunk's lines as rows of (left, right): a context line on both sides, a run of removed
    lines beside the run of added lines that replaces it."""
    rows: list[tuple[DiffLine | None, DiffLine | None]] = []
    removed: list[DiffLine] = []
    added: list[DiffLine] = []
    for line in (*lines, None):
        if line is not None and line.op == "-":
            removed.append(line)
        elif line is not None and line.op == "+":
            added.append(line)
        else:
            for i in range(max(len(removed), len(added))):
                rows.append(
                    (
                        removed[i] if i < len(removed) else None,
                        added[i] if i < len(added) else None,
                    )
                )
            removed, added = [], []
            if line is not None:
                rows.append((line, line))
    return rows


def _diff_cell(line: DiffLine | None, number: int | None) -> str:
    if line is None:
        return '<td class="n"></td><td class="blank"></td>'
    kind = {" ": "same", "-": "del", "+": "add"}[line.op]
    return f'<td class="n">{number or ""}</td><td class="{kind}">{html.escape(_visible(line.text))}</td>'


def _diff_html(d: Diff) -> str:
    """The diff's hunks side by side: the left text's lines beside the right's."""
    rows = [
        '<table class="diff"><colgroup><col class="n"><col><col class="n"><col></colgroup>'
        f'<thead><tr><th colspan="2">{html.escape(_visible(d.left))}</th>'
        f'<th colspan="2">{html.escape(_visible(d.right))}</th></tr></thead><tbody>'
    ]
    for h in d.hunks:
        rows.append(f'<tr><td class="hunk" colspan="4">{html.escape(_visible(h.header))}</td></tr>')
        for left, right in side_by_side(h.lines):
            rows.append(
                "<tr>"
                + _diff_cell(left, left.left if left else None)
                + _diff_cell(right, right.right if right else None)
                + "</tr>"
            )
    rows.append("</tbody></table>")
    return "".join(rows)


def block_html(b: Block) -> str:
    """Returns one block as HTML: its Markdown through markdown-it (a diff side by side)."""
    if isinstance(b, Diff):
        return _diff_html(b)
    if isinstance(b, Image):
        img = (
            f'<img src="{html.escape(b.src)}" alt="{html.escape(b.alt)}">'
            if own_image(b.src)
            else html.escape(b.alt)
        )
        cap = (
            f"<figcaption>{render_markdown(_md_text(b.caption)).strip()}</figcaption>"
            if b.caption
            else ""
        )
        return f"<figure>{img}{cap}</figure>"
    src = "\n".join(block_markdown(b))
    if isinstance(b, Heading):
        return render_markdown(src, anchor=b.anchor)
    if isinstance(b, Table):
        return render_markdown(src, table_class="wrap" if b.wrap else "")
    return render_markdown(src)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#1d1d1f}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}h3{margin:1em 0 .35em}
table{border-collapse:collapse;margin:.6em 0;font-size:12.5px;display:block;overflow-x:auto}
th,td{border:1px solid #d0d0d0;padding:3px 6px;text-align:left;vertical-align:top;white-space:nowrap}
td:nth-child(2){white-space:normal;min-width:6em}
table.wrap td{white-space:normal;min-width:16em}
th{background:#f2f2f4;position:sticky;top:0}tr:nth-child(even) td{background:#fafafa}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f3f3f5;padding:0 2px;border-radius:3px}pre code{background:none;padding:0}
pre{background:#f6f6f8;border:1px solid #e2e2e6;padding:.6em;overflow-x:auto;font-size:12px}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:12.5px}
figcaption p{margin:.2em 0}
table.diff{font:11.5px ui-monospace,Menlo,Consolas,monospace;display:table;width:100%;table-layout:fixed}
table.diff td{white-space:pre-wrap;word-break:break-all;border:none;padding:0 4px}table.diff th{white-space:normal;word-break:break-all}
table.diff col.n{width:3.5em}table.diff td.n{color:#888;text-align:right}table.diff td.hunk{background:#eef;color:#446}
table.diff td.del{background:#fdecec}table.diff td.add{background:#e8f7e8}table.diff td.blank{background:#f4f4f4}
"""


# Every page the harness writes forbids every load but its inline style and its own images
# (the run's plots/, same origin or file:): no script, no fetch, no frame, no form, no <base>.
CSP = (
    "default-src 'none'; img-src 'self' file:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"  # frame-ancestors: ignored in a <meta>
)
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'


def to_html(blocks: tuple[Block, ...], title: str, head: str = "") -> str:
    """Returns a self-contained HTML page: inline CSS, no scripts, no external requests (its
    Content-Security-Policy forbids them, whatever a page holds); `head` is the harness's own
    markup for the <head> (a page's mark)."""
    body = [block_html(b).strip() for b in blocks]
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">{CSP_META}{head}'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
