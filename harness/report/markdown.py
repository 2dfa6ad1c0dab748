"""write_report(workdir): report.md, report.html, plots/ and the indexes of a saved run.

Reads only files in the run folder (and never imports jax), so a report can be rendered again
from a saved run at any time: `python -m harness.report --run=results/gelu/latest`. It writes
only its own outputs: report.md, report.html, plots/, index.html in the run folder, and the
results index above it.
"""

from __future__ import annotations

from pathlib import Path

from harness import io
from harness.report import data, doc, index, observations, plots, sections


def render(run: data.RunData, plot_outcomes: tuple[plots.PlotOutcome, ...]) -> tuple[str, str]:
    """Returns (markdown, html) of the report: two renderings of the same blocks."""
    texts = {f: observations.read_emitter_texts(run, framework=f) for f in observations.FRAMEWORKS}
    rows = observations.observation_table(run, texts)
    blocks = sections.report_blocks(run, rows, plot_outcomes)
    title = f"{run.experiment} {run.run_id}"
    return doc.to_markdown(blocks), doc.to_html(blocks, title)


def plot_formats(run: data.RunData) -> tuple[str, ...]:
    """PNG, which the report shows; SVG too when the run's config asks (`report.svg`)."""
    wanted = ((run.manifest.get("config") or {}).get("report") or {}).get("svg")
    return ("png", "svg") if wanted is True else ("png",)


def write_report(workdir: Path) -> Path:
    """Writes report.md, report.html, plots/, the run's index.html and the results index.

    The results index (<results>/index.html) is only rewritten when the run sits in the
    <results>/<experiment>/<run_id> layout. Returns the path of report.md.
    """
    run = data.load_run(workdir)
    outcomes = plots.save_plots(run, run.path / "plots", plot_formats(run))
    md, html = render(run, outcomes)
    io.write_text(run.path / "report.html", html)
    io.write_text(run.path / "report.md", md)
    index.write_run_index(run.path)
    if run.path.parent.name == run.experiment:  # laid out as <results>/<experiment>/<run_id>
        with io.writes_confined_to(run.path.parent.parent):
            index.write_results_index(run.path.parent.parent)
    return run.path / "report.md"
