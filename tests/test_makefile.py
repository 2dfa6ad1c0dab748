"""make passes every path it is given to the shell as one quoted word (issue 59): a run folder
named `run;touch X;#` runs nothing, a `'` or a `$(shell ...)` in a value stays text, and a
recipe whose command fails makes make fail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _make(tmp_path: Path, *args: str, py: str) -> subprocess.CompletedProcess[str]:
    venv = tmp_path / "venv"
    venv.mkdir(exist_ok=True)
    (venv / ".installed").touch()  # newer than pyproject.toml: nothing is installed
    return subprocess.run(
        ["make", "-s", "-C", str(REPO), f"VENV={venv}", f"PY={py}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _argv_stub(tmp_path: Path) -> str:
    stub = tmp_path / "argv.py"
    stub.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    return f"{sys.executable} {stub}"


@pytest.mark.parametrize(
    ("target", "values", "expected"),
    [
        (
            "compare",
            {"A": "run;touch {X};#", "B": "b'c d", "OUT": "$(shell touch {X})"},
            ["--a=run;touch {X};#", "--b=b'c d", "--out=$(shell touch {X})"],
        ),
        ("report", {"RUN": "r $(A);touch {X}"}, ["--run=r $(A);touch {X}"]),
        ("experiment", {"CONFIG": "`touch {X}`.yaml"}, ["--config=`touch {X}`.yaml"]),
    ],
    ids=["compare", "report", "experiment"],
)
def test_every_path_reaches_the_command_as_one_word(
    tmp_path: Path, target: str, values: dict[str, str], expected: list[str]
) -> None:
    x = tmp_path / "X"
    args = [f"{k}={v.format(X=x)}" for k, v in values.items()]
    result = _make(tmp_path, target, *args, py=_argv_stub(tmp_path))
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout.splitlines()[-1])
    assert argv[2:] == [e.format(X=x) for e in expected]
    assert not x.exists(), "make ran what a path said"


def test_a_compare_that_fails_makes_make_fail_and_runs_nothing(tmp_path: Path) -> None:
    x = tmp_path / "X"
    run = tmp_path / f"run;touch {x};#"
    result = _make(tmp_path, "compare", f"A={run}", f"B={tmp_path / 'b'}", py=sys.executable)
    assert result.returncode != 0
    assert "error:" in result.stderr
    assert not x.exists()
