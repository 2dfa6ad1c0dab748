"""Specification of attributing device events to HLO fusion clusters (harness.match.match)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import CapturedProfiles
from fixture_root import fixtures_root

from harness.common import userfiles
from harness.hlo.clusters import Cluster, find_clusters
from harness.hlo.parser import parse_file, parse_module
from harness.match.match import (
    ClusterLike,
    match_events,
    primitive_of,
    union_busy_ns,
)
from harness.profile.events import DeviceEvent, find_xplane, load_profile, read_step_markers
from harness.profile.reader import read_device_events

FIXTURES = fixtures_root() / "h200-jax0.11.2"
FIXTURE_STEPS = 3  # README: "Profiles cover 3 steady-state steps"


def fixture_clusters(variant: str) -> dict[tuple[str, int], tuple[Cluster, ...]]:
    """Return the HLO stage's clusters of every optimized module in a fixture dump.

    Keyed (module name, program_id): the dump's `module_NNNN` number is the
    program_id the profile's events carry, and the dump holds two same-named
    modules (the steady one and the m/2 recompile).
    """
    dump = FIXTURES / variant / "dump"
    out = {}
    for path in dump.glob("module_*gpu_after_optimizations.txt"):
        number, name = re.match(r"module_(\d+)\.([\w.]+?)\.sm_", path.name).groups()
        out[(name, int(number))] = find_clusters(parse_file(path))
    return out


def fixture_events(variant: str) -> tuple[DeviceEvent, ...]:
    path = FIXTURES / variant / "profile.xplane.pb"
    if not path.is_file():
        pytest.skip(f"H200 fixture absent: {path}")
    return read_device_events(path, steps=FIXTURE_STEPS)


JIT_VARIANTS = (
    "jit_bf16_tanh_large",
    "jit_bf16_tanh_large_notriton",
    "jit_bf16_erf_large",
    "jit_bf16_tanh_large_nofusion",
    "jit_bf16_tanh_large_emitters",
)
# "device ops a step" column of the fixture README
README_DEVICE_OPS = {
    "jit_bf16_tanh_large": 3,
    "jit_bf16_tanh_large_notriton": 2,
    "jit_bf16_erf_large": 3,
    "jit_bf16_tanh_large_nofusion": 17,
    "jit_bf16_tanh_large_emitters": 2,
    "eager_bf16_tanh_large": 18,
    "matmul_only_bf16_large": 2,
}


@pytest.mark.parametrize("variant", JIT_VARIANTS)
def test_every_jit_fixture_event_is_attributed_to_a_cluster(variant: str) -> None:
    report = match_events(fixture_events(variant), fixture_clusters(variant), steps=FIXTURE_STEPS)
    assert report.unmatched == (), [a.reason for a in report.unmatched]
    assert report.matched_fraction == 1.0
    assert report.device_ops_per_step == README_DEVICE_OPS[variant]
    assert report.transfers_per_step == ()


def test_notriton_runs_one_memset_and_the_bias_gelu_gemm_per_step() -> None:
    variant = "jit_bf16_tanh_large_notriton"
    report = match_events(fixture_events(variant), fixture_clusters(variant), steps=FIXTURE_STEPS)
    assert (report.kernels_per_step, report.memsets_per_step) == (1.0, 1.0)
    gemm = [a for a in report.attributions if a.event.kind == "kernel"]
    assert {a.cluster for a in gemm} == {a.cluster for a in report.attributions}
    assert all("gelubias" in a.event.name for a in gemm)
    clusters = {c.name: c for cs in fixture_clusters(variant).values() for c in cs}
    assert {clusters[a.cluster].epilogue for a in gemm} == {"BIAS_GELU"}


def test_memset_before_a_gemm_is_attributed_to_that_gemm() -> None:
    variant = "jit_bf16_tanh_large"
    report = match_events(fixture_events(variant), fixture_clusters(variant), steps=FIXTURE_STEPS)
    memsets = [a for a in report.attributions if a.event.kind == "memset"]
    assert len(memsets) == FIXTURE_STEPS
    assert {(a.rule, a.cluster) for a in memsets} == {("memset_for_gemm", "cublas-lt-matmul.1")}
    assert report.launches_per_cluster == {
        "jit_gelu_linear:cublas-lt-matmul.1": 2.0,  # Memset + nvjet GEMM
        "jit_gelu_linear:loop_multiply_fusion": 1.0,
    }


def test_command_buffer_kernels_are_matched_by_instruction_name() -> None:
    variant = "jit_bf16_tanh_large_nofusion"
    report = match_events(fixture_events(variant), fixture_clusters(variant), steps=FIXTURE_STEPS)
    rules = {a.event.name: a.rule for a in report.attributions}
    assert rules["wrapped_tanh"] == "command_buffer_kernel"
    assert rules["wrapped_multiply_1"] in ("command_buffer_kernel", "command_buffer_reused_kernel")
    library = [a for a in report.attributions if a.event.name.startswith("nvjet_")]
    assert {(a.rule, a.cluster) for a in library} == {
        ("command_buffer_library", "cublas-lt-matmul.1")
    }
    assert report.kernels_per_step == 16


def test_eager_kernels_are_named_by_primitive_and_scalar_uploads_are_explained() -> None:
    variant = "eager_bf16_tanh_large"
    report = match_events(fixture_events(variant), {}, steps=FIXTURE_STEPS, mode="eager")
    assert report.device_ops_per_step == README_DEVICE_OPS[variant]
    assert report.kernels_per_step >= 3
    (h2d,) = report.transfers_per_step
    assert (h2d.direction, h2d.count_per_step) == ("H2D", 4.0)
    primitives = {a.primitive for a in report.attributions if a.matched}
    assert {"tanh", "integer_pow", "add", "multiply", "matmul"} <= primitives
    launches = [a for a in report.attributions if a.event.kind != "memcpy"]
    assert all("no HLO analysis" in a.reason for a in launches)
    uploads = [a for a in report.attributions if a.event.kind == "memcpy"]
    # Each scalar upload is a host argument of the primitive launched right after it.
    assert {a.rule for a in uploads} == {"eager_host_argument"}
    assert {a.primitive for a in uploads} <= {"multiply", "add"}
    assert report.matched_fraction == 1.0


def test_transfers_outside_any_program_stay_unmatched_in_jit_mode() -> None:
    report = match_events(fixture_events("eager_bf16_tanh_large"), {}, steps=FIXTURE_STEPS)
    memcpys = [a for a in report.unmatched if a.event.kind == "memcpy"]
    assert len(memcpys) == 4 * FIXTURE_STEPS
    assert all("outside any XLA program" in a.reason for a in memcpys)


def test_jit_mode_refuses_module_only_matches() -> None:
    report = match_events(fixture_events("eager_bf16_tanh_large"), {}, steps=FIXTURE_STEPS)
    assert report.matched_fraction == 0.0
    assert any("not among the analysed modules" in a.reason for a in report.unmatched)


def test_profile_of_another_program_is_reported_unmatched() -> None:
    clusters = fixture_clusters("jit_bf16_tanh_large")
    report = match_events(fixture_events("eager_bf16_tanh_large"), clusters, steps=FIXTURE_STEPS)
    assert report.matched_fraction == 0.0
    assert len(report.unmatched) == report.events_in_window == 54


def test_device_time_is_the_union_of_busy_intervals_per_step() -> None:
    variant = "jit_bf16_tanh_large"
    events = fixture_events(variant)
    report = match_events(events, fixture_clusters(variant), steps=FIXTURE_STEPS)
    # one stream: the union is the sum of durations less CUPTI's timestamp overlaps
    # (the GELU fusion starts 128 ns before the GEMM's recorded end in this fixture)
    summed = sum(e.duration_ns for e in events) * 1e-9 / FIXTURE_STEPS
    assert summed - 1e-6 < report.device_time_per_step_s < summed
    wall = json.loads((FIXTURES / variant / "probe.json").read_text())["median_step_s"]
    gap = report.host_gap_per_step_s(wall)
    assert 0 < gap < wall  # the GPU is busy most of a 1.76 ms step
    overlapping = (events[0], events[0])
    assert union_busy_ns(overlapping) == events[0].duration_ns


def test_unmarked_profile_needs_the_step_count() -> None:
    with pytest.raises(ValueError, match="no step markers"):
        match_events(fixture_events("jit_bf16_tanh_large"), {})


def test_empty_table_is_reported_not_crashed() -> None:
    report = match_events((), {})
    assert report.matched_fraction == 0.0
    assert "no device events in the steady window" in report.notes
    json.dumps(report.to_json())


def test_primitive_of_strips_the_jit_prefix() -> None:
    assert primitive_of("jit_integer_pow") == "integer_pow"


# --- live CPU -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_clusters(cpu_run) -> dict[str, tuple[ClusterLike, ...]]:
    ir = cpu_run / "variants" / "xla" / "ir"
    text = userfiles.read_text(ir / "40-hlo-after-optimizations.txt", userfiles.IR_TEXT)
    return {"jit_gelu_linear": find_clusters(parse_module(text))}


def test_live_cpu_steady_profile_is_fully_matched(
    live: CapturedProfiles, cpu_clusters: dict[str, tuple[ClusterLike, ...]]
) -> None:
    events = read_device_events(find_xplane(live.folder("steady")), steps=live.steps)
    report = match_events(events, cpu_clusters)
    assert report.marked_steps and report.steps == live.steps
    assert report.matched_fraction == 1.0, [a.reason for a in report.unmatched]
    assert report.kernels_per_step == len(cpu_clusters["jit_gelu_linear"])
    assert len(report.device_time_by_step_s) == live.steps
    markers = read_step_markers(load_profile(find_xplane(live.folder("steady"))))
    walls = [m.duration_s for m in markers if m.name == "step"]
    for busy, wall in zip(report.device_time_by_step_s, walls, strict=True):
        assert 0 < busy < wall
    data = json.loads(json.dumps(report.to_json()))
    assert data["matched_fraction"] == 1.0 and data["unmatched"] == []


def test_live_first_call_window_is_the_one_annotated_call(
    live: CapturedProfiles, cpu_clusters: dict[str, tuple[ClusterLike, ...]]
) -> None:
    events = read_device_events(find_xplane(live.folder("first_call")))
    report = match_events(events, cpu_clusters)
    assert report.steps == 1
    assert report.matched_fraction == 1.0


def test_a_reused_command_buffer_kernel_is_spread_over_its_identical_fusions() -> None:
    variant = "jit_bf16_tanh_large_nofusion"
    clusters = fixture_clusters(variant)
    report = match_events(fixture_events(variant), clusters, steps=FIXTURE_STEPS)
    # XLA launched `wrapped_multiply_1` five times a step for wrapped_multiply.1 to .5.
    reused = [a for a in report.attributions if a.rule == "command_buffer_reused_kernel"]
    assert {a.event.name for a in reused} == {"wrapped_multiply_1", "wrapped_broadcast"}
    launched = {name.split(":", 1)[1] for name in report.launches_per_cluster}
    every = {c.name for cs in clusters.values() for c in cs}
    assert launched == every  # each cluster of the program ran
    assert all(n == 1.0 for k, n in report.launches_per_cluster.items() if "wrapped_" in k)


def test_a_reused_kernel_under_control_flow_takes_no_turns_with_its_twins() -> None:
    """A kernel launched n times a step goes in turn to structurally identical fusions only
    where each runs once a step: not inside a loop body (its repeats are iterations) nor to a
    twin in a conditional's branch (the branch may never run)."""
    from dataclasses import dataclass

    from harness.match.match import reused_twins

    @dataclass(frozen=True)
    class Unit:
        name: str
        parent: str = ""
        kind: str = "kInput"
        output_shape: str = "s32[4]"
        member_opcodes: tuple[tuple[str, int], ...] = (("reduce", 1),)
        target: str | None = None
        epilogue: str | None = None
        source_ops: tuple[str, ...] = ()

    def twins(units: list[Unit], launched: str) -> list[str]:
        event = DeviceEvent(
            step=0, name=launched, kind="kernel", direction=None, bytes=None, hlo_module="m",
            hlo_op="command_buffer", program_id=None, correlation_id=None, device="0",
            stream="7", start_ns=0.0, duration_ns=1.0,
        )  # fmt: skip
        found = reused_twins(event, launched, {"m": units}, 9, {launched})
        return [c.name for c in found]

    loop, cond = Unit("while.1", kind="while"), Unit("cond.2", "while.1", kind="conditional")
    flat = [Unit("argmax"), Unit("argmax.3"), Unit("argmax.4")]
    assert twins(flat, "argmax") == ["argmax", "argmax.3", "argmax.4"]
    greedy, sampling = Unit("argmax", "cond.2"), Unit("argmax.3", "cond.2")
    assert twins([loop, cond, greedy, sampling], "argmax") == ["argmax"]
    assert twins([loop, Unit("argmax", "while.1"), Unit("argmax.3")], "argmax") == ["argmax"]
    assert twins([cond, Unit("argmax"), sampling], "argmax") == ["argmax"]
