"""`python -m harness.analyze` on input it cannot use: one stderr line, exit 2, no traceback.
(test_analyze_cli covers a missing path, an empty folder, unrelated files, plain text and a
broken module; these add the cases it leaves out.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_analyze
from test_profile_faults import PROFILE

pytestmark = pytest.mark.slow  # each test runs `python -m harness.analyze` in a process of its own


def assert_one_line_exit_2(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_no_flags() -> None:
    assert_one_line_exit_2(run_analyze(), "--dump and --out are required")


def test_a_binary_profile_given_as_the_dump(tmp_path: Path) -> None:
    if not PROFILE.is_file():
        pytest.skip(f"fixture absent: {PROFILE}")
    assert_one_line_exit_2(run_analyze(f"--dump={PROFILE}", f"--out={tmp_path}"), str(PROFILE))


def test_a_dump_folder_whose_module_is_truncated_names_the_file_and_line(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    bad = dump / "module_0001.jit_f.cpu_after_optimizations.txt"
    bad.write_text("HloModule jit_f\n\nENTRY %main (a: f32[2]) -> f32[2] {\n  %a = f32[2] para")
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path / 'out'}")
    assert_one_line_exit_2(proc, str(bad))
    # No result is left, and the manifest says the analysis failed, and why.
    found = {p.name for p in (tmp_path / "out").rglob("*.json")}
    assert found == {"manifest.json"}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and str(bad) in manifest["reason"]


def test_an_invalid_module_filter_regex(tmp_path: Path) -> None:
    dump = tmp_path / "m.txt"
    dump.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    assert_one_line_exit_2(run_analyze(f"--dump={dump}", f"--out={tmp_path}", "--module=("))


@pytest.mark.parametrize("steps", ["0", "-2"])
def test_steps_must_be_positive(steps: str, tmp_path: Path) -> None:
    dump = tmp_path / "m.txt"
    dump.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    proc = run_analyze(
        f"--dump={dump}", f"--out={tmp_path / 'out'}", f"--xplane={tmp_path}", f"--steps={steps}"
    )
    assert_one_line_exit_2(proc, "--steps must be a positive integer", steps)


def test_steps_without_a_profile(tmp_path: Path) -> None:
    dump = tmp_path / "m.txt"
    dump.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path / 'out'}", "--steps=3")
    assert_one_line_exit_2(proc, "--steps needs --xplane")


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '{"device": "cpu"}'])
def test_an_unusable_ceilings_file(content: str, tmp_path: Path) -> None:
    dump = tmp_path / "m.txt"
    dump.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    ceilings = tmp_path / "ceilings.json"
    ceilings.write_text(content)
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path / 'out'}", f"--ceilings={ceilings}")
    assert_one_line_exit_2(proc, str(ceilings))
