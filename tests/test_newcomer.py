"""benchmarks/newcomer.py (issue 42): a fresh clone runs the README's make commands, and
every command the harness printed for the user pastes and runs as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import newcomer  # noqa: E402


def test_the_commands_printed_for_the_user_are_read_in_every_form() -> None:
    out = (
        "could not resolve: This run could not resolve differences ...\n"
        "time it again later: make experiment CONFIG=gelu.yaml FLAGS='--resume=1'\n"
        "  or: .venv/bin/python -m harness --config=gelu.yaml --resume=1\n"
        "interrupted (SIGINT): 3 of 9 variants kept; finish it with: make experiment "
        "CONFIG=gelu.yaml FLAGS='--resume=2', or: .venv/bin/python -m harness --resume=2\n"
        "report: results/gelu/1/report.md\n"
    )
    assert newcomer.printed_commands(out) == [
        "make experiment CONFIG=gelu.yaml FLAGS='--resume=1'",
        ".venv/bin/python -m harness --config=gelu.yaml --resume=1",
        "make experiment CONFIG=gelu.yaml FLAGS='--resume=2'",
        ".venv/bin/python -m harness --resume=2",
    ]


def test_the_tiny_overrides_are_the_suites_own() -> None:
    from conftest import TINY

    assert newcomer.tiny_overrides(ROOT / "tests" / "conftest.py") == TINY


@pytest.mark.slow
@pytest.mark.study  # through make, in the clone: the audit hook sees only the script
def test_a_newcomers_first_hour_runs_every_command_it_was_given() -> None:
    """The committed tree, cloned, with the installed environment reused. Every run is
    made unresolved (timing.max_others=0: any other process's CPU time makes the machine busy;
    a failed A/A check alone would not), so each study prints its re-time command in both forms,
    and each is run as printed. The Flax study is left out: tests/test_flax_train_state.py
    runs it. The gelu studies run two of their variants (the baseline, whose A/A pair the gate
    reads, and eager): every command is still typed and pasted whole, and the other variants'
    studies are the session's (conftest.cpu_run); each of the 13 was compiled again in every
    re-time, half of this test's time."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "newcomer.py"),
            "--no_flax",
            "--config.timing.max_others=0",
            "--config.select=eager,xla",
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    counted = re.search(r"^(\d+) commands \((\d+) pasted as printed\), 0 failed$", out, re.M)
    assert counted, out[-4000:]
    rows = [line for line in out.splitlines() if re.search(r"\s0\s+\d+\.\d$", line)]
    assert len(rows) == int(counted[1]) and int(counted[2]) >= 2
    for step in ("make experiment CONFIG=gelu.yaml", "make report", "make compare A="):
        assert any(r.startswith(step) for r in rows), step
    retimes = [r for r in rows if r.startswith("(pasted)") and "timing.only=true" in r]
    assert any(" make experiment " in r for r in retimes)
    assert any(" .venv/bin/python -m harness " in r for r in retimes)


def test_the_failed_variants_line_is_read() -> None:
    out = "report: r.md\nfailed variants: eager, xla (see variants/<name>/error.txt)\n"
    assert newcomer.failed_variants(out) == ["eager", "xla"]
    assert newcomer.failed_variants("report: r.md\n") == []
