"""Hostile faults, as a hostile user would make them (classes 6 and 7 of tests/test_hostile.py's
list): crashes, signals at every stage, resumes and races, and a full disk, all real commands
and real processes. Every case asserts what test_hostile.py's do: the exit status, one line on
stderr and no traceback, nothing written outside the output folder, and nothing lost.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aborting_program import STUDY
from conftest import (
    REPO,
    TINY,
    WORLD_STUDY,
    World,
    harness_env,
)
from hostile_world import (
    Result,
    command,
    config,
    one_line,
    run_outputs,
    untouched,
)

# ==============================================================================================
# 6. Crash isolation, resume, races and signals: real commands, real processes.


@contextlib.contextmanager
def tagged() -> Iterator[dict[str, str]]:
    """An environment with a unique tag, to find any process the run leaves behind."""
    tag = uuid.uuid4().hex
    env = {**harness_env(), "HARNESS_TEST_TAG": tag}
    yield env
    deadline = time.time() + 10
    while time.time() < deadline and tagged_processes(tag):
        time.sleep(0.2)
    assert tagged_processes(tag) == [], "a process outlived the run"


def tagged_processes(tag: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if f"HARNESS_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
    return found


# A program whose bfloat16 variant aborts its process as an XLA CHECK failure would
# (tests/aborting_program.py): the variant between two that work.
ABORTING = STUDY.format(experiment="crash", more="")

SIGNALLED = """\
experiment: crash
problem: {m: 16, k: 32, n: 32}
measure: {warmup: 1, steps: 2}
profile: {enabled: false}
timing: {rounds: 3, budget_s: 0.3, max_budget_s: 0.3}
variants:
  - {name: xla, mode: jit}
  - {name: eager, mode: eager}
  - {name: matmul_only, mode: matmul_only}
"""


def test_a_variant_that_aborts_the_process_is_recorded_and_the_run_goes_on(world: World) -> None:
    cfg = config(world, ABORTING)
    before = world.before()
    with tagged() as env:
        result = command(
            "-m", "harness", f"--config={cfg}", f"--results_root={world.results}", env=env
        )
    assert result.code == 1, result.stderr
    run = (world.results / "crash" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())["variants"]
    dies = summary["dies"]["identity"]
    assert dies["status"] == "failed" and dies["failure"]["kind"] == "crash"
    assert (
        dies["failure"]["signal"] == "SIGABRT" and "crashed the process (SIGABRT)" in dies["reason"]
    )
    assert summary["xla"]["identity"]["status"] == "ok"
    assert summary["eager"]["identity"]["status"] == "ok"
    assert summary["eager"]["timing"]["step_s"] > 0  # timed by the worker that took over
    assert json.loads((run / "manifest.json").read_text())["workers"] == 2
    assert "failed variants: dies" in result.stderr
    untouched(
        world,
        before,
        world.results / "crash",
        world.results / "index.html",
        world.results / ".cache",
    )


def popen(
    world: World, *args: str, env: dict[str, str], hook: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """Starts `python -m harness`, or with `hook` (action, function, word) the same run through
    tests/hooked_harness.py, which wraps that function (see its docstring)."""
    start = [str(REPO / "tests" / "hooked_harness.py"), *hook] if hook else ["-m", "harness"]
    return subprocess.Popen(
        [sys.executable, *start, f"--results_root={world.results}", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 240) -> list[str]:
    """Reads stdout until a line starts with `prefix`; returns the lines read."""
    seen: list[str] = []
    deadline = time.time() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return seen
        assert time.time() < deadline, seen
    raise AssertionError(f"the run ended before {prefix!r}: {seen}")


def signalled(world: World, when: str, signals: tuple[int, ...]) -> tuple[Result, Path | None]:
    """Starts a small run, sends `signals` at `when` ('start', '[2/', '-- analysis', ...).

    'start' is sent by the run itself as it is about to make its folder (the config read, the
    worker starting); at '-- STAGE' the run holds at that stage's start, and at '[N/' once it
    has printed variant N's line, until signalled."""
    cfg = config(world, SIGNALLED)
    with tagged() as env:
        if when == "start":
            hook: tuple[str, ...] = ("sigint", "harness.study.runs.new_run", "-")
        elif when.startswith("-- "):
            hook = ("hold", "harness.study.run._stage", when.removeprefix("-- "))
        else:
            hook = ("hold", "harness.study.run._progress", when.strip("[/"))
        proc = popen(world, f"--config={cfg}", env=env, hook=hook)
        if when != "start":
            wait_for_line(proc, when)
            for sig in signals:
                proc.send_signal(sig)
                time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    runs = (
        [p for p in (world.results / "crash").glob("2*")]
        if (world.results / "crash").exists()
        else []
    )
    return Result(proc.returncode, out, err), (runs[0] if runs else None)


def test_sigint_at_start_up_leaves_no_folder(world: World) -> None:
    before = world.before()
    result, run = signalled(world, "start", (signal.SIGINT,))
    one_line(result, 130, "interrupted")
    assert run is None
    untouched(world, before, world.root / "c.yaml")


# Sends SIGINT to itself as `module` starts to import, then runs `python -m harness`: the
# signal lands while the modules that import it are half initialised.
INTERRUPT_DURING_IMPORT = """
import importlib.abc, os, runpy, signal, sys
module = sys.argv.pop(1)
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv[0] = "harness"
runpy.run_module("harness", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["absl.flags", "harness.config.schema", "harness.study.runs"])
def test_sigint_while_a_module_is_half_imported_is_one_line(world: World, module: str) -> None:
    cfg = config(world, SIGNALLED)
    before = world.before()
    with tagged() as env:
        result = command(
            "-c",
            INTERRUPT_DURING_IMPORT,
            module,
            f"--config={cfg}",
            f"--results_root={world.results}",
            env=env,
        )
    one_line(result, 130, "interrupted")
    assert not (world.results / "crash").exists()
    untouched(world, before, world.root / "c.yaml")


@pytest.mark.parametrize(
    ("when", "signals"),
    [
        ("[2/", (signal.SIGTERM,)),
        ("-- timing", (signal.SIGINT,)),
        ("-- analysis", (signal.SIGINT,)),
        ("-- report", (signal.SIGINT, signal.SIGINT)),
    ],
    ids=["capture_sigterm", "timing_sigint", "analysis_sigint", "report_double_sigint"],
)
def test_a_signal_at_any_stage_leaves_a_resumable_run(
    world: World, when: str, signals: tuple[int, ...]
) -> None:
    before = world.before()
    result, run = signalled(world, when, signals)
    line = one_line(result, 130, "interrupted", "--resume=")
    assert run is not None and run.name in line
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    untouched(world, before, *run_outputs(world, "crash"))


def test_a_resume_redoes_a_corrupt_variant_and_a_second_resume_at_once_is_refused(
    world: World,
) -> None:
    """One resume of an interrupted run whose matmul_only result is corrupt: it redoes that
    variant, keeps the others, and holds the run's lock, so a second resume meanwhile is
    refused in one line. (A missing result is redone too: test_faults.py's SIGTERM test.)"""
    manifest = json.loads((world.run / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (world.run / "manifest.json").write_text(json.dumps(manifest))
    (world.run / "variants" / "matmul_only" / "result.json").write_text("{corrupt")
    args = (*WORLD_STUDY, f"--resume={world.run.name}")
    with tagged() as env:
        first = popen(world, *args, env=env)
        seen = wait_for_line(first, "[1/")  # the first holds the run's lock by now
        second = command("-m", "harness", f"--results_root={world.results}", *args, env=env)
        # Read on through the same file: communicate() would lose what it has buffered.
        assert first.stdout is not None and first.stderr is not None
        out, err = first.stdout.read(), first.stderr.read()
        first.wait(timeout=300)
    assert first.returncode == 0, err
    one_line(second, 2, "in use by another harness process")
    stdout = "".join(seen) + out
    assert re.search(r"^\[\d+/\d+\] matmul_only +ok", stdout, re.M)
    assert re.search(r"^\[\d+/\d+\] xla +kept from the interrupted run", stdout, re.M)


def test_sigkill_leaves_no_temporary_folder_or_process(world: World) -> None:
    # A temporary folder of its own: the shared one also holds what other studies (the other
    # test worker's, anyone's) make and remove meanwhile.
    tmp = world.root / "tmp"
    tmp.mkdir()
    with tagged() as env:
        proc = popen(world, "--config=gelu.yaml", *TINY, env={**env, "TMPDIR": str(tmp)})
        wait_for_line(proc, "[2/")
        proc.kill()
        proc.communicate(timeout=60)
    assert not {p.name for p in tmp.iterdir() if "harness" in p.name}


# ==============================================================================================
# 7. Environment faults, for real: a small tmpfs in a private mount namespace (root only).


def unshare_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True
    )
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not unshare_ok(), reason="unshare -m is not permitted here")


def in_namespace(script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
        cwd=REPO,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.study
@needs_namespace
def test_disk_full_is_one_line_keeps_finished_variants_and_resume_finishes(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    run_cmd = f"{sys.executable} -m harness --results_root={mount}/results --config=gelu.yaml {' '.join(TINY)}"
    script = f"""
mount -t tmpfs -o size=3m tmpfs {mount}
{run_cmd} > {tmp_path}/first.out 2> {tmp_path}/first.err; echo "first=$?"
mount -o remount,size=200m {mount}
id=$(ls {mount}/results/gelu | grep -v latest | head -1)
{run_cmd} --resume=$id > {tmp_path}/second.out 2> {tmp_path}/second.err; echo "second=$?"
cp -r {mount}/results {tmp_path}/kept
"""
    proc = in_namespace(script)
    assert "first=1" in proc.stdout, (proc.stdout, proc.stderr)
    err = (tmp_path / "first.err").read_text()
    one_line(Result(1, "", err), 1, "No space left on device")
    assert "second=0" in proc.stdout, (tmp_path / "second.err").read_text()
    run = next(p for p in (tmp_path / "kept" / "gelu").iterdir() if not p.is_symlink())
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"
    assert "kept from the interrupted run" in (tmp_path / "second.out").read_text()


@needs_namespace
def test_a_read_only_run_folder_is_one_line(tmp_path: Path, world_run: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    script = f"""
mount -t tmpfs -o size=50m tmpfs {mount}
mkdir -p {mount}/results/gelu && cp -r {world_run} {mount}/results/gelu/
sed -i 's/"status": "complete"/"status": "interrupted"/' {mount}/results/gelu/{world_run.name}/manifest.json
mount -o remount,ro {mount}
{sys.executable} -m harness.report --run={mount}/results/gelu/{world_run.name} 2> {tmp_path}/report.err; echo "report=$?"
{sys.executable} -m harness --results_root={mount}/results {" ".join(WORLD_STUDY)} --resume={world_run.name} 2> {tmp_path}/resume.err; echo "resume=$?"
"""
    proc = in_namespace(script)
    assert "report=2" in proc.stdout, (proc.stdout, proc.stderr)
    one_line(Result(2, "", (tmp_path / "report.err").read_text()), 2, "Read-only file system")
    assert "resume=2" in proc.stdout
    one_line(Result(2, "", (tmp_path / "resume.err").read_text()), 2, "Read-only file system")
