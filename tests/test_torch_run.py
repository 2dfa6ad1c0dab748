"""The PyTorch row in a real tiny run: torch eager and torch.compile beside JAX on the CPU.

Every test reads the one session run of configs/gelu_torch.yaml (conftest.torch_run): the
summary, the variant folders, timing.json and the report. Skipped without torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_json, read_summary
from test_schema import README, documented

from harness.common import userfiles
from harness.findings.observations import NOT_HERE, NOT_MEASURED, YES
from harness.frontends.torch.trace import read_torch_trace
from harness.records import events_file, ladder
from harness.records.summary import RunSummary, load_summary
from harness.store import records
from harness.store.runfolder import VariantFolder

TORCH = ("torch_eager", "torch_compile", "torch_compile_dynamic", "torch_print", "torch_matmul")
COMPILED_STAGES = {
    "fx_graph",
    "aot_forward",
    "post_grad",
    "inductor_pre_fusion",
    "inductor_post_fusion",
    "output_code",
}
# The PyTorch column of the observations on the tiny CPU run, claim by claim.
TORCH_CPU_VERDICTS = {
    "eager_launches": YES,  # aten::matmul, aten::add, aten::gelu
    "eager_transfers": NOT_HERE,
    "first_call_pause": YES,
    "library_epilogue": YES,  # on a CPU Inductor calls extern_kernels.addmm: the bias is fused
    "fewer_kernels": YES,
    "new_shape_pause": YES,
    "host_callback_split": YES,
    "traced_branch": YES,  # torch.compile(fullgraph=True) refuses the branch
    "cache_miss_log": YES,
    "later_ir_loops": YES,  # the C++ kernel's for loops in output_code
    "later_ir_thread_blocks": NOT_HERE,
    "later_ir_memory_spaces": NOT_HERE,
    "flops_counted": NOT_MEASURED,
}


@pytest.fixture(scope="module")
def summary(torch_run: Path) -> dict:
    return read_summary(torch_run)


def test_every_torch_variant_ran_on_the_same_data_with_its_own_numerics(summary):
    for name in TORCH:
        s = summary[name]
        assert (s.identity.status, s.identity.framework) == ("ok", "torch"), name
        assert s.numerics.ok and s.numerics.rel_fro_err < 1e-5, name
    # Same inputs, same float64 reference: torch and XLA agree to float32 rounding.
    assert summary["torch_compile"].numerics.tolerance == summary["xla"].numerics.tolerance
    assert summary["torch_compile"].identity.roles == ("baseline", "compiled")
    assert summary["torch_matmul"].identity.roles == ("lower_bound", "compiled")


def test_compiled_variant_runs_the_extern_gemm_and_a_fused_cpp_kernel(torch_run, summary):
    s = summary["torch_compile"]
    p = s.profile
    assert p.matched_fraction == 1.0 and p.unmatched_events == 0
    assert p.kernels_per_step == 2
    first, second = p.step_sequence[:2]
    assert first == "extern_kernels.addmm:1" and second.startswith("cpp_fused_"), p.step_sequence
    assert {k.split(":", 1)[1] for k in p.launches_per_cluster} == {first, second}
    assert s.hlo.fusion_count == 1 and s.hlo.cluster_count == 2
    (call,) = s.hlo.library_calls
    assert (call.target, call.epilogue) == ("extern_kernels.addmm", "BIAS")
    events = events_file.read(VariantFolder(torch_run / "variants/torch_compile"))
    assert {e.rule for e in events} == {"extern_call", "inductor_kernel"}
    assert {e.cpu_op for e in events} >= {"aten::addmm"}
    fusions = read_json(torch_run / "variants/torch_compile/fusions.json")
    (module,) = fusions["modules"]
    assert module["reverse_map"] and all(module["reverse_map"].values())


def test_print_breaks_the_graph_in_two(torch_run, summary):
    d = summary["torch_print"].dynamo
    assert d.explain_source == "explain()"
    assert d.graph_break_count >= 1 and d.graph_count == 2 and d.compiled_graphs == 2
    assert "builtin operator" in d.break_reasons[0]
    assert d.break_locations[0].endswith(f"expression.py:{print_line()}")
    assert (
        "gelu_linear: mean(x @ W + b) = tensor("
        in (torch_run / "variants/torch_print/callback_output.txt").read_text()
    )
    # Printing the tensor runs eagerly between the graphs, attributed outside both of them.
    launches = summary["torch_print"].profile.launches_per_cluster
    assert len({k.split(":", 1)[0] for k in launches}) >= 2
    assert summary["torch_compile"].dynamo.graph_break_count == 0


def print_line() -> int:
    from harness.frontends.torch import expression

    lines = Path(expression.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if 'print("gelu_linear' in line)


def test_fullgraph_refuses_the_branch_as_an_expected_error(torch_run, summary):
    s = summary["torch_branch_fullgraph"]
    assert s.identity.status == "ok" and s.identity.roles == ("traced_branch", "compiled")
    assert s.identity.reason == "expected: fullgraph=True makes a graph break an error"
    assert s.identity.expected_error.type == "Unsupported"
    assert s.analysis_errors == () and s.timing.step_s is None
    assert (torch_run / "variants/torch_branch_fullgraph/expected_error.txt").is_file()


def test_new_shape_recompile_reason_and_guards(torch_run, summary):
    s = summary["torch_compile"]
    reason = "tensor 'x' size mismatch at index 0. expected 16, actual 8"
    assert reason in s.compile.recompile_explanation
    assert s.compile.recompile_backend_compiles == 1
    d = s.dynamo
    assert d.recompiles == 1 and reason in d.recompile_reasons[0]
    assert d.guard_count > 0 and d.recompile_guard_count > 0
    assert d.dynamic_shapes is False and d.recompile_dynamic_shapes is True
    guards = read_json(torch_run / "variants/torch_compile/compile.json")["guards"]
    assert any("TENSOR_MATCH" in g and "L['x']" in g for g in guards)
    assert reason in (torch_run / "variants/torch_compile/recompile.txt").read_text()


def test_dynamic_true_avoids_the_recompile(summary):
    dynamic, default = summary["torch_compile_dynamic"], summary["torch_compile"]
    assert dynamic.dynamo.options["dynamic"] is True
    assert dynamic.dynamo.dynamic_shapes is True
    assert dynamic.dynamo.recompiles == 0 and dynamic.compile.recompile_backend_compiles == 0
    assert dynamic.compile.recompile_s < default.compile.recompile_s / 10
    assert dynamic.comparison.first_divergence.stage == "fx_graph"
    assert "Sym(" in dynamic.comparison.first_divergence.detail


def test_compile_pause_is_split_into_torch_compile_phases(summary):
    c = summary["torch_compile"].compile
    assert {"dynamo_tracing", "aot_autograd", "inductor", "kernel_compile"} <= set(c.by_pipeline)
    assert all(v >= 0 for v in c.by_pipeline.values())
    assert sum(c.by_pipeline.values()) <= c.compile_s * 1.01
    assert c.compile_s <= c.first_call_s
    assert summary["torch_eager"].compile.compile_s == 0.0


def test_torch_and_jax_are_timed_in_the_same_rounds(torch_run):
    timing = read_json(torch_run / "timing.json")
    rounds = timing["rounds"]
    for name in ("xla", *TORCH):
        assert len(timing["variants"][name]["round_step_s"]) == rounds, name
    # The compiled function that saw the new shape is compiled again for timing; the
    # dynamic one, which did not recompile, is timed as captured.
    assert "compiled again for timing" in timing["variants"]["torch_compile"]["note"]
    assert timing["variants"]["torch_compile_dynamic"]["note"] is None
    assert all(name in order for order in timing["orders"] for name in TORCH)


def test_comparisons_pair_each_framework_and_the_two(summary):
    cmp = {n: summary[n].comparison for n in summary}
    assert cmp["torch_compile_dynamic"].vs_baseline.against == "torch_compile"
    assert cmp["torch_compile"].vs_lower_bound.against == "torch_matmul"
    assert cmp["xla"].vs_lower_bound.against == "matmul_only"
    for torch_name, jax_name in (
        ("torch_compile", "xla"),
        ("torch_eager", "eager"),
        ("torch_matmul", "matmul_only"),
        ("torch_print", "xla_host_callback"),
        ("torch_compile_dynamic", "xla"),
    ):
        v = cmp[torch_name].vs_framework
        assert v.against == jax_name, torch_name
        assert v.ratio > 0 and v.ci95[0] <= v.ratio <= v.ci95[1]
    assert cmp["xla"].vs_framework is None


def test_first_divergence_from_the_torch_baseline(summary):
    d = summary["torch_print"].comparison.first_divergence
    assert (d.against, d.stage) == ("torch_compile", "fx_graph")
    assert "1 graph(s) vs 2" in d.detail
    matmul = summary["torch_matmul"].comparison.first_divergence
    assert matmul.stage == "fx_graph" and "-torch._C._nn.gelu" in matmul.detail
    assert summary["eager"].comparison.first_divergence.against == "xla"


def test_ir_ladder_and_artifacts_stay_in_the_variant_folder(torch_run):
    vdir = torch_run / "variants" / "torch_compile"
    stages = {s.name for s in ladder.read_ladder(vdir / "ir").stages}
    assert stages == COMPILED_STAGES
    code = userfiles.read_text(vdir / "ir" / "50-output-code.py", userfiles.IR_TEXT)
    assert "cpp_fused_" in code and "extern_kernels.addmm" in code
    assert {s.name for s in ladder.read_ladder(torch_run / "variants/torch_eager/ir").stages} == {
        "fx_graph"
    }
    assert list((vdir / "torch" / "trace").glob("*.log"))
    assert any((vdir / "torch" / "inductor_cache").rglob("*.so"))
    trace = read_torch_trace(vdir / "profile" / "steady" / "torch_trace.json", steps=3)
    assert [m.step for m in trace.markers] == [1, 2, 3]
    facts = read_json(vdir / "torch.json")
    assert facts["compile_ids"]["first_call"] and facts["compile_ids"]["recompile"]


def test_reanalyze_asks_each_variants_frontend_for_its_raw_inputs(torch_run, tmp_path):
    """The full run has every raw input its variants' frontends name; a folder holding only
    the IR ladders lacks XLA's dump for JAX, torch.compile's working folder for a compiled
    torch variant (never for eager, which makes none) and the profile for both."""
    from harness.commands.reanalyze import missing_inputs
    from harness.config.schema import build_experiment
    from harness.records import run_files
    from harness.store.runfolder import RunFolder

    manifest = RunFolder(torch_run).manifest
    exp = build_experiment(run_files.load(run_files.MANIFEST, manifest).config, str(manifest))
    assert missing_inputs(torch_run, exp) == []
    bare = tmp_path / "bare"
    for name in ("xla", "torch_eager", "torch_compile"):
        (bare / "variants" / name / "ir").mkdir(parents=True)
    assert missing_inputs(bare, exp) == [
        "variants/torch_compile/torch",
        "variants/torch_compile/profile",
        "variants/torch_eager/profile",
        "variants/xla/dump",
        "variants/xla/profile",
    ]


def test_report_has_the_pytorch_column(torch_run):
    found = load_summary(torch_run / "summary.json").findings.observations
    got = {o.key: o.verdict for o in found if o.framework == "torch"}
    assert got == TORCH_CPU_VERDICTS
    md = (torch_run / "details.md").read_text()
    assert "| claim | JAX: verdict and evidence | PyTorch: verdict and evidence | rule |" in md
    assert "torch_compile: argument x, dim 0: 16 → 8" in md
    page = (torch_run / "variants" / "torch_compile" / "report.md").read_text()
    assert "Dynamo: torch.compile(" in page


def test_torch_run_emits_exactly_the_documented_keys(torch_run):
    data_ = json.loads((torch_run / "summary.json").read_text())
    assert records.emitted_keys(RunSummary, data_) == documented(README.read_text())
