"""Hostile input and faults, as a hostile user would try them, class by class.

Every case asserts four things: the exit status; exactly one line on stderr and no traceback;
nothing written outside the command's output folder (a snapshot of everything else before and
after); and nothing lost (a finished run that sits beside the output is byte-for-byte intact).
Config cases run in-process through the entry point's `main()`; the rest run the real command.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import (
    REPO,
    WORLD_STUDY,
    World,
    snapshot,
)
from hostile_world import (
    MINIMAL,
    Result,
    command,
    config,
    harness_main,
    in_process,
    one_line,
    untouched,
)

from harness.common import userfiles

# ==============================================================================================
# 1. Config promises: every number has a range, keys are unique, nothing expands without bound.
# Each is exit 2, one line, no folder.

CONFIG_CASES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "seed_too_large": (
        MINIMAL,
        ("--config.seed=100000000000000000000000",),
        ("seed", "[0, 4294967295]"),
    ),
    "seed_negative": (MINIMAL + "seed: -1\n", (), ("seed", "must be in")),
    "steps_too_many": (
        MINIMAL,
        ("--config.measure.steps=1000000000",),
        ("measure.steps", "[1, 100000]"),
    ),
    "warmup_too_many": (
        MINIMAL,
        ("--config.measure.warmup=999999",),
        ("measure.warmup", "[0, 1000]"),
    ),
    "rounds_too_many": (MINIMAL, ("--config.timing.rounds=5000",), ("timing.rounds", "[0, 1000]")),
    "budget_zero": (MINIMAL, ("--config.timing.budget_s=0",), ("timing.budget_s", "must be in")),
    "profile_steps_zero": (MINIMAL + "profile: {steps: 0}\n", (), ("profile.steps", "[1, 1000]")),
    "dimension_too_large": (MINIMAL, ("--config.problem.n=99999999",), ("problem.n", "must be in")),
    "array_too_large": (
        MINIMAL.replace("m: 8, k: 4, n: 4", "m: 1048576, k: 1048576, n: 4"),
        (),
        ("problem", "2**34 elements"),
    ),
    "platforms_empty": (
        MINIMAL.replace("mode: jit}", "mode: jit, platforms: []}"),
        (),
        ("variants.xla.platforms", "is empty"),
    ),
    "platforms_unknown": (
        MINIMAL.replace("mode: jit}", "mode: jit, platforms: [quantum]}"),
        (),
        ("variants.xla.platforms", "allowed: cpu, gpu, tpu"),
    ),
    "duplicate_key": (
        MINIMAL + "seed: 1\nseed: 2\n",
        (),
        ("'seed'", "duplicate key", "line 5", "line 6"),
    ),
    "duplicate_nested_key": (
        MINIMAL.replace("{m: 8, k: 4, n: 4}", "{m: 8, k: 4, n: 4, m: 9}"),
        (),
        ("'m'", "duplicate key"),
    ),
    "alias_bomb": (
        "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        "experiment: *f\n" + MINIMAL.split("\n", 1)[1],
        (),
        ("expands to over 100000 values",),
    ),
    "alias_bomb_in_an_error": (
        MINIMAL
        + "seed: [&x [1,1,1,1,1,1,1,1,1,1], &y [*x,*x,*x,*x,*x,*x,*x,*x,*x,*x],"
        + " [*y,*y,*y,*y,*y,*y,*y,*y,*y,*y]]\n",
        (),
        ("seed", "expected int"),
    ),
    "deeply_nested_file": (
        MINIMAL + "description: " + "[" * 5000 + "]" * 5000 + "\n",
        (),
        ("nests", "32"),
    ),
    "deeply_nested_block_file": (
        MINIMAL + "".join("  " * i + f"k{i}:\n" for i in range(60)) + "  " * 60 + "x: 1\n",
        (),
        ("nests deeper than 32 levels",),
    ),
    "deeply_nested_flag": (
        MINIMAL,
        ("--config.problem.batch=" + "[" * 3000 + "]" * 3000,),
        ("problem.batch",),
    ),
    "huge_string_in_an_error": (
        MINIMAL.replace("mode: jit", "mode: " + "j" * 200_000),
        (),
        ("variants.xla.mode", "..."),
    ),
    "file_over_a_megabyte": (
        MINIMAL + "description: " + "d" * 1_100_000 + "\n",
        (),
        ("larger than",),
    ),
    "experiment_name_too_long": (
        MINIMAL.replace("experiment: t", "experiment: " + "t" * 65),
        (),
        ("experiment", "1-64"),
    ),
    "path_option_dump_to": (
        MINIMAL.replace("mode: jit}", "mode: jit, xla_options: {xla_dump_to: /tmp/elsewhere}}"),
        (),
        ("xla_dump_to", "outside the run folder"),
    ),
    "path_option_autotune_cache": (
        MINIMAL,
        ("--config.variants.xla.xla_options.xla_gpu_per_fusion_autotune_cache_dir=/tmp/x",),
        ("xla_gpu_per_fusion_autotune_cache_dir", "names a file or folder"),
    ),
    "unknown_mode": (  # the harness has no test-only modes (the old `test_abort`)
        MINIMAL.replace("mode: jit", "mode: test_abort"),
        (),
        ("variants.xla.mode", "allowed"),
    ),
    "unknown_role": (
        MINIMAL.replace("mode: jit}", "mode: jit, roles: [fastest]}"),
        (),
        ("variants.xla.roles", "allowed"),
    ),
    "unknown_isolation": (
        MINIMAL + "capture: {isolation: thread}\n",
        (),
        ("capture.isolation", "allowed"),
    ),
    "binary_file": ("\x00\x01\x02 not yaml \xff", (), ("",)),
}


@pytest.mark.parametrize("name", list(CONFIG_CASES))
def test_config_promises(world: World, name: str) -> None:
    text, flags_, words = CONFIG_CASES[name]
    cfg = config(world, text)
    before = world.before()
    started = time.perf_counter()
    result = harness_main(world, f"--config={cfg}", *flags_)
    assert time.perf_counter() - started < 30, "a config error must be refused quickly"
    one_line(result, 2, *words)
    assert len(result.stderr) < 3000, "errors never print unbounded values"
    untouched(world, before)


@pytest.mark.parametrize(
    "root",
    ["", "   ", "/", "~", "REPO", "REPO/harness", "FILE", "LONG"],
    ids=["empty", "blank", "filesystem_root", "home", "repo", "source", "a_file", "too_long"],
)
def test_a_dangerous_results_root_is_refused(world: World, root: str) -> None:
    cfg = config(world, MINIMAL)
    if root == "FILE":
        root = str(world.sentinel / "keep.txt")
    elif root == "LONG":
        root = str(world.root / ("x" * 300) / "results")
    root = root.replace("REPO", str(REPO))
    before = world.before()
    result = in_process("harness.commands.study", f"--config={cfg}", f"--results_root={root}")
    one_line(result, 2, "results_root" if root != str(world.root / ("x" * 300) / "results") else "")
    untouched(world, before)


# ==============================================================================================
# 2. Data loss: nothing is deleted or overwritten unless the tool made it.


def export(world: World, run: Path, to: Path) -> Result:
    return in_process("harness.commands.export", f"--run={run}", f"--to={to}")


@pytest.mark.parametrize(
    "target", ["the_run", "results_root", "experiment", "sentinel", "a_file", "inside_the_run"]
)
def test_export_never_replaces_what_it_did_not_make(world: World, target: str) -> None:
    to = {
        "the_run": world.run,
        "results_root": world.results,
        "experiment": world.run.parent,
        "sentinel": world.sentinel,
        "a_file": world.sentinel / "keep.txt",
        "inside_the_run": world.run / "plots",
    }[target]
    before = world.before()
    one_line(export(world, world.run, to), 2)
    untouched(world, before)


def test_export_replaces_its_own_earlier_copy(world: World) -> None:
    to = world.root / "copy"
    assert export(world, world.run, to).code == 0
    before = world.before()
    assert export(world, world.run, to).code == 0
    assert (to / "summary.json").is_file()
    untouched(world, before, to)
    # A file the export did not write (issue 32): the copy is no longer its own to replace.
    (to / "stale.txt").write_text("put there since")
    before = world.before()
    one_line(export(world, world.run, to), 2, "stale.txt")
    untouched(world, before)


@pytest.mark.parametrize("target", ["the_run", "results_root", "sentinel"])
def test_compare_out_never_replaces_what_it_did_not_make(world: World, target: str) -> None:
    out = {"the_run": world.run, "results_root": world.results, "sentinel": world.sentinel}[target]
    before = world.before()
    result = in_process(
        "harness.commands.compare", f"--a={world.run}", f"--b={world.run}", f"--out={out}"
    )
    line = one_line(result, 2)
    assert "only replaces an empty folder" in line or "inside the input" in line, line
    untouched(world, before)


@pytest.mark.parametrize("target", ["the_run", "sentinel"])
def test_analyze_out_never_replaces_what_it_did_not_make(world: World, target: str) -> None:
    out = {"the_run": world.run, "sentinel": world.sentinel}[target]
    dump = world.run / "variants" / "xla" / "ir" / "40-hlo-after-optimizations.txt"
    before = world.before()
    result = in_process("harness.commands.analyze", f"--dump={dump}", f"--out={out}")
    one_line(result, 2, "only replaces an empty folder")
    untouched(world, before)


# ==============================================================================================
# 3. Writes outside the output folder: links are never followed out.


def test_report_replaces_a_planted_plots_link(world: World) -> None:
    shutil.rmtree(world.run / "plots")
    (world.run / "plots").symlink_to(world.sentinel)
    before = world.before()
    result = in_process("harness.commands.report", f"--run={world.run}")
    assert result.code == 0, result.stderr
    assert (world.run / "plots").is_dir() and not (world.run / "plots").is_symlink()
    assert snapshot(world.sentinel) == {
        k.removeprefix("sentinel/"): v for k, v in before.items() if k.startswith("sentinel/")
    }


@pytest.mark.parametrize("module", ["harness.commands.report", "harness.commands.reanalyze"])
def test_a_latest_link_pointing_outside_is_refused(world: World, module: str) -> None:
    outside = world.root / "outside_run"
    shutil.copytree(world.run, outside, symlinks=True)
    latest = world.results / "gelu" / "latest"
    latest.unlink()
    latest.symlink_to(outside)
    before = world.before()
    one_line(in_process(module, f"--run={latest}"), 2, "outside its own folder")
    untouched(world, before)


def test_an_ir_index_naming_paths_outside_is_refused(world: World) -> None:
    index = world.run / "variants" / "xla" / "ir" / "index.json"
    index.write_text(
        json.dumps(
            {
                "stages": [
                    {"order": 40, "stage": "hlo_after", "path": "../../../../../sentinel/keep.txt"}
                ]
            }
        )
    )
    from harness.records.ladder import read_ladder

    with pytest.raises(ValueError, match="leaves the ladder folder"):
        read_ladder(index.parent)
    before = world.before()
    # The variant's sections made from its ladder would be lost: a finished run's rewrite is
    # refused, naming them, and nothing changes (issue 59) ...
    line = one_line(in_process("harness.commands.reanalyze", f"--run={world.run}"), 2, "would lose")
    assert "variants.xla.compile" in line and "--allow_loss" in line
    untouched(world, before)
    # ... unless the loss is wanted: the variant's analysis notes the refusal; the run goes on.
    result = in_process("harness.commands.reanalyze", f"--run={world.run}", "--allow_loss")
    assert result.code == 0, result.stderr
    summary = json.loads((world.run / "summary.json").read_text())
    assert any(
        "leaves the ladder folder" in e for e in summary["variants"]["xla"]["analysis_errors"]
    )
    untouched(world, before, world.run, world.results / "index.html")


# ==============================================================================================
# 4. Hangs and tracebacks from hostile HLO and patterns (analyze).


def hlo_case(world: World, name: str) -> Path:
    path = world.root / f"{name}.txt"
    header = "HloModule m\n\n"
    if name == "long_header":
        text = header + "%c" + "(" * 8000 + " {\n  ROOT %x = f32[] constant(1)\n}\n"
    elif name == "megabyte_line":
        text = (
            header
            + 'ENTRY %e () -> f32[] {\n  ROOT %x = f32[] constant(1), metadata={op_name="'
            + "a" * 1_000_000
            + "\n}\n"
        )
    elif name == "huge_dimension":
        text = (
            header
            + "ENTRY %e (p: f32["
            + "9" * 400
            + "]) -> f32[] {\n  %p = f32["
            + "9" * 400
            + "] parameter(0)\n  ROOT %x = f32[] constant(1)\n}\n"
        )
    elif name == "deep_call_chain":
        comps = [
            f"%c{i} () -> f32[] {{\n  ROOT %r{i} = f32[] call(), to_apply=%c{i + 1}\n}}\n"
            for i in range(3000)
        ]
        comps.append("%c3000 () -> f32[] {\n  ROOT %r = f32[] constant(1)\n}\n")
        text = (
            header
            + "\n".join(comps)
            + "\nENTRY %e () -> f32[] {\n  ROOT %x = f32[] call(), to_apply=%c0\n}\n"
        )
    elif name == "malformed_gemm_config":
        text = header + (
            "ENTRY %e (a: f32[4,4], b: f32[4,4]) -> (f32[4,4], s8[8]) {\n"
            "  %a = f32[4,4] parameter(0)\n  %b = f32[4,4] parameter(1)\n"
            '  ROOT %g = (f32[4,4], s8[8]) custom-call(%a, %b), custom_call_target="__cublas$gemm", '
            'backend_config={"gemm_backend_config":{"dot_dimension_numbers":"banana","epilogue":7}}\n}\n'
        )
    elif name == "empty_tuple_library_call":
        text = header + (
            "ENTRY %e (a: f32[4,4]) -> () {\n  %a = f32[4,4] parameter(0)\n"
            '  ROOT %g = () custom-call(%a), custom_call_target="__cublas$lt$matmul", '
            'backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"]}}}\n}\n'
        )
    else:
        raise AssertionError(name)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name",
    [
        "long_header",
        "megabyte_line",
        "huge_dimension",
        "deep_call_chain",
        "malformed_gemm_config",
        "empty_tuple_library_call",
    ],
)
def test_hostile_hlo_is_one_line_or_analyzed_never_a_hang_or_traceback(
    world: World, name: str
) -> None:
    path = hlo_case(world, name)
    out = world.root / "out"
    before = world.before()
    started = time.perf_counter()
    result = command("-m", "harness.analyze", f"--dump={path}", f"--out={out}", timeout=60)
    assert time.perf_counter() - started < 30
    assert "Traceback" not in result.stderr, result.stderr
    if result.code != 0:
        one_line(result, 2, str(path))
    untouched(world, before, out)


# A module named against the pattern: with Python's `re`, `^(a+)+$` on this name backtracks for
# hours. RE2 ends on it at once, with the outcome the pattern means.
BACKTRACKING_NAME = "a" * 40 + "!"


@pytest.mark.parametrize(
    ("pattern", "code", "says"),
    [
        ("^(a+)+$", 2, "no module matches"),
        ("(a|a)*c", 2, "no module matches"),
        ("(.*a)*!", 0, BACKTRACKING_NAME),  # matches: the module is analysed
        ("^(a+)+!$", 0, BACKTRACKING_NAME),
    ],
)
def test_a_module_regex_that_backtracks_in_re_ends_at_once(
    world: World, pattern: str, code: int, says: str
) -> None:
    dump = world.root / "dump"
    dump.mkdir(exist_ok=True)
    hlo = world.run / "variants" / "xla" / "ir" / "40-hlo-after-optimizations.txt"
    (dump / f"{BACKTRACKING_NAME}.txt").write_text(userfiles.read_text(hlo, userfiles.IR_TEXT))
    out = world.root / "out"
    # A subprocess with a time limit: a regression hangs in C, where no signal reaches it.
    result = command(
        "-m", "harness.analyze", f"--dump={dump}", f"--out={out}", f"--module={pattern}", timeout=30
    )
    assert result.code == code, result.stderr
    assert says in (result.stdout + result.stderr)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)a", "(?<!b)a", "x" * 1001, "(unclosed"])
def test_a_module_regex_re2_cannot_run_is_refused_in_one_line(world: World, pattern: str) -> None:
    dump = world.run / "variants" / "xla" / "ir" / "40-hlo-after-optimizations.txt"
    out = world.root / "out"
    before = world.before()
    one_line(
        in_process(
            "harness.commands.analyze", f"--dump={dump}", f"--out={out}", f"--module={pattern}"
        ),
        2,
        "--module=",
    )
    untouched(world, before, out)
    assert not out.exists()


# ==============================================================================================
# 5. One bad file never breaks the others.


# Four kinds of damage at once, beside the run: the report is rendered once for all of them.
DAMAGED_SUMMARIES = ("[1, 2]", '"a string"', "{not json", "")


def test_a_damaged_summary_elsewhere_is_skipped_with_a_note(world: World) -> None:
    others = [world.results / "gelu" / f"20000101-00000{i}" for i in range(len(DAMAGED_SUMMARIES))]
    for other, content in zip(others, DAMAGED_SUMMARIES, strict=True):
        other.mkdir()
        (other / "summary.json").write_text(content)
    before = world.before()
    result = in_process("harness.commands.report", f"--run={world.run}")
    assert result.code == 0, result.stderr
    untouched(world, before, world.run)  # `make report` writes nothing above its run
    from harness.report.index import write_results_index

    write_results_index(world.results)  # what `make index` and every study do
    index = (world.results / "index.html").read_text()
    assert "could not be read" in index
    for other, content in zip(others, DAMAGED_SUMMARIES, strict=True):
        assert other.name in index, content
    untouched(world, before, world.run, world.results / "index.html")


@pytest.mark.parametrize(
    "content", ["[1, 2]", "{not json", '{"schema_version": 99, "variants": {}}']
)
def test_report_of_a_damaged_run_is_one_line(world: World, content: str) -> None:
    (world.run / "summary.json").write_text(content)
    before = world.before()
    one_line(in_process("harness.commands.report", f"--run={world.run}"), 2, "summary.json")
    untouched(world, before)


def test_compare_with_a_damaged_run_is_one_line(world: World) -> None:
    bad = world.root / "bad_run"
    shutil.copytree(world.run, bad, symlinks=True)
    (bad / "summary.json").write_text('{"variants": 3}')
    out = world.root / "cmp"
    before = world.before()
    one_line(
        in_process("harness.commands.compare", f"--a={world.run}", f"--b={bad}", f"--out={out}"),
        2,
        "variants",
    )
    untouched(world, before, out)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_reanalyze_refuses_an_exported_copy_and_changes_nothing(world: World) -> None:
    """An export leaves out dump/ and profile/; analysing the copy again would replace the
    profile and compile sections with empty ones, so it is refused, naming what is missing."""
    copy = world.root / "copy"
    assert in_process("harness.commands.export", f"--run={world.run}", f"--to={copy}").code == 0
    before = _tree(copy)
    line = one_line(in_process("harness.commands.reanalyze", f"--run={copy}"), 2, "reanalyze needs")
    assert "variants/eager/dump" in line and "make report" in line
    assert _tree(copy) == before
    # The full run it came from is analysed again as before.
    assert in_process("harness.commands.reanalyze", f"--run={world.run}").code == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cpu", "h200", "h200x2"])
def test_reanalyze_leaves_each_committed_reference_as_it_is(name: str, tmp_path: Path) -> None:
    copy = tmp_path / name
    shutil.copytree(REPO / "results" / "reference" / name, copy)
    before = _tree(copy)
    one_line(in_process("harness.commands.reanalyze", f"--run={copy}"), 2, "lacks variants/")
    assert _tree(copy) == before
    assert in_process("harness.commands.report", f"--run={copy}").code == 0
    # Read through the typed records (issue 26), the report is byte for byte the committed one.
    assert (copy / "report.md").read_bytes() == before["report.md"]
    # Every page renders its emphasis as markup (issue 27): no `**` or `*x*` left as text.
    from tests.html_helpers import stray_markers

    for page in [copy / "report.html", *copy.glob("variants/*/report.html")]:
        assert stray_markers(page.read_text()) == [], page
    assert len(list(copy.glob("variants/*/report.html"))) == len(list(copy.glob("variants/*/")))
    summary = json.loads((copy / "summary.json").read_text())
    assert summary == json.loads(before["summary.json"])
    assert all("profile" in v for v in summary["variants"].values() if v.get("hlo"))


def test_reanalyze_of_an_interrupted_run_works(world: World) -> None:
    manifest = json.loads((world.run / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (world.run / "manifest.json").write_text(json.dumps(manifest))
    for name in ("matmul_only", "xla_lax_cond"):
        (world.run / "variants" / name / "result.json").unlink()
    (world.run / "timing.json").unlink()
    result = in_process("harness.commands.reanalyze", f"--run={world.run}")
    assert result.code == 0, result.stderr
    summary = json.loads((world.run / "summary.json").read_text())
    assert (
        summary["variants"]["matmul_only"]["identity"]["reason"] == "not captured (no result.json)"
    )


@pytest.mark.parametrize("content", ["{not json", "[]", '{"config": 5}'])
def test_resume_with_a_damaged_manifest_is_one_line(world: World, content: str) -> None:
    (world.run / "manifest.json").write_text(content)
    before = world.before()
    one_line(
        harness_main(world, *WORLD_STUDY, f"--resume={world.run.name}"),
        2,
        "--resume",
    )
    untouched(world, before)


def test_resume_of_a_folder_without_manifest_lists_the_runs(world: World) -> None:
    before = world.before()
    one_line(
        harness_main(world, *WORLD_STUDY, "--resume=20991231-000000"),
        2,
        world.run.name,
    )
    untouched(world, before)
