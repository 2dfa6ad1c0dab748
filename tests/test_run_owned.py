"""The run folder is owned to its hidden corners (issue 59): `.references` planted as a link out
of the run is never written through, clean-up deletes only the entries the session made there,
and a file-writing option in XLA_FLAGS is taken out of the study and said."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TINY, harness_env

from harness.capture import environment
from harness.store import io
from harness.study.session import Session


def _session() -> Session:
    return Session(config=None, worker=None, environment={})  # type: ignore[arg-type]


def test_a_references_link_out_of_the_run_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / ".references").symlink_to(outside)
    session = _session()
    with io.writes_confined_to(run):
        found = session.reference_folder(run)
    assert found.parent == run and not found.is_symlink() and found.name != ".references"
    assert "is a link to" in capsys.readouterr().err
    io.write_bytes(found / "reference-abc.npz", b"x")
    session.forget_private_folders()
    assert list(outside.iterdir()) == [] and (run / ".references").is_symlink()
    assert not found.exists()


def test_clean_up_deletes_only_what_the_session_made(tmp_path: Path) -> None:
    run = tmp_path / "run"
    users = run / ".references"
    (users / ".git").mkdir(parents=True)
    (users / "reference-notes.txt").write_text("a user's file beside ours\n")
    session = _session()
    found = session.reference_folder(run)
    assert found == users
    io.write_bytes(found / "reference-0123.npz", b"x")
    (found / "reference-0123.npz.lock").touch()
    session.forget_private_folders()
    assert sorted(p.name for p in users.iterdir()) == [".git", "reference-notes.txt"]


@pytest.mark.parametrize(
    ("flags", "left", "taken"),
    [
        ("--xla_dump_to=/tmp/elsewhere --xla_dump_hlo_as_text", "--xla_dump_hlo_as_text", True),
        ("--xla_gpu_dump_autotune_results_to=/a", "", True),
        ("--xla_cpu_enable_fast_math=true", "--xla_cpu_enable_fast_math=true", False),
    ],
)
def test_file_writing_xla_flags_are_taken_out_and_said(
    monkeypatch: pytest.MonkeyPatch, flags: str, left: str, taken: bool
) -> None:
    monkeypatch.setenv("XLA_FLAGS", flags)
    note = environment.no_writes_outside()
    assert os.environ["XLA_FLAGS"] == left
    assert (note is not None and "taken out for the study" in note) == taken


@pytest.mark.study
def test_a_study_writes_nothing_where_xla_flags_dump(tmp_path: Path) -> None:
    """XLA_FLAGS=--xla_dump_to=<a folder outside the run> wrote 665 files there (issue 59)."""
    outside = tmp_path / "outside"
    env: dict[str, Any] = {**harness_env(), "XLA_FLAGS": f"--xla_dump_to={outside}"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "--config=gelu.yaml",
            *TINY,
            "--config.select=xla",
            f"--results_root={tmp_path / 'r'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert not outside.exists() or list(outside.iterdir()) == []
    assert "--xla_dump_to" in result.stderr and "taken out for the study" in result.stderr


def test_a_held_reference_lock_is_said_while_waiting(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A held lock made each variant wait out limits.call_s with no word of it (issue 59)."""
    import fcntl
    import threading

    from harness.capture import reference, turn

    held = turn.open_lock(tmp_path / (reference.file_name("k") + ".lock"))
    fcntl.flock(held, fcntl.LOCK_EX)
    entered = threading.Event()

    def compute() -> None:
        with reference._computing(tmp_path, "k"):
            entered.set()

    waiter = threading.Thread(target=compute, daemon=True)
    waiter.start()
    try:
        assert not entered.wait(1.0)  # it waits for the lock...
        assert "note: waiting for" in capfd.readouterr().err  # ...and says so
    finally:
        os.close(held)
    assert entered.wait(10)
    waiter.join(10)
