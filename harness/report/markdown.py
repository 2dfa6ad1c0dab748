"""write_report(workdir): report.md, report.html, plots/ and the indexes of a saved run.

Reads only files in the run folder (and never imports jax), so a report can be rendered again
from a saved run at any time: `python -m harness.report --run=results/gelu/latest`. It writes
only its own outputs: report.md, report.html, plots/, index.html in the run folder, and, for a
study, the results index of its results root (`make index` rewrites that one).
"""

from __future__ import annotations

from pathlib import Path

from harness import io
from harness.report import data, doc, findings, index, observations, plots, search, sections


def read_decisions(run: data.RunData) -> str:
    """The baseline's priority-fusion decision log (GPU), read at the edge; '' when absent."""
    base = run.by_role("baseline")
    stage = base.stage("fusion_decisions") if base else None
    if stage is None or not stage.exists:
        return ""
    with open(run.path / stage.path, errors="replace") as f:
        return f.read(2_000_000)


def read_pass_texts(run: data.RunData, v: data.VariantData) -> dict[str, str]:
    """A variant's per-pass HLO files by name, read at the edge, when a cluster needs its
    origin traced (XLA-made clusters: converts, copies, wrapped ops)."""
    stage = v.stage("passes")
    wanted = any(
        not c.get("source_ops")
        or str(c.get("name", "")).startswith(("wrapped_", "convert", "copy"))
        for c in v.clusters()
    )
    if stage is None or not stage.exists or not stage.is_dir or not wanted:
        return {}
    folder = run.path / stage.path
    return {p.stem: p.read_text(errors="replace") for p in sorted(folder.iterdir()) if p.is_file()}


def render(run: data.RunData, plot_outcomes: tuple[plots.PlotOutcome, ...]) -> tuple[str, str]:
    """Returns (markdown, html) of the report: two renderings of the same blocks."""
    texts = {f: observations.read_emitter_texts(run, framework=f) for f in observations.FRAMEWORKS}
    rows = observations.observation_table(run, texts)
    origins = {
        v.name: findings.origins(v, passes)
        for v in run.variants
        if (passes := read_pass_texts(run, v))
    }
    blocks = sections.report_blocks(run, rows, plot_outcomes, read_decisions(run), origins)
    title = f"{run.experiment} {run.run_id}"
    return doc.to_markdown(blocks), doc.to_html(blocks, title)


def plot_formats(run: data.RunData) -> tuple[str, ...]:
    """PNG, which the report shows; SVG too when the run's config asks (`report.svg`)."""
    wanted = ((run.manifest.get("config") or {}).get("report") or {}).get("svg")
    return ("png", "svg") if wanted is True else ("png",)


def write_search_report(workdir: Path) -> Path:
    """report.md, report.html and plots/search.png of a search's run folder."""
    record = search.load(workdir)
    plot = None
    if any(c.step_s is not None for c in record.candidates):
        plots.save_figure(search.figure(record), workdir / "plots" / "search.png")
        plot = "plots/search.png"
    blocks = search.blocks(record, f"Search: {workdir.parent.name} {workdir.name}", plot)
    io.write_text(workdir / "report.html", doc.to_html(blocks, workdir.name))
    io.write_text(workdir / "report.md", doc.to_markdown(blocks))
    return workdir / "report.md"


def write_report(workdir: Path, results_root: Path | None = None) -> Path:
    """Writes report.md, report.html, plots/ and the run's index.html; with `results_root`
    (a study's, whose run this is), the results index there too. Returns report.md's path.

    Only a study names its results root: a command given a run folder (report, export,
    reanalyze) writes inside that folder alone, never into a folder above it.
    """
    if (workdir / "search.json").is_file() and not (workdir / "summary.json").is_file():
        return write_search_report(workdir)
    run = data.load_run(workdir)
    for own in ("plots", "report.md", "report.html", "index.html"):
        if (run.path / own).is_symlink():  # planted: replace the link, never write through it
            (run.path / own).unlink()
    outcomes = plots.save_plots(run, run.path / "plots", plot_formats(run))
    md, html = render(run, outcomes)
    io.write_text(run.path / "report.html", html)
    io.write_text(run.path / "report.md", md)
    index.write_run_index(run.path)
    if results_root is not None:
        with io.writes_confined_to(results_root):
            index.write_results_index(results_root, own=run.path)
    return run.path / "report.md"
