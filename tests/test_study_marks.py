"""`make test-fast` leaves out the tests marked `study`: the check in conftest.py that fails a
test starting a study unmarked sees every way the suite starts one, and nothing else."""

from __future__ import annotations

import sys

import conftest
import pytest
from conftest import REPO, harness_argv

STUDIES = {
    "run_harness": harness_argv("--config=gelu.yaml", results_root=REPO / "results"),
    "a_shell_line": [
        "unshare",
        "-m",
        "bash",
        "-c",
        f"{sys.executable} -m harness --results_root=/tmp/r --config=gelu.yaml > out",
    ],
    "runpy": [
        sys.executable,
        "-c",
        'import runpy; runpy.run_module("harness", run_name="__main__")',
    ],
    "hooked": [sys.executable, str(REPO / "tests" / "hooked_harness.py"), "hold", "x", "y"],
    "in_process_worker": [sys.executable, "-m", "harness.study.worker", "7"],
    "one_string": f"{sys.executable} -m harness --config=gelu.yaml",
}
OTHERS = {
    "analyze": [sys.executable, "-m", "harness.analyze", "--dump=d", "--out=o"],
    "report": [sys.executable, "-m", "harness.report", "--run=r"],
    "reanalyze": [sys.executable, "-m", "harness.commands.reanalyze", "--run=r"],
    "a_program": [sys.executable, str(REPO / "tests" / "mlp_program.py"), "prof"],
    "vulture": [sys.executable, "-m", "vulture", "harness"],
}


@pytest.mark.parametrize("name", STUDIES)
def test_every_way_a_study_starts_is_seen(name: str) -> None:
    assert conftest.STUDY_COMMAND.search(conftest._command_line(STUDIES[name]))


@pytest.mark.parametrize("name", OTHERS)
def test_other_commands_are_no_study(name: str) -> None:
    assert not conftest.STUDY_COMMAND.search(conftest._command_line(OTHERS[name]))


def test_a_study_started_by_an_unmarked_test_is_noted(request: pytest.FixtureRequest) -> None:
    """The audit hook itself, called as Python calls it when a command starts (no process is
    started here): it notes this unmarked test, whose tear-down would then fail."""
    argv = STUDIES["run_harness"]
    try:
        conftest._note_unmarked_study("subprocess.Popen", (sys.executable, argv, None, None))
        assert request.node.nodeid in conftest._unmarked_studies
        conftest._note_unmarked_study(
            "subprocess.Popen", (sys.executable, OTHERS["analyze"], None, None)
        )
        assert "-m harness --" in conftest._unmarked_studies[request.node.nodeid]
    finally:
        conftest._unmarked_studies.pop(request.node.nodeid, None)
