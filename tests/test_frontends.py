"""Frontends are plug-ins: registered by name, their modes data, and a third one (plain NumPy,
tests/toy_frontend.py) runs a whole study with no edit outside harness/frontends/."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, TINY, harness_env, read_json, run_harness

from harness.common import fmt
from harness.config import ConfigError, load
from harness.frontends import registry
from harness.frontends.modes import Mode, Traits
from harness.records import run_files
from harness.records.summary import load_summary

TOY = REPO / "tests" / "toy_frontend.py"

# The modes the config accepted before they were data on their frontends, in the same order
# (a config error lists them so).
BUILTIN_MODES = (
    "eager",
    "jit",
    "jit_host_callback",
    "matmul_only",
    "jit_python_branch",
    "jit_lax_cond",
    "torch_eager",
    "torch_compile",
    "torch_matmul",
    "torch_print",
    "torch_branch",
)


@pytest.fixture
def numpy_frontend() -> Iterator[registry.Frontend]:
    """The toy frontend registered in this process for one test, then taken out again (the
    other tests of this worker see the built-ins alone)."""
    sys.path.insert(0, str(TOY.parent))
    try:
        import toy_frontend
    finally:
        sys.path.remove(str(TOY.parent))
    frontend = registry.register(toy_frontend.NumpyFrontend())
    try:
        yield frontend
    finally:
        registry.unregister(frontend.name)


def test_the_builtins_are_registered_by_name_with_their_modes() -> None:
    assert registry.names()[:2] == ("jax", "torch")
    assert tuple(m.name for m in registry.modes())[: len(BUILTIN_MODES)] == BUILTIN_MODES
    for name in ("jax", "torch"):
        frontend = registry.get(name)
        assert frontend.name == name
        assert {m.framework for m in frontend.modes} == {name}
    with pytest.raises(KeyError, match="registered: jax, torch"):
        registry.get("tensorflow")


def test_a_mode_says_how_it_runs_and_what_it_computes() -> None:
    mode = registry.mode
    assert mode("eager").op_by_op and mode("torch_eager").op_by_op
    assert not mode("jit").op_by_op and not mode("torch_compile").op_by_op
    assert mode("jit_python_branch").expects_trace_error
    assert not mode("torch_branch").expects_trace_error  # Dynamo splits it instead
    assert mode("torch_branch").branches and mode("jit_lax_cond").branches
    assert mode("matmul_only").gemm_only and mode("torch_matmul").gemm_only
    assert mode("jit_host_callback").host_print and mode("torch_print").host_print
    assert {m.name for m in registry.modes() if m.program} == {"eager", "jit"}
    # A finding names a mode in its frontend's words, else by its name.
    assert mode("eager").words == "op-by-op (eager) dispatch" and mode("torch_eager").words == ""
    assert registry.traits("torch").timed_against == "jax"
    assert registry.traits("jax").timed_against is None
    assert registry.traits("nobody") == registry.traits("nobody2")  # UNKNOWN, never KeyError


def test_every_builtin_has_every_method_of_the_protocol() -> None:
    wanted = {
        n
        for n, f in inspect.getmembers(registry.Frontend, inspect.isfunction)
        if not n.startswith("_")
    }
    assert {"capture", "compile_for_timing", "waiter", "analyze", "subject"} <= wanted
    for name in registry.names():
        frontend = registry.get(name)
        assert all(callable(getattr(frontend, n, None)) for n in wanted), name
        assert isinstance(frontend.traits, Traits)
        assert all(isinstance(m, Mode) for m in frontend.modes)


def test_a_mode_name_belongs_to_one_frontend() -> None:
    class Thief:
        name = "thief"
        modes = (Mode("jit", "thief"),)
        traits = Traits(label="Thief")

    with pytest.raises(ValueError, match="already jax's"):
        registry.register(Thief())  # type: ignore[arg-type]
    assert "thief" not in registry.names()


def test_the_registry_imports_neither_jax_nor_torch() -> None:
    """The supervisor and the report look modes and traits up without loading a framework."""
    code = (
        "import sys; from harness.frontends import registry; registry.modes(); "
        "registry.traits('torch'); print(sorted(m for m in ('jax', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=harness_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def toy_config(folder: Path) -> Path:
    """A study of one JAX variant and two of the NumPy frontend's."""
    path = folder / "toy.yaml"
    path.write_text(
        "experiment: toy\n"
        "baseline: xla\n"
        "variants:\n"
        "  - {name: xla, mode: jit}\n"
        "  - {name: numpy_gelu, mode: numpy_gelu, roles: [baseline]}\n"
        "  - {name: numpy_matmul, mode: numpy_matmul}\n"
    )
    return path


def test_a_plugged_in_frontend_brings_its_modes_to_the_config(
    tmp_path: Path, numpy_frontend: registry.Frontend
) -> None:
    exp = load(str(toy_config(tmp_path))).experiment
    assert [v.framework for v in exp.variants] == ["jax", "numpy", "numpy"]
    assert exp.variant("numpy_matmul").mode_spec.gemm_only
    registry.unregister(numpy_frontend.name)
    with pytest.raises(ConfigError, match=r"numpy_gelu.*is not supported; allowed: eager, jit"):
        load(str(toy_config(tmp_path)))


def test_a_plugin_that_fails_to_import_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken_frontend.py"
    broken.write_text("raise RuntimeError('no such framework here')\n")
    with pytest.raises(ImportError, match=r"broken_frontend\.py.*no such framework here"):
        registry.load_plugins(str(broken))


# Every stage of a study, kept small: two timed calls a round, four rounds, rounds added only
# within the budget.
TOY_FLAGS = (*TINY, "--config.profile.enabled=false")


def test_a_run_records_each_frontend_s_own_versions(numpy_frontend: registry.Frontend) -> None:
    """The environment's versions are the packages each registered frontend's traits name,
    frontend after frontend: a third frontend's are recorded with no edit elsewhere."""
    import importlib.metadata

    from harness.capture import environment

    found = environment.versions(importlib.metadata)
    assert list(found) == ["jax", "jaxlib", "flax", "torch", "numpy"]
    assert found["numpy"] == importlib.metadata.version("numpy")


def test_a_manifest_of_version_2_reads_its_fixed_versions_as_versions() -> None:
    """A manifest saved with the fixed jax, jaxlib, flax and torch fields reads them, in that
    order, as `environment.versions` (a field it lacked reads as not recorded)."""
    old = {
        "schema_version": 2,
        "experiment": "e",
        "run_id": "r",
        "config_file": "c.yaml",
        "started": "2025-01-01T00:00:00Z",
        "status": "complete",
        "environment": {"python": "3.12", "jax": "0.7", "jaxlib": "0.7", "flax": "0.11"},
    }
    env = run_files.parse(run_files.MANIFEST, old, "manifest.json").environment
    assert env.versions == {"jax": "0.7", "jaxlib": "0.7", "flax": "0.11", "torch": None}
    assert (env.value("python"), env.value("jax"), env.value("torch")) == ("3.12", "0.7", None)


@pytest.mark.study
def test_a_third_frontend_runs_a_study_through_every_stage(tmp_path: Path) -> None:
    """Capture, timing, analysis and report of a NumPy frontend no harness module knows: the
    worker and the supervisor learn of it from HARNESS_FRONTENDS alone."""
    proc = run_harness(
        f"--config={toy_config(tmp_path)}",
        *TOY_FLAGS,
        results_root=tmp_path / "results",
        env={registry.PLUGINS_ENV: str(TOY)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = (tmp_path / "results" / "toy" / "latest").resolve()
    summary = load_summary(run / "summary.json")
    toy = {n: s for n, s in summary.variants.items() if s.identity.framework == "numpy"}
    assert set(toy) == {"numpy_gelu", "numpy_matmul"}
    for name, s in toy.items():
        assert s.identity.status == "ok", (name, s.identity.reason)
        assert s.numerics.ok, name  # against the float64 reference the JAX variants meet
        assert s.timing.step_s and s.timing.step_s > 0
    assert summary.variants["xla"].identity.status == "ok"
    # Each timed against its own framework's baseline and lower bound, and against JAX.
    gelu, matmul = toy["numpy_gelu"].comparison, toy["numpy_matmul"].comparison
    assert matmul.vs_baseline is not None and matmul.vs_baseline.against == "numpy_gelu"
    assert gelu.vs_lower_bound is not None and gelu.vs_lower_bound.against == "numpy_matmul"
    assert gelu.vs_framework is not None and gelu.vs_framework.against == "xla"
    for verdict in (matmul.vs_baseline, gelu.vs_lower_bound, gelu.vs_framework):
        assert verdict.ratio is not None and verdict.ratio > 0
    timing = read_json(run / "timing.json")
    assert {"numpy_gelu", "numpy_matmul", "xla"} <= set(timing["variants"])
    report = (run / "report.md").read_text()
    assert "`numpy_gelu` (NumPy)" in report  # its baseline, named by the frontend's traits
    versions = read_json(run / "manifest.json")["environment"]["versions"]
    assert f", numpy {versions['numpy']}." in report  # its own versions, in the headline
    rows = {n: next(line for line in report.splitlines() if f"[{n}](" in line) for n in toy}
    # The study table's cells, in its short words ("not resolved: 0.174× (0.129–0.343)").
    assert fmt.verdict(matmul.vs_baseline, fmt.SHORT_WORDS) in rows["numpy_matmul"]
    assert fmt.verdict(gelu.vs_lower_bound, fmt.SHORT_WORDS) in rows["numpy_gelu"]
    assert (run / "variants" / "numpy_gelu" / "report.md").is_file()
