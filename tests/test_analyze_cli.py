"""The analyze CLI on every fixture dump folder and on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, run_analyze
from hlo_helpers import H200, require_fixtures

from harness.program.dump import read_events

pytestmark = pytest.mark.slow  # each test runs `python -m harness.analyze` in a process of its own

VARIANTS = sorted(p.name for p in H200.iterdir()) if H200.is_dir() else []


@pytest.mark.parametrize("variant", VARIANTS)
def test_cli_on_each_fixture_dump(variant: str, tmp_path: Path) -> None:
    dump = require_fixtures() / variant / "dump"
    has_hlo = any(p.name.endswith("after_optimizations.txt") for p in dump.iterdir())
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path}")
    if not has_hlo:  # eager and matmul_only dumps hold only a config.pbtxt
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"error: --dump: {dump}: no HLO modules found"
        assert not any(tmp_path.iterdir())  # refused before any work: nothing written
        return
    assert proc.returncode == 0, proc.stderr
    found = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    outs = [o for o in found if o.startswith("module_")]
    assert len(outs) == 2
    assert sorted(set(found) - set(outs)) == [
        "analysis.json",
        "manifest.json",  # harness.study.lifecycle's: how the analysis ended
        "plots",
        "report.html",
        "report.md",
    ]
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"
    for out in outs:
        assert sorted(p.name for p in (tmp_path / out).iterdir()) == [
            "cost.json",
            "fusions.json",
            "hlo.txt",
            "memory.json",  # the dump holds XLA's buffer assignment and live ranges
        ]
        fusions = json.loads((tmp_path / out / "fusions.json").read_text())
        assert fusions["modules"][0]["reverse_map"]
    if variant == "jit_bf16_tanh_large_notriton":
        assert proc.stdout.count("__cublas$lt$matmul (BIAS_GELU)") == 2
    # Without a profile the main program is the module with the most FLOPs: the [m, k] compile,
    # not its [m/2, k] recompile, which is listed apart.
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    (main,) = analysis["main"]
    recompile = next(m for m in analysis["modules"] if m["role"] == "helper")
    assert analysis["ranked_by"] == "FLOPs" and main == outs[1]  # module_5970 < module_26480
    assert recompile["key"] == outs[0] and recompile["kind"].startswith("recompile")
    md = (tmp_path / "report.md").read_text()
    assert f"`{main}` is the main program: the module with the most FLOPs" in md
    assert (tmp_path / "plots" / f"{main}.top.png").is_file()


def test_cli_module_filter_and_single_file(tmp_path: Path) -> None:
    dump = require_fixtures() / "jit_bf16_tanh_large" / "dump"
    proc = run_analyze(f"--dump={dump}", f"--out={tmp_path}", "--module=module_5970")
    assert proc.returncode == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("module_")] == [
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


@pytest.mark.parametrize(
    ("variant", "steps"),
    [(v, None) for v in sorted(README_DEVICE_OPS)] + [("jit_bf16_tanh_large", "--steps=3")],
)
def test_cli_matches_a_profile_from_the_same_program(
    variant: str, steps: str | None, tmp_path: Path
) -> None:
    """The fixture profiles hold 3 calls and no step markers: given --steps=3 or, without
    it, counted from the executions (run_id of the host Execute that launched each kernel)."""
    folder = require_fixtures() / variant
    proc = run_analyze(
        f"--dump={folder / 'dump'}",
        f"--out={tmp_path}",
        f"--xplane={folder / 'profile.xplane.pb'}",
        *([steps] if steps else []),
    )
    assert proc.returncode == 0, proc.stderr
    assert "matched 1.000" in proc.stdout
    assert f"3 steps ({'flag' if steps else 'executions'})" in proc.stdout
    match = json.loads((tmp_path / "kernels.json").read_text())["match"]
    assert match["matched_fraction"] == 1.0
    assert match["device_ops_per_step"] == README_DEVICE_OPS[variant]
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    main = next(m for m in analysis["modules"] if m["role"] == "main")
    assert analysis["ranked_by"] == "device time" and main["executions"] == 3
    kernels = [k for k in main["kernels"] if k["grid"] is not None]
    assert kernels and all(k["block"] and k["occupancy_pct"] for k in kernels)


def test_module_filter_never_attributes_another_programs_events(tmp_path: Path) -> None:
    """The profile ran module 5970; selecting its recompile (26480, same name) must not take
    5970's events through the name: they are outside the selection, and the output says so."""
    folder = require_fixtures() / "jit_bf16_tanh_large"
    args = (f"--dump={folder / 'dump'}", f"--xplane={folder / 'profile.xplane.pb'}")
    proc = run_analyze(*args, f"--out={tmp_path / 'recompile'}", "--module=module_26480")
    assert proc.returncode == 0, proc.stderr
    assert "0 device events" in proc.stdout
    assert "9 events of other programs outside the selection: jit_gelu_linear (program 5970)" in (
        proc.stdout
    )
    # the two ids named as one program compiled twice (issue 61), not as two programs
    assert (
        "jit_gelu_linear is one program compiled twice: the dump's compile is module 26480, the "
        "profiled one program 5970"
    ) in proc.stdout
    kernels = json.loads((tmp_path / "recompile" / "kernels.json").read_text())
    assert kernels["match"]["events_in_window"] == 0
    assert read_events(tmp_path / "recompile" / "events.parquet") == []
    assert kernels["outside_selection"] == [
        {
            "module": "jit_gelu_linear",
            "program_id": 5970,
            "events": 9,
            "time_s": pytest.approx(kernels["outside_selection"][0]["time_s"]),
        }
    ]
    md = (tmp_path / "recompile" / "report.md").read_text()
    assert "**Outside the selection**: 9 events" in md
    analysis = json.loads((tmp_path / "recompile" / "analysis.json").read_text())
    assert analysis["ranked_by"] == "FLOPs" and analysis["steps"] is None

    proc = run_analyze(*args, f"--out={tmp_path / 'first'}", "--module=module_5970")
    assert proc.returncode == 0 and "matched 1.000" in proc.stdout
    assert "outside the selection" not in proc.stdout


def test_a_loose_hlo_file_binds_to_the_only_program_of_its_name(tmp_path: Path) -> None:
    folder = require_fixtures() / "jit_bf16_tanh_large"
    one = next((folder / "dump").glob("module_5970.*sm_9.0a_gpu_after_optimizations.txt"))
    loose = tmp_path / "gelu.txt"
    loose.write_bytes(one.read_bytes())
    proc = run_analyze(
        f"--dump={loose}", f"--out={tmp_path / 'out'}", f"--xplane={folder / 'profile.xplane.pb'}"
    )
    assert proc.returncode == 0, proc.stderr
    assert "matched 1.000" in proc.stdout
    md = (tmp_path / "out" / "report.md").read_text()
    assert "bound by name to the only program jit_gelu_linear in the profile" in md


def test_marked_steps_on_two_gpus(tmp_path: Path) -> None:
    """The 2-GPU fixtures mark 3 steps with StepTraceAnnotation; each device's kernels count."""
    folder = FIXTURES / "h200x2-jax0.11.2" / "k_sharded_replicated_out"
    if not folder.is_dir():
        pytest.skip(f"fixture absent: {folder}")
    proc = run_analyze(
        f"--dump={folder / 'dump'}", f"--out={tmp_path}", f"--xplane={folder / 'profile.xplane.pb'}"
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 steps (markers)" in proc.stdout and "matched 1.000" in proc.stdout
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    top = analysis["modules"][0]["clusters"][0]
    assert top["kind"] == "library" and top["time_s"] > 0


def test_ceilings_put_roofs_on_the_roofline(tmp_path: Path) -> None:
    folder = require_fixtures() / "jit_bf16_tanh_large"
    ceilings = REPO / "results" / "reference" / "h200" / "ceilings.json"
    proc = run_analyze(
        f"--dump={folder / 'dump'}",
        f"--out={tmp_path}",
        f"--xplane={folder / 'profile.xplane.pb'}",
        f"--ceilings={ceilings}",
        "--module=module_5970",
    )
    assert proc.returncode == 0, proc.stderr
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    rows = {r["name"]: r for r in analysis["modules"][0]["clusters"]}
    gemm, gelu = rows["cublas-lt-matmul.1"], rows["loop_multiply_fusion"]
    assert gemm["precision"] == "bf16" and gemm["roof"] == "bf16 peak"
    assert gemm["flops_per_s"] == pytest.approx(gemm["flops"] / gemm["time_s"])
    assert gelu["roof"] == "bandwidth" and 0 < gelu["roof_fraction"] < 1
    assert gelu["bytes_per_s"] == pytest.approx(gelu["bytes"] / gelu["time_s"])
    assert (tmp_path / "plots" / "module_5970.jit_gelu_linear.roofline.png").is_file()
    assert f"Ceilings from `{ceilings}`" in (tmp_path / "report.md").read_text()


def test_cli_reports_a_corrupt_profile_in_one_line(tmp_path: Path) -> None:
    folder = require_fixtures() / "jit_bf16_tanh_large"
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes((folder / "profile.xplane.pb").read_bytes()[:5000])
    proc = run_analyze(f"--dump={folder / 'dump'}", f"--out={tmp_path / 'out'}", f"--xplane={bad}")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr


def test_eager_profile_steps_are_the_executions_of_its_largest_program(tmp_path: Path) -> None:
    """The eager fixture runs one small module per primitive (no HLO dumped) and 4 host copies
    a step: --mode=eager counts 3 steps from its largest program's run_ids and gets the
    README's 18 device ops a step; in jit mode none of it belongs to the analysed modules."""
    fixtures = require_fixtures()
    args = (
        f"--dump={fixtures / 'jit_bf16_tanh_large' / 'dump'}",
        f"--xplane={fixtures / 'eager_bf16_tanh_large' / 'profile.xplane.pb'}",
    )
    proc = run_analyze(*args, f"--out={tmp_path / 'eager'}", "--mode=eager")
    assert proc.returncode == 0, proc.stderr
    assert "3 steps (executions)" in proc.stdout and "18 device ops a step" in proc.stdout
    proc = run_analyze(*args, f"--out={tmp_path / 'jit'}")
    assert proc.returncode == 0, proc.stderr
    assert "no events of the analysed modules" in proc.stdout
    md = (tmp_path / "jit" / "report.md").read_text()
    assert "12 device events outside any program (runtime copies) ignored" in md


TINY_HLO = "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"


@pytest.mark.parametrize("wrong", ["dump", "xplane", "xplane_folder"])
def test_a_wrong_input_path_is_refused_before_any_work(wrong: str, tmp_path: Path) -> None:
    """A missing dump or profile (or a folder with no profile) is one line naming the flag and
    the path once, and leaves no output folder: nothing was analysed first."""
    dump = tmp_path / "m.txt"
    dump.write_text(TINY_HLO)
    (tmp_path / "empty").mkdir()
    bad = {"dump": tmp_path / "no_dump", "xplane": tmp_path / "no.xplane.pb"}.get(
        wrong, tmp_path / "empty"
    )
    flag = "dump" if wrong == "dump" else "xplane"
    args = {"dump": dump, flag: bad}
    out = tmp_path / "out"
    proc = run_analyze(*(f"--{k}={v}" for k, v in args.items()), f"--out={out}")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: --{flag}: ")
    assert line.count(str(bad)) == 1 and "Traceback" not in line
    assert not out.exists()
    # The same inputs with the right path do the work: the check can pass.
    args[flag] = dump if flag == "dump" else None
    ok = run_analyze(*(f"--{k}={v}" for k, v in args.items() if v), f"--out={out}")
    assert ok.returncode == 0, ok.stderr
    assert out.is_dir()


def test_help_lists_every_flag_on_a_line_of_its_own() -> None:
    proc = run_analyze("--help")  # absl's --help exits 1, having printed the help
    assert "Traceback" not in proc.stderr, proc.stderr
    listed = {
        line.split(":")[0].strip().removeprefix("--")
        for line in proc.stdout.splitlines()
        if line.startswith("  --")
    }
    assert listed == {"dump", "out", "module", "xplane", "steps", "ceilings", "mode"}
    for line in proc.stdout.splitlines():
        if line.startswith("  --"):
            assert len(line) <= 80 and line.rstrip().endswith((".", ")")), line
