"""Specification of the kernel table read from XSpace profiles (harness.profile.events)."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import CapturedProfiles
from fixture_root import fixtures_root

from harness.profile.events import (
    DeviceEvent,
    ProfileError,
    StepMarker,
    assign_step,
    events_from_json,
    events_to_json,
    find_xplane,
    host_launch_times,
    load_profile,
    parse_kernel_details,
    read_step_markers,
)
from harness.profile.reader import read_device_events

FIXTURES = fixtures_root() / "h200-jax0.11.2"
FIXTURE_STEPS = 3  # README: "Profiles cover 3 steady-state steps"


def fixture_profile(variant: str) -> Path:
    path = FIXTURES / variant / "profile.xplane.pb"
    if not path.is_file():
        pytest.skip(f"H200 fixture absent: {path}")
    return path


def probe(variant: str) -> dict:
    return json.loads((FIXTURES / variant / "probe.json").read_text())


# --- GPU fixtures ------------------------------------------------------------------------


def test_every_gpu_event_the_probe_counted_becomes_a_row() -> None:
    for variant in ("jit_bf16_tanh_large", "jit_bf16_tanh_large_nofusion", "eager_bf16_tanh_large"):
        rows = read_device_events(fixture_profile(variant), steps=FIXTURE_STEPS)
        assert len(rows) == probe(variant)["gpu_event_count"], variant
        assert {r.device for r in rows} == {"/device:GPU:0"}


def test_fixture_rows_have_no_step_because_the_probe_wrote_no_markers() -> None:
    path = fixture_profile("jit_bf16_tanh_large")
    assert read_step_markers(load_profile(path)) == ()
    assert {r.step for r in read_device_events(path, steps=FIXTURE_STEPS)} == {None}


def test_default_variant_rows_carry_module_op_and_kernel_details() -> None:
    rows = read_device_events(fixture_profile("jit_bf16_tanh_large"))
    assert Counter(r.kind for r in rows) == {"kernel": 6, "memset": 3}
    gemm = next(r for r in rows if r.name.startswith("nvjet_"))
    assert (gemm.hlo_module, gemm.hlo_op, gemm.program_id) == (
        "jit_gelu_linear",
        "cublas-lt-matmul.1",
        5970,
    )
    # kernel_details: "regs:168 ... grid:2,66,1 block:384,1,1 occ_pct:18.75"
    assert (gemm.registers, gemm.grid, gemm.block, gemm.occupancy_pct) == (
        168,
        (2, 66, 1),
        (384, 1, 1),
        18.75,
    )
    memset = next(r for r in rows if r.kind == "memset")
    assert memset.hlo_op == "cublas-lt-matmul.1"
    assert memset.bytes == 4  # Memset_details "num_bytes:4"
    assert memset.grid is None and memset.registers is None
    assert [r.start_ns for r in rows] == sorted(r.start_ns for r in rows)


def test_eager_memcpys_are_h2d_with_sizes_from_memcpy_details() -> None:
    rows = read_device_events(fixture_profile("eager_bf16_tanh_large"))
    copies = [r for r in rows if r.kind == "memcpy"]
    assert len(copies) == 12
    assert {r.direction for r in copies} == {"H2D"}
    assert {r.stream for r in copies} == {"Stream #15(MemcpyH2D)"}
    assert Counter(r.bytes for r in copies) == {4: 9, 2: 3}
    assert all(r.hlo_module is None for r in copies)  # scalar uploads outside any program
    assert {r.hlo_module for r in rows if r.kind == "kernel"} >= {"jit_tanh", "jit_add"}


def test_command_buffer_events_all_carry_the_command_buffer_op() -> None:
    rows = read_device_events(fixture_profile("jit_bf16_tanh_large_nofusion"))
    assert {r.hlo_op for r in rows} == {"command_buffer_1"}
    assert "wrapped_tanh" in {r.name for r in rows}


def test_kernel_details_parser_tolerates_missing_and_malformed_fields() -> None:
    assert parse_kernel_details(None).grid is None
    details = parse_kernel_details("regs:x grid:1,2 block:128,1,1 occ_pct:100")
    assert (details.registers, details.grid, details.block, details.occupancy_pct) == (
        None,
        None,
        (128, 1, 1),
        100.0,
    )


def test_rows_survive_a_json_round_trip() -> None:
    rows = read_device_events(fixture_profile("jit_bf16_tanh_large"))
    text = json.dumps(events_to_json(rows))
    assert events_from_json(json.loads(text)) == rows


# --- live CPU profiles (jax CPU, our capture convention) ---------------------------------


def test_find_xplane_resolves_the_folder_jax_profiler_trace_writes(live: CapturedProfiles) -> None:
    path = find_xplane(live.folder("steady"))
    assert path.name.endswith(".xplane.pb")
    assert path.parent.parent.name == "profile" and path.parents[2].name == "plugins"


def test_step_trace_annotation_shows_up_as_a_named_host_event_with_step_num(
    live: CapturedProfiles,
) -> None:
    markers = read_step_markers(load_profile(find_xplane(live.folder("steady"))))
    assert [(m.name, m.step) for m in markers] == [("step", i) for i in range(live.steps)]
    assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(markers))
    first = read_step_markers(load_profile(find_xplane(live.folder("first_call"))))
    assert [(m.name, m.step) for m in first] == [("first_call", 0)]


def test_cpu_thunks_become_rows_assigned_to_the_step_that_ran_them(live: CapturedProfiles) -> None:
    rows = read_device_events(find_xplane(live.folder("steady")), steps=live.steps)
    assert rows, "the CPU thunk executor emits one event per thunk"
    assert {r.kind for r in rows} == {"host_thunk"}
    assert {r.hlo_module for r in rows} == {"jit_gelu_linear"}
    assert not any(r.name.startswith("end: ") for r in rows)
    by_step = Counter(r.step for r in rows)
    assert set(by_step) == set(range(live.steps))
    assert len(set(by_step.values())) == 1, f"each step runs the same thunks: {by_step}"
    markers = {
        m.step: m for m in read_step_markers(load_profile(find_xplane(live.folder("steady"))))
    }
    for row in rows:
        assert markers[row.step].start_ns <= row.start_ns < markers[row.step].end_ns


def test_expected_step_count_that_disagrees_with_the_markers_is_an_error(
    live: CapturedProfiles,
) -> None:
    with pytest.raises(ProfileError, match="expected 5 marked steps"):
        read_device_events(find_xplane(live.folder("steady")), steps=5)


# --- bad input ----------------------------------------------------------------------------


def test_missing_file_and_empty_folder_raise_profile_error_naming_the_path(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope.xplane.pb"
    with pytest.raises(ProfileError, match=re.escape(str(missing))):
        read_device_events(missing)
    with pytest.raises(ProfileError, match=r"no \*\.xplane\.pb"):
        find_xplane(tmp_path)


def test_truncated_profile_raises_profile_error(tmp_path: Path) -> None:
    data = fixture_profile("jit_bf16_tanh_large").read_bytes()
    for cut in (1000, len(data) // 2, len(data) - 7):
        bad = tmp_path / f"cut{cut}.xplane.pb"
        bad.write_bytes(data[:cut])
        with pytest.raises(ProfileError, match=re.escape(str(bad))):
            read_device_events(bad)


def test_mutated_profiles_give_rows_or_profile_error_never_a_crash(tmp_path: Path) -> None:
    data = fixture_profile("jit_bf16_tanh_large").read_bytes()
    rng = random.Random(0)
    outcomes = Counter()
    for trial in range(40):
        mutated = bytearray(data)
        for _ in range(rng.choice((1, 5, 50))):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        bad = tmp_path / f"mut{trial}.xplane.pb"
        bad.write_bytes(bytes(mutated))
        try:
            rows = read_device_events(bad)
        except ProfileError as err:
            assert str(bad) in str(err)
            outcomes["error"] += 1
        else:
            assert all(isinstance(r, DeviceEvent) for r in rows)
            outcomes["rows"] += 1
    assert outcomes["error"] > 0, f"corruption must be noticed sometimes: {outcomes}"
    assert sum(outcomes.values()) == 40


def test_profile_without_device_plane_or_thunks_is_an_empty_table(tmp_path: Path) -> None:
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")  # a valid, empty XSpace
    assert read_device_events(empty) == ()


def test_gpu_kernels_go_to_the_step_whose_host_window_launched_them() -> None:
    """Rule 1 of events.py on real H200 data: steps are the probe's 3 host Execute calls."""
    path = fixture_profile("jit_bf16_tanh_large")
    profile = load_profile(path)
    calls = [
        e
        for plane in profile.planes
        if plane.name == "/host:CPU"
        for line in plane.lines
        for e in line.events
        if e.name.startswith("CommonPjRtLoadedExecutable::Execute (")
    ]
    windows = tuple(
        StepMarker("step", i, float(e.start_ns), float(e.start_ns + e.duration_ns))
        for i, e in enumerate(sorted(calls, key=lambda e: e.start_ns))
    )
    assert len(windows) == FIXTURE_STEPS
    rows = read_device_events(path)
    launches = host_launch_times(profile)
    steps = [assign_step(r, windows, launches) for r in rows]
    assert Counter(steps) == {0: 3, 1: 3, 2: 3}
    # the GPU runs behind the host: by device time alone most kernels fall outside their window
    late = [r for r in rows if not any(w.start_ns <= r.start_ns < w.end_ns for w in windows)]
    assert late
