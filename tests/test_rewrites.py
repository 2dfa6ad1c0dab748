"""Commands that rewrite a run are transactions (issue 59): reanalyze and migrate build the
new summary beside the old one and replace it only when nothing it held is lost (or the user
passes --allow_loss); a run missing the raw inputs a section needs is refused, naming them,
with nothing changed; sibling runs' figures are range-checked, and no record writes NaN or an
infinity where null would not read back."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile_world import in_process, one_line

from harness.analyze import between_runs
from harness.common import stats
from harness.records import losses
from harness.store.records import NonFinite, to_json


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- what a rewrite would lose ------------------------------------------------------------------


def test_lost_names_sections_variants_and_a_variant_no_longer_ok() -> None:
    before = {
        "noise": {"floor": 0.03},
        "findings": None,
        "variants": {
            "xla": {"identity": {"status": "ok"}, "compile": {"first_call_s": 0.2}},
            "eager": {"identity": {"status": "ok"}, "profile": {"kernels": [1]}},
            "gone": {"identity": {"status": "ok"}},
        },
    }
    after = {
        "noise": None,
        "findings": {"timing": []},
        "variants": {
            "xla": {"identity": {"status": "failed"}, "compile": {"first_call_s": None}},
            "eager": {"identity": {"status": "ok"}, "profile": {"kernels": [2]}},
        },
    }
    assert losses.lost(before, after) == [
        "noise",
        "variants.xla (ok before, failed after)",
        "variants.xla.compile",
        "variants.gone",
    ]
    assert losses.lost(before, before) == []


# --- reanalyze of a damaged finished run: refused, nothing changed -----------------------------


def _rm(rel: str) -> Callable[[Path], None]:
    return lambda run: shutil.rmtree(run / rel)


def _file_for_folder(run: Path) -> None:
    shutil.rmtree(run / "variants" / "xla")
    (run / "variants" / "xla").write_text("not a folder\n")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "variants_removed": (_rm("variants"), "variants/xla (a folder)"),
    "ir_removed": (_rm("variants/xla/ir"), "variants/xla/ir"),
    "folder_replaced_by_a_file": (_file_for_folder, "variants/xla (a folder, not a file"),
}


@pytest.mark.study
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_reanalyze_refuses_a_run_missing_raw_inputs(
    cpu_run: Path, tmp_path: Path, damage: str
) -> None:
    run = shutil.copytree(cpu_run, tmp_path / "run", symlinks=True)
    make, words = DAMAGE[damage]
    make(run)
    before = _tree(run)
    line = one_line(in_process("harness.commands.reanalyze", f"--run={run}"), 2, words)
    assert "changed nothing" in line
    assert _tree(run) == before


@pytest.mark.study
def test_reanalyze_refuses_to_lose_a_section_unless_allowed(cpu_run: Path, tmp_path: Path) -> None:
    """The run's rounds (timing.json) removed: its noise section and every comparison would be
    empty after. Refused, every file the analysis rewrote is put back."""
    run = shutil.copytree(cpu_run, tmp_path / "run", symlinks=True)
    (run / "timing.json").unlink()
    before = _tree(run)
    line = one_line(in_process("harness.commands.reanalyze", f"--run={run}"), 2, "would lose")
    assert "noise" in line and "--allow_loss" in line and "nothing was changed" in line
    assert _tree(run) == before
    assert not list(run.glob(".harness-kept-*"))
    result = in_process("harness.commands.reanalyze", f"--run={run}", "--allow_loss")
    assert result.code == 0, result.stderr
    assert json.loads((run / "summary.json").read_text())["noise"] is None


# --- sibling runs' figures, and the writer --------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "ci95"),
    [
        (1e300, (1e299, 1e301)),
        (1.0, (1e-300, 1e300)),
        (math.nan, (0.9, 1.1)),
        (1.0, (0.9, math.inf)),
    ],
    ids=["huge", "huge_interval", "nan", "inf_bound"],
)
def test_a_sibling_runs_ratio_out_of_range_is_not_used(ratio: float, ci95: tuple) -> None:
    assert between_runs.run_ratio(stats.RatioEstimate(ratio, ci95, 0)) is None
    assert between_runs.run_ratio(stats.RatioEstimate(1.2, (1.1, 1.3), 0)) is not None


def test_the_writer_refuses_a_non_finite_bound() -> None:
    @dataclasses.dataclass(frozen=True)
    class Verdictish:
        ratio: float | None = None
        ci95: tuple[float, float] | None = None
        wall_s: float = 0.0

    assert to_json(Verdictish(ratio=math.inf)) == {"ratio": None, "ci95": None, "wall_s": 0.0}
    with pytest.raises(NonFinite, match="ci95"):
        to_json(Verdictish(ci95=(0.0, math.inf)))
    with pytest.raises(NonFinite, match="wall_s"):
        to_json(Verdictish(wall_s=math.nan))


def test_a_rewrite_not_committed_puts_every_file_back(tmp_path: Path) -> None:
    from harness.store import io, rewrite

    run = tmp_path / "run"
    io.write_text(run / "summary.json", "old\n")
    io.write_text(run / "variants" / "x" / "fusions.json", "[1]\n")
    before = _tree(run)
    with rewrite.transaction(run):
        io.write_text(run / "summary.json", "new\n")  # replaced
        (run / "variants" / "x" / "fusions.json").unlink()  # removed
        io.write_text(run / "variants" / "x" / "made.json", "{}\n")  # made
    assert _tree(run) == before
    assert sorted(p.name for p in run.iterdir()) == ["summary.json", "variants"]
    with rewrite.transaction(run) as t:
        io.write_text(run / "summary.json", "new\n")
        t.commit()
    assert (run / "summary.json").read_text() == "new\n"


@pytest.mark.study
def test_resume_of_a_run_killed_in_its_report_stage_names_make_report(
    cpu_run: Path, tmp_path: Path
) -> None:
    """Killed in its report stage, a run reads complete with no report; --resume refused it
    without saying how to make the report (issue 59)."""
    from conftest import TINY, run_harness

    run = shutil.copytree(cpu_run, tmp_path / "r" / "gelu" / cpu_run.name, symlinks=True)
    (run / "report.md").unlink()
    result = run_harness(
        "--config=gelu.yaml", *TINY, f"--resume={run.name}", results_root=tmp_path / "r"
    )
    assert result.returncode == 2, result.stderr
    assert f"make report RUN={run}" in result.stderr and "Traceback" not in result.stderr


def test_migrate_refuses_a_summary_that_would_lose_its_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rules that make nothing of a run whose summary holds findings: the old summary stays,
    byte for byte, unless --allow_loss."""
    from conftest import REPO

    from harness.commands import cli, migrate
    from harness.records.findings import Findings

    run = shutil.copytree(REPO / "results" / "reference" / "cpu", tmp_path / "cpu")
    before = (run / "summary.json").read_bytes()
    monkeypatch.setattr(migrate.rules, "evaluate", lambda facts: Findings())
    with pytest.raises(cli.UsageError, match=r"would lose findings.*--allow_loss"):
        migrate.add_findings(run)
    assert (run / "summary.json").read_bytes() == before
    migrate.add_findings(run, allow_loss=True)
    assert (run / "summary.json").read_bytes() != before


def test_a_fork_of_the_sole_writer_writes_nothing(tmp_path: Path) -> None:
    """A copy of the worker a user's fork made, running on into the harness's code, exits at
    its first write: the finished run's files never change under it (issue 59)."""
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from harness.store import io\n"
        "io.sole_writer()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    io.write_text(Path(sys.argv[1]) / 'child.json', '{}')\n"
        "    os._exit(7)  # never reached: the write exits first, with 0\n"
        "_, status = os.waitpid(pid, 0)\n"
        "io.write_text(Path(sys.argv[1]) / 'parent.json', '{}')\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    from conftest import REPO

    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parent.json"]


def test_a_timing_record_past_any_stages_rounds_is_not_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 92 MB timing.json took 62 s and 6.9 GB in migrate (issue 59): its rounds are counted
    before a record is built, and one too large for its bound is not read."""
    from harness.analyze import verdicts

    rounds = {"rounds": 3, "target_batch_s": 0.01, "wall_s": 1.0, "variants": {}}
    (tmp_path / "timing.json").write_text(json.dumps({**rounds, "orders": [["x"]] * 30_000}))
    assert verdicts.read_timing(tmp_path) is None
    assert capsys.readouterr().err == ""  # a sibling run's rounds: left out quietly
    assert verdicts.read_timing(tmp_path, warn=True) is None
    assert "holds more than 20000 rounds" in capsys.readouterr().err
    with (tmp_path / "timing.json").open("wb") as f:
        f.truncate(92 << 20)
    assert verdicts.read_timing(tmp_path, warn=True) is None
    assert "the bound for a timing record" in capsys.readouterr().err
    (tmp_path / "timing.json").write_text(json.dumps({**rounds, "orders": [["x"]] * 3}))
    assert verdicts.read_timing(tmp_path, warn=True) is not None
