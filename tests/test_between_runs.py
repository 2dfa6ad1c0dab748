"""How far a ratio moves from run to run (issue 24): DerSimonian–Laird over earlier runs on the
same machine, added to a run's intervals (harness.analyze.between_runs).

The statistics run on numbers whose answer is known; the analysis on copies of the session's
tiny real run, whose earlier copies have their rounds scaled so that one ratio moves between
runs and the others do not.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from harness.analyze import analyze_run, between_runs
from harness.common import stats
from harness.config.schema import build_experiment
from harness.records.summary import RunSummary
from harness.report import unresolved

MOVER = "xla_host_callback"
BASELINE = "xla"


def test_dersimonian_laird_with_equal_variances_is_the_spread_beyond_them() -> None:
    """With every run's variance v, τ² = max(0, s² − v), s² the runs' sample variance."""
    ys = [0.0, 0.1, -0.1, 0.2]
    s2 = sum((y - sum(ys) / 4) ** 2 for y in ys) / 3
    runs = [between_runs.RunRatio(y, 0.001) for y in ys]
    assert between_runs.dersimonian_laird(runs) == pytest.approx(s2 - 0.001)
    same = [between_runs.RunRatio(0.05, 0.001)] * 5
    assert between_runs.dersimonian_laird(same) == 0.0
    assert between_runs.dersimonian_laird(runs[:1]) == 0.0


def test_a_spread_widens_the_interval_and_keeps_the_ratio() -> None:
    rng = __import__("random").Random(3)
    a = [1.5 * (1 + rng.uniform(-0.1, 0.1)) for _ in range(40)]
    b = [1.0 * (1 + rng.uniform(-0.1, 0.1)) for _ in range(40)]
    alone = stats.ratio_estimate(a, b)
    assert stats.ratio_estimate(a, b, between=0.0) == alone  # no spread: exactly as before
    wide = stats.ratio_estimate(a, b, between=0.1)
    assert wide.ratio == alone.ratio
    assert wide.ci95[0] < alone.ci95[0] and wide.ci95[1] > alone.ci95[1]
    # A 1.5× ratio stays called with a 10% spread, but not with a 40% one.
    assert wide.p is not None and wide.p < 0.05
    loose = stats.ratio_estimate(a, b, between=0.4)
    assert loose.p is not None and loose.p > 0.05


def _copy(run: Path, parent: Path, run_id: str, scale: float, **noise: object) -> Path:
    """Copies the run to parent/run_id with MOVER's rounds made BASELINE's × 2 × scale (± 2%
    round by round, so each run's own interval has a width), its summary marked as the given
    noise (resolved by default).

    MOVER's own rounds are not kept: a host callback on a loaded machine reads an interval so
    wide that it alone would explain the spread between runs, and the test would measure the
    load."""
    out = parent / run_id
    shutil.copytree(run, out, symlinks=True)
    timing = json.loads((out / "timing.json").read_text())
    timing["variants"][MOVER]["round_step_s"] = [
        t * 2.0 * scale * (1.02 if i % 2 else 0.98)
        for i, t in enumerate(timing["variants"][BASELINE]["round_step_s"])
    ]
    (out / "timing.json").write_text(json.dumps(timing))
    summary = json.loads((out / "summary.json").read_text())
    summary["noise"] = {**summary["noise"], "resolved": True, "reasons": [], **noise}
    for v in summary["variants"].values():  # older runs: the rounds are re-read
        for verdict in (v.get("comparison") or {}).values():
            if isinstance(verdict, dict) and "ci95_rounds" in verdict:
                verdict["ci95_rounds"] = None
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def _analyzed(workdir: Path) -> RunSummary:
    manifest = json.loads((workdir / "manifest.json").read_text())
    return analyze_run(workdir, build_experiment(manifest["config"], str(workdir)))


def _host(workdir: Path, host: str) -> None:
    manifest = json.loads((workdir / "manifest.json").read_text())
    manifest["environment"]["host"] = host
    (workdir / "manifest.json").write_text(json.dumps(manifest))


def _rounds(workdir: Path, rounds: int) -> None:
    manifest = json.loads((workdir / "manifest.json").read_text())
    manifest["config"]["timing"]["rounds"] = rounds
    (workdir / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def history(cpu_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gelu/: three earlier resolved runs on this machine (MOVER's rounds ×0.5, ×2, ×1),
    one on another host, one unresolved and one timed with other rounds (each ×3), a newer one
    (×5), and the run itself."""
    parent = tmp_path_factory.mktemp("between") / "gelu"
    parent.mkdir()
    _copy(cpu_run, parent, "20260101-000001", 0.5)
    _copy(cpu_run, parent, "20260101-000002", 2.0)
    _host(_copy(cpu_run, parent, "20260101-000003", 3.0), "elsewhere")
    _copy(cpu_run, parent, "20260101-000004", 3.0, resolved=False, reasons=["loaded"])
    _copy(cpu_run, parent, "20260101-000005", 1.0)
    _rounds(_copy(cpu_run, parent, "20260101-000007", 3.0), 99)
    _copy(cpu_run, parent, "20260101-000009", 5.0)
    _copy(cpu_run, parent, "20260101-000008", 1.0)
    return parent


def test_a_ratio_that_moved_between_runs_gets_a_wider_interval(history: Path) -> None:
    summary = _analyzed(history / "20260101-000008")
    b = summary.noise.between_runs if summary.noise else None
    assert b is not None
    # Only the same host's resolved, older runs timed alike count: not ...03 (another host),
    # ...04 (unresolved), ...07 (other rounds) or the newer ...09.
    assert b.earlier_runs == ("20260101-000001", "20260101-000002", "20260101-000005")
    moved = summary.variants[MOVER].comparison.vs_baseline
    assert moved is not None and moved.between_runs is not None and moved.ci95_rounds
    # Rounds ×0.5, ×2 and ×1 beside this run's: log ratios 0.69 either side, a spread (sd)
    # of 0.57 of which each run's own rounds (a constant ratio) explain nothing.
    assert 0.3 < moved.between_runs < 0.6
    assert moved.ci95[0] < moved.ci95_rounds[0] and moved.ci95[1] > moved.ci95_rounds[1]
    # A comparison whose earlier runs read the same ratio gets no spread.
    steady = summary.variants["eager"].comparison.vs_baseline
    assert steady is not None and steady.between_runs == 0.0
    assert steady.ci95 == steady.ci95_rounds
    assert unresolved.between_runs_line(summary) is not None


def test_with_too_few_earlier_runs_the_interval_is_the_runs_own_and_says_so(
    cpu_run: Path, tmp_path: Path
) -> None:
    parent = tmp_path / "gelu"
    parent.mkdir()
    _copy(cpu_run, parent, "20260101-000001", 2.0)
    shutil.copytree(cpu_run, parent / "20260101-000002", symlinks=True)
    summary = _analyzed(parent / "20260101-000002")
    moved = summary.variants[MOVER].comparison.vs_baseline
    assert moved is not None and moved.between_runs is None
    assert moved.ci95 == moved.ci95_rounds
    b = summary.noise.between_runs if summary.noise else None
    assert b is not None and b.widened == 0 and b.earlier_runs == ("20260101-000001",)
    line = unresolved.between_runs_line(summary)
    assert line is not None and "this run's rounds only" in line
    assert math.isfinite(moved.ratio or math.nan)
