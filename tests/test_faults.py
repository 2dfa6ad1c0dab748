"""Faults at run time: a failing variant, SIGTERM/SIGINT and --resume, atomic writes, two runs
at once. Every run is a real `python -m harness` process; nothing in the harness is patched."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import REPO, TINY, harness_argv, harness_env, read_summary, run_harness

from harness.store import io

FINISHED = re.compile(r"^\[(\d+)/(\d+)\] (\S+)\s+(ok|failed|skipped)\b")

# bf16 GEMM with XLA's bf16 normalization pass disabled: the name and the value are legal (the
# preflight compile of an f32 probe accepts them) but the CPU dot emitter then fails a
# RET_CHECK when it meets the bf16 dot. A real compile failure, chosen in the config.
# The timing shrunk as conftest.TINY shrinks it: the default (a 30 s budget, and rounds added up
# to 3x that) would be most of each run here, and no test of this file reads a timing.
FAILING = """\
experiment: faults
problem: {m: 16, k: 32, n: 32}
measure: {warmup: 1, steps: 2}
profile: {enabled: false}
timing: {rounds: 4, budget_s: 0.5, max_budget_s: 0.5}
variants:
  - {name: xla, mode: jit}
  - name: bf16_unnormalized
    mode: jit
    description: bf16 GEMM with the bf16 float-normalization pass disabled
    problem: {dtype: bfloat16}
    xla_options: {xla_disable_hlo_passes: float-normalization-bf16}
  - {name: matmul_only, mode: matmul_only}
"""


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def popen_harness(*args: str, results_root: Path) -> subprocess.Popen[str]:
    """Starts `python -m harness` like run_harness, but returns at once."""
    return subprocess.Popen(
        harness_argv(*args, results_root=results_root),
        cwd=REPO,
        env=harness_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_finished(proc: subprocess.Popen[str], count: int) -> list[str]:
    """Reads stdout until `count` variants have finished; returns their names."""
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    done: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = FINISHED.match(line)
            if m and m[4] == "ok":
                done.append(m[3])
            if len(done) >= count:
                return done
    finally:
        watchdog.cancel()
    raise AssertionError(f"the run ended after {done} finished: {proc.stderr.read()}")


# ---------------------------------------------------------------------------------------------
# A variant that fails.


@pytest.mark.study
def test_failing_variant_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    cfg = tmp_path / "faults.yaml"
    cfg.write_text(FAILING)
    proc = run_harness(f"--config={cfg}", results_root=tmp_path / "results")
    assert proc.returncode == 1, proc.stderr
    run = (tmp_path / "results" / "faults" / "latest").resolve()
    variants = read_summary(run)
    assert list(variants) == ["xla", "bf16_unnormalized", "matmul_only"]
    assert variants["xla"].identity.status == "ok"
    assert variants["matmul_only"].identity.status == "ok"
    failed = variants["bf16_unnormalized"].identity
    assert failed.status == "failed" and failed.failure.kind == "exception"
    assert "RET_CHECK" in failed.reason and "dot_op_emitter" in failed.reason
    assert "Traceback" in (run / "variants" / "bf16_unnormalized" / "error.txt").read_text()
    saved = json.loads((run / "variants" / "bf16_unnormalized" / "result.json").read_text())
    assert saved["status"] == "failed" and saved["reason"] == failed.reason
    assert manifest(run)["status"] == "failed"
    listed = [line for line in proc.stderr.splitlines() if line.startswith("failed variants:")]
    assert listed == ["failed variants: bf16_unnormalized (see variants/<name>/error.txt)"]
    assert re.search(r"^\[2/3\] bf16_unnormalized\s+failed .*RET_CHECK", proc.stdout, re.M)


# ---------------------------------------------------------------------------------------------
# SIGTERM / SIGINT and --resume.


def _plant_partial(run: Path, name: str) -> list[Path]:
    """Leaves what an attempt interrupted inside variant `name` would: a stale dump and profile."""
    stale = [
        run / "variants" / name / "dump" / f"module_9999.jit_{name}.cpu_after_optimizations.txt",
        run
        / "variants"
        / name
        / "profile"
        / "first_call"
        / "plugins"
        / "profile"
        / "old"
        / "h.xplane.pb",
    ]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"partial")
    return stale


def test_sigterm_then_resume_equals_an_uninterrupted_run(tmp_path: Path, cpu_run: Path) -> None:
    """ACCEPTANCE: SIGTERM after two variants, then --resume, gives the uninterrupted summary."""
    results = tmp_path / "results"
    proc = popen_harness("--config=gelu.yaml", *TINY, results_root=results)
    finished = wait_for_finished(proc, 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted (SIGTERM)" in err
    run_id = re.search(r"--resume=(\S+)", err)[1]
    run = results / "gelu" / run_id
    assert manifest(run)["status"] == "interrupted"
    for name in finished:
        record = json.loads((run / "variants" / name / "result.json").read_text())
        assert record["status"] == "ok" and min(record["latency_blocked_s"]) > 0
    partial = [
        p.name
        for p in (run / "variants").iterdir()
        if p.is_dir() and not (p / "result.json").exists()
    ]
    assert "matmul_only" not in finished
    stale = _plant_partial(run, "matmul_only")

    resumed = run_harness("--config=gelu.yaml", *TINY, f"--resume={run_id}", results_root=results)
    assert resumed.returncode == 0, resumed.stderr
    for name in finished:
        assert re.search(
            rf"^\[\d+/\d+\] {name}\s+kept from the interrupted run", resumed.stdout, re.M
        )
    for name in {*partial, "matmul_only"}:  # redone from scratch
        assert re.search(rf"^\[\d+/\d+\] {name}\s+ok", resumed.stdout, re.M), name
    assert not any(p.exists() for p in stale)
    for window in ("first_call", "steady", "recompile"):
        found = list((run / "variants" / "matmul_only" / "profile" / window).rglob("*.xplane.pb"))
        assert len(found) == 1, window

    expected = {n: r.identity.status for n, r in read_summary(cpu_run).items()}
    got = {n: r.identity.status for n, r in read_summary(run).items()}
    assert list(got) == list(expected) and got == expected
    assert manifest(run)["status"] == "complete" and manifest(run)["resumed"]
    assert (run / "report.md").exists()


@pytest.mark.study
def test_sigint_marks_the_run_interrupted_and_keeps_finished_variants(tmp_path: Path) -> None:
    cfg = tmp_path / "three.yaml"
    cfg.write_text(
        FAILING.replace(
            "  - name: bf16_unnormalized\n    mode: jit\n"
            "    description: bf16 GEMM with the bf16 float-normalization pass disabled\n"
            "    problem: {dtype: bfloat16}\n"
            "    xla_options: {xla_disable_hlo_passes: float-normalization-bf16}\n",
            "  - {name: eager, mode: eager}\n",
        )
    )
    results = tmp_path / "results"
    proc = popen_harness(f"--config={cfg}", results_root=results)
    finished = wait_for_finished(proc, 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    run = (results / "faults" / "latest").resolve()
    assert manifest(run)["status"] == "interrupted"
    assert finished == ["xla"] and (run / "variants" / "xla" / "result.json").exists()
    # The message's command is pasted as printed (harness.records.invocations): this interpreter, the
    # config, the results root and the run's id, nothing the test adds.
    printed = re.search(r"; finish it with: (.+)$", err, re.M)
    assert printed is not None, err
    assert f"--resume={run.name}" in printed[1] and "make" not in printed[1]
    resumed = subprocess.run(
        ["bash", "-c", printed[1]],
        cwd=REPO,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert {n: r.identity.status for n, r in read_summary(run).items()} == {
        "xla": "ok",
        "eager": "ok",
        "matmul_only": "ok",
    }


@pytest.mark.study
def test_resume_with_a_different_config_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FAILING)
    run = tmp_path / "results" / "faults" / "20240101-000000"
    run.mkdir(parents=True)
    config = {"experiment": "faults", "problem": {"m": 99}}
    (run / "manifest.json").write_text(json.dumps({"status": "interrupted", "config": config}))
    proc = run_harness(f"--config={cfg}", f"--resume={run.name}", results_root=tmp_path / "results")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: flag --resume={run.name}: problem.m: differs")
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json"]


# ---------------------------------------------------------------------------------------------
# Atomic writes.


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    io.write_json(target, {"old": True})
    with pytest.raises(UnicodeEncodeError):
        io.write_text(target, '{"new": "\ud800"}')  # fails inside f.write, after the temp exists
    with pytest.raises(TypeError):
        io.write_json(target, {"new": object()})
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_crash_before_the_rename_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "report.md"
    io.write_text(target, "old\n")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        io.write_text(target, "new\n")
    with pytest.raises(OSError, match="No space"):
        io.copy_file(Path(__file__), target)
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError):
        io.copy_file(tmp_path / "missing.txt", target)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


# Writers that are allowed to open files for writing themselves.
ATOMIC_WRITERS = {
    "harness/store/io.py",  # write_text, copy_file (temp file + os.replace) and append_jsonl
    "harness/study/worker.py",  # its events pipe to the supervisor, not a file
}
WRITER = re.compile(
    r"(?<!io)\.write_text\(|(?<!io)\.write_bytes\(|json\.dump\(|shutil\.copy|"
    r"open\([^)]*['\"][wax]b?['\"]|fdopen\([^)]*['\"][wa]"
)


def test_every_file_is_written_through_the_atomic_helpers() -> None:
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if WRITER.search(line) and rel not in ATOMIC_WRITERS:
                found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------------------------
# Two runs at once.


@pytest.mark.study
def test_concurrent_runs_get_their_own_folders_and_latest_is_complete(tmp_path: Path) -> None:
    results = tmp_path / "results"
    args = ("--config=gelu.yaml", *TINY, "--config.select=xla")
    procs = [popen_harness(*args, results_root=results) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    runs = [Path(re.search(r"^report: (.+)/report.md$", o, re.M)[1]) for o, _ in outs]
    assert runs[0] != runs[1]
    folders = sorted(p for p in (results / "gelu").iterdir() if not p.name.startswith("."))
    assert [p.name for p in folders] == sorted([runs[0].name, runs[1].name, "latest"])
    latest = (results / "gelu" / "latest").resolve()
    assert latest in [r.resolve() for r in runs]
    assert manifest(latest)["status"] == "complete"
    assert list(read_summary(latest)) == ["xla"]
    for run in runs:
        assert manifest(run)["status"] == "complete"
    assert not [p for p in (results / "gelu").iterdir() if p.name.startswith(".latest")]


@pytest.mark.study
def test_per_variant_isolation_compiles_each_variant_in_a_process_of_its_own(tmp_path):
    """The GPU's default (capture.isolation=auto there): each variant's first call is paid in a
    fresh worker, so no variant inherits another's caches or autotuning. The next variant's
    worker starts while the current one captures, each used. The timing worker
    loads the program a capture worker compiled, from a private folder that is gone after."""
    root, private = tmp_path / "results", tmp_path / "tmp"
    private.mkdir()
    proc = run_harness(
        "--config=gelu.yaml",
        *TINY,
        "--config.capture.isolation=per_variant",
        "--config.select=[xla,matmul_only,xla_host_callback]",
        results_root=root,
        env={"TMPDIR": str(private)},
    )
    assert proc.returncode == 0, proc.stderr
    run = root / "gelu" / "latest"
    variants = read_summary(run)
    assert all(v.compile.fresh_process for v in variants.values())
    # The session's worker captured the first variant; two workers started ahead took one
    # variant each (one left unused, or started twice, would count here).
    assert json.loads((run / "manifest.json").read_text())["workers"] == 3
    notes = {
        n: v["note"] for n, v in json.loads((run / "timing.json").read_text())["variants"].items()
    }
    # xla was captured by another worker: its program is loaded, not compiled again, and it
    # is the program captured. The last variant's worker times it with the call it kept.
    assert notes["xla"] == (
        "the captured program, loaded in the timing process (not compiled again); "
        "its optimized HLO equals the captured one"
    )
    assert notes["matmul_only"] is None
    assert not list(private.glob("harness-executables-*"))


def test_a_kept_program_that_does_not_load_is_compiled_again(tmp_path):
    """A damaged or missing kept program never fails the timing: the variant is compiled
    again and the note says why; a good one round-trips to the same results."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from harness.capture.reuse import keep_executable, load_executable

    x = jnp.arange(12.0).reshape(3, 4)
    lowered = jax.jit(lambda a: jnp.tanh(a) * 2).lower(x)
    compiled = lowered.compile()
    keep_executable(compiled, tmp_path / "good")
    loaded, note = load_executable(lowered, tmp_path / "good")
    assert loaded is not None and note.startswith("the captured program, loaded")
    assert np.array_equal(np.asarray(loaded(x)), np.asarray(compiled(x)))
    assert load_executable(lowered, tmp_path / "absent") == (None, "compiled again for timing")
    (tmp_path / "damaged").write_bytes(b"\x80\x04not a program")
    loaded, note = load_executable(lowered, tmp_path / "damaged")
    assert loaded is None and note.startswith("compiled again for timing (the captured program")


def test_progress_lines_come_in_config_order(capsys: pytest.CaptureFixture[str]) -> None:
    """A line decided before the capture (a variant skipped on this platform) waits for the
    lines above it: `[3/3] ... skipped` never comes before `[1/3]`."""
    from harness.records.summary import CaptureRecord
    from harness.study.run import InOrder

    skipped = CaptureRecord(status="skipped", reason="applies to gpu", mode="jit", module=None)
    order = InOrder(["a", "b", "c"])
    order.add("c", skipped)
    assert capsys.readouterr().out == ""
    order.add("a", None)  # a variant whose worker crashed
    order.add("b", skipped)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["[1/3]", "a", "failed"],
        ["[2/3]", "b", "skipped"],
        ["[3/3]", "c", "skipped"],
    ]
