"""The report finds variants by role, never by name: renaming every variant changes no verdict."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import REPO, TINY, run_harness

from harness.config import load
from harness.frontends.roles import roles_of
from harness.records.summary import load_summary


def verdicts(run: Path) -> dict[str, str]:
    """The JAX column of the run's observations, as its summary.json records them."""
    found = load_summary(run / "summary.json").findings.observations
    return {o.key: o.verdict for o in found if o.framework == "jax"}


@pytest.fixture(scope="module")
def renamed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny default study with every variant (and the baseline) renamed."""
    root = tmp_path_factory.mktemp("renamed")
    text = (REPO / "configs" / "gelu.yaml").read_text()
    names = [v.name for v in load("gelu.yaml").experiment.variants]
    for i, name in enumerate(names):
        new = f"v{i}_{name[::-1]}"
        text = re.sub(rf"(name: ){name}$", rf"\g<1>{new}", text, flags=re.M)
        text = re.sub(rf"^(baseline: ){name}\b", rf"\g<1>{new}", text, flags=re.M)
    cfg = root / "renamed.yaml"
    cfg.write_text(text)
    proc = run_harness(f"--config={cfg}", *TINY, results_root=root / "results")
    assert proc.returncode == 0, proc.stderr
    return (root / "results" / "gelu" / "latest").resolve()


def test_renaming_every_variant_keeps_every_observation_verdict(
    cpu_run: Path, renamed_run: Path
) -> None:
    assert "xla" not in {p.name for p in (renamed_run / "variants").iterdir()}
    before, after = verdicts(cpu_run), verdicts(renamed_run)
    assert after == before
    assert "not measured" not in set(after.values())


def test_roles_come_from_mode_options_baseline_and_the_roles_key() -> None:
    assert roles_of("a", "eager", {}, "b") == ("eager",)
    assert roles_of("b", "jit", {}, "b") == ("baseline", "compiled")
    assert roles_of("c", "matmul_only", {}, "b") == ("lower_bound", "compiled")
    assert "library_epilogue" in roles_of("d", "jit", {"xla_gpu_enable_triton_gemm": False}, "b")
    assert roles_of("e", "jit", {}, "b", explicit=("host_callback",)) == (
        "host_callback",
        "compiled",
    )


def test_the_experiment_resolves_each_variants_roles_once() -> None:
    """Every stage reads `variant.resolved_roles`: resolved when the experiment is made,
    against its own baseline, and again when it is replaced with another; the config's own
    `roles` key is kept as written, since it is what the manifest saves."""
    exp = load("gelu.yaml").experiment
    for v in exp.variants:
        assert v.resolved_roles == roles_of(
            v.name, v.mode, v.xla_options, exp.baseline, v.roles, v.sharding.enabled
        )
    assert "baseline" in exp.variant(exp.baseline).resolved_roles
    other = next(v.name for v in exp.variants if v.name != exp.baseline)
    moved = dataclasses.replace(exp, baseline=other)
    assert "baseline" in moved.variant(other).resolved_roles
    assert "baseline" not in moved.variant(exp.baseline).resolved_roles
    assert "baseline" in exp.variant(exp.baseline).resolved_roles  # the first is unchanged
    with pytest.raises(ValueError, match="in no Experiment"):
        _ = dataclasses.replace(exp.variants[0]).resolved_roles
