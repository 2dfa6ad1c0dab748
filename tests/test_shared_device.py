"""Workers that share one device (harness.capture.turn, harness.study.pipeline): compiles and
measurements hold it one at a time, inputs are made beside a compile, and the turns to measure
come in config order, whatever crashes.

The lock is checked with real processes that all ask at once and each hold the device a
moment: a phase that let another in would see it inside (never a timing assertion). The pipeline is checked on a real study run on the CPU with
`capture.ahead` forced on, a variant aborting its process among the others.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest
from aborting_program import STUDY
from conftest import run_harness

from harness.capture.turn import COMPILE_QUEUE_FILE, DeviceTurn

COMPILERS = 3
LIMIT_S = 60  # a process that never gets the lock fails the test instead of hanging it
HOLD_S = 0.05  # how long each phase holds the device: a window for another to break in


def _compiler(locks: str, started: object, inside: object, peak: object) -> None:
    turn = DeviceTurn(locks=Path(locks))
    started.wait(LIMIT_S)  # every process asks at once
    with turn.compiling():
        with inside.get_lock():
            inside.value += 1
            peak.value = max(peak.value, inside.value)
        time.sleep(HOLD_S)
        with inside.get_lock():
            inside.value -= 1


def _measurer(locks: str, started: object, inside: object, seen: object) -> None:
    turn = DeviceTurn(locks=Path(locks))
    started.wait(LIMIT_S)
    for _ in range(COMPILERS):
        with turn.alone():
            seen.value = max(seen.value, inside.value)  # a compile inside beside it
            time.sleep(HOLD_S)


def test_compiles_and_measurements_hold_the_device_one_at_a_time(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    started = ctx.Barrier(COMPILERS + 1)
    inside, peak, seen = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [
        ctx.Process(target=_compiler, args=(str(tmp_path), started, inside, peak))
        for _ in range(COMPILERS)
    ]
    procs.append(ctx.Process(target=_measurer, args=(str(tmp_path), started, inside, seen)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(LIMIT_S)
        assert p.exitcode == 0
    assert peak.value == 1 and seen.value == 0


QUEUED_COMPILE, MEASUREMENT = 1, 2


def _record(order: object, who: int) -> None:
    """Appends `who` to the shared `order` inside the lock it holds (a multiprocessing.Queue
    would not do: each process's feeder thread sends when it is scheduled, out of order)."""
    with order.get_lock():
        order[order[0] + 1] = who
        order[0] += 1


def _queued_compiler(locks: str, order: object) -> None:
    turn = DeviceTurn(locks=Path(locks))
    with turn.compiling():
        _record(order, QUEUED_COMPILE)


def _waiting_measurer(locks: str, order: object) -> None:
    turn = DeviceTurn(locks=Path(locks))
    with turn.alone():
        _record(order, MEASUREMENT)


def _wait_until_blocked(pid: int) -> None:
    """Waits until process `pid` waits for a lock file (the kernel lists it in /proc/locks
    with "->"): an order of events, not a guess at how long a start takes under load."""
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never waited for a lock")


def test_a_compile_waiting_for_the_slot_holds_no_measurement_up(tmp_path: Path) -> None:
    """A compile runs; another is queued for the slot; a measurement asks after it. The
    measurement comes first: the queued compile holds nothing of the device while it waits
    (with the device taken before the slot, it held the device shared and went first)."""
    ctx = multiprocessing.get_context("fork")
    order = ctx.Array("i", 3)  # how many, then who held the device, in order
    running = DeviceTurn(locks=tmp_path)
    with running.compiling():
        queued = ctx.Process(target=_queued_compiler, args=(str(tmp_path), order))
        queued.start()
        _wait_until_blocked(queued.pid)
        measurer = ctx.Process(target=_waiting_measurer, args=(str(tmp_path), order))
        measurer.start()
        _wait_until_blocked(measurer.pid)  # it waits for the device when the compile ends
    for p in (queued, measurer):
        p.join(LIMIT_S)
        assert p.exitcode == 0
    assert list(order) == [2, MEASUREMENT, QUEUED_COMPILE]


def _preparer(locks: str, compiling: object, prepared: object) -> None:
    turn = DeviceTurn(locks=Path(locks))
    compiling.wait(LIMIT_S)
    with turn.preparing():
        prepared.set()  # inside beside the compile, which waits for this


def _slot_compiler(locks: str, slots: int, started: object, inside: object, peak: object) -> None:
    turn = DeviceTurn(locks=Path(locks), compiles=slots)
    started.wait(LIMIT_S)
    with turn.compiling():
        with inside.get_lock():
            inside.value += 1
            peak.value = max(peak.value, inside.value)
        # Until two were seen inside together, each waits there for another (bounded by
        # LIMIT_S, never reached unless the slots let only one in).
        deadline = time.monotonic() + LIMIT_S
        while peak.value < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(HOLD_S)
        with inside.get_lock():
            inside.value -= 1


def _late_measurer(locks: str, started: object, inside: object, peak: object, seen: object) -> None:
    """A measurer that asks once two compiles were seen together: asked before, it would hold
    the gate while the first compile, waiting inside for a second, held the device."""
    started.wait(LIMIT_S)
    deadline = time.monotonic() + LIMIT_S
    while peak.value < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    _measurer(locks, _NO_WAIT, inside, seen)


class _NoWait:
    def wait(self, timeout: float) -> None:
        del timeout


_NO_WAIT = _NoWait()


def test_two_compile_slots_let_two_compiles_in_and_no_more(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    started = ctx.Barrier(COMPILERS + 2)
    inside, peak, seen = ctx.Value("i", 0), ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [
        ctx.Process(target=_slot_compiler, args=(str(tmp_path), 2, started, inside, peak))
        for _ in range(COMPILERS + 1)
    ]
    procs.append(
        ctx.Process(target=_late_measurer, args=(str(tmp_path), started, inside, peak, seen))
    )
    for p in procs:
        p.start()
    for p in procs:
        p.join(LIMIT_S * 2)
        assert p.exitcode == 0
    assert peak.value == 2 and seen.value == 0
    assert DeviceTurn(locks=tmp_path, compiles=2).compile_slots == 2


def test_inputs_are_prepared_beside_a_compile(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    compiling, prepared = ctx.Event(), ctx.Event()
    preparer = ctx.Process(target=_preparer, args=(str(tmp_path), compiling, prepared))
    preparer.start()
    turn = DeviceTurn(locks=tmp_path)
    with turn.compiling():
        compiling.set()
        assert prepared.wait(LIMIT_S)  # a preparation that waited for the compile never comes
    preparer.join(LIMIT_S)
    assert preparer.exitcode == 0


@pytest.mark.parametrize("slots", [1, 2])
def test_a_worker_sees_whether_its_next_compile_would_wait_for_a_slot(
    tmp_path: Path, slots: int
) -> None:
    asking, held = DeviceTurn(locks=tmp_path, compiles=slots), []
    assert not asking.slots_taken()
    for _ in range(slots):  # each other worker holds one slot (its own lock files' fds)
        held.append(DeviceTurn(locks=tmp_path, compiles=slots).compiling())
        held[-1].__enter__()
        assert asking.slots_taken() == (len(held) == slots)
    held[-1].__exit__(None, None, None)  # one slot frees: a compile asked now goes straight in
    assert not asking.slots_taken()
    with asking.compiling():  # the check took no slot it kept
        pass
    assert not DeviceTurn().slots_taken()  # nobody shares the device: nothing to wait for


@pytest.mark.parametrize("slots", [1, 2])
def test_a_wait_is_long_only_for_the_one_slot_held(tmp_path: Path, slots: int) -> None:
    holders = [DeviceTurn(locks=tmp_path, compiles=slots).compiling() for _ in range(slots)]
    asking = DeviceTurn(locks=tmp_path, compiles=slots)
    assert not asking.long_wait()
    for held in holders:
        held.__enter__()
    queued = os.open(tmp_path / COMPILE_QUEUE_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(queued, fcntl.LOCK_EX)  # another worker waits first: a slot may still free soon
    assert asking.slots_taken() and asking.long_wait() == (slots == 1)
    fcntl.flock(queued, fcntl.LOCK_UN)
    os.close(queued)
    for held in holders:
        held.__exit__(None, None, None)
    assert not asking.long_wait() and not DeviceTurn().long_wait()


def test_without_lock_files_every_phase_is_free() -> None:
    turn = DeviceTurn()
    with turn.preparing(), turn.compiling(), turn.alone():
        turn.begin()
        assert turn.measuring and not turn.shared
    turn.end()
    assert turn.began is not None and turn.ended is not None and turn.waited_s >= 0.0


_HEAD, _, _LISTED = STUDY.format(
    experiment="shared", more="capture: {isolation: per_variant, ahead: 2}\n"
).partition("variants:\n")
_XLA, _DIES, _EAGER = _LISTED.splitlines(keepends=True)
# The eager variant first: its worker, the first done, measures the ceilings and then times
# the others (an op-by-op variant has nothing kept to load elsewhere).
ABORTING = (
    f"{_HEAD}variants:\n{_EAGER}{_XLA}{_DIES}"
    "  - {name: xla_no_fusion, mode: jit, xla_options: {xla_disable_hlo_passes: fusion}}\n"
)


@pytest.mark.study
def test_workers_started_ahead_measure_in_turn_and_a_crash_passes_the_turn_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "study.yaml").write_text(ABORTING)
    proc = run_harness(f"--config={tmp_path / 'study.yaml'}", results_root=tmp_path / "results")
    assert proc.returncode == 1, proc.stderr[-2000:]  # one variant failed; the run went on
    run = (tmp_path / "results" / "shared" / "latest").resolve()
    results = {
        name: json.loads((run / "variants" / name / "result.json").read_text())
        for name in ("eager", "xla", "dies", "xla_no_fusion")
    }
    assert results["dies"]["status"] == "failed"
    assert results["dies"]["failure"]["signal"] == "SIGABRT"
    ok = [n for n, r in results.items() if r["status"] == "ok"]
    assert ok == ["eager", "xla", "xla_no_fusion"]
    turns = [(results[n]["probe_s"]["turn_began"], results[n]["probe_s"]["turn_ended"]) for n in ok]
    # One turn at a time, in config order; the ones after the first were started ahead.
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(turns))
    assert all(results[n]["probe_s"]["turn_shared"] for n in ok)
    # The compile slot, as recorded: every variant held it, one at a time, never in a turn.
    spans = sorted(tuple(c) for n in ok for c in results[n]["probe_s"]["compiles"])
    assert all(results[n]["probe_s"]["compiles"] for n in ok)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert not [(c, t) for c in spans for t in turns if c[0] < t[1] and t[0] < c[1]]
    # Each worker's timeline: its start, its device client, then each compile asked for
    # before it was held (the breakdown's idle device is read from these).
    for n in ok:
        probes = results[n]["probe_s"]
        asked, held = probes["compiles_asked"], probes["compiles"]
        assert len(asked) == len(held)
        assert probes["worker_started"] <= probes["worker_ready"] <= asked[0]
        assert all(a <= h[0] for a, h in zip(asked, held, strict=True))
        # Its turn asked for, the go, then the device alone; its preparations (holding the
        # device shared) never inside a turn.
        assert probes["worker_ready"] <= probes["turn_asked"] <= probes["turn_go"]
        assert probes["turn_go"] <= probes["turn_began"]
        assert probes["preparations"] and all(a <= b for a, b in probes["preparations"])
        prepared = [tuple(x) for m in ok for x in results[m]["probe_s"]["preparations"]]
        assert not [(p, t) for p in prepared for t in turns if p[0] < t[1] and t[0] < p[1]]
    # A worker per variant and no other: the ceilings were measured by the first one beside
    # the captures, and it timed the rest (eager's: its own, warm; the others' loaded).
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workers"] == 4 and (run / "ceilings.json").is_file()
    # Measured in this run (a fresh results root has no cache): what, and when it held the
    # device, never inside a variant's turn (the breakdown counts these spans as busy).
    ceilings = json.loads((run / "ceilings.json").read_text())
    assert ceilings["measured"] and any(k.startswith("copy:") for k in ceilings["measured"])
    held = [tuple(x) for x in ceilings["held"]]
    assert held and all(a <= b for a, b in held)
    assert not [(h, t) for h in held for t in turns if h[0] < t[1] and t[0] < h[1]]
    timing = json.loads((run / "timing.json").read_text())["variants"]
    assert set(timing) >= {"xla", "eager", "xla_no_fusion"}
    assert timing["eager"]["prepare_s"] is None
    assert all(timing[n]["prepare_s"] is not None for n in ("xla", "xla_no_fusion"))
    assert not list(Path(run).glob("**/device*.lock"))


def test_autotune_choices_compare_by_what_was_chosen_not_by_its_timings(tmp_path: Path) -> None:
    from harness.capture import reuse

    def result(config: str, micros: int) -> str:
        return (
            'results {\n  device: "CUDA: 9.0"\n  result {\n'
            f"    run_time {{\n      nanos: {micros * 1000}\n    }}\n    {config}\n  }}\n}}\n"
        )

    runs = {}
    for run, (config, micros) in {
        "a": ("gemm { algorithm: 7 }", 41),
        "b": ("gemm { algorithm: 7 }", 44),
        "c": ("gemm { algorithm: 12 }", 41),
    }.items():
        folder = tmp_path / run
        folder.mkdir()
        (folder / "fusion_key.textproto").write_text(result(config, micros))
        runs[run] = reuse.autotune_choices({reuse.AUTOTUNE_CACHE: str(folder)})
    assert runs["a"] == runs["b"] != runs["c"]
    assert set(runs["a"]) == {"fusion_key.textproto"}
    assert reuse.autotune_choices({}) is None
    # jaxlib 0.11's layout on the H200: a binary entry per fusion, under a folder per key
    # prefix, beside XLA's folder of files being written.
    nested = tmp_path / "nested"
    (nested / "ed0e56ab" / "tmp").mkdir(parents=True)
    (nested / "ed0e56ab" / "e41c5eb8.pb").write_bytes(b"\x0a\x80backend")
    (nested / "tmp").mkdir()
    (nested / "tmp" / "tmp_cache_x.textproto").write_text("partial")
    found = reuse.autotune_choices({reuse.AUTOTUNE_CACHE: str(nested)})
    assert found is not None and set(found) == {"ed0e56ab/e41c5eb8.pb"}


@pytest.mark.study
def test_a_study_with_two_compile_slots_records_them_and_marks_its_pauses(tmp_path: Path) -> None:
    proc = run_harness(
        "--config=gelu.yaml",
        "--config.select=[xla,xla_no_fusion]",
        "--config.capture.isolation=per_variant",
        "--config.capture.ahead=1",
        "--config.capture.compiles=2",
        "--config.timing.budget_s=1",
        "--config.timing.max_budget_s=1",
        results_root=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = (tmp_path / "gelu" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    for name in ("xla", "xla_no_fusion"):
        result = json.loads((run / "variants" / name / "result.json").read_text())
        assert result["pauses"]["compile_slots"] == 2  # the worker was given the config's
        assert summary["variants"][name]["compile"]["compile_slots"] == 2
        assert result["autotune_choices"] is None  # a CPU: XLA autotunes nothing
    report = (run / "report.md").read_text()
    assert report.count(" (≤2 compiling) |") == 2
    assert "measured with up to 2 compiles at once" in (run / "details.md").read_text()
