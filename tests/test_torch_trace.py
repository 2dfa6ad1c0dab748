"""torch.profiler Chrome traces from the H200 torch 2.11 fixtures, read and attributed.

No torch needed. Each compile case's `profile_trace.json.gz` covers 3 steps without
ProfilerStep markers, so the step count is given, as for the XLA fixtures.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixture_root import fixtures_root

from harness.frontends.torch.inductor.artifacts import read_graphs
from harness.frontends.torch.inductor.clusters import clusters_by_graph
from harness.frontends.torch.inductor.trace_log import read_trace_log
from harness.frontends.torch.match import eager_clusters, match_torch_events
from harness.frontends.torch.trace import read_torch_trace as read_profile
from harness.frontends.torch.trace import torch_events_to_json
from harness.match.match import is_library_kernel, kernels_document
from harness.profile.events import ProfileError

TORCH = fixtures_root() / "h200-torch2.11"
GEMM = "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"


def path(*parts: str) -> Path:
    p = TORCH.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"H200 torch fixture absent: {p}")
    return p


def compiled(case: str, linked: bool = True):
    """(trace rows, clusters by graph, compile id -> graph) of one compile case."""
    facts = read_trace_log(path("compile", case, "torch_trace.log"))
    graphs = read_graphs(path("compile", case, "inductor"), facts if linked else None)
    rows = read_profile(path("compile", case, "profile_trace.json.gz"))
    return rows, clusters_by_graph(graphs), facts.graph_by_compile_id if linked else None


def test_rows_carry_the_launching_cpu_op():
    trace = read_profile(path("compile", "compile_default", "profile_trace.json.gz"))
    assert trace.device_kind == "cuda"
    assert trace.markers == ()
    assert [(r.event.kind, r.cpu_op) for r in trace.events[:3]] == [
        ("memset", "aten::mm"),
        ("kernel", "aten::mm"),
        ("kernel", "triton_poi_fused_add_gelu_0"),
    ]
    memset, gemm, fused = trace.events[:3]
    assert (memset.event.bytes, memset.launch_api) == (4, "cudaMemsetAsync")
    assert (gemm.event.name, gemm.launch_api, gemm.event.grid, gemm.event.block) == (
        GEMM,
        "cuLaunchKernelEx",
        (2, 66, 1),
        (384, 1, 1),
    )
    assert gemm.cpu_op_stack == (
        "Torch-Compiled Region: 0/0",
        "## Call CompiledFxGraph None ##",
        "aten::mm",
    )
    assert (gemm.compile_region, gemm.graph_op, gemm.graph_op_ordinal) == ("0/0", "aten::mm", 0)
    assert (fused.event.registers, fused.event.occupancy_pct) == (25, 100.0)
    assert [r.graph_call for r in trace.events] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert all(r.event.hlo_module is None and r.event.hlo_op is None for r in trace.events)
    assert trace.launcher_by_correlation[17] == "aten::mm"
    row = torch_events_to_json(trace.events[:1])[0]
    assert (row["cpu_op"], row["correlation_id"], row["device"]) == (
        "aten::mm",
        16,
        "/device:GPU:0",
    )


def test_compile_default_is_fully_attributed():
    """nvjet through External id -> aten::mm -> extern_kernels.mm; Triton by name."""
    rows, clusters, by_compile = compiled("compile_default")
    report = match_torch_events(rows, clusters, steps=3, graph_by_compile_id=by_compile)
    assert report.matched_fraction == 1.0
    assert (report.kernels_per_step, report.memsets_per_step, report.device_ops_per_step) == (
        2,
        1,
        3,
    )
    rules = {a.event.name: (a.rule, a.cluster) for a in report.attributions}
    assert rules[GEMM] == ("extern_call", "extern_kernels.mm:1")
    assert rules["Memset (Device)"] == ("memset_for_gemm", "extern_kernels.mm:1")
    assert rules["triton_poi_fused_add_gelu_0"] == (
        "inductor_kernel",
        "triton_poi_fused_add_gelu_0",
    )
    assert is_library_kernel(GEMM)
    assert report.launches_per_cluster == {
        "0_inference:extern_kernels.mm:1": 2.0,
        "0_inference:triton_poi_fused_add_gelu_0": 1.0,
    }
    # The device is busy ~1.47 ms a step, less than the 1.562 ms median step: the host gap.
    wall = json.loads(path("probe.json").read_text())["compiled"]["median_step_s"]
    assert 1.4e-3 < report.device_time_per_step_s < wall
    assert report.host_gap_per_step_s(wall) > 0
    doc = kernels_document(report, variant="torch_compile")
    assert {r["cluster"] for r in doc["events"]} == {
        "extern_kernels.mm:1",
        "triton_poi_fused_add_gelu_0",
    }
    assert doc["match"]["matched_fraction"] == 1.0


def test_compile_default_matches_without_the_trace_log():
    """One graph: kernel names and the aten::mm launcher suffice, no compile-id map needed."""
    rows, clusters, _ = compiled("compile_default", linked=False)
    assert match_torch_events(rows, clusters, steps=3).matched_fraction == 1.0


def test_eager_trace_one_cluster_per_aten_op():
    trace = read_profile(path("compile", "eager", "profile_trace.json.gz"))
    report = match_torch_events(trace, {}, steps=3, mode="eager")
    assert report.matched_fraction == 1.0
    assert (report.kernels_per_step, report.device_ops_per_step) == (3, 4)
    assert report.launches_per_cluster == {
        "eager:aten::add": 1.0,
        "eager:aten::gelu": 1.0,
        "eager:aten::mm": 2.0,  # the memset and the nvjet GEMM
    }
    memset = next(a for a in report.attributions if a.event.kind == "memset")
    assert (memset.rule, memset.cluster, memset.primitive) == ("eager_memset", "aten::mm", "mm")
    assert [c.name for c in eager_clusters(trace)] == ["aten::mm", "aten::add", "aten::gelu"]
    # The same four device ops the probe listed for eager, by name.
    names = {e.event.name for e in trace.events}
    assert names == set(json.loads(path("probe.json").read_text())["eager"]["kernels"])


def test_graph_break_copy_is_eager_code_between_graphs():
    rows, clusters, by_compile = compiled("compile_graph_break")
    report = match_torch_events(rows, clusters, steps=3, graph_by_compile_id=by_compile)
    assert report.matched_fraction == 1.0
    assert report.kernels_per_step == 4  # addmm GEMM, two mean kernels, GELU
    (d2h,) = report.transfers_per_step
    assert (d2h.direction, d2h.count_per_step, d2h.sizes) == ("D2H", 1.0, (4,))
    copy = next(a for a in report.attributions if a.event.kind == "memcpy")
    assert (copy.rule, copy.module, copy.cluster) == (
        "outside_graph",
        "eager",
        "aten::_local_scalar_dense",
    )
    assert "graph break" in copy.reason
    gelu = next(a for a in report.attributions if a.event.name == "triton_poi_fused_gelu_0")
    assert gelu.module == "1_inference" and "compile 2/0" in gelu.reason


def test_recompile_kernels_need_the_compile_id_map():
    """Both graphs define triton_poi_fused_add_gelu_0 and extern_kernels.mm:1: without the
    TORCH_TRACE map every event is ambiguous, with it they go to the recompiled graph."""
    rows, clusters, by_compile = compiled("compile_recompile")
    blind = match_torch_events(rows, clusters, steps=3)
    assert blind.matched_fraction == 0.0
    assert {a.rule for a in blind.unmatched} == {"ambiguous_graph"}
    assert "graph_by_compile_id" in blind.unmatched[0].reason
    report = match_torch_events(rows, clusters, steps=3, graph_by_compile_id=by_compile)
    assert report.matched_fraction == 1.0
    assert {a.module for a in report.attributions} == {"1_inference"}
    assert not any("never appears" in n for n in report.notes)


def test_probe_compiled_trace_kernels():
    """The probe's own one-step trace: the same three device ops as probe.json lists."""
    trace = read_profile(path("compiled_trace.json.gz"))
    (graph,) = read_graphs(path("compile", "compile_default", "inductor"))
    report = match_torch_events(trace, clusters_by_graph([graph]), steps=1)
    assert report.matched_fraction == 1.0
    expected = json.loads(path("probe.json").read_text())["compiled"]["kernels"]
    assert [e.event.name for e in trace.events] == expected


def test_unreadable_traces_name_the_file(tmp_path):
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(ProfileError, match=r"trace\.json\.gz: not a readable torch profiler trace"):
        read_profile(bad)
    other = tmp_path / "other.json"
    other.write_text('{"events": []}')
    with pytest.raises(ProfileError, match=r"other\.json: no traceEvents list"):
        read_profile(other)
    with pytest.raises(ValueError, match="no step markers"):
        match_torch_events(read_profile(path("compile", "eager", "profile_trace.json.gz")), {})


def test_second_gemm_of_a_graph_goes_to_the_second_extern_call():
    """The n-th aten::mm under one graph call is the wrapper's n-th extern_kernels.mm.

    The fixture graph has one GEMM; a second extern call is added to its clusters and the
    real GEMM rows are relabelled as the graph call's second and third aten::mm.
    """
    rows, clusters, by_compile = compiled("compile_default")
    gemm, fused = clusters["0_inference"]
    second = replace(gemm, name="extern_kernels.mm:3")
    two = {"0_inference": (gemm, fused, second)}
    mm_rows = [r for r in rows.events if r.cpu_op == "aten::mm"]
    relabelled = [replace(r, graph_op_ordinal=1) for r in mm_rows[:2]]
    relabelled += [replace(r, graph_op_ordinal=2) for r in mm_rows[2:4]]
    report = match_torch_events(relabelled, two, steps=1, graph_by_compile_id=by_compile)
    assert [a.cluster for a in report.attributions[:2]] == ["extern_kernels.mm:3"] * 2
    assert [a.rule for a in report.attributions[2:]] == ["unknown_call"] * 2
    assert "only 2 cluster(s) launched as aten::mm" in report.attributions[2].reason


def test_a_cuda_graph_replay_is_attributed_to_its_extern_call_and_input_copies():
    """Under mode="reduce-overhead" the H200 trace (gelu_h200 run, torch 2.11) showed, per
    step, 7 `multi_tensor_apply_kernel` copies launched by aten::_foreach_copy_ inside the
    graph call, then the memset and nvjet GEMM launched by the graph call itself (no
    aten::mm: the CUDA graph replays them), then the Triton kernel. The fixture's compiled
    rows are relabelled so: the GEMM's launches lose their aten::mm, and the Triton row,
    renamed, becomes a copy."""
    rows, clusters, by_compile = compiled("compile_default")
    graph_call = next(r.cpu_op_stack[:-1] for r in rows.events if r.cpu_op == "aten::mm")
    copy_name = "void at::native::multi_tensor_apply_kernel<Copy<c10::BFloat16>>"
    relabelled = []
    for r in rows.events:
        if r.cpu_op == "aten::mm":  # the replay launches them, under the graph call alone
            r = replace(r, cpu_op=graph_call[-1], cpu_op_stack=graph_call, graph_op=None)
            r = replace(r, graph_op_ordinal=None)
        relabelled.append(r)
        if r.event.name == "triton_poi_fused_add_gelu_0":
            copy = replace(r.event, name=copy_name)
            relabelled.append(replace(r, event=copy, graph_op="aten::_foreach_copy_"))
    report = match_torch_events(relabelled, clusters, steps=3, graph_by_compile_id=by_compile)
    assert report.matched_fraction == 1.0
    rules = {a.event.name: (a.rule, a.cluster) for a in report.attributions}
    assert rules[GEMM] == ("graph_replay", "extern_kernels.mm:1")
    assert rules["Memset (Device)"] == ("graph_replay", "extern_kernels.mm:1")
    assert rules[copy_name] == ("cudagraph_input_copy", "cudagraph_input_copy")
    assert report.launches_per_cluster["0_inference:cudagraph_input_copy"] == 1.0
    # With two extern calls the replay cannot say which ran: unmatched, never guessed.
    gemm, fused = clusters["0_inference"]
    two = {"0_inference": (gemm, fused, replace(gemm, name="extern_kernels.mm:3"))}
    report = match_torch_events(relabelled, two, steps=3, graph_by_compile_id=by_compile)
    assert {a.rule for a in report.attributions if a.event.name == GEMM} == {"unknown_kernel"}
