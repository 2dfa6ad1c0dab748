"""Moved commands keep working (issue 61): every `python -m harness...` that a README, a
report or a saved run has named since the first release either runs, or says in one line where
the command went and exits 2 (never exits 0 having done nothing)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import harness

NAMED = re.compile(r"python3? -m (harness(?:\.[a-z_]+)*)")
# Named at the time of this test, for a clone without the history (a shallow CI checkout).
KNOWN = {
    "harness",
    "harness.analysis",
    "harness.analyze",
    "harness.capture.xla_options",
    "harness.commands",
    "harness.commands.compare",
    "harness.commands.export",
    "harness.commands.migrate",
    "harness.commands.reanalyze",
    "harness.migrate",
    "harness.reanalyze",
    "harness.records.keytables",
    "harness.records.processes",
    "harness.report",
    "harness.report.compare",
    "harness.report.export",
    "harness.study.worker",
    "harness.summary",
    "harness.summary_doc",
    "harness.summary_processes",
    "harness.worker",
}


def named_commands() -> set[str]:
    """Every module run with `python -m` in the git history, the README and the saved runs."""
    found = set(KNOWN)
    log = subprocess.run(
        ["git", "log", "-p", "--format=", "-G", r"python3\? -m[ ]harness"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    texts = [log.stdout if log.returncode == 0 else ""]
    texts.append((REPO / "README.md").read_text())
    texts += [p.read_text() for p in (REPO / "results" / "reference").rglob("*.md")]
    for text in texts:
        found.update(m.group(1) for m in NAMED.finditer(text))
    return found


def runs_as_itself(name: str) -> bool:
    """Whether `python -m name` runs a file of the harness with a main of its own."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return False
    if spec.submodule_search_locations:  # a package: its __main__
        main = Path(spec.origin).parent / "__main__.py"
        return main.is_file() and name not in harness.MOVED
    return "__main__" in Path(spec.origin).read_text() and name not in harness.MOVED


def test_every_named_command_runs_or_is_known_to_have_moved() -> None:
    names = named_commands()
    assert names >= KNOWN
    lost = sorted(n for n in names if not runs_as_itself(n) and n not in harness.MOVED)
    assert lost == [], f"named once, now neither a command nor in harness.MOVED: {lost}"


@pytest.mark.slow  # a fresh interpreter each
@pytest.mark.parametrize("name", sorted(harness.MOVED))
def test_a_moved_command_says_where_it_went_in_one_line_and_exits_2(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", name, "--a=x", "--b=y"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: python -m {name} has moved: "), lines
    assert proc.stdout == ""


def test_a_moved_module_still_fails_to_import_as_before() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("harness.summary")
