"""One renderer: user-controlled text (names, descriptions, option values, exception messages,
HLO op_name scopes, folder names, index rows) reaches every page the harness writes only as
text or code, never as Markdown; images come only from the run's own plots/; every page
carries a Content-Security-Policy that forbids network loads. In-process on hand-made runs
(tests/test_report_browser.py loads the same pages in Chromium); a planted bypass fails it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO

from harness.commands.compare import compare_runs
from harness.report import doc, write_report
from harness.report.export import export

sys.path.insert(0, str(REPO / "benchmarks"))
from hostile.readers_material import _manifest, _summary

# What a hostile field holds: a remote image, raw HTML that would load one and run a script,
# a javascript: link, and a frame.
REMOTE = (
    "![x](http://127.0.0.1:9/x.png)",
    "<img src=http://127.0.0.1:9/y onerror=window.__pwned=1>",
    "[a](javascript:alert(1))",
    "<script>window.__pwned=1</script>",
    '<iframe src="http://127.0.0.1:9/f"></iframe>',
    "[r](http://127.0.0.1:9/r)",
    "<http://127.0.0.1:9/autolink>",  # issue 59: literal()'s `\<` escaped again went live
)
PAYLOAD = " ".join(REMOTE)
# A folder name holds no "/": a relative image and raw HTML are what it can carry.
FOLDER = "20260102-000000 ![i](x.png) <b>b<b>"


def hostile_pages(root: Path) -> list[Path]:
    """Every page the harness writes (the run's report, a variant's page, the run folder's
    index, the results index, compare, an export's re-rendered report) for two runs whose
    every user-controlled field holds REMOTE; returns their paths."""
    runs = []
    for name in ("20260101-000000", FOLDER):
        run = root / "results" / "gelu" / name
        run.mkdir(parents=True)
        summary = _summary(
            f"desc {PAYLOAD}",
            xla_options={"xla_flag": PAYLOAD},
        )
        summary["run_id"] = f"id {PAYLOAD}"
        summary["variants"]["matmul_only"]["identity"].update(
            status="failed", reason=f"RuntimeError: {PAYLOAD}"
        )
        (run / "summary.json").write_text(json.dumps(summary))
        manifest = _manifest(
            run_id=f"id {PAYLOAD}",
            started=REMOTE[0],
            status=REMOTE[1],
            environment={"device_kind": REMOTE[3], "platform": REMOTE[4]},
            # A value that differs between the runs: compare's config table shows it.
            config={"experiment": "gelu", "description": f"{PAYLOAD} {len(runs)}"},
        )
        (run / "manifest.json").write_text(json.dumps(manifest))
        fusions = {  # HLO metadata: op_name scopes and a cluster named after them
            "modules": [
                {
                    "module": "jit_f",
                    "clusters": [{"name": f"fusion {REMOTE[0]}", "kind": "kLoop"}],
                    "reverse_map": {f"add.1 (jit(f)/{PAYLOAD}/add)": [f"fusion {REMOTE[0]}"]},
                }
            ]
        }
        (run / "variants" / "xla").mkdir(parents=True)
        (run / "variants" / "xla" / "fusions.json").write_text(json.dumps(fusions))
        (run / f"notes {REMOTE[1][:10]}.txt").write_text("a user's file\n")
        runs.append(run)
    write_report(runs[0], results_root=root / "results")
    # A forged index row beside the second run: its own headline in the results index.
    stamp = (runs[1] / "summary.json").stat()
    (runs[1] / ".index-row.json").write_text(
        json.dumps(
            {
                "stamp": [2, stamp.st_mtime_ns, stamp.st_size],
                "experiment": PAYLOAD,
                "headline": list(REMOTE),
            }
        )
    )
    write_report(runs[1], results_root=root / "results")
    (root / "cmp").mkdir()
    _, compare_html, _ = compare_runs(runs[0], runs[1], root / "cmp")
    export(runs[1], root / "exported")
    return [
        runs[1] / "report.html",
        runs[1] / "variants" / "xla" / "report.html",
        runs[1] / "variants" / "matmul_only" / "report.html",
        runs[1] / "index.html",
        root / "results" / "index.html",
        compare_html,
        root / "exported" / "report.html",
    ]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return hostile_pages(tmp_path_factory.mktemp("renderer"))


def live_remote(page: str) -> list[str]:
    """What in `page` would load, run or link remote or script content: every <img> whose
    source is not the run's own plots/, any tag but the renderer's own, any href to the
    hostile host or a script, and a missing Content-Security-Policy."""
    found = [
        f"img {s}"
        for s in re.findall(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", page)
        if not s.startswith("plots/")
    ]
    found += [
        f"tag <{t}"
        for t in re.findall(r"<(script|iframe|object|embed|base|link|form)\b", page, re.I)
    ]
    found += [
        f"href {h}"
        for h in re.findall(r'href="([^"]*)"', page)
        if "127.0.0.1" in h or (":" in h.split("/")[0] and not h.startswith(("http:", "https:")))
    ]
    found += [f"handler {h}" for h in re.findall(r"<[a-z]+\b[^>]*\s(on[a-z]+)=", page, re.I)]
    if doc.CSP_META not in page:
        found.append("no Content-Security-Policy")
    return found


def test_no_page_made_of_hostile_fields_loads_links_or_runs_remote_content(
    pages: list[Path],
) -> None:
    for page in pages:
        text = page.read_text()
        assert live_remote(text) == [], page
        # the hostile text is there, shown as text (escaped), not dropped (the run folder's
        # index shows only file names: one holds raw HTML)
        assert "127.0.0.1:9" in text or "&lt;img src=h" in text, page
    md = (pages[0].parent / "report.md").read_text()
    assert "](http://127.0.0.1" not in md.replace("\\](", "")  # no live Markdown link or image


def test_the_renderer_check_fails_on_a_planted_bypass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """User text passed through as Markdown (literal and code made the identity) is caught."""
    monkeypatch.setattr(doc, "literal", lambda text: str(text))
    from harness.report import index, sections, variant_page

    for module in (index, sections, variant_page):
        monkeypatch.setattr(module, "literal", lambda text: str(text))
    found = hostile_pages(tmp_path)
    assert any(live_remote(p.read_text()) for p in found)


@pytest.mark.parametrize(
    "planted",
    [
        '<img src="http://127.0.0.1:9/x.png">',
        "<script>x=1</script>",
        '<a href="http://127.0.0.1:9/">a</a>',
        '<p onclick="x()">',
    ],
)
def test_the_check_sees_each_planted_load(planted: str) -> None:
    page = doc.to_html((doc.Para("x"),), "t")
    assert live_remote(page) == []
    assert live_remote(page.replace("<p>x</p>", planted)) != []
    assert live_remote(page.replace(doc.CSP_META, "")) == ["no Content-Security-Policy"]


def test_images_come_only_from_the_runs_own_plots() -> None:
    for src in ("http://127.0.0.1:9/x.png", "../x.png", "plots/../../x.png", "/etc/x.png", "x.png"):
        page = doc.to_html((doc.Image(src, "alt"),), "t")
        assert "<img" not in page, src
        assert f"({src})" not in doc.to_markdown((doc.Image(src, "alt"),))
    assert '<img src="plots/step_time.png"' in doc.to_html(
        (doc.Image("plots/step_time.png", "a"),), "t"
    )


@pytest.mark.parametrize("text", [*REMOTE, "`a`", "**b**", "a | b", "x\\y", "line\nbreak"])
def test_literal_and_code_render_exactly_the_text(text: str) -> None:
    flat = " ".join(text.split())
    for shown in (doc.literal(text), doc.code(text)):
        html = doc.render_markdown(shown)
        assert "<img" not in html and "<a " not in html and "<script" not in html
        inner = re.sub(r"</?(p|code)>", "", html).strip()
        import html as stdhtml

        assert stdhtml.unescape(inner) == flat, (shown, html)


def test_raw_escape_and_bell_bytes_never_reach_a_page() -> None:
    """An error's text holding ESC sequences and BELs reached report.md and the HTML (issue 59)."""
    blocks = (
        doc.Para(f"RuntimeError: {doc.literal(chr(27) + '[31mred' + chr(7) + ' text')}"),
        doc.Table(
            ("variant", "reason"), ((doc.literal("x"), doc.literal(f"a{chr(27)}]0;t{chr(7)}")),)
        ),
        doc.Para(f"raw prose {chr(27)}[2J{chr(7)} too"),
    )
    md, page = doc.to_markdown(blocks), doc.to_html(blocks, "t")
    for text in (md, page):
        assert "\x1b" not in text and "\x07" not in text
    assert "red text" in md
