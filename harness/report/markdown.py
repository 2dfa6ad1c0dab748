"""write_report(workdir): report.md, report.html, plots/ and the indexes of a saved run.

Reads only files in the run folder (and never imports jax), so a report can be rendered again
from a saved run at any time: `python -m harness.report --run=results/gelu/latest`. It reads
no IR file and no profile: the conclusions are summary.json's `findings`. It writes
only its own outputs: report.md, report.html, plots/, index.html in the run folder, and, for a
study, the results index of its results root (`make index` rewrites that one).
"""

from __future__ import annotations

from pathlib import Path

from harness import io
from harness.report import data, doc, index, plots, search, sections


def render(run: data.RunData, plot_outcomes: tuple[plots.PlotOutcome, ...]) -> tuple[str, str]:
    """Returns (markdown, html) of the report: two renderings of the same blocks."""
    blocks = sections.report_blocks(run, plot_outcomes)
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
