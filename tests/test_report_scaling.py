"""The report stages grow linearly with a run's size (issue 32, class 11): a program of
3,000 outputs spent over 400 s in the fusion map and 20,000 variants never finished.

Work is counted as Python calls (benchmarks/report_scaling.py's `count_calls`), not seconds:
at sizes n, 2n and 4n the second step may cost at most about twice the first, which a loop
over every pair cannot meet; a figure, whose drawing is the cost, stops growing at its cap.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

from harness import saved
from harness.report import markdown, plots

sys.path.insert(0, str(REPO / "benchmarks"))

from report_scaling import count_calls, widen_run


def _growth(counts: list[int]) -> float:
    """Returns how much more the second doubling cost than the first."""
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    return second / max(first, 1)


@pytest.fixture(scope="module")
def widened(cpu_run: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("scaling")

    def make(variants: int = 0, ops: int = 0) -> saved.SavedRun:
        return saved.load_run(widen_run(cpu_run, root / f"v{variants}-o{ops}", variants, ops))

    return make


def test_the_report_text_is_linear_in_the_variants(widened):
    runs = [widened(variants=n) for n in (10, 20, 40)]
    counts = [count_calls(lambda r=r: markdown.render(r, ())) for r in runs]
    assert counts[0] < counts[1] < counts[2]  # every variant is in the tables
    assert _growth(counts) <= 2.2, counts


def test_the_fusion_map_is_bounded_in_the_ops(widened):
    """Its rows are the ops: past MAX_MAP_OPS the figure stops growing and says so."""
    runs = [widened(ops=n) for n in (plots.MAX_MAP_OPS * 2, plots.MAX_MAP_OPS * 4)]
    counts = [count_calls(lambda r=r: plots.fusion_map(r)) for r in runs]
    assert counts[1] <= 1.2 * counts[0], counts
    titles = [ax.get_title() for ax in plots.fusion_map(runs[1]).axes]
    assert any(f"first {plots.MAX_MAP_OPS} of {plots.MAX_MAP_OPS * 4} ops" in t for t in titles)


def test_a_figure_of_many_variants_shows_a_bounded_number(widened):
    run = widened(variants=plots.MAX_PLOT_VARIANTS * 2)
    fig = plots.step_time(run)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(labels) == plots.MAX_PLOT_VARIANTS
    assert run.baseline in labels
    measured = sum(v.measured for v in run.variants)
    assert f"{plots.MAX_PLOT_VARIANTS} of {measured} variants shown" in fig.axes[0].get_title()
