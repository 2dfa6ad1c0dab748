"""User code is contained (issue 59): a program whose host callback forks twice and `setsid`s
leaves no process behind one second after its study returns, and the finished run's files keep
their digests for ten seconds after; a callback that sends SIGTERM to the supervisor stops the
run as Ctrl-C does. harness.study.containment is what ends the escapees."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, harness_env
from forking_program import STUDY

from harness.study import containment


def _tagged(tag: str) -> list[int]:
    """Live processes (not zombies) whose environment holds HARNESS_TEST_TAG=tag."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if f"HARNESS_TEST_TAG={tag}".encode() not in (proc / "environ").read_bytes():
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(proc.name))
    return found


def _digests(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _study(tmp_path: Path, dtype: str, tag: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "fork.yaml"
    cfg.write_text(STUDY.format(experiment="fork", dtype=dtype))
    return subprocess.run(
        [sys.executable, "-m", "harness", f"--config={cfg}", f"--results_root={tmp_path / 'r'}"],
        cwd=REPO,
        env={**harness_env(), "HARNESS_TEST_TAG": tag},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.study
@pytest.mark.slow
def test_processes_a_callback_forks_and_setsids_end_with_the_study(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    try:
        result = _study(tmp_path, "float32", tag)
        assert result.returncode == 0, result.stderr[-3000:]
        time.sleep(1)
        assert _tagged(tag) == [], "a process the callback started outlived the study"
        run = (tmp_path / "r" / "fork" / "latest").resolve()
        before = _digests(run)
        assert "variants/xla/result.json" in before
        time.sleep(10)
        assert _digests(run) == before, "the finished run changed after it was complete"
    finally:
        for pid in _tagged(tag):  # never leave them to the next test
            os.kill(pid, signal.SIGKILL)


@pytest.mark.study
@pytest.mark.slow
def test_sigterm_from_a_callback_stops_the_run_as_ctrl_c_does(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    result = _study(tmp_path, "bfloat16", tag)
    assert result.returncode == 130, (result.returncode, result.stderr[-3000:])
    assert "Exception ignored" not in result.stderr
    assert "Traceback" not in result.stderr
    manifest = (tmp_path / "r" / "fork" / "latest" / "manifest.json").read_text()
    assert '"status": "interrupted"' in manifest


def test_a_marked_double_fork_is_ended_by_the_sweep() -> None:
    """In-process, no study: a process that forked twice and left its session is found by
    the marker alone and ended, and one without it is left alone."""
    mark = uuid.uuid4().hex[:16]
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
    )
    env = {**os.environ, containment.MARK: mark}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.time() + 10
        while not containment.marked(mark) and time.time() < deadline:
            time.sleep(0.05)
        assert len(containment.marked(mark)) == 1
        assert containment.end_marked(mark) == 1
        time.sleep(0.2)
        assert containment.marked(mark) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_raise_a_weakref_callback_swallowed_still_stops_the_block() -> None:
    """The handler's Interrupted, raised while a weakref callback runs, is printed and dropped
    by Python ("Exception ignored"); the block still ends Interrupted."""
    import weakref

    from harness.study import lifecycle

    class Owner:
        pass

    def callback(_ref: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here, between these bytecodes
            pass

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(lifecycle.Interrupted, match="SIGTERM"), lifecycle.interruptible():
            owner = Owner()
            ref = weakref.ref(owner, callback)
            del owner  # the callback runs now; its exception is ignored
            assert ref() is None
            ran_on = True
        assert ran_on  # the swallowed raise did not stop the block itself
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
