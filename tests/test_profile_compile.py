"""Specification of the compile-pause breakdown by XLA pipeline and pass (harness.profile.compile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CapturedProfiles
from fixture_root import fixtures_root

from harness.profile.compile import compile_breakdown
from harness.profile.events import ProfileError, find_xplane

MODULE = "jit_gelu_linear"
FIXTURES = fixtures_root() / "h200-jax0.11.2"


def test_first_call_profile_shows_the_cpu_compile_and_its_pipelines(live: CapturedProfiles) -> None:
    b = compile_breakdown(find_xplane(live.folder("first_call")), MODULE)
    assert b.compile_event == "PjRtCpuClient::Compile"
    assert b.total_compile_s > 0
    names = {p.name for p in b.pipelines}
    assert {"HLO passes through layout assignment", "HLO passes after layout assignment"} <= names
    assert "simplification [fixed-point wrapper]" in names


def test_passes_are_disjoint_and_fit_inside_the_compile(live: CapturedProfiles) -> None:
    b = compile_breakdown(find_xplane(live.folder("first_call")), MODULE)
    pass_names = {p.name for p in b.passes}
    assert {"algsimp", "dce", "layout-assignment"} <= pass_names
    assert not pass_names & {p.name for p in b.pipelines}
    assert 0 < b.passes_total_s <= b.total_compile_s
    assert all(0 <= p.self_s <= p.total_s for p in b.passes)
    top = b.top_passes(3)
    assert len(top) == 3 and top[0].total_s >= top[-1].total_s


def test_compile_total_is_the_hlo_pipelines_plus_backend_and_fits_in_jax_compile(
    live: CapturedProfiles,
) -> None:
    b = compile_breakdown(find_xplane(live.folder("first_call")), MODULE)
    assert sum(t.total_s for t in b.top_level) <= b.total_compile_s
    assert "CpuCompiler::RunBackend" in {t.name for t in b.top_level}
    jax_side = {t.name: t.total_s for t in b.jax_events}
    assert jax_side["backend_compile_and_load"] >= b.total_compile_s
    assert jax_side["lower_sharding_computation"] > 0
    assert b.autotuning_s == 0.0  # the CPU backend does not autotune


def test_recompile_profile_compiles_again(live: CapturedProfiles) -> None:
    b = compile_breakdown(find_xplane(live.folder("recompile")), MODULE)
    assert b.total_compile_s > 0 and b.passes


def test_steady_profile_has_no_compile_and_says_so(live: CapturedProfiles) -> None:
    b = compile_breakdown(find_xplane(live.folder("steady")), MODULE)
    assert b.total_compile_s == 0.0 and b.passes == ()
    assert "no XLA compile event" in b.notes[0]


def test_other_module_name_selects_nothing(live: CapturedProfiles) -> None:
    b = compile_breakdown(find_xplane(live.folder("first_call")), "jit_something_else")
    assert b.compile_event is None and b.total_compile_s == 0.0


def test_breakdown_serializes_to_json(live: CapturedProfiles) -> None:
    data = json.loads(
        json.dumps(compile_breakdown(find_xplane(live.folder("first_call")), MODULE).to_json())
    )
    assert data["module"] == MODULE and data["top_passes"]


def test_gpu_fixture_profiles_hold_no_compile() -> None:
    path = FIXTURES / "jit_bf16_tanh_large" / "profile.xplane.pb"
    if not path.is_file():
        pytest.skip(f"H200 fixture absent: {path}")
    assert compile_breakdown(path).compile_event is None  # steady-state only


def test_corrupt_profile_raises_profile_error(tmp_path: Path, live: CapturedProfiles) -> None:
    data = find_xplane(live.folder("first_call")).read_bytes()
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(ProfileError):
        compile_breakdown(bad, MODULE)


def test_a_later_capture_in_the_same_worker_still_records_a_compile(cpu_run: Path) -> None:
    # xla_flax_nnx is captured after xla by the same worker process on the CPU; it compiles the
    # same GEMM and GELU again, and its first-call profile must still show that compile.
    folder = cpu_run / "variants" / "xla_flax_nnx" / "profile" / "first_call"
    b = compile_breakdown(find_xplane(folder), MODULE)
    assert b.total_compile_s > 0, b.notes
