"""One real torch.compile on the CPU, read back through the torch row's libraries.

Skipped when torch is not importable. The session fixture compiles
`F.gelu(x @ w + b, approximate="tanh")` once (x[8,16], w[16,32]; ~12 s warm, up to ~55 s
cold on 2 cores) inside `torch_capture_env`, profiles 3 steps with ProfilerStep markers,
calls again with m halved (a recompile), and finally runs explain() on a function with a
print() inside. explain() resets Dynamo, so it runs last. The tests only read the results.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, harness_env

from harness.capture import torch_env
from harness.inductor.artifacts import InductorGraph, find_graph_dirs, read_graphs
from harness.inductor.clusters import clusters_by_graph, graph_clusters, reverse_map
from harness.inductor.trace_log import TorchTraceFacts, read_trace_log
from harness.match.torch_match import match_torch_events
from harness.profile.torch_trace import TorchTrace
from harness.profile.torch_trace import read_torch_trace as read_profile

torch = pytest.importorskip("torch")
F = torch.nn.functional


def gelu_linear(x: Any, w: Any, b: Any) -> Any:
    return F.gelu(x @ w + b, approximate="tanh")


GELU_LINE = gelu_linear.__code__.co_firstlineno + 1


def with_print(x: Any) -> Any:
    y = torch.relu(x)
    print("between graphs")
    return y * 2


@dataclass(frozen=True)
class CpuRun:
    variant: Path
    state: torch_env.TorchCaptureState
    compile_s: float
    profile: TorchTrace
    metrics: Any
    explained: Any
    provenance: Any
    after_exit: tuple[Any, ...]


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> CpuRun:
    variant = tmp_path_factory.mktemp("torch_compile_cpu")
    profiler = torch.profiler
    torch._dynamo.reset()
    with torch_env.torch_capture_env(variant) as state:
        x, w, b = torch.randn(8, 16), torch.randn(16, 32), torch.randn(32)
        fn = torch.compile(gelu_linear)
        start = time.perf_counter()
        fn(x, w, b)
        compile_s = time.perf_counter() - start
        schedule = profiler.schedule(wait=0, warmup=1, active=3, repeat=1)
        with profiler.profile(
            activities=[profiler.ProfilerActivity.CPU], schedule=schedule
        ) as prof:
            for _ in range(4):
                fn(x, w, b)
                prof.step()
        prof.export_chrome_trace(str(variant / "profile_trace.json"))
        fn(x[:4], w, b)  # new shape: a recompile
        metrics = torch_env.compilation_metrics()
        provenance = torch_env.provenance_setting()
        explained = torch_env.explain(with_print, x)
    config = torch._inductor.config
    return CpuRun(
        variant=variant,
        state=state,
        compile_s=compile_s,
        profile=read_profile(variant / "profile_trace.json", steps=3),
        metrics=metrics,
        explained=explained,
        provenance=provenance,
        after_exit=(config.force_disable_caches, config.trace.debug_dir),
    )


@pytest.fixture(scope="session")
def facts(cpu_run: CpuRun) -> TorchTraceFacts:
    return read_trace_log(cpu_run.state.dirs.trace)


@pytest.fixture(scope="session")
def graphs(cpu_run: CpuRun, facts: TorchTraceFacts) -> tuple[InductorGraph, ...]:
    return read_graphs(cpu_run.state.dirs.debug, facts)


def test_artifacts_are_written_into_the_variant_folder(cpu_run: CpuRun, graphs):
    dirs = cpu_run.state.dirs
    assert cpu_run.state.trace_redirected
    assert cpu_run.state.unavailable == ()
    assert [p.name for p in find_graph_dirs(dirs.debug)] == [
        "model__0_inference_0.0",
        "model__1_inference_1.1",
    ]
    first = find_graph_dirs(dirs.debug)[0]
    code = (first / "output_code.py").read_text()
    assert "cpp_fused_" in code
    if not isinstance(cpu_run.provenance, torch_env.NotAvailable):
        assert (first / "inductor_provenance_tracking_node_mappings.json").is_file()
        assert graphs[0].provenance is not None
    assert list(dirs.trace.glob("*.log")), "TORCH_TRACE wrote no log into the variant folder"
    # trace.enabled makes Dynamo log too; its debug root was moved into the variant folder.
    assert "torch._dynamo.config.debug_dir_root" in {a.path for a in cpu_run.state.applied}
    assert list(dirs.debug.rglob("torchdynamo/debug.log"))
    # Leaving the block restored the live config.
    assert cpu_run.after_exit == (False, None)


def test_clusters_of_the_cpu_graph(graphs):
    first = graphs[0]
    assert (first.key, first.compile_id, first.device) == ("0_inference", "0/0", "cpu")
    clusters = graph_clusters(first)
    kinds = {c.kind for c in clusters}
    assert {"cpp", "library"} <= kinds
    cpp = next(c for c in clusters if c.kind == "cpp")
    assert cpp.name.startswith("cpp_fused_")
    assert "tanh (aten.tanh.default)" in cpp.source_ops
    assert cpp.source_locations == (f"{__file__}:{GELU_LINE}",)
    assert cpp.output_shape == "f32[8, 32]" and cpp.output_bytes == 8 * 32 * 4
    rmap = reverse_map(first, clusters)
    assert all(rmap.values()), f"FX nodes held by no cluster: {rmap}"


def test_profile_of_three_steps_is_fully_attributed(cpu_run: CpuRun, facts, graphs):
    trace = cpu_run.profile
    assert trace.device_kind == "cpu"
    assert [m.step for m in trace.markers] == [1, 2, 3]
    report = match_torch_events(
        trace, clusters_by_graph(graphs), graph_by_compile_id=facts.graph_by_compile_id
    )
    assert report.marked_steps and report.steps == 3
    assert report.matched_fraction == 1.0, [a.reason for a in report.unmatched]
    # Each step runs the extern GEMM and the fused C++ GELU kernel, in graph 0_inference.
    assert report.kernels_per_step == 2
    assert {a.rule for a in report.attributions} == {"extern_call", "inductor_kernel"}
    assert {a.module for a in report.attributions} == {"0_inference"}
    assert len(report.device_time_by_step_s) == 3
    assert report.notes == ()


def test_explain_records_the_print_graph_break(cpu_run: CpuRun, facts):
    explained = cpu_run.explained
    assert isinstance(explained, torch_env.ExplainFacts), str(explained)
    assert explained.graph_break_count >= 1
    assert explained.graph_count >= 2
    assert explained.break_locations[0] == f"{__file__}:{with_print.__code__.co_firstlineno + 2}"
    # explain() logged its own Dynamo session; the compile session stays the main one.
    explain_session = facts.sessions[-1]
    assert not explain_session.inductor_ran
    assert explain_session.graph_break_count == explained.graph_break_count
    assert facts.main is facts.sessions[0]


def test_recompile_reason_recorded(cpu_run: CpuRun, facts):
    expected = "tensor 'x' size mismatch at index 0. expected 8, actual 4"
    reasons = torch_env.recompile_reasons(cpu_run.metrics)
    assert any(expected in r for r in reasons), reasons
    assert any(expected in r for r in facts.main.recompile_reasons)
    assert facts.graph_by_compile_id == {"0/0": "0_inference", "0/1": "1_inference"}
    compiles = [m.compile_id for m in cpu_run.metrics if not m.empty]
    assert compiles[:2] == ["0/0", "0/1"]


def test_compile_time_breakdown(cpu_run: CpuRun, facts):
    first = facts.main.frame("0/0")
    assert first is not None and first.graph_emitted and first.guard_count
    times = first.times
    assert times.total_s is not None and 0 < times.total_s <= cpu_run.compile_s
    # On the CPU the kernel compile is the C++ compiler's.
    assert times.kernel_compile_s and times.kernel_compile_s > 0
    assert times.inductor_s and times.inductor_s > 0
    assert facts.torch_version == torch.__version__


def test_feature_detection(cpu_run: CpuRun):
    setting = cpu_run.provenance
    assert isinstance(setting, torch_env.ConfigSetting)
    assert setting.path in {
        f"torch._inductor.config.{g}.{n}" for g, n, _ in torch_env.PROVENANCE_CANDIDATES
    }
    report = torch_env.feature_report()
    assert report["torch_version"] == torch.__version__
    # CompileProfiler is gone from recent torch: reported, not raised.
    assert report["compile_profiler"].startswith(("not available", "torch."))
    assert isinstance(torch_env.compile_times(), str)


FRESH_WORKER = """
import json, sys
from harness.capture.torch_env import torch_capture_env
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


def test_fresh_worker_gets_everything_from_the_environment(tmp_path: Path):
    """The capture worker imports torch inside the block: the environment alone must do."""
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
    assert seen["trace_dir"] == str(torch_env.capture_dirs(tmp_path).trace)
