"""The capture's probes reuse the first compile: one dump per variant, the new-shape call a
real compile of its own (not dumped), one float64 reference, and what each probe cost kept in
result.json. Checked on the tiny real CPU run (cpu_run), by the files and records it made."""

from __future__ import annotations

import dataclasses

from harness.capture import reuse
from harness.records.summary import load_capture


def test_every_probe_of_a_captured_variant_says_what_it_cost(cpu_run):
    for name, probes in {
        "xla": ("first_call", "steady", "profile", "reference", "recompile", "ir"),
        "eager": ("first_call", "steady", "profile", "reference", "recompile", "ir"),
    }.items():
        record = load_capture(cpu_run / "variants" / name / "result.json")
        costs = dataclasses.asdict(record.probe_s)
        assert all(costs[f"{p}_s"] is not None and costs[f"{p}_s"] >= 0 for p in probes), name


def test_the_recompile_is_compiled_but_never_dumped_again(cpu_run):
    vdir = cpu_run / "variants" / "xla"
    modules = {p.name.split(".")[0] for p in (vdir / "dump").iterdir() if ".jit_" in p.name}
    assert len(modules) == 1  # the first compile's module alone; before, a second id
    again = (vdir / "ir" / "41-hlo-after-optimizations-recompile.txt").read_text()
    assert "HloModule jit_" in again and "f32[8,32]" in again  # the new shape, optimized
    record = load_capture(vdir / "result.json")
    assert record.recompile is not None and record.recompile.backend_compiles == 1


def test_the_first_compile_takes_the_dump_options_the_variant_does_not_set():
    dump = {"xla_dump_to": "/d", "xla_dump_hlo_as_text": True}
    assert reuse.first_compile_options(dump, {"xla_dump_hlo_as_text": False}) == {
        "xla_dump_to": "/d"
    }


def test_a_gpu_variants_autotune_results_are_kept_in_its_own_folder(tmp_path):
    """On a GPU the first compile and a timing compile take the variant's own folder; a CPU,
    a study without the private folder and a variant that sets the cache itself, nothing."""
    kept = reuse.autotune_options("gpu", {}, "xla", tmp_path)
    assert kept == {reuse.AUTOTUNE_CACHE: str(tmp_path / "autotune" / "xla")}
    assert (tmp_path / "autotune" / "xla").is_dir()
    assert reuse.autotune_options("gpu", {}, "matmul_only", tmp_path) != kept
    mine = {reuse.AUTOTUNE_CACHE: "/mine"}
    assert reuse.autotune_options("gpu", mine, "xla", tmp_path) == {}
    assert reuse.autotune_options("cpu", {}, "xla", tmp_path) == {}
    assert reuse.autotune_options("gpu", {}, "xla", None) == {}
