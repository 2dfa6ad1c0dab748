"""Findings come from the data of any config: a second study, not gelu.yaml's, names its
largest effect and its cause; compare states its ground."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import REPO, run_harness

from harness.report import compare, data, findings

# The batched erf study of the issue, at a tiny size: erf expands to ~127 elementwise ops, and
# with the fusion passes off each becomes a kernel of its own.
BATCHED_ERF = (
    "--config.problem.gelu=erf",
    "--config.problem.batch=2,4",
    "--config.problem.m=16",
    "--config.problem.k=32",
    "--config.problem.n=32",
    "--config.select=xla,xla_no_fusion,xla_flax_nnx,matmul_only",
    "--config.measure.steps=3",
    "--config.profile.steps=2",
    "--config.timing.rounds=6",
    "--config.timing.budget_s=1",
)


@pytest.fixture(scope="module")
def erf_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("erf")
    proc = run_harness("--config=gelu.yaml", *BATCHED_ERF, results_root=root)
    assert proc.returncode == 0, proc.stderr
    return (root / "gelu" / "latest").resolve()


def test_the_largest_effect_of_a_batched_erf_study_is_no_fusion_and_why(erf_run: Path) -> None:
    run = data.load_run(erf_run)
    found, noise = findings.findings(run)
    top = found[0]
    assert top.variant == "xla_no_fusion" and top.verdict == "slower", [f.what for f in found]
    assert "xla_disable_hlo_passes" in top.why
    kernels, ops = (
        int(x) for x in re.search(r"(\d+) kernels a step.*fuses (\d+) ops", top.why).groups()
    )
    assert kernels > 50 and ops > 50  # the erf expansion, op by op
    assert any("xla_flax_nnx" in n and "same program" in n for n in noise)
    md = (erf_run / "report.md").read_text()
    assert md.index("## Findings") < md.index("## Summary")
    assert "1. `xla_no_fusion` is" in md


def test_what_to_change_is_measured_with_its_interval_and_numerics(erf_run: Path) -> None:
    recs = findings.recommendations(data.load_run(erf_run))
    (rec,) = [r for r in recs if r.variant == "xla_no_fusion"]
    assert rec.change.startswith("keep `xla_disable_hlo_passes` unset")
    assert re.search(r"95% CI \d\.\d{3}–\d\.\d{3}", rec.effect)
    assert "error against float64" in rec.tradeoff


def test_compare_states_its_ground_first(cpu_run: Path, erf_run: Path, tmp_path: Path) -> None:
    md, _ = compare.compare_runs(cpu_run, erf_run, tmp_path)
    text = md.read_text()
    assert text.index("## Config differences") < text.index("## Variants in both runs")
    assert "problem.gelu" in text and "problem.batch" in text
    assert "different problem sizes" in text and "per FLOP" in text
    assert re.search(r"ps/FLOP", text)
    assert max(len(line) for line in text.splitlines()) < 1500  # long lists are cut


def test_an_older_runs_config_counts_its_missing_keys_as_defaults(cpu_run: Path) -> None:
    """A run saved before a top-level key existed (here `program`) is the same problem, and
    the key is not listed as a difference."""
    run = data.load_run(cpu_run)
    old_config = {k: v for k, v in run.manifest["config"].items() if k != "program"}
    older = dataclasses.replace(run, manifest={**run.manifest, "config": old_config})
    assert compare.same_problem(older, run)
    assert not [k for k, _, _ in compare.config_differences(older, run) if k == "program"]
    changed = {
        **old_config,
        "problem": {**old_config["problem"], "m": 1 + old_config["problem"]["m"]},
    }
    assert not compare.same_problem(
        dataclasses.replace(run, manifest={**run.manifest, "config": changed}), run
    )


def test_the_h200_reference_names_the_five_effects_the_study_is_about() -> None:
    """The committed H200 run (real profiles): each finding carries its measured mechanism."""
    run = data.load_run(REPO / "results" / "reference" / "h200")
    found, _ = findings.findings(run)
    by_variant = {f.variant: f for f in found}
    assert {"xla_mixed_dtype", "xla_library_epilogue", "xla_no_fusion", "xla_host_callback"} <= set(
        by_variant
    ) and "eager" in by_variant
    epilogue = by_variant["xla_library_epilogue"]
    assert epilogue.verdict == "faster"
    assert "1 kernel a step instead of 2" in epilogue.why
    assert re.search(r"; \d+ MB less memory traffic", epilogue.why)  # a size, not "-268 MB less"
    assert "1 D2H copy a step" in by_variant["xla_host_callback"].why
    assert "tf32" in by_variant["xla_mixed_dtype"].why
    assert len(findings.recommendations(run)) >= 3
