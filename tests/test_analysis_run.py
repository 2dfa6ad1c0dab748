"""The analysis stage on a real tiny CPU run: clusters, kernels, compile passes, divergence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_summary

from harness.analyze import sections
from harness.profile.events import find_xplane
from harness.profile.reader import read_events_and_markers
from harness.records import events_file, ladder, run_files
from harness.store.runfolder import VariantFolder

JIT = [
    "xla",
    "xla_no_fusion",
    "xla_exact_gelu",
    "xla_host_callback",
    "xla_mixed_dtype",
    "xla_flax_linen",
    "xla_flax_nnx",
    "xla_lax_cond",
    "matmul_only",
]


def read(run: Path, variant: str, name: str) -> dict:
    return json.loads((run / "variants" / variant / name).read_text())


def events_of(run: Path, variant: str) -> tuple[run_files.KernelEvent, ...]:
    return events_file.read(VariantFolder(run / "variants" / variant))


@pytest.mark.parametrize("name", JIT)
def test_every_jit_kernel_is_attributed_to_a_cluster(cpu_run, name):
    r = read_summary(cpu_run)[name]
    assert r.profile.matched_fraction == 1.0, read(cpu_run, name, "kernels.json")["match"][
        "unmatched"
    ]
    assert r.analysis_errors == ()
    events = events_of(cpu_run, name)
    clusters = {
        c["name"] for m in read(cpu_run, name, "fusions.json")["modules"] for c in m["clusters"]
    }
    assert events and all(e.cluster in clusters for e in events)
    assert r.profile.kernels_per_step == len(events) / 2  # profile.steps=2 in the tiny run


def test_eager_launches_more_kernels_than_the_fused_program(cpu_run):
    s = read_summary(cpu_run)
    assert s["eager"].profile.kernels_per_step >= 3
    assert s["eager"].profile.kernels_per_step > s["xla"].profile.kernels_per_step
    assert s["eager"].profile.matched_fraction == 1.0
    primitives = {e.primitive for e in events_of(cpu_run, "eager")}
    assert {"tanh", "integer_pow", "add", "multiply"} <= primitives


def test_no_fusion_launches_one_kernel_per_elementwise_op(cpu_run):
    s = read_summary(cpu_run)
    assert s["xla_no_fusion"].hlo.fusion_count > s["xla"].hlo.fusion_count
    assert s["xla_no_fusion"].profile.kernels_per_step > s["xla"].profile.kernels_per_step


def test_host_callback_splits_the_compiled_program(cpu_run):
    s = read_summary(cpu_run)
    clusters = [
        c
        for m in read(cpu_run, "xla_host_callback", "fusions.json")["modules"]
        for c in m["clusters"]
    ]
    assert any("callback" in (c["target"] or "") for c in clusters)
    assert s["xla_host_callback"].profile.kernels_per_step > s["xla"].profile.kernels_per_step


def test_first_divergence_names_the_stage_that_explains_each_variant(cpu_run):
    s = read_summary(cpu_run)
    assert s["xla"].comparison.first_divergence is None  # the baseline
    exact = s["xla_exact_gelu"].comparison.first_divergence
    assert exact.stage == "jaxpr" and "tanh" in exact.detail and "erf" in exact.detail
    nofusion = s["xla_no_fusion"].comparison.first_divergence
    assert nofusion.stage == "passes" and "fusion" in nofusion.detail
    assert s["xla_mixed_dtype"].comparison.first_divergence.stage == "jaxpr"
    assert s["matmul_only"].comparison.first_divergence.stage == "jaxpr"
    for name in JIT[1:]:
        d = s[name].comparison.first_divergence
        assert d.detail and d.against == "xla", name


def test_reverse_map_places_every_gelu_op(cpu_run):
    fusions = read(cpu_run, "xla", "fusions.json")
    (module,) = fusions["modules"]
    rmap = module["reverse_map"]
    tanh = [held for op, held in rmap.items() if "/tanh" in op]
    assert tanh and all(held for held in tanh)
    dots = [held for op, held in rmap.items() if "dot_general" in op]
    assert dots and all(held for held in dots)


def test_compile_time_is_broken_down_by_pass(cpu_run):
    r = read_summary(cpu_run)["xla"]
    top = r.compile.top_passes
    assert top and all(p.pipeline and p.name and p.total_s > 0 for p in top), top
    compile_doc = read(cpu_run, "xla", "compile.json")
    first = compile_doc["first_call"]
    assert first["total_compile_s"] > 0
    assert first["passes_total_s"] <= first["total_compile_s"]
    assert "recompile" in compile_doc and compile_doc["recompile"]["total_compile_s"] > 0
    assert r.compile.recompile_fusion_changed is False  # halving m does not change what fuses


def test_cost_model_counts_the_gemm(cpu_run):
    r = read_summary(cpu_run)["matmul_only"].cost
    assert r.flops == 2 * 16 * 32 * 32
    assert read_summary(cpu_run)["xla"].cost.flops > r.flops
    assert read_summary(cpu_run)["xla"].cost.arithmetic_intensity > 0


@pytest.mark.parametrize("name", ["xla", "xla_lax_cond", "eager"])
def test_events_parquet_holds_every_event_as_the_match_attributed_it(cpu_run, name):
    """kernels.json holds the match's totals alone; events.parquet every event of the steady
    window, each read back as the per-event matcher attributes the saved profile's events."""
    folder = VariantFolder(cpu_run / "variants" / name)
    kernels = run_files.load(run_files.KERNELS, folder.kernels)
    assert kernels.events == () and kernels.events_file == folder.events.name
    assert read(cpu_run, name, "kernels.json")["events"] == []
    rows = events_file.read(folder)
    lad = ladder.read_ladder(folder.ir)
    profile = find_xplane(folder.profile_window("steady"))
    report, _ = sections.matched(read_events_and_markers(profile)[0], lad, name == "eager")
    assert len(rows) == kernels.match.events_in_window == len(report.attributions) > 0
    assert [
        (r.name, r.start_ns, r.step, r.cluster, r.primitive, r.matched, r.rule) for r in rows
    ] == [
        (a.event.name, a.event.start_ns, a.event.step, a.cluster, a.primitive, a.matched, a.rule)
        for a in report.attributions
    ]
    launches: dict[str, float] = {}
    for r in rows:
        if r.matched:
            key = f"{r.hlo_module}:{r.cluster or r.primitive}"
            launches[key] = launches.get(key, 0.0) + 1 / kernels.match.steps
    assert launches == pytest.approx(kernels.match.launches_per_cluster)


def test_the_manifest_states_the_folders_size_by_kind_and_the_report_says_it(cpu_run):
    """Written when the run ended, the sizes sum to every file of the folder but the manifest
    (a file the IR ladder links from the dump counted once); the pages say them in one line."""
    manifest = run_files.load(run_files.MANIFEST, cpu_run / "manifest.json")
    files = [p for p in cpu_run.rglob("*") if p.is_file() and not p.is_symlink()]
    distinct = {p.stat().st_ino: p.stat().st_size for p in files if p.name != "manifest.json"}
    assert sum(manifest.sizes.values()) == sum(distinct.values())
    assert manifest.sizes["dumps"] > 0 and manifest.sizes["profiles"] > 0
    assert manifest.sizes["events"] > 0 and manifest.sizes["reports"] > 0
    line = next(x for x in (cpu_run / "details.md").read_text().splitlines() if "run folder" in x)
    assert "dumps" in line and "profiles" in line and "events" in line
