"""The analyze CLI on every fixture dump folder and on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_analyze
from hlo_helpers import H200, require_fixtures

VARIANTS = sorted(p.name for p in H200.iterdir()) if H200.is_dir() else []


@pytest.mark.parametrize("variant", VARIANTS)
def test_cli_on_each_fixture_dump(variant: str, tmp_path: Path) -> None:
    dump = require_fixtures() / variant / "dump"
    has_hlo = any(p.name.endswith("after_optimizations.txt") for p in dump.iterdir())
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path}")
    if not has_hlo:  # eager and matmul_only dumps hold only a config.pbtxt
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"error: {dump}: no HLO modules found"
        return
    assert proc.returncode == 0, proc.stderr
    outs = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert len(outs) == 2 and all(o.startswith("module_") for o in outs)
    for out in outs:
        assert sorted(p.name for p in (tmp_path / out).iterdir()) == [
            "cost.json",
            "fusions.json",
            "hlo.txt",
        ]
        fusions = json.loads((tmp_path / out / "fusions.json").read_text())
        assert fusions["modules"][0]["reverse_map"]
    if variant == "jit_bf16_tanh_large_notriton":
        assert proc.stdout.count("__cublas$lt$matmul (BIAS_GELU)") == 2


def test_cli_module_filter_and_single_file(tmp_path: Path) -> None:
    dump = require_fixtures() / "jit_bf16_tanh_large" / "dump"
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path}", "--module=module_5970")
    assert proc.returncode == 0 and [p.name for p in tmp_path.iterdir() if p.name[0] != "."] == [
        "module_5970.jit_gelu_linear"
    ]
    one = next(dump.glob("module_5970.*.0034.*.txt"))
    proc = run_analyze(f"--dump={one}", f"--out={tmp_path / 'one'}")
    assert proc.returncode == 0 and "module_5970" in proc.stdout


@pytest.mark.parametrize("kind", ["missing", "empty", "unrelated", "not_hlo", "broken_hlo"])
def test_cli_bad_input_is_one_line_and_exit_2(kind: str, tmp_path: Path) -> None:
    target = tmp_path / kind
    if kind == "empty":
        target.mkdir()
    elif kind == "unrelated":
        target.mkdir()
        (target / "notes.txt").write_text("hello\n")
        (target / "data.bin").write_bytes(b"\x00\x01")
    elif kind == "not_hlo":
        target.write_text("just text\n")
    elif kind == "broken_hlo":
        target.write_text("HloModule m\n\nENTRY %e {\n  %a = f32[] parameter(0)\n")
    proc = run_analyze(f"--dump={target}", f"--out={tmp_path / 'out'}")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(target) in proc.stderr and "Traceback" not in proc.stderr


# Device ops a step, from the fixture README's table (Memset counted).
README_DEVICE_OPS = {
    "jit_bf16_tanh_large": 3,
    "jit_bf16_tanh_large_notriton": 2,
    "jit_bf16_erf_large": 3,
    "jit_bf16_tanh_large_nofusion": 17,
    "jit_bf16_tanh_large_emitters": 2,
}


@pytest.mark.parametrize("variant", sorted(README_DEVICE_OPS))
def test_cli_matches_a_profile_from_the_same_program(variant: str, tmp_path: Path) -> None:
    folder = require_fixtures() / variant
    proc = run_analyze(
        f"--dump={folder / 'dump'}",
        f"--out={tmp_path}",
        f"--xplane={folder / 'profile.xplane.pb'}",
        "--steps=3",
    )
    assert proc.returncode == 0, proc.stderr
    assert "matched 1.000" in proc.stdout
    match = json.loads((tmp_path / "kernels.json").read_text())["match"]
    assert match["matched_fraction"] == 1.0
    assert match["device_ops_per_step"] == README_DEVICE_OPS[variant]


def test_cli_reports_a_corrupt_profile_in_one_line(tmp_path: Path) -> None:
    folder = require_fixtures() / "jit_bf16_tanh_large"
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes((folder / "profile.xplane.pb").read_bytes()[:5000])
    proc = run_analyze(f"--dump={folder / 'dump'}", f"--out={tmp_path / 'out'}", f"--xplane={bad}")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr
