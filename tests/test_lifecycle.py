"""One run lifecycle (harness.study.lifecycle) for the study, the search and `python -m harness.analyze`.

Each command, stopped by a full disk or an interrupt, leaves its manifest saying how it ended
and why, and one on a folder another run holds writes nothing there. Each case runs the real
command in this process up to its fault, injected where the command first makes a folder in
its output after the manifest is written: a full disk is `os.mkdir` raising ENOSPC there (as a
full tmpfs does; test_hostile fills one for real where it may mount one), an interrupt a real
SIGINT or SIGTERM sent to this process there. The study and the search get a real worker,
which the fault comes before: it never imports JAX. Nothing is mocked.
"""

from __future__ import annotations

import errno
import gc
import io as stdio
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.config import load
from harness.store import io
from harness.study import lifecycle
from harness.study.session import Session
from harness.study.workerproc import WorkerProcess

STUDY = """\
experiment: t
problem: {m: 8, k: 4, n: 4}
variants:
  - {name: xla, mode: jit}
"""
SEARCH = """\
experiment: t
problem: {m: 8, k: 4, n: 4}
search:
  base: xla
  space: {xla_options: {xla_cpu_enable_fast_math: [false, true]}}
variants:
  - {name: xla, mode: jit}
"""
HLO = "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"


@dataclass
class Command:
    """One user of the lifecycle, ready to run on `folder`."""

    name: str
    folder: Path
    run: Callable[[], int]  # runs the command in this process; returns its exit status
    out: stdio.StringIO
    err: stdio.StringIO

    def manifest(self) -> dict:
        return json.loads((self.folder / lifecycle.MANIFEST).read_text())


def _captured(fn: Callable[[], int], out: stdio.StringIO, err: stdio.StringIO) -> Callable[[], int]:
    def run() -> int:
        with redirect_stdout(out), redirect_stderr(err):
            return fn()

    return run


def _study_like(name: str, tmp_path: Path, sessions: list[Session]) -> Command:
    from harness.search import run_search
    from harness.study import run

    cfg = tmp_path / "c.yaml"
    cfg.write_text(SEARCH if name == "search" else STUDY)
    config = load(str(cfg))
    folder = io.new_run_dir(tmp_path / "results", "t")
    session = Session(config, WorkerProcess(1), {"platform": "cpu"})
    sessions.append(session)

    def body() -> int:
        if name == "search":
            return run_search(config, folder, session)
        return run.run(config, folder, session)

    out, err = stdio.StringIO(), stdio.StringIO()
    return Command(name, folder, _captured(body, out, err), out, err)


def _analyze(tmp_path: Path) -> Command:
    from absl import flags

    from harness.commands import analyze as main
    from harness.commands import cli

    dump, folder = tmp_path / "m.hlo", tmp_path / "out"
    dump.write_text(HLO)

    def body() -> int:
        main.define_flags()
        flags.FLAGS.unparse_flags()
        argv = flags.FLAGS(["analyze", f"--dump={dump}", f"--out={folder}"])
        try:
            return cli.guarded(main.main)(argv)
        finally:
            gc.enable()  # main disables the collector for its short-lived process

    out, err = stdio.StringIO(), stdio.StringIO()
    return Command("analyze", folder, _captured(body, out, err), out, err)


@pytest.fixture
def signals_restored() -> Iterator[None]:
    """The lifecycle ignores SIGINT and SIGTERM after the first, for the rest of the process:
    this process is pytest's, which gets its own handlers back."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


@pytest.fixture
def command(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Command]:
    sessions: list[Session] = []
    if request.param == "analyze":
        yield _analyze(tmp_path)
    else:
        yield _study_like(request.param, tmp_path, sessions)
    for s in sessions:
        s.kill()


# The study and the search each start a real worker (conftest counts that as a study).
COMMANDS = [
    pytest.param("study", marks=pytest.mark.study),
    pytest.param("search", marks=pytest.mark.study),
    "analyze",
]
# A fault the CLI reports: the study and the search return 1; analyze's CLI exits 2.
FAULT_EXIT = {"study": 1, "search": 1, "analyze": 2}


def at_first_folder_inside(
    monkeypatch: pytest.MonkeyPatch, folder: Path, act: Callable[[str], None]
) -> list[str]:
    """Calls `act(path)` when the command first makes a folder inside `folder` (the manifest
    is written by then); returns the paths it acted on."""
    real, inside, seen = os.mkdir, folder.resolve(), []

    def mkdir(path: object, mode: int = 0o777, **kwargs: object) -> None:
        if not seen and inside in Path(os.fsdecode(path)).resolve().parents:
            seen.append(os.fsdecode(path))
            act(os.fsdecode(path))
        real(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    return seen


def disk_full(path: str) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, indirect=True)
def test_a_full_disk_leaves_the_manifest_failed_with_the_reason(
    command: Command, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = at_first_folder_inside(monkeypatch, command.folder, disk_full)
    code = command.run()
    monkeypatch.undo()
    assert seen, "the fault was never reached"
    assert code == FAULT_EXIT[command.name], command.err.getvalue()
    manifest = command.manifest()
    assert manifest["status"] == "failed"
    assert manifest["reason"] == "No space left on device"
    assert manifest["finished"] >= manifest["started"]
    line = one_line(command.err.getvalue())
    assert line.startswith("error: ") and "No space left on device" in line and seen[0] in line
    if command.name == "search":  # not resumable: the command that starts it again
        from harness.records import invocations

        # The direct form, first or (under make, which `make test` is) after the make form.
        python = invocations.typed_interpreter(sys.executable, Path.cwd())
        assert "start it again with: " in line and f"{python} -m harness" in line
        assert f"-m harness --config={command.folder.parent.parent.parent / 'c.yaml'}" in line
    if command.name != "analyze":
        assert (command.folder.parent / "latest").resolve() == command.folder.resolve()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", COMMANDS, indirect=True)
def test_an_interrupt_leaves_the_manifest_interrupted(
    command: Command, sig: signal.Signals, monkeypatch: pytest.MonkeyPatch, signals_restored: None
) -> None:
    # raise_signal runs the handler before it returns (it checks for signals itself); after
    # os.kill the handler ran at the next check of the interpreter, which could fall inside a
    # garbage collector's callback (hypothesis's gc_callback, in a process that ran a property
    # test), where its exception is lost as an unraisable warning.
    seen = at_first_folder_inside(monkeypatch, command.folder, lambda _: signal.raise_signal(sig))
    code = command.run()
    monkeypatch.undo()
    assert seen
    assert code == 130, command.err.getvalue()
    manifest = command.manifest()
    assert (manifest["status"], manifest["reason"]) == ("interrupted", sig.name)
    assert "interrupted" in one_line(command.err.getvalue())


@pytest.mark.parametrize("command", COMMANDS, indirect=True)
def test_a_folder_another_run_holds_is_left_as_it_is(command: Command) -> None:
    command.folder.mkdir(exist_ok=True)
    with io.run_lock(command.folder):
        before = sorted(p.name for p in command.folder.iterdir())  # the lock alone
        if command.name == "analyze":
            assert command.run() == 2
            assert "in use by another harness process" in one_line(command.err.getvalue())
        else:
            with pytest.raises(io.Locked):  # the CLI says it in one line (cli.guarded)
                command.run()
    # Nothing of the command's own is in the folder: no manifest, no `latest` pointed at it.
    assert lifecycle.MANIFEST not in {p.name for p in command.folder.iterdir()}
    assert sorted(p.name for p in command.folder.iterdir() if p.name != io.MARKER) == before
    assert not (command.folder.parent / "latest").exists()


def test_a_resume_of_a_run_another_holds_keeps_its_manifest(tmp_path: Path) -> None:
    """The lock is taken before the manifest is read or written: a resume of a run another
    process holds leaves that run's manifest byte for byte."""
    folder = tmp_path / "results" / "t" / "20990101-000000"
    folder.mkdir(parents=True)
    (folder / lifecycle.MANIFEST).write_text('{"status": "interrupted", "started": "x"}\n')
    with (
        io.run_lock(folder),
        pytest.raises(io.Locked),
        lifecycle.running(folder, {}, latest=True, resumed=True),
    ):
        raise AssertionError("the block must not run")
    assert (
        folder / lifecycle.MANIFEST
    ).read_text() == '{"status": "interrupted", "started": "x"}\n'
    assert not (folder.parent / "latest").exists()


def test_a_resumed_run_keeps_its_first_start(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / lifecycle.MANIFEST).write_text('{"status": "interrupted", "started": "first"}')
    with lifecycle.running(folder, {"config": {}}, resumed=True) as run:
        assert run.manifest["started"] == "first" and run.manifest["status"] == "running"
        run.settle("complete")
    assert run.stopped is None
    manifest = json.loads((folder / lifecycle.MANIFEST).read_text())
    assert (manifest["started"], manifest["status"]) == ("first", "complete")
    # Written through its record (harness.records.run_files.Manifest): every key, null when unset.
    assert manifest["resumed"] is not None and manifest["reason"] is None


def test_an_unexpected_error_is_recorded_then_raised(tmp_path: Path) -> None:
    """A fault the command does not expect (a bug) still leaves the manifest failed, with the
    reason, and reaches the caller with its traceback."""
    stopped: list[str] = []
    with (
        pytest.raises(ZeroDivisionError),
        lifecycle.running(tmp_path, {}, stop=lambda: stopped.append("stop")),
    ):
        _ = 1 / 0
    manifest = json.loads((tmp_path / lifecycle.MANIFEST).read_text())
    assert (manifest["status"], manifest["reason"]) == ("failed", "division by zero")
    assert stopped == ["stop"]


def test_a_manifest_the_full_disk_refuses_is_said_to_be_unrecorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with lifecycle.running(tmp_path, {}) as run:
        monkeypatch.setattr(os, "fsync", lambda fd: disk_full(str(tmp_path)))
        io.write_json(tmp_path / "summary.json", {})
    monkeypatch.undo()
    assert run.stopped is not None and not run.stopped.recorded
    assert run.stopped.then("; finish it") == "; the run's state could not be recorded"
    assert json.loads((tmp_path / lifecycle.MANIFEST).read_text())["status"] == "running"


def test_the_lock_and_the_manifest_never_make_an_analysis_foreign(tmp_path: Path) -> None:
    """A failed analysis's folder is still its own (harness.store.ownership): the next analysis may
    replace it, and removes exactly what the failed one wrote."""
    out = tmp_path / "out"
    with io.own_output(out, "analyze") as claimed, lifecycle.running(claimed, {}) as run:
        io.write_json(claimed / "module_1" / "cost.json", {})
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert run.stopped is not None and run.stopped.status == "failed"
    io.claim_output(out, "analyze")
    assert sorted(p.name for p in out.iterdir()) == sorted([".lock", io.MARKER])


def test_a_folder_whose_manifest_cannot_be_written_raises_before_the_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing can be recorded, so nothing runs: the OSError reaches the CLI (one line)."""
    monkeypatch.setattr(os, "fsync", lambda fd: disk_full(str(tmp_path)))
    ran = []
    with pytest.raises(OSError, match="No space left"), lifecycle.running(tmp_path, {}):
        ran.append(True)
    assert ran == [] and not (tmp_path / lifecycle.MANIFEST).exists()
