"""Shared test fixtures: the H200 fixture folder and one tiny real run of the default study."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fixture_root import fixtures_root

REPO = Path(__file__).resolve().parents[1]
# ../shared/fixtures, else the pack that ships with the project, unpacked (fixture_root).
FIXTURES = fixtures_root()
H200 = FIXTURES / "h200-jax0.11.2"

# The default study shrunk so the whole pipeline runs in seconds on two cores. Rounds are added
# only within the budget (timing.max_budget_s = budget_s): four rounds of a tiny problem on a
# busy runner would otherwise add a second to every run. Some may still be added when the
# planned rounds end early, so a test never asserts how many ran (tests/test_busy_machine.py
# tests the added rounds on a fake clock).
TINY = (
    "--config.timing.max_budget_s=0.5",
    "--config.problem.m=16",
    "--config.problem.k=32",
    "--config.problem.n=32",
    "--config.measure.steps=3",
    "--config.measure.warmup=1",
    "--config.profile.steps=2",
    "--config.timing.rounds=4",
    "--config.timing.budget_s=0.5",
    # All four rounds, however busy the runner: a round cut to keep the budget (one call over
    # what the budget allows a round, tests/test_timing_budget.py) would change their count.
    "--config.timing.min_rounds=4",
)


# The PyTorch row's study shrunk the same way. torch_branch is left out: every Inductor compile
# runs the C++ compiler (seconds each on two cores), and the print variant already breaks a
# graph (the branch under fullgraph=True stays: Dynamo refuses it before compiling anything);
# the JAX variants stay for the comparisons and the JAX column of the observations.
TINY_TORCH = (
    *TINY[:-3],
    "--config.profile.steps=3",
    "--config.timing.rounds=4",
    "--config.timing.budget_s=0.5",
    "--config.select=eager,xla,xla_host_callback,xla_python_branch,matmul_only,"
    "torch_eager,torch_compile,torch_compile_dynamic,torch_print,torch_branch_fullgraph,"
    "torch_matmul",
)


def harness_env() -> dict[str, str]:
    """The environment a fresh `python -m harness` gets: the repo importable, no XLA_FLAGS."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("XLA_FLAGS", None)
    # `make test` puts these in pytest's environment: a study would record that make started
    # it (harness.records.invocations) and print its commands in make's form.
    for name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS"):
        env.pop(name, None)
    return env


def harness_argv(*args: str, results_root: Path) -> list[str]:
    return [sys.executable, "-m", "harness", f"--results_root={results_root}", *args]


def run_harness(
    *args: str, results_root: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs `python -m harness` as a user would, in a fresh process, from the repo root;
    `env` adds to its environment."""
    return subprocess.run(
        harness_argv(*args, results_root=results_root),
        cwd=REPO,
        env={**harness_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_analyze(*args: str) -> subprocess.CompletedProcess[str]:
    """Runs `python -m harness.analyze` in a fresh process from the repo root."""
    return subprocess.run(
        [sys.executable, "-m", "harness.analyze", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def read_summary(run: Path) -> dict:
    """Returns summary.json's variants of a run folder, typed (harness.records.summary.VariantSummary)."""
    from harness.records.summary import load_summary

    return load_summary(run / "summary.json").variants


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """Returns the folder `make(folder)` filled, made once in the whole test session.

    Under pytest-xdist each worker is a session of its own, so a session-scoped fixture would
    run its study once per worker: here the first worker to ask makes it, under a lock in the
    folder the workers share, and the others wait for it and read it. A failed `make` leaves
    no mark, so the next worker to ask tries again (and fails alike)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's own folder, above each worker's
    folder, made = base / name, base / f"{name}.made"
    with open(base / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
            folder.mkdir()
            make(folder)
            made.touch()
    return folder


# ---------------------------------------------------------------------------------------------
# `make test-fast` leaves out the tests marked `study` and those marked `slow` (pyproject.toml
# says what each means). A study is seconds even shrunk: a test that reads one of the session's
# (cpu_run, torch_run, ...) is marked here; one that runs its own study says so with
# `@pytest.mark.study` (or its module's `pytestmark`), and the check below fails it if not.

# The fixtures that run a study: the session's (below) and those of single test files.
STUDY_FIXTURES = frozenset(
    {
        "cpu_run",
        "torch_run",
        "erf_run",  # test_findings.py
        "two_input_run",  # test_program_pytrees.py
        "fast_math_run",  # test_report.py
        "renamed_run",  # test_roles.py
        "search_run",  # test_search.py
        "sharded_run",  # test_sharded.py
        "program_run",  # test_user_program.py
        "world_run",  # test_hostile.py, test_hostile_faults.py
        "group_run",  # test_processes.py: a study across two processes
    }
)
# The fixtures that run something slow but no study: the tests that read them are `slow`.
SLOW_FIXTURES = frozenset(
    {
        "mesh",  # test_comm.py, test_collectives.py: the 4-device capture, in its own process
        "mlp",  # test_analyze_program.py: a program profiled, then analysed, in processes
        "mixer",  # test_analyze_steps.py: `python -m harness.analyze` on the Mixer fixture
    }
)
# A study seen in a command this process starts: `python -m harness` (its argv, a shell line
# or runpy), the hooked harness of the signal tests, or the JAX worker of a study this
# process runs itself (harness.commands.study called in-process).
STUDY_COMMAND = re.compile(
    r"(?:^|[\s'\"])-m\s+harness(?:\.study\.worker)?(?=[\s'\"]|$)"
    r"|run_module\(\s*['\"]harness['\"]"
    r"|hooked_harness\.py"
)
_running: list[pytest.Item] = []  # the test whose set-up, call or tear-down runs now
_unmarked_studies: dict[str, str] = {}  # test id -> the study command it started unmarked


def _command_line(argv: object) -> str:
    if isinstance(argv, str | bytes | os.PathLike):
        return os.fsdecode(argv)
    return " ".join(os.fsdecode(a) if isinstance(a, bytes | os.PathLike) else str(a) for a in argv)


def _note_unmarked_study(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook (it only looks; it must never raise, or the command would not start)."""
    if event != "subprocess.Popen" or not _running:
        return
    try:
        item = _running[-1]
        line = _command_line(args[1])
        if item.get_closest_marker("study") is None and STUDY_COMMAND.search(line):
            _unmarked_studies.setdefault(item.nodeid, line[:300])
    except Exception:
        pass


sys.addaudithook(_note_unmarked_study)


# The files that take longest (pytest --durations=0 -n 2 on two cores, 2026-12-02; the files
# added since from `-m "study or slow" --durations`, 2026-12-07), longest first: `make test`
# (--dist loadfile --no-loadscope-reorder) hands them out first, and the short files fill in at
# the end, so neither worker is left with a long file while the other idles. xdist's own order,
# by number of tests, put test_faults.py and the torch run last, and then the one-study files
# (test_newcomer.py, test_kv_decoder_study.py: a minute or more of one test) at the very end.
LONGEST_FIRST = (
    "test_hostile.py",
    "test_faults.py",
    "test_hostile_faults.py",  # classes 6-7 of the hostile cases, split off test_hostile.py
    "test_hlo_parser.py",
    "test_analyze_cli.py",
    "test_bad_inputs.py",
    "test_torch_run.py",
    "test_newcomer.py",
    "test_user_program.py",
    "test_parser_bounds.py",
    "test_kv_decoder_study.py",
    "test_processes.py",
    "test_flax_train_state.py",
    "test_shared_device.py",
    "test_busy_machine.py",
    "test_containment.py",
    "test_sharded.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if STUDY_FIXTURES & used:
            item.add_marker(pytest.mark.study)
        if SLOW_FIXTURES & used:
            item.add_marker(pytest.mark.slow)
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int, str]:
        name = item.path.name
        first = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        return first, -counts[name], name  # then xdist's own order: more tests first

    items.sort(key=rank)  # stable: each file keeps its own order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    command = _unmarked_studies.get(item.nodeid)
    if call.when == "teardown" and command is not None and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} runs a study but is not marked `study` (`make test-fast` would run "
            f"it): mark it with @pytest.mark.study. It started: {command}"
        )
    return report


@pytest.fixture(scope="session")
def h200() -> Path:
    if not H200.exists():
        pytest.skip(f"H200 fixtures not found at {H200}")
    return H200


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the folder of one complete tiny run of configs/gelu.yaml on the CPU (one for the
    whole session, its workers included: tests read it and copy it before changing anything)."""

    def study(root: Path) -> None:
        proc = run_harness("--config=gelu.yaml", *TINY, results_root=root)
        if proc.returncode != 0:
            raise AssertionError(
                f"the tiny study failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )

    return (once_per_session(tmp_path_factory, "results", study) / "gelu" / "latest").resolve()


@dataclass(frozen=True)
class CapturedProfiles:
    """The jax.profiler windows the real capture stage wrote for one variant of the tiny run."""

    root: Path
    steps: int

    def folder(self, kind: str) -> Path:
        return self.root / kind


@pytest.fixture(scope="session")
def live(cpu_run: Path) -> CapturedProfiles:
    """The tiny run's `xla` profiles (first_call, steady, recompile): real capture output."""
    return CapturedProfiles(cpu_run / "variants" / "xla" / "profile", steps=2)


@pytest.fixture(scope="session")
def torch_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the folder of one tiny run of configs/gelu_torch.yaml: the session's only
    torch.compile (every torch test reads its files; one Inductor compile on two cores costs
    seconds). Skipped when torch is not installed."""
    pytest.importorskip("torch")

    def study(root: Path) -> None:
        proc = run_harness("--config=gelu_torch.yaml", *TINY_TORCH, results_root=root, timeout=600)
        if proc.returncode != 0:
            raise AssertionError(
                f"the tiny torch study failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )

    found = once_per_session(tmp_path_factory, "torch_results", study)
    return (found / "gelu_torch" / "latest").resolve()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line when the H200 fixtures are absent (a plain clone without ../shared beside it):
    how many tests that skipped, so a green run is not mistaken for a full one."""
    if FIXTURES.exists():
        return
    skipped = [
        r
        for r in terminalreporter.stats.get("skipped", [])
        if isinstance(r.longrepr, tuple) and "shared/fixtures" in str(r.longrepr[-1])
    ]
    if skipped:
        n = len(skipped)
        terminalreporter.write_line(
            f"{n} {'test needs' if n == 1 else 'tests need'} ../shared/fixtures beside the "
            f"checkout (not found at {FIXTURES}) and {'was' if n == 1 else 'were'} skipped; "
            "the README's 'Tests' section says where it comes from."
        )


# --- the world each hostile case runs in (test_hostile.py, test_hostile_faults.py) ---------


def under(path: Path, folders: tuple[Path, ...]) -> bool:
    """True when `path` (not followed if it is a link) is one of `folders` or inside one."""
    return any(path == f or f in path.parents for f in folders)


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every file and link under root (except `skip`), with a hash of its content or target."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if under(path, skip):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        elif path.is_dir():
            out[rel] = "dir"
    return out


@dataclass
class World:
    """tmp/sentinel (files nobody may touch), tmp/results holding one finished run."""

    root: Path
    results: Path
    run: Path
    sentinel: Path

    def before(self) -> dict[str, str]:
        return snapshot(self.root)


# The finished run each case runs beside: the default study shrunk as conftest.TINY shrinks it,
# with the variants the cases name. Every case copies it and hashes it twice; the session's
# 13-variant cpu_run cost 0.8 CPU-s a case for that alone.
WORLD_STUDY = ("--config=gelu.yaml", *TINY, "--config.select=eager,xla,xla_lax_cond,matmul_only")


@pytest.fixture(scope="session")
def world_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def study(root: Path) -> None:
        proc = run_harness(*WORLD_STUDY, results_root=root)
        if proc.returncode != 0:
            raise AssertionError(f"the world's study failed:\n{proc.stdout}\n{proc.stderr}")

    found = once_per_session(tmp_path_factory, "hostile_world", study)
    return (found / "gelu" / "latest").resolve()


@pytest.fixture
def world(tmp_path: Path, world_run: Path) -> World:
    results = tmp_path / "results"
    run = results / "gelu" / world_run.name
    shutil.copytree(world_run, run, symlinks=True)
    (results / "gelu" / "latest").symlink_to(run.name)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("mine\n")
    (sentinel / "nested").mkdir()
    (sentinel / "nested" / "data.bin").write_bytes(os.urandom(64))
    return World(tmp_path, results, run, sentinel)
