"""The report stage on real tiny CPU runs: files, figures, verdicts, comparison, robustness."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness import findings as rules
from harness import saved
from harness.commands.compare import compare_runs
from harness.findings.observations import NO, NOT_HERE, YES
from harness.records.compare import CHANGED, SAME, VANISHED, WITHIN_NOISE
from harness.records.summary import SCHEMA_VERSION, RunSummary, load_summary
from harness.report import plots, write_report
from tests.conftest import REPO, TINY, read_summary, run_harness

# What the tiny default study shows on a CPU, claim by claim.
CPU_VERDICTS = {
    "eager_launches": YES,
    "eager_transfers": NOT_HERE,  # the CPU has nothing to transfer
    "first_call_pause": YES,
    "library_epilogue": NO,  # the CPU GEMM (YNNPACK) fuses no epilogue: XLA fuses bias+GELU
    "fewer_kernels": YES,
    "new_shape_pause": YES,
    "host_callback_split": YES,
    "traced_branch": YES,
    "cache_miss_log": YES,
    "later_ir_loops": YES,
    "later_ir_thread_blocks": NOT_HERE,
    "later_ir_memory_spaces": NOT_HERE,
    "flops_counted": YES,
}

EXPECTED_PLOTS = {f"{n}.png" for n in plots.PLOT_NAMES}


@pytest.fixture(scope="module")
def rendered(cpu_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny run, laid out as <results>/gelu/<run_id>, its report rendered again."""
    root = tmp_path_factory.mktemp("report_results")
    run = root / "gelu" / cpu_run.name
    shutil.copytree(cpu_run, run, symlinks=True)
    for stale in ("report.md", "report.html", "index.html"):
        (run / stale).unlink(missing_ok=True)
    shutil.rmtree(run / "plots", ignore_errors=True)
    write_report(run, results_root=root)  # as a study does; `make report` writes no index
    return run


class _Tables(HTMLParser):
    """Collects the text of every table cell, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, text: str) -> None:
        if self.cell is not None:
            self.cell.append(text)


def md_tables(text: str) -> list[list[list[str]]]:
    """Returns every Markdown table's rows of cells, separator rows left out."""
    tables: list[list[list[str]]] = []
    previous = False
    for line in text.splitlines():
        is_row = line.startswith("| ")
        if is_row:
            if not previous:
                tables.append([])
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            cells = [re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", c) for c in cells]  # a link's text
            cells = [re.sub(r"`([^`]*)`", r"\1", c) for c in cells]
            # a backslash escape (user text is written as escaped text) reads as its mark
            tables[-1].append([re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", c) for c in cells])
        elif line.startswith("|---"):
            is_row = True
        previous = is_row
    return tables


def test_plots_are_exactly_the_named_figures_as_png(rendered):
    assert {p.name for p in (rendered / "plots").iterdir()} == EXPECTED_PLOTS
    html = (rendered / "report.html").read_text()
    for name in plots.PLOT_NAMES:
        assert f'src="plots/{name}.png"' in html
        assert f"](plots/{name}.png)" in (rendered / "report.md").read_text()


def test_markdown_and_html_state_the_same_figures(rendered):
    parser = _Tables()
    parser.feed((rendered / "report.html").read_text())
    md = md_tables((rendered / "report.md").read_text())
    assert len(md) == len(parser.tables) and md
    assert md == parser.tables
    # The summary is the first per-variant table; findings and what-to-change may come first.
    summary = next(t for t in md if t[0][0] == "variant")
    variants = read_summary(rendered)
    assert [row[0] for row in summary[1:]] == list(variants)
    xla = next(r for r in summary if r[0] == "xla")
    record = variants["xla"]
    assert f"{record.timing.step_s * 1e3:.3f} ms" in xla[4]
    assert xla[2] == f"{record.profile.kernels_per_step:.0f}"


def test_each_observation_has_its_verdict_on_the_real_cpu_run(rendered):
    run = saved.load_run(rendered)
    got = {o.key: o for o in run.summary.findings.observations}
    assert {o.framework for o in got.values()} == {"jax"}  # a JAX-only study
    assert {k: o.verdict for k, o in got.items()} == CPU_VERDICTS
    assert all(o.rule == f"observation.{o.key}" for o in got.values())
    assert "now f32[8,32] and before f32[16,32]" in got["cache_miss_log"].evidence[0]
    assert "phi i64" in got["later_ir_loops"].quote
    md = (rendered / "details.md").read_text()
    table = next(t for t in md_tables(md) if t[0][0] == "claim")
    # No PyTorch column in a JAX-only study; the rule beside each claim.
    assert table[0][1:] == ["JAX: verdict and evidence", "rule"]
    assert [row[1].split(" — ")[0] for row in table[1:]] == list(CPU_VERDICTS.values())
    assert table[1][2] == "observation.eager_launches"


def test_ladder_links_point_at_real_files(rendered):
    """Every relative link of the leading page and each variant's page (ladder, divergence
    files, the pages themselves) names a file the run folder holds."""
    pages = [rendered / "report.html", *sorted(rendered.glob("variants/*/report.html"))]
    assert len(pages) == 1 + len(read_summary(rendered))
    links = []
    for page in pages:
        for href in re.findall(r'href="([^"#]+)(?:#[^"]*)?"', page.read_text()):
            if not href.startswith("http"):
                links.append(page.parent / href)
    assert len(links) > 40
    for link in links:
        assert link.exists(), link


def test_indexes_list_the_run(rendered):
    index = (rendered.parent.parent / "index.html").read_text()
    assert f"gelu/{rendered.name}/report.html" in index
    run_index = (rendered / "index.html").read_text()
    assert 'href="report.html"' in run_index and 'href="plots/timeline.png"' in run_index


def test_rerender_never_imports_jax(rendered):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.report", f"--run={rendered}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"report: {rendered}/report.md" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "harness.report.markdown" in imported and "matplotlib" in imported
    assert not {m for m in imported if m == "jax" or m.startswith("jax.")}, "jax was imported"


def test_missing_keys_and_files_render_with_dashes_and_skip_notes(rendered, tmp_path):
    run = tmp_path / "gelu" / "bare"
    shutil.copytree(rendered, run, symlinks=True)
    summary = json.loads((run / "summary.json").read_text())
    ident = {"mode": "jit", "framework": "jax"}
    summary["variants"] = {
        "xla": {
            "identity": {**ident, "status": "ok", "roles": ["baseline", "compiled"]},
            "timing": {"step_s": 0.001},
        },
        "eager": {"identity": {**ident, "status": "ok", "mode": "eager", "roles": ["eager"]}},
        "matmul_only": {"identity": {**ident, "status": "failed", "reason": "boom"}},
    }
    (run / "summary.json").write_text(json.dumps(summary))
    for name in ("fusions.json", "kernels.json", "events.parquet"):
        for p in run.glob(f"variants/*/{name}"):
            p.unlink()
    (run / "manifest.json").write_text("{}")
    from harness.commands.migrate import add_findings

    add_findings(run)  # the findings of this summary, as the analysis would make them
    write_report(run)
    md = (run / "report.md").read_text()
    assert "| not measured — " in (run / "details.md").read_text()
    for name in ("launches", "roofline", "timeline", "fusion_map", "compile_time"):
        assert f"**{name}**: skipped: " in md
    assert {p.name for p in (run / "plots").iterdir()} == {"step_time.png"}


def test_an_empty_run_claims_nothing(tmp_path):
    empty = RunSummary(
        schema_version=SCHEMA_VERSION,
        experiment="x",
        run_id="r",
        platform="cpu",
        baseline="xla",
        variants={},
    )
    # no variant in any role: the study measured nothing, and no rule claims anything
    found = rules.evaluate(rules.facts_of(empty))
    assert found.observations == found.timing == found.untested == ()
    assert all(r.error is None for r in found.rules)
    from harness.report.observations import observation_blocks

    judged = dataclasses.replace(empty, findings=found)
    _, said = observation_blocks(saved.SavedRun(path=tmp_path, summary=judged, variants=()))
    assert "No claim" in said.text


@pytest.fixture(scope="module")
def fast_math_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second tiny run of three variants with one XLA option changed on xla."""
    root = tmp_path_factory.mktemp("fast_math")
    proc = run_harness(
        "--config=gelu.yaml",
        *TINY,
        "--config.select=eager,xla,matmul_only",
        "--config.variants.xla.xla_options.xla_cpu_enable_fast_math=true",
        results_root=root,
    )
    assert proc.returncode == 0, proc.stderr
    return (root / "gelu" / "latest").resolve()


def test_compare_two_real_runs(rendered, fast_math_run, tmp_path):
    md, html, found = compare_runs(rendered, fast_math_run, tmp_path / "cmp")
    text = md.read_text()
    assert "xla_cpu_enable_fast_math" in text
    table = next(t for t in md_tables(text) if t[0][:2] == ["variant", "clusters"])
    rows = {r[0]: r for r in table[1:]}
    assert set(rows) == {"eager", "xla", "matmul_only"}
    # the option reaches XLA as a compile option, not in the traced program: jaxpr and
    # StableHLO agree, so the first difference is at or after hlo_before
    assert rows["xla"][7] not in ("jaxpr", "stablehlo")
    assert "<table>" in html.read_text()
    # every finding of both runs, from their records: a pair only the first run has vanished
    by = {c.subject: c for c in found}
    assert by["`xla_no_fusion` against `xla`"].status == VANISHED
    assert by["`eager` against `xla`"].status in (
        SAME,
        CHANGED,
        WITHIN_NOISE,
    ) or by["`eager` against `xla`"].status.startswith("no verdict")
    assert text.index("## Findings") < text.index("## Variants in both runs")


def test_the_results_index_reads_a_kept_row_only_while_its_summary_is_unchanged(
    rendered: Path, tmp_path: Path
) -> None:
    """Each report keeps its run's index row beside summary.json, so an index over many runs
    reads one small file per run; a changed summary is read again, and the index never
    writes into another run's folder."""
    from harness.report import index

    root = tmp_path / "results"
    own, other = root / "gelu" / "20990101-000000", root / "gelu" / "20980101-000000"
    for run in (own, other):
        shutil.copytree(rendered, run, symlinks=True)
        (run / index.PART_FILE).unlink(missing_ok=True)
    index.write_results_index(root, own=own)
    assert (own / index.PART_FILE).is_file() and not (other / index.PART_FILE).exists()
    fresh = (root / "index.html").read_text()
    part = index.kept_part(own)
    assert part is not None and part.experiment == "gelu" and len(part.headline) == 5
    top = load_summary(own / "summary.json").findings.top
    assert part.headline[-1].rstrip("…") == top[: index.TOP_LIMIT]
    index.write_results_index(root)
    assert (root / "index.html").read_text() == fresh  # the kept row is the same row

    # A kept row that no longer matches its summary is not believed: the summary is read.
    kept = json.loads((own / index.PART_FILE).read_text())
    kept["headline"] = ["forged", "forged", "forged", "0/0", "forged"]
    (own / index.PART_FILE).write_text(json.dumps(kept))
    assert "forged" in (index.write_results_index(root) and (root / "index.html").read_text())
    summary = own / "summary.json"
    summary.write_text(summary.read_text() + "\n")
    assert index.kept_part(own) is None
    index.write_results_index(root)
    assert "forged" not in (root / "index.html").read_text()


def test_the_report_reads_no_ir_file_and_no_profile(tmp_path):
    """The conclusions the report shows are summary.json's: in a copy of the committed H200
    reference with every IR file emptied and no kernels.json, they render the same."""
    from harness.report.doc import to_markdown
    from harness.report.findings import boundaries_blocks, changes_blocks, findings_blocks
    from harness.report.observations import observation_blocks

    source = REPO / "results" / "reference" / "h200"
    copy = tmp_path / "h200"
    shutil.copytree(source, copy)
    emptied = [p for p in copy.glob("variants/*/ir/**/*") if p.is_file() and p.name != "index.json"]
    for p in emptied:
        p.write_text("")
    for p in copy.glob("variants/*/kernels.json"):
        p.unlink()
    assert len(emptied) > 100

    def conclusions(run: Path) -> str:
        r = saved.load_run(run)
        shown = (findings_blocks, changes_blocks, boundaries_blocks, observation_blocks)
        return to_markdown(tuple(b for blocks in shown for b in blocks(r)))

    assert "(rule `structure.why_not_fused`)" in conclusions(source)
    assert conclusions(copy) == conclusions(source)
