"""write_report(workdir): report.md, report.html, plots/ and the indexes of a saved run.

Reads only files in the run folder (and never imports jax), so a report can be rendered again
from a saved run at any time: `python -m harness.report --run=results/gelu/latest`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import io
from harness.report import ceilings as ceilings_mod
from harness.report import data, doc, index, observations, plots, sections


def resolve_ceilings(run: data.RunData) -> dict[str, Any]:
    """Returns the run's ceilings: ceilings.json, else known constants, else a CPU calibration now.

    A calibration made here (not at capture) is written to ceilings.json with a note saying so,
    so the next rendering reuses it.
    """
    if run.ceilings:
        return run.ceilings
    measured = ceilings_mod.device_ceilings({**run.environment, "platform": run.platform})
    if measured is None:
        return {}
    if "measured_at" in measured:  # calibrated now, not at capture: say so and keep it
        measured["note"] = (
            "ceilings.json was absent: the CPU ceiling was calibrated when the report was "
            f"rendered ({measured['measured_at']}), not at capture"
        )
        io.write_json(run.path / "ceilings.json", measured)
    return measured


def render(
    run: data.RunData, ceilings: dict[str, Any], plot_outcomes: tuple[plots.PlotOutcome, ...]
) -> tuple[str, str]:
    """Returns (markdown, html) of the report: two renderings of the same blocks."""
    texts = observations.read_emitter_texts(run)
    obs = observations.all_observations(run, texts)
    blocks = sections.report_blocks(run, obs, plot_outcomes, ceilings)
    title = f"{run.experiment} {run.run_id}"
    return doc.to_markdown(blocks), doc.to_html(blocks, title)


def write_report(workdir: Path) -> Path:
    """Writes report.md, report.html, plots/*.png|svg, the run's index.html and the results index.

    The results index (<results>/index.html) is only rewritten when the run sits in the
    <results>/<experiment>/<run_id> layout.

    Returns the path of report.md (run.py prints it).
    """
    workdir = Path(workdir)
    run = data.load_run(workdir)
    ceilings = resolve_ceilings(run)
    outcomes = plots.save_plots(run, ceilings, run.path / "plots")
    md, html = render(run, ceilings, outcomes)
    io.write_text(run.path / "report.html", html)
    io.write_text(run.path / "report.md", md)
    index.write_run_index(run.path)
    if run.path.parent.name == run.experiment:  # laid out as <results>/<experiment>/<run_id>
        index.write_results_index(run.path.parent.parent)
    return workdir / "report.md"
