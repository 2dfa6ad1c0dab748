"""Pass timeline and structural fingerprints on the per-pass H200 dumps and live CPU dumps."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
from hlo_helpers import cpu_dump, require_fixtures, write_ladder

from harness.hlo.parser import parse_file, parse_module, print_module
from harness.hlo.passes import pass_file_info, pass_timeline, structural_fingerprint


def _tanh_large_passes() -> list[Path]:
    dump = require_fixtures() / "jit_bf16_tanh_large" / "dump"
    return sorted(dump.glob("module_5970.*.txt"))


def test_timeline_covers_every_pass_file_in_order() -> None:
    files = _tanh_large_passes()
    timeline = pass_timeline(files)
    expected = [f for f in files if ".after_" in f.name and f.name.split(".")[2].isdigit()]
    assert len(timeline) == len(expected) > 60
    assert [e.index for e in timeline] == sorted(e.index for e in timeline)
    assert timeline[0].fusion_count == 0
    assert timeline[-1].fusion_count == 1


def test_timeline_explains_where_fusion_structure_changed() -> None:
    changed = [e for e in pass_timeline(_tanh_large_passes()) if e.changed_fusions]
    by_pass = {e.pass_name: e.explanation for e in changed}
    assert by_pass["triton-gemm-rewriter"].startswith(
        "triton-gemm-rewriter created gemm_fusion_dot"
    )
    assert by_pass["priority-fusion"].startswith("priority-fusion created fusion")
    assert "from 19 ops" in by_pass["priority-fusion"]
    assert by_pass["config-assigner"].startswith(
        "config-assigner turned dot into __cublas$lt$matmul (epilogue BIAS)"
    )


def test_harness_pass_names_are_accepted(tmp_path: Path) -> None:
    assert pass_file_info(Path("0034.fusion.priority-fusion.txt")) == (
        34,
        "fusion",
        "priority-fusion",
    )
    assert pass_file_info(
        Path(
            "module_0008.jit_f.0019.copy-insertion.after_adding_copies_to_resolve_interference.txt"
        )
    ) == (19, "copy-insertion", "adding_copies_to_resolve_interference")
    ladder = write_ladder(tmp_path / "ir", lambda x: jnp.tanh(x) * 2.0, jnp.ones((8, 16)))
    timeline = pass_timeline(sorted((ladder / "30-passes").iterdir()))
    assert timeline and any(e.changed_fusions for e in timeline)


def test_fingerprint_ignores_names_and_metadata_but_not_structure() -> None:
    path = require_fixtures() / "jit_bf16_tanh_large_notriton" / "dump"
    module = parse_file(next(path.glob("module_5970.*gpu_after_optimizations.txt")))
    text = print_module(module)
    renamed = text.replace("cublas-lt-matmul.3", "gemm.99").replace("gpu_probe.py", "other.py")
    renamed = renamed.replace('scheduling_name="b.1"', 'scheduling_name="zz"')
    assert structural_fingerprint(parse_module(renamed)) == structural_fingerprint(module)
    changed = text.replace('"epilogue":"BIAS_GELU"', '"epilogue":"BIAS"')
    assert structural_fingerprint(parse_module(changed)) != structural_fingerprint(module)
    reshaped = text.replace("s8[33554432]", "s8[1024]")
    assert structural_fingerprint(parse_module(reshaped)) != structural_fingerprint(module)


def test_same_program_compiled_twice_has_the_same_fingerprint(tmp_path: Path) -> None:
    def f(x):
        return jax.nn.relu(x) + 1.0

    a, _ = cpu_dump(tmp_path / "a", f, jnp.ones((8, 16)))
    b, _ = cpu_dump(tmp_path / "b", f, jnp.ones((8, 16)))
    fa = structural_fingerprint(parse_file(next(a.glob("*cpu_after_optimizations.txt"))))
    fb = structural_fingerprint(parse_file(next(b.glob("*cpu_after_optimizations.txt"))))
    assert fa == fb
