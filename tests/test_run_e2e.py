"""One tiny real run of configs/gelu.yaml on the CPU, checked file by file and key by key."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import TINY, read_summary, run_harness

from harness.common import userfiles
from harness.config import load
from harness.variants import expression

JIT_STAGES = [
    "jaxpr",
    "stablehlo",
    "hlo_before",
    "passes",
    "hlo_after",
    "hlo_after_recompile",
    "buffer_assignment",
    "live_range",
    "memory_usage",
    "llvm",
]
EAGER_STAGES = [
    "jaxpr",
    "hlo_before",
    "hlo_after",
    "buffer_assignment",
    "live_range",
    "memory_usage",
    "llvm",
]


def test_every_cpu_variant_is_ok_and_the_gpu_one_skipped(cpu_run):
    variants = read_summary(cpu_run)
    assert list(variants) == [v.name for v in load("gelu.yaml").experiment.variants]
    for name, s in variants.items():
        if name in ("xla_library_epilogue", "xla_small_gemm"):
            assert s.identity.status == "skipped"
            assert "gpu" in s.identity.reason and "cpu" in s.identity.reason
        else:
            assert s.identity.status == "ok", (name, s.identity.reason)


def test_measured_variants_have_numbers_and_pass_numerics(cpu_run):
    for name, s in read_summary(cpu_run).items():
        if s.identity.status != "ok" or s.identity.mode == "jit_python_branch":
            continue
        t = s.timing
        # The four planned rounds and every round added while the intervals were wide (how
        # many depends on the machine's load; they come in pairs): one figure per round.
        assert t.interleaved and t.rounds == len(t.round_step_s), name
        assert t.rounds >= 4 and (t.rounds - 4) % 2 == 0, name
        assert t.step_ci95_s[0] <= t.step_s <= t.step_ci95_s[1], name
        assert 0 < t.latency_blocked_p10_s <= t.latency_blocked_median_s <= t.latency_blocked_p90_s
        c = s.compile
        assert c.first_call_s > 0 and c.compile_s > 0 and c.recompile_s > 0, name
        assert s.numerics.ok is True and s.numerics.max_abs_err < 1e-2, name
        assert s.cost.flops_analytic == 2 * 16 * 32 * 32, name


def test_python_branch_is_an_expected_error_not_a_crash(cpu_run):
    s = read_summary(cpu_run)["xla_python_branch"]
    assert s.identity.status == "ok"
    assert s.identity.expected_error.type in (
        "TracerBoolConversionError",
        "ConcretizationTypeError",
    )
    assert (cpu_run / "variants" / "xla_python_branch" / "expected_error.txt").exists()


def test_recompile_is_explained_by_the_new_shape(cpu_run):
    c = read_summary(cpu_run)["xla"].compile
    assert "now f32[8,32] and before f32[16,32]" in c.recompile_explanation
    assert (cpu_run / "variants" / "xla" / "recompile.txt").exists()
    assert c.recompile_backend_compiles == 1  # the new module alone, no helper compiles


def test_host_callback_printed_once_per_captured_call(cpu_run):
    s = read_summary(cpu_run)["xla_host_callback"]
    # first call + warmup + blocked steps + profiled steps + recompile; the timing stage's
    # calls print too, but into the timing stage's own buffer
    assert s.identity.callback_lines == 1 + 1 + 3 + 2 + 1
    text = (cpu_run / "variants" / "xla_host_callback" / "callback_output.txt").read_text()
    assert text.count("mean(x @ W + b)") == s.identity.callback_lines


@pytest.mark.parametrize(
    "name", ["xla", "xla_no_fusion", "xla_exact_gelu", "xla_mixed_dtype", "matmul_only"]
)
def test_jit_variant_ir_ladder_has_exactly_the_expected_stages(cpu_run, name):
    ir = cpu_run / "variants" / name / "ir"
    index = json.loads((ir / "index.json").read_text())["stages"]
    expected = [s for s in JIT_STAGES if not (name == "matmul_only" and s == "llvm")]
    assert [s["stage"] for s in index] == expected
    # By the names the ladder asks for (a stage's text is kept gzipped, harness.store.io).
    names = {p.name.removesuffix(".gz") for p in ir.iterdir()}
    assert names == {s["path"] for s in index} | {"index.json"}
    hlo = userfiles.read_text(ir / "40-hlo-after-optimizations.txt", userfiles.IR_TEXT)
    assert "HloModule jit_" in hlo
    passes = sorted((ir / "30-passes").iterdir())
    assert passes and all(p.name[:4].isdigit() for p in passes)


def test_eager_ladder_holds_one_module_per_primitive(cpu_run):
    ir = cpu_run / "variants" / "eager" / "ir"
    index = json.loads((ir / "index.json").read_text())["stages"]
    assert [s["stage"] for s in index] == EAGER_STAGES
    modules = sorted(
        p.name.split("-", 1)[1] for p in userfiles.files_in(ir / "40-hlo-after-optimizations")
    )
    assert "jit_tanh.txt" in modules and "jit_integer_pow.txt" in modules
    assert read_summary(cpu_run)["eager"].identity.eager_modules


def test_profiles_are_kept_as_jax_writes_them(cpu_run):
    for window in ("first_call", "steady", "recompile"):
        found = list(
            (cpu_run / "variants" / "xla" / "profile" / window).glob(
                "plugins/profile/*/*.xplane.pb"
            )
        )
        assert len(found) == 1, window


def test_manifest_records_overrides_versions_and_status(cpu_run):
    manifest = json.loads((cpu_run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert {o["key"] for o in manifest["overrides"]} == {
        t.split("=")[0].removeprefix("--config.") for t in TINY
    }
    assert manifest["config"]["problem"]["m"] == 16
    env = manifest["environment"]
    assert env["platform"] == "cpu" and list(env["versions"]) == ["jax", "jaxlib", "flax", "torch"]
    assert env["versions"]["jax"] and env["versions"]["jaxlib"] and env["versions"]["flax"]
    assert set(manifest["stages_s"]) == {
        "start_s",
        "capture_s",
        "ceilings_s",
        "timing_s",
        "analysis_s",
        "report_s",
    }
    assert manifest["compiler_options"]["xla_no_fusion"]["xla_disable_hlo_passes"]
    assert "| [xla](variants/xla/report.md) |" in (cpu_run / "report.md").read_text()
    assert (cpu_run / "variants" / "xla" / "report.md").read_text().startswith("# gelu: `xla`")


@pytest.mark.study
def test_misspelled_key_exits_2_with_a_suggestion_and_no_results(tmp_path):
    proc = run_harness("--config=gelu.yaml", "--config.problem.mm=64", results_root=tmp_path)
    assert proc.returncode == 2
    assert "did you mean 'm'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())


def test_frontends_compute_the_same_numbers():
    exp = load(
        "gelu.yaml", ["--config.problem.m=8", "--config.problem.k=16", "--config.problem.n=16"]
    ).experiment
    outputs = {}
    for name in ("xla", "xla_flax_linen", "xla_flax_nnx"):
        v = exp.variant(name)
        inputs = expression.make_inputs(v.problem, exp.seed)
        outputs[name] = np.asarray(expression.build_function(v)(inputs.x, inputs.w, inputs.b))
    np.testing.assert_allclose(outputs["xla_flax_linen"], outputs["xla"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outputs["xla_flax_nnx"], outputs["xla"], rtol=1e-6, atol=1e-6)
