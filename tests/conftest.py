"""Shared test fixtures: the H200 fixture folder and one tiny real run of the default study."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"
H200 = FIXTURES / "h200-jax0.11.2"

# The default study shrunk so the whole pipeline runs in seconds on two cores. No rounds are
# added past the budget (timing.max_budget_s): four rounds of a tiny problem on a busy runner
# would otherwise add a second to every run; tests/test_busy_machine.py tests the added rounds.
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
    """Returns summary.json's variants of a run folder, typed (harness.summary.VariantSummary)."""
    from harness.summary import load_summary

    return load_summary(run / "summary.json").variants


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="session")
def h200() -> Path:
    if not H200.exists():
        pytest.skip(f"H200 fixtures not found at {H200}")
    return H200


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the folder of one complete tiny run of configs/gelu.yaml on the CPU."""
    root = tmp_path_factory.mktemp("results")
    proc = run_harness("--config=gelu.yaml", *TINY, results_root=root)
    if proc.returncode != 0:
        raise AssertionError(
            f"the tiny study failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return (root / "gelu" / "latest").resolve()


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
    root = tmp_path_factory.mktemp("torch_results")
    proc = run_harness("--config=gelu_torch.yaml", *TINY_TORCH, results_root=root, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(
            f"the tiny torch study failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return (root / "gelu_torch" / "latest").resolve()


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
