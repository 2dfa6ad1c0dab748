"""Issue 32, classes 7-9: user files read only when regular and bounded, the memory estimate
against rlimits and per-device buffers, a stopped worker seen as stopped, and one real study
in which a variant that crashes only in the timing stage is excluded while the other is timed.
(The battery, benchmarks/hostile/cases_faults.py, tries many more of each.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import run_harness

from harness.capture import hostmem, preflight
from harness.common import userfiles
from harness.config import ConfigError, load
from harness.study import workerproc

# --- bounded reads of user files --------------------------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    # A reader that blocked would hold this thread: the timer proves it returned on its own.
    result: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(result, fifo), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading the FIFO blocked"
    assert isinstance(result[0], userfiles.Unreadable) and "FIFO" in str(result[0])


def _catch(out: list[BaseException], path: Path) -> None:
    try:
        userfiles.read_bytes(path)
    except BaseException as e:
        out.append(e)


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/kmsg", "/proc/self/status"])
def test_devices_and_kernel_files_are_refused(path: str) -> None:
    with pytest.raises(userfiles.Unreadable, match="kernel file"):
        userfiles.read_bytes(path)


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").symlink_to("/dev/zero")
    with pytest.raises(userfiles.Unreadable):
        userfiles.read_bytes(tmp_path / "c.yaml")


def test_a_file_over_the_limit_is_refused_and_one_under_it_read(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 101)
    with pytest.raises(userfiles.Unreadable, match="larger than 100 bytes"):
        userfiles.read_bytes(tmp_path / "a", limit=100)
    assert userfiles.read_bytes(tmp_path / "a", limit=101) == b"x" * 101


def test_a_config_that_is_a_fifo_is_a_config_error(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "c.yaml")
    with pytest.raises(ConfigError, match="not a file"):
        load(str(tmp_path / "c.yaml"))


def test_nested_flag_files_are_checked_to_the_last(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "end")
    (tmp_path / "b.flags").write_text(f"# b\n--flagfile={tmp_path / 'end'}\n")
    (tmp_path / "a.flags").write_text(f"--config.seed=1\n--flagfile={tmp_path / 'b.flags'}\n")
    with pytest.raises(userfiles.Unreadable, match="end: is a FIFO"):
        userfiles.check_flagfiles(["prog", "--flagfile", str(tmp_path / "a.flags")])
    (tmp_path / "b.flags").write_text("--config.seed=2\n--flagfile=" + str(tmp_path / "a.flags"))
    userfiles.check_flagfiles(["prog", f"--flagfile={tmp_path / 'a.flags'}"])  # a cycle is fine


# --- the memory estimate ----------------------------------------------------------------------

GIB = 1 << 30


def test_the_tightest_bound_is_the_rlimit_less_what_is_mapped() -> None:
    bound = hostmem.tightest(
        64 * GIB, {"RLIMIT_AS": 8 * GIB}, {"VmSize": 3 * GIB, "VmData": GIB}, None
    )
    assert bound.left == 5 * GIB and "RLIMIT_AS" in bound.where
    bound = hostmem.tightest(64 * GIB, {"RLIMIT_DATA": 2 * GIB}, {"VmData": GIB}, (9 * GIB, 0))
    assert bound.left == GIB and "RLIMIT_DATA" in bound.where
    bound = hostmem.tightest(64 * GIB, {}, {}, (6 * GIB, 2 * GIB))
    assert bound.left == 4 * GIB and "cgroup" in bound.where
    unlimited = hostmem.tightest(64 * GIB, {}, {}, (hostmem.UNLIMITED, 0))
    assert unlimited.left == 64 * GIB and unlimited.where == "host physical memory"


def _dp(devices: int, out: str) -> object:
    config = load(
        "gelu_sharded.yaml",
        [
            f"--config.variants.dp.sharding.mesh={devices}",
            f"--config.variants.dp.sharding.out={out}",
            "--config.problem.m=4096",
            "--config.problem.k=8",
            "--config.problem.n=4096",
        ],
    )
    return config.experiment.variant("dp")


def test_a_replicated_output_costs_its_size_on_every_device() -> None:
    _, held, rest = preflight._sizes(_dp(2048, "[]"), 0)
    assert rest > 2048 * 4096 * 4096 * 4  # the 64 MiB output on each of 2048 devices
    _, _, split = preflight._sizes(_dp(2048, "[d,null]"), 0)
    assert split < rest / 50  # what is left is the per-device runtime
    assert held >= 2048 * 8 * 4096 * 4  # W replicated on every device


# --- the watchdog's view of a stopped process -------------------------------------------------


def test_a_stopped_process_reads_as_stopped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # Running, sleeping, or (just started, reading its files) in a disk wait: not stopped.
        assert workerproc.process_state(proc.pid) in ("S", "R", "D")
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while workerproc.process_state(proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workerproc.process_state(proc.pid) == "T"
    finally:
        proc.kill()
        proc.wait()


# --- one study: a fault only in the timing stage stays with its variant -----------------------

PROGRAM = """\
import os

import jax
import jax.numpy as jnp

_calls = [0]


def _hook(a):
    # The capture calls the bfloat16 variant a few dozen times; the timing stage many more.
    if str(a.dtype) == "bfloat16":
        _calls[0] += 1
        if _calls[0] >= 60:
            os.abort()


def init(key, x):
    return {"w": jnp.ones((x.shape[-1], 8), jnp.float32) * 0.1}


def apply(p, x):
    jax.debug.callback(_hook, x[0, 0])
    return jnp.tanh(x @ p["w"].astype(x.dtype))
"""

CONFIG = """\
experiment: timing_fault
baseline: xla
program:
  function: {program}:apply
  init: {program}:init
  inputs:
    - {{shape: [16, 32], dtype: float32}}
measure: {{warmup: 1, steps: 3}}
profile: {{enabled: false}}
dump: {{passes: false}}
timing: {{rounds: 3, budget_s: 0.3, max_budget_s: 0.3}}
variants:
  - {{name: xla, mode: jit}}
  - {{name: bad, mode: jit, program: {{dtype: bfloat16}}}}
"""


@pytest.mark.study
def test_a_variant_that_crashes_only_in_timing_is_excluded_and_the_rest_timed(
    tmp_path: Path,
) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "study.yaml").write_text(CONFIG.format(program=tmp_path / "prog.py"))
    proc = run_harness(f"--config={tmp_path / 'study.yaml'}", results_root=tmp_path / "results")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    run = (tmp_path / "results" / "timing_fault" / "latest").resolve()
    timing = json.loads((run / "timing.json").read_text())
    # How many rounds ran depends on the machine's load: pairs of rounds are added while the
    # intervals are wide and the rounds so far left time in max_budget_s (a busy machine made
    # it 7). What cannot change: the 3 planned rounds all ran, the added ones came in pairs, and
    # every variant left timed has one figure per round that ran.
    assert set(timing["variants"]) >= {"xla", "xla#again"}
    assert timing["rounds"] == 3 + timing["added_rounds"] and timing["added_rounds"] % 2 == 0
    for name, v in timing["variants"].items():
        assert len(v["round_step_s"]) == timing["rounds"], name
    assert "bad" not in timing["variants"]
    assert "SIGABRT" in timing["excluded"]["bad"] and "timing it" in timing["excluded"]["bad"]
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"
