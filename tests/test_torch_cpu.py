"""The torch row's libraries on a real torch.compile on the CPU: the session's tiny run.

Skipped when torch is not importable. Reads the artifacts the run's torch_compile and
torch_print variants wrote (conftest.torch_run: the session's only compile): Inductor's debug
folder, the TORCH_TRACE log, torch.profiler's trace and torch.json, and checks what the
readers, the cluster builder and the matcher make of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env, read_json

from harness.frontends.torch import env, expression
from harness.frontends.torch.inductor.artifacts import InductorGraph, find_graph_dirs, read_graphs
from harness.frontends.torch.inductor.clusters import clusters_by_graph, graph_clusters, reverse_map
from harness.frontends.torch.inductor.trace_log import TorchTraceFacts, read_trace_log
from harness.frontends.torch.match import match_torch_events
from harness.frontends.torch.trace import read_torch_trace

torch = pytest.importorskip("torch")

SOURCE = Path(expression.__file__).resolve()
PRINT = 'print("gelu_linear'


def line_of(text: str) -> int:
    lines = SOURCE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def compiled(torch_run: Path) -> Path:
    return torch_run / "variants" / "torch_compile"


@pytest.fixture(scope="module")
def facts(compiled: Path) -> TorchTraceFacts:
    return read_trace_log(env.capture_dirs(compiled).trace)


@pytest.fixture(scope="module")
def graphs(compiled: Path, facts: TorchTraceFacts) -> tuple[InductorGraph, ...]:
    return read_graphs(env.capture_dirs(compiled).debug, facts)


def test_artifacts_are_written_into_the_variant_folder(compiled: Path, graphs):
    dirs = env.capture_dirs(compiled)
    capture = read_json(compiled / "torch.json")["capture_env"]
    assert capture["trace_redirected"] and capture["unavailable"] == []
    # The first call's graph, then the new-shape recompile's.
    assert len(find_graph_dirs(dirs.debug)) == 2
    first = find_graph_dirs(dirs.debug)[0]
    assert "cpp_fused_" in (first / "output_code.py").read_text()
    assert (first / "inductor_provenance_tracking_node_mappings.json").is_file()
    assert graphs[0].provenance is not None
    assert list(dirs.trace.glob("*.log")), "TORCH_TRACE wrote no log into the variant folder"
    # trace.enabled makes Dynamo log too; its debug root was moved into the variant folder.
    assert "torch._dynamo.config.debug_dir_root" in {a["path"] for a in capture["applied"]}
    assert list(dirs.debug.rglob("torchdynamo/debug.log"))


def test_clusters_of_the_cpu_graph(compiled: Path, graphs):
    first_id = read_json(compiled / "torch.json")["compile_ids"]["first_call"][0]
    first = next(g for g in graphs if g.compile_id == first_id)
    assert first.device == "cpu" and first.key.endswith("_inference")
    clusters = graph_clusters(first)
    assert {c.kind for c in clusters} == {"cpp", "library"}
    cpp = next(c for c in clusters if c.kind == "cpp")
    assert cpp.name.startswith("cpp_fused_")
    assert "tanh (aten.tanh.default)" in cpp.source_ops
    assert f"{SOURCE}:{line_of('return F.gelu(h')}" in cpp.source_locations
    assert cpp.output_shape == "f32[16, 32]" and cpp.output_bytes == 16 * 32 * 4
    rmap = reverse_map(first, clusters)
    assert all(rmap.values()), f"FX nodes held by no cluster: {rmap}"


def test_profile_of_three_steps_is_fully_attributed(compiled: Path, facts, graphs):
    trace = read_torch_trace(compiled / "profile" / "steady" / "torch_trace.json", steps=3)
    assert trace.device_kind == "cpu"
    assert [m.step for m in trace.markers] == [1, 2, 3]
    first_id = read_json(compiled / "torch.json")["compile_ids"]["first_call"][0]
    mine = [g for g in graphs if g.compile_id == first_id]
    report = match_torch_events(
        trace, clusters_by_graph(mine), graph_by_compile_id=facts.graph_by_compile_id
    )
    assert report.marked_steps and report.steps == 3
    assert report.matched_fraction == 1.0, [a.reason for a in report.unmatched]
    # Each step runs the extern GEMM and the fused C++ GELU kernel of the first graph.
    assert report.kernels_per_step == 2
    assert {a.rule for a in report.attributions} == {"extern_call", "inductor_kernel"}
    assert {a.module for a in report.attributions} == {mine[0].key}
    assert len(report.device_time_by_step_s) == 3
    assert report.notes == ()


def test_explain_records_the_print_graph_break(torch_run: Path):
    explained = read_json(torch_run / "variants" / "torch_print" / "torch.json")["explain"]
    assert isinstance(explained, dict), explained
    assert explained["graph_break_count"] >= 1 and explained["graph_count"] >= 2
    assert explained["break_locations"][0] == f"{SOURCE}:{line_of(PRINT)}"
    # explain() ran outside the capture: the captured log holds only the variant's compiles.
    vdir = torch_run / "variants" / "torch_print"
    facts = read_trace_log(env.capture_dirs(vdir).trace)
    assert len(facts.sessions) == 1
    first = read_json(vdir / "torch.json")["compile_ids"]["first_call"]
    breaks = [b for f in facts.main.frames if f.compile_id in first for b in f.graph_breaks]
    assert [b.graph_emitted for b in breaks] == [True]


def test_recompile_reason_recorded(compiled: Path, facts):
    expected = "tensor 'x' size mismatch at index 0. expected 16, actual 8"
    recorded = read_json(compiled / "torch.json")
    reasons = [m["recompile_reason"] for m in recorded["metrics"] if m.get("recompile_reason")]
    assert any(expected in str(r) for r in reasons), reasons
    assert any(expected in r for r in facts.main.recompile_reasons)
    first, again = recorded["compile_ids"]["first_call"], recorded["compile_ids"]["recompile"]
    assert set(facts.graph_by_compile_id) == {*first, *again}


def test_compile_time_breakdown(compiled: Path, facts):
    recorded = read_json(compiled / "torch.json")
    first = facts.main.frame(recorded["compile_ids"]["first_call"][0])
    assert first is not None and first.graph_emitted and first.guard_count
    times = first.times
    assert times.total_s is not None and 0 < times.total_s <= recorded["first_call_s"]
    # On the CPU the kernel compile is the C++ compiler's.
    assert times.kernel_compile_s and times.kernel_compile_s > 0
    assert times.inductor_s and times.inductor_s > 0
    assert facts.torch_version == torch.__version__


def test_feature_detection(compiled: Path):
    report = read_json(compiled / "torch.json")["features"]
    assert report["torch_version"] == torch.__version__
    assert report["provenance"]["path"] in {
        f"torch._inductor.config.{g}.{n}" for g, n, _ in env.PROVENANCE_CANDIDATES
    }
    # CompileProfiler is gone from recent torch: reported, not raised.
    assert report["compile_profiler"].startswith(("not available", "torch."))


FRESH_WORKER = """
import json, sys
from harness.frontends.torch.env import torch_capture_env
with torch_capture_env(sys.argv[1]) as state:
    import torch
    import torch._inductor.config as c
    import torch._logging._internal as logs
    print(json.dumps({
        "note": list(state.notes),
        "trace_enabled": c.trace.enabled,
        "kernel_profile": c.cpp.enable_kernel_profile,
        "force_disable_caches": c.force_disable_caches,
        "provenance": c.trace.provenance_tracking_level,
        "trace_dir": logs.LOG_TRACE_HANDLER.root_dir,
    }))
"""


@pytest.mark.slow
def test_fresh_worker_gets_everything_from_the_environment(tmp_path: Path):
    """A process that imports torch inside the block: the environment alone must do."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_WORKER, str(tmp_path)],
        cwd=REPO,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["note"] == ["torch not imported yet: the environment is enough"]
    assert seen["trace_enabled"] and seen["kernel_profile"] and seen["force_disable_caches"]
    assert seen["provenance"] == 1
    assert seen["trace_dir"] == str(env.capture_dirs(tmp_path).trace)
