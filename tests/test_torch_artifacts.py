"""Inductor debug artifacts and TORCH_TRACE logs from the H200 torch 2.11 fixtures.

No torch needed: the readers parse text and JSON. Each case folder holds what torch 2.11
wrote for `F.gelu(x @ w + b, approximate="tanh")` at 8192^3 bf16.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixture_root import fixtures_root

from harness.frontends.torch.inductor.artifacts import (
    ArtifactError,
    find_graph_dirs,
    graphs_from_trace,
    parse_fx_graph,
    parse_output_code,
    read_graph_dir,
    read_graphs,
)
from harness.frontends.torch.inductor.clusters import (
    clusters_by_graph,
    fusions_document,
    graph_clusters,
    reverse_map,
    shape_bytes,
    summary,
)
from harness.frontends.torch.inductor.trace_log import (
    break_headline,
    compile_times,
    read_trace_log,
    read_trace_records,
)

COMPILE = fixtures_root() / "h200-torch2.11" / "compile"
USER_LINE = "/work/steering/tools/torch_probe.py:38"


def case(name: str) -> Path:
    path = COMPILE / name
    if not path.is_dir():
        pytest.skip(f"H200 torch fixture absent: {path}")
    return path


def probe(name: str) -> dict:
    return json.loads((case(name) / "probe.json").read_text())


@pytest.fixture(scope="module")
def facts():
    """The TORCH_TRACE facts of the three compile cases, read once."""
    return {
        n: read_trace_log(case(n) / "torch_trace.log")
        for n in ("compile_default", "compile_graph_break", "compile_recompile")
    }


def test_output_code_lists_the_extern_gemm_and_the_fused_triton_kernel():
    (graph_dir,) = find_graph_dirs(case("compile_default") / "inductor")
    code = parse_output_code((graph_dir / "output_code.py").read_text())
    assert code.aot_id == "0_inference"
    assert code.device == "cuda"
    assert [(c.target, c.kind, c.handle, c.order) for c in code.calls] == [
        ("extern_kernels.mm", "library", "extern_kernels.mm:1", 1),
        ("triton_poi_fused_add_gelu_0", "triton", "triton_poi_fused_add_gelu_0:2", 2),
    ]
    (kernel,) = code.kernels
    assert kernel.heuristic == "pointwise"
    assert kernel.source_nodes == ("add", "gelu")
    assert "tanh" in kernel.fragment_nodes and "mm" not in kernel.fragment_nodes
    assert "libdevice.tanh" in kernel.source


def test_clusters_of_the_default_compile():
    (graph,) = read_graphs(case("compile_default") / "inductor")
    gemm, fused = graph_clusters(graph)
    assert (gemm.name, gemm.kind, gemm.target, gemm.epilogue) == (
        "extern_kernels.mm:1",
        "library",
        "extern_kernels.mm",
        "DEFAULT",
    )
    assert gemm.source_ops == ("mm (aten.mm.default)",)
    assert (fused.name, fused.kind, fused.backend_kind) == (
        "triton_poi_fused_add_gelu_0",
        "triton",
        "pointwise",
    )
    # The bias add and all eleven GELU nodes went into the one Triton kernel.
    assert len(fused.source_ops) == 12
    assert "add (aten.add.Tensor)" in fused.source_ops
    assert "tanh (aten.tanh.default)" in fused.source_ops
    assert dict(fused.member_opcodes)["aten.mul"] == 6
    assert fused.source_locations == gemm.source_locations == (USER_LINE,)
    assert fused.output_shape == "bf16[8192, 8192]"
    assert fused.output_bytes == 8192 * 8192 * 2
    assert summary([gemm, fused]) == {
        "fusion_count": 1,
        "cluster_count": 2,
        "library_calls": [{"target": "extern_kernels.mm", "epilogue": "DEFAULT"}],
    }


def test_reverse_map_has_the_fusions_json_shape():
    (graph,) = read_graphs(case("compile_default") / "inductor")
    rmap = reverse_map(graph)
    assert rmap["mm (aten.mm.default)"] == ["extern_kernels.mm:1"]
    assert rmap["convert_element_type_3 (prims.convert_element_type.default)"] == [
        "triton_poi_fused_add_gelu_0"
    ]
    assert all(rmap.values()), "no FX node of this graph is folded away"
    doc = fusions_document([graph])
    (module,) = doc["modules"]
    assert module["module"] == "0_inference"
    assert module["reverse_map"] == rmap
    assert module["folded_away"] == []
    assert [c["name"] for c in module["clusters"]] == [
        "extern_kernels.mm:1",
        "triton_poi_fused_add_gelu_0",
    ]


def test_graph_break_addmm_needs_the_post_grad_graph_from_the_trace(facts):
    """Torch 2.11 writes no post-grad graph to the debug folder: mm + add became addmm_default
    after the ATen graph was printed. The TORCH_TRACE log has the post-grad graph."""
    folder = case("compile_graph_break") / "inductor"
    alone = read_graphs(folder)[0]
    assert any("fx_graph_transformed.py" in n for n in alone.notes)
    rmap = reverse_map(alone)
    assert rmap["mm (aten.mm.default)"] == []
    assert rmap["addmm_default"] == ["extern_kernels.addmm:1"]

    linked = read_graphs(folder, facts["compile_graph_break"])
    first, second = linked
    assert (first.compile_id, second.compile_id) == ("0/0", "2/0")
    assert first.notes == ()
    rmap = reverse_map(first)
    assert rmap["addmm_default (aten.addmm.default)"] == ["extern_kernels.addmm:1"]
    assert all(rmap.values())
    addmm = graph_clusters(first)[0]
    assert (addmm.epilogue, addmm.output_bytes) == ("BIAS", 8192 * 8192 * 2)
    # Its post-grad node has no stack trace; the kernel stack trace gives the user's line.
    assert addmm.source_locations == ("/work/steering/tools/torch_probe.py:41",)
    # The split reduction: both kernels hold the mean and its convert.
    reds = graph_clusters(first)[1:]
    assert [c.backend_kind for c in reds] == ["reduction", "persistent_reduction"]
    assert all(c.source_ops == reds[0].source_ops for c in reds)


def test_graph_break_facts_agree_with_explain(facts):
    explained = probe("compile_graph_break")["explain"]
    trace = facts["compile_graph_break"]
    # explain() ran first and reset Dynamo, then the real compile: two sessions.
    assert len(trace.sessions) == 2
    assert not trace.sessions[0].inductor_ran
    main = trace.main
    assert main.graph_count == explained["graph_count"] == 2
    assert main.graph_break_count == explained["graph_break_count"] == 1
    assert main.break_reasons == (break_headline(explained["break_reasons"][0]),)
    assert main.break_reasons[0].startswith("Unsupported Tensor.item() call")
    (brk,) = main.graph_breaks
    assert (brk.compile_id, brk.location) == ("0/0", "/work/steering/tools/torch_probe.py:42")
    # The print() break sits in a frame that made no graph: logged, but it split nothing.
    (skipped,) = main.skipped_breaks
    assert skipped.reason == "Failed to trace builtin operator"
    assert [f.compile_id for f in main.frames] == ["0/0", "1/0", "2/0"]
    assert trace.graph_by_compile_id == {"0/0": "0_inference", "2/0": "1_inference"}
    assert main.guard_count == 11 + 10 + 10


def test_recompile_reason_and_compile_ids(facts):
    trace = facts["compile_recompile"]
    expected = "0/0: tensor 'x' size mismatch at index 0. expected 8192, actual 4096"
    assert trace.main.recompile_reasons == (expected,)
    metrics = [m["recompile_reason"] for m in probe("compile_recompile")["compilation_metrics"]]
    assert expected in metrics
    assert trace.graph_by_compile_id == {"0/0": "0_inference", "0/1": "1_inference"}
    assert trace.torch_version == "2.11.0+cu130"
    graphs = read_graphs(case("compile_recompile") / "inductor", trace)
    assert graphs[1].compile_id == "0/1"
    # The recompile is dynamic in m: its output shape is symbolic, so its bytes are unknown.
    assert graph_clusters(graphs[1])[1].output_shape == "bf16[s77, 8192]"
    assert graph_clusters(graphs[1])[1].output_bytes == 0


def test_compile_time_breakdown_matches_the_metrics(facts):
    """Chromium phases of the log against the probe's get_compilation_metrics() numbers."""
    trace = facts["compile_default"]
    (metric, _) = probe("compile_default")["compilation_metrics"]
    times = trace.main.times
    assert times.source == "chromium_events"
    assert times.total_s == pytest.approx(float(metric["entire_frame_compile_time_s"]), abs=1e-3)
    assert times.kernel_compile_s == pytest.approx(
        int(metric["triton_compile_time_us"]) * 1e-6, abs=1e-3
    )
    assert times.inductor_s + times.kernel_compile_s == pytest.approx(
        float(metric["inductor_compile_time_s"]), abs=1e-3
    )
    assert times.autotune_s == pytest.approx(0.0632, abs=1e-3)
    assert 0 < times.dynamo_tracing_s < times.aot_s < times.inductor_s < times.total_s
    assert trace.main.guard_count == int(metric["guard_count"]) == 12


def test_compile_times_fall_back_to_metrics_without_chromium_events(facts):
    frames = [replace(f, phases_s={}) for f in facts["compile_default"].main.frames]
    times = compile_times(frames)
    assert times.source == "compilation_metrics"
    assert times.total_s == pytest.approx(2.774325)
    assert times.kernel_compile_s == pytest.approx(0.393665)
    assert times.inductor_s == pytest.approx(2.058789 - 0.393665)
    assert times.autotune_s == pytest.approx(0.063231)  # the runtime autotune entry


def test_graphs_rebuilt_from_the_trace_log_alone(facts):
    trace = facts["compile_recompile"]
    from_log = graphs_from_trace(trace)
    from_dir = read_graphs(case("compile_recompile") / "inductor", trace)
    assert [g.key for g in from_log] == ["0_inference", "1_inference"]
    assert clusters_by_graph(from_log) == clusters_by_graph(from_dir)


def test_post_grad_graph_nodes_and_shapes(facts):
    frame = facts["compile_graph_break"].main.frame("0/0")
    fx = parse_fx_graph(frame.artifacts["inductor_post_grad_graph"])
    assert [n.name for n in fx.inputs] == ["arg0_1", "arg1_1", "arg2_1"]
    addmm, convert, mean = fx.nodes
    assert (addmm.target, addmm.shape, addmm.location) == (
        "aten.addmm.default",
        "bf16[8192, 8192]",
        None,
    )
    assert addmm.args == ("arg2_1", "arg0_1", "arg1_1")
    assert (mean.shape, mean.location) == ("f32[]", "/work/steering/tools/torch_probe.py:42")
    assert convert.args == ("addmm_default",)
    assert fx.outputs == ("mean", "addmm_default")
    assert shape_bytes(addmm.shape) == 8192 * 8192 * 2 and shape_bytes(mean.shape) == 4


def test_bad_inputs_name_the_file(tmp_path):
    with pytest.raises(ArtifactError, match=r"no output_code\.py"):
        read_graph_dir(tmp_path)
    not_a_log = tmp_path / "x.log"
    not_a_log.write_text("hello\nworld\n")
    with pytest.raises(ArtifactError, match=r"x\.log: no TORCH_TRACE records"):
        read_trace_records(not_a_log)
    broken = tmp_path / "broken.log"
    broken.write_text('V1130 10:10:50.224000 446 torch/x.py:1] {"dynamo_start": \n')
    with pytest.raises(ArtifactError, match=r"broken\.log:1: record is not JSON"):
        read_trace_records(broken)
    folder = tmp_path / "model__0_inference_0.0"
    folder.mkdir()
    (folder / "output_code.py").write_text("# AOT ID: ['0_inference']\n")
    (folder / "inductor_provenance_tracking_node_mappings.json").write_text('{"preToPost": 3}')
    with pytest.raises(ArtifactError, match=r"mappings\.json: 'preToPost' must map names to lists"):
        read_graph_dir(folder)
    (folder / "output_code.py").write_text("k = async_compile.triton('k', '''\nbody\n")
    with pytest.raises(ArtifactError, match=r"output_code\.py:1: kernel k has no end"):
        read_graph_dir(folder)


def test_the_same_code_replayed_as_a_cuda_graph_is_another_program():
    """reduce-overhead runs Inductor's wrapper as a CUDA graph, with input copies before each
    replay: the timeline differs though the generated code does not, so the fingerprint
    (which decides "same program, any difference is noise") must tell the two apart."""
    from harness.frontends.torch.inductor.captured import fingerprint

    graphs = read_graphs(case("compile_default") / "inductor")
    plain, graphed = fingerprint(graphs), fingerprint(graphs, ("cudagraphs",))
    assert plain is not None and graphed is not None
    assert plain.code == graphed.code and plain.graph == graphed.graph
    assert plain.launches != graphed.launches and plain.digest != graphed.digest
    assert fingerprint(graphs) == plain  # and it is deterministic
