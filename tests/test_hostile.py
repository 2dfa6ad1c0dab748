"""Hostile input and faults, as a hostile user would try them, class by class.

Every case asserts four things: the exit status; exactly one line on stderr and no traceback;
nothing written outside the command's output folder (a snapshot of everything else before and
after); and nothing lost (a finished run that sits beside the output is byte-for-byte intact).
Config cases run in-process through the entry point's `main()`; the rest run the real command.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as stdio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aborting_program import STUDY
from conftest import REPO, TINY, harness_env, once_per_session, run_harness

CONFIGS = REPO / "configs"
MINIMAL = "experiment: t\nproblem: {m: 8, k: 4, n: 4}\nvariants:\n  - {name: xla, mode: jit}\n"


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


# --- the world each case runs in --------------------------------------------------------------


def _under(path: Path, folders: tuple[Path, ...]) -> bool:
    """True when `path` (not followed if it is a link) is one of `folders` or inside one."""
    return any(path == f or f in path.parents for f in folders)


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every file and link under root (except `skip`), with a hash of its content or target."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if _under(path, skip):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        elif path.is_dir():
            out[rel] = "dir"
    return out


@dataclass
class World:
    """tmp/sentinel (files nobody may touch), tmp/results holding one finished run."""

    root: Path
    results: Path
    run: Path
    sentinel: Path

    def before(self) -> dict[str, str]:
        return snapshot(self.root)


# The finished run each case runs beside: the default study shrunk as conftest.TINY shrinks it,
# with the variants the cases name. Every case copies it and hashes it twice; the session's
# 13-variant cpu_run cost 0.8 CPU-s a case for that alone.
WORLD_STUDY = ("--config=gelu.yaml", *TINY, "--config.select=eager,xla,xla_lax_cond,matmul_only")


@pytest.fixture(scope="session")
def world_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def study(root: Path) -> None:
        proc = run_harness(*WORLD_STUDY, results_root=root)
        if proc.returncode != 0:
            raise AssertionError(f"the world's study failed:\n{proc.stdout}\n{proc.stderr}")

    found = once_per_session(tmp_path_factory, "hostile_world", study)
    return (found / "gelu" / "latest").resolve()


@pytest.fixture
def world(tmp_path: Path, world_run: Path) -> World:
    results = tmp_path / "results"
    run = results / "gelu" / world_run.name
    shutil.copytree(world_run, run, symlinks=True)
    (results / "gelu" / "latest").symlink_to(run.name)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("mine\n")
    (sentinel / "nested").mkdir()
    (sentinel / "nested" / "data.bin").write_bytes(os.urandom(64))
    return World(tmp_path, results, run, sentinel)


def run_outputs(world: World, experiment: str) -> tuple[Path, ...]:
    """What a run of `experiment` may write under the results root: its own folder, the
    results index, the host's ceiling cache; and the config file the test wrote."""
    r = world.results
    return (r / experiment, r / "index.html", r / ".cache", world.root / "c.yaml")


def one_line(result: Result, code: int, *words: str) -> str:
    """Asserts the exit status, a single stderr line without traceback, and the words in it."""
    assert result.code == code, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def untouched(world: World, before: dict[str, str], *outputs: Path) -> None:
    """Asserts nothing outside `outputs` changed, and the finished run is intact."""
    after = snapshot(world.root, outputs)
    expected = {k: v for k, v in before.items() if not _under(world.root / k, outputs)}
    assert after == expected


# --- running the entry points ------------------------------------------------------------------


def _in_process(module: str, *args: str) -> Result:
    """Runs an entry point's main() in this process, as its command line would."""
    from absl import flags

    from harness.commands import cli

    entry = __import__(module, fromlist=["main"])
    if hasattr(entry, "define_flags"):
        entry.define_flags()
    flags.FLAGS.unparse_flags()
    out, err = stdio.StringIO(), stdio.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            argv = flags.FLAGS(["prog", *args], known_only=module == "harness.commands.study")
        except flags.Error as e:
            print(f"error: {e}", file=sys.stderr)
            return Result(2, out.getvalue(), err.getvalue())
        code = cli.guarded(entry.main)(argv)
    return Result(code, out.getvalue(), err.getvalue())


def harness_main(world: World, *args: str) -> Result:
    return _in_process("harness.commands.study", f"--results_root={world.results}", *args)


def command(*argv: str, timeout: float = 300, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=env or harness_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def config(world: World, text: str, name: str = "c.yaml") -> Path:
    path = world.root / name
    path.write_text(text)
    return path


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
    result = _in_process("harness.commands.study", f"--config={cfg}", f"--results_root={root}")
    one_line(result, 2, "results_root" if root != str(world.root / ("x" * 300) / "results") else "")
    untouched(world, before)


# ==============================================================================================
# 2. Data loss: nothing is deleted or overwritten unless the tool made it.


def export(world: World, run: Path, to: Path) -> Result:
    return _in_process("harness.commands.export", f"--run={run}", f"--to={to}")


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
    result = _in_process(
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
    result = _in_process("harness.commands.analyze", f"--dump={dump}", f"--out={out}")
    one_line(result, 2, "only replaces an empty folder")
    untouched(world, before)


# ==============================================================================================
# 3. Writes outside the output folder: links are never followed out.


def test_report_replaces_a_planted_plots_link(world: World) -> None:
    shutil.rmtree(world.run / "plots")
    (world.run / "plots").symlink_to(world.sentinel)
    before = world.before()
    result = _in_process("harness.commands.report", f"--run={world.run}")
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
    one_line(_in_process(module, f"--run={latest}"), 2, "outside its own folder")
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
    result = _in_process("harness.commands.reanalyze", f"--run={world.run}")
    assert result.code == 0, (
        result.stderr
    )  # the variant's analysis notes the refusal; the run goes on
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
    (dump / f"{BACKTRACKING_NAME}.txt").write_text(hlo.read_text())
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
        _in_process(
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
    result = _in_process("harness.commands.report", f"--run={world.run}")
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
    one_line(_in_process("harness.commands.report", f"--run={world.run}"), 2, "summary.json")
    untouched(world, before)


def test_compare_with_a_damaged_run_is_one_line(world: World) -> None:
    bad = world.root / "bad_run"
    shutil.copytree(world.run, bad, symlinks=True)
    (bad / "summary.json").write_text('{"variants": 3}')
    out = world.root / "cmp"
    before = world.before()
    one_line(
        _in_process("harness.commands.compare", f"--a={world.run}", f"--b={bad}", f"--out={out}"),
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
    assert _in_process("harness.commands.export", f"--run={world.run}", f"--to={copy}").code == 0
    before = _tree(copy)
    line = one_line(
        _in_process("harness.commands.reanalyze", f"--run={copy}"), 2, "reanalyze needs"
    )
    assert "variants/eager/dump" in line and "make report" in line
    assert _tree(copy) == before
    # The full run it came from is analysed again as before.
    assert _in_process("harness.commands.reanalyze", f"--run={world.run}").code == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cpu", "h200", "h200x2"])
def test_reanalyze_leaves_each_committed_reference_as_it_is(name: str, tmp_path: Path) -> None:
    copy = tmp_path / name
    shutil.copytree(REPO / "results" / "reference" / name, copy)
    before = _tree(copy)
    one_line(_in_process("harness.commands.reanalyze", f"--run={copy}"), 2, "lacks variants/")
    assert _tree(copy) == before
    assert _in_process("harness.commands.report", f"--run={copy}").code == 0
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
    result = _in_process("harness.commands.reanalyze", f"--run={world.run}")
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


# ==============================================================================================
# 6. Crash isolation, resume, races and signals: real commands, real processes.


@contextlib.contextmanager
def tagged() -> Iterator[dict[str, str]]:
    """An environment with a unique tag, to find any process the run leaves behind."""
    tag = uuid.uuid4().hex
    env = {**harness_env(), "HARNESS_TEST_TAG": tag}
    yield env
    deadline = time.time() + 10
    while time.time() < deadline and tagged_processes(tag):
        time.sleep(0.2)
    assert tagged_processes(tag) == [], "a process outlived the run"


def tagged_processes(tag: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if f"HARNESS_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
    return found


# A program whose bfloat16 variant aborts its process as an XLA CHECK failure would
# (tests/aborting_program.py): the variant between two that work.
ABORTING = STUDY.format(experiment="crash", more="")

SIGNALLED = """\
experiment: crash
problem: {m: 16, k: 32, n: 32}
measure: {warmup: 1, steps: 2}
profile: {enabled: false}
timing: {rounds: 3, budget_s: 0.3, max_budget_s: 0.3}
variants:
  - {name: xla, mode: jit}
  - {name: eager, mode: eager}
  - {name: matmul_only, mode: matmul_only}
"""


def test_a_variant_that_aborts_the_process_is_recorded_and_the_run_goes_on(world: World) -> None:
    cfg = config(world, ABORTING)
    before = world.before()
    with tagged() as env:
        result = command(
            "-m", "harness", f"--config={cfg}", f"--results_root={world.results}", env=env
        )
    assert result.code == 1, result.stderr
    run = (world.results / "crash" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())["variants"]
    dies = summary["dies"]["identity"]
    assert dies["status"] == "failed" and dies["failure"]["kind"] == "crash"
    assert (
        dies["failure"]["signal"] == "SIGABRT" and "crashed the process (SIGABRT)" in dies["reason"]
    )
    assert summary["xla"]["identity"]["status"] == "ok"
    assert summary["eager"]["identity"]["status"] == "ok"
    assert summary["eager"]["timing"]["step_s"] > 0  # timed by the worker that took over
    assert json.loads((run / "manifest.json").read_text())["workers"] == 2
    assert "failed variants: dies" in result.stderr
    untouched(
        world,
        before,
        world.results / "crash",
        world.results / "index.html",
        world.results / ".cache",
    )


def popen(
    world: World, *args: str, env: dict[str, str], hook: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """Starts `python -m harness`, or with `hook` (action, function, word) the same run through
    tests/hooked_harness.py, which wraps that function (see its docstring)."""
    start = [str(REPO / "tests" / "hooked_harness.py"), *hook] if hook else ["-m", "harness"]
    return subprocess.Popen(
        [sys.executable, *start, f"--results_root={world.results}", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 240) -> list[str]:
    """Reads stdout until a line starts with `prefix`; returns the lines read."""
    seen: list[str] = []
    deadline = time.time() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return seen
        assert time.time() < deadline, seen
    raise AssertionError(f"the run ended before {prefix!r}: {seen}")


def signalled(world: World, when: str, signals: tuple[int, ...]) -> tuple[Result, Path | None]:
    """Starts a small run, sends `signals` at `when` ('start', '[2/', '-- analysis', ...).

    'start' is sent by the run itself as it is about to make its folder (the config read, the
    worker starting); at '-- STAGE' the run holds at that stage's start, and at '[N/' once it
    has printed variant N's line, until signalled."""
    cfg = config(world, SIGNALLED)
    with tagged() as env:
        if when == "start":
            hook: tuple[str, ...] = ("sigint", "harness.study.runs.new_run", "-")
        elif when.startswith("-- "):
            hook = ("hold", "harness.study.run._stage", when.removeprefix("-- "))
        else:
            hook = ("hold", "harness.study.run._progress", when.strip("[/"))
        proc = popen(world, f"--config={cfg}", env=env, hook=hook)
        if when != "start":
            wait_for_line(proc, when)
            for sig in signals:
                proc.send_signal(sig)
                time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    runs = (
        [p for p in (world.results / "crash").glob("2*")]
        if (world.results / "crash").exists()
        else []
    )
    return Result(proc.returncode, out, err), (runs[0] if runs else None)


def test_sigint_at_start_up_leaves_no_folder(world: World) -> None:
    before = world.before()
    result, run = signalled(world, "start", (signal.SIGINT,))
    one_line(result, 130, "interrupted")
    assert run is None
    untouched(world, before, world.root / "c.yaml")


# Sends SIGINT to itself as `module` starts to import, then runs `python -m harness`: the
# signal lands while the modules that import it are half initialised.
INTERRUPT_DURING_IMPORT = """
import importlib.abc, os, runpy, signal, sys
module = sys.argv.pop(1)
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv[0] = "harness"
runpy.run_module("harness", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["absl.flags", "harness.config.schema", "harness.study.runs"])
def test_sigint_while_a_module_is_half_imported_is_one_line(world: World, module: str) -> None:
    cfg = config(world, SIGNALLED)
    before = world.before()
    with tagged() as env:
        result = command(
            "-c",
            INTERRUPT_DURING_IMPORT,
            module,
            f"--config={cfg}",
            f"--results_root={world.results}",
            env=env,
        )
    one_line(result, 130, "interrupted")
    assert not (world.results / "crash").exists()
    untouched(world, before, world.root / "c.yaml")


@pytest.mark.parametrize(
    ("when", "signals"),
    [
        ("[2/", (signal.SIGTERM,)),
        ("-- timing", (signal.SIGINT,)),
        ("-- analysis", (signal.SIGINT,)),
        ("-- report", (signal.SIGINT, signal.SIGINT)),
    ],
    ids=["capture_sigterm", "timing_sigint", "analysis_sigint", "report_double_sigint"],
)
def test_a_signal_at_any_stage_leaves_a_resumable_run(
    world: World, when: str, signals: tuple[int, ...]
) -> None:
    before = world.before()
    result, run = signalled(world, when, signals)
    line = one_line(result, 130, "interrupted", "--resume=")
    assert run is not None and run.name in line
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    untouched(world, before, *run_outputs(world, "crash"))


def test_a_resume_redoes_a_corrupt_variant_and_a_second_resume_at_once_is_refused(
    world: World,
) -> None:
    """One resume of an interrupted run whose matmul_only result is corrupt: it redoes that
    variant, keeps the others, and holds the run's lock, so a second resume meanwhile is
    refused in one line. (A missing result is redone too: test_faults.py's SIGTERM test.)"""
    manifest = json.loads((world.run / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (world.run / "manifest.json").write_text(json.dumps(manifest))
    (world.run / "variants" / "matmul_only" / "result.json").write_text("{corrupt")
    args = (*WORLD_STUDY, f"--resume={world.run.name}")
    with tagged() as env:
        first = popen(world, *args, env=env)
        seen = wait_for_line(first, "[1/")  # the first holds the run's lock by now
        second = command("-m", "harness", f"--results_root={world.results}", *args, env=env)
        # Read on through the same file: communicate() would lose what it has buffered.
        assert first.stdout is not None and first.stderr is not None
        out, err = first.stdout.read(), first.stderr.read()
        first.wait(timeout=300)
    assert first.returncode == 0, err
    one_line(second, 2, "in use by another harness process")
    stdout = "".join(seen) + out
    assert re.search(r"^\[\d+/\d+\] matmul_only +ok", stdout, re.M)
    assert re.search(r"^\[\d+/\d+\] xla +kept from the interrupted run", stdout, re.M)


def test_sigkill_leaves_no_temporary_folder_or_process(world: World) -> None:
    before_tmp = {p.name for p in Path(os.environ.get("TMPDIR", "/tmp")).iterdir()}
    with tagged() as env:
        proc = popen(world, "--config=gelu.yaml", *TINY, env=env)
        wait_for_line(proc, "[2/")
        proc.kill()
        proc.communicate(timeout=60)
    after_tmp = {p.name for p in Path(os.environ.get("TMPDIR", "/tmp")).iterdir()}
    assert not {n for n in after_tmp - before_tmp if "harness" in n}


# ==============================================================================================
# 7. Environment faults, for real: a small tmpfs in a private mount namespace (root only).


def unshare_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True
    )
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not unshare_ok(), reason="unshare -m is not permitted here")


def in_namespace(script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
        cwd=REPO,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.study
@needs_namespace
def test_disk_full_is_one_line_keeps_finished_variants_and_resume_finishes(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    run_cmd = f"{sys.executable} -m harness --results_root={mount}/results --config=gelu.yaml {' '.join(TINY)}"
    script = f"""
mount -t tmpfs -o size=3m tmpfs {mount}
{run_cmd} > {tmp_path}/first.out 2> {tmp_path}/first.err; echo "first=$?"
mount -o remount,size=200m {mount}
id=$(ls {mount}/results/gelu | grep -v latest | head -1)
{run_cmd} --resume=$id > {tmp_path}/second.out 2> {tmp_path}/second.err; echo "second=$?"
cp -r {mount}/results {tmp_path}/kept
"""
    proc = in_namespace(script)
    assert "first=1" in proc.stdout, (proc.stdout, proc.stderr)
    err = (tmp_path / "first.err").read_text()
    one_line(Result(1, "", err), 1, "No space left on device")
    assert "second=0" in proc.stdout, (tmp_path / "second.err").read_text()
    run = next(p for p in (tmp_path / "kept" / "gelu").iterdir() if not p.is_symlink())
    assert json.loads((run / "manifest.json").read_text())["status"] == "complete"
    assert "kept from the interrupted run" in (tmp_path / "second.out").read_text()


@needs_namespace
def test_a_read_only_run_folder_is_one_line(tmp_path: Path, world_run: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    script = f"""
mount -t tmpfs -o size=50m tmpfs {mount}
mkdir -p {mount}/results/gelu && cp -r {world_run} {mount}/results/gelu/
sed -i 's/"status": "complete"/"status": "interrupted"/' {mount}/results/gelu/{world_run.name}/manifest.json
mount -o remount,ro {mount}
{sys.executable} -m harness.report --run={mount}/results/gelu/{world_run.name} 2> {tmp_path}/report.err; echo "report=$?"
{sys.executable} -m harness --results_root={mount}/results {" ".join(WORLD_STUDY)} --resume={world_run.name} 2> {tmp_path}/resume.err; echo "resume=$?"
"""
    proc = in_namespace(script)
    assert "report=2" in proc.stdout, (proc.stdout, proc.stderr)
    one_line(Result(2, "", (tmp_path / "report.err").read_text()), 2, "Read-only file system")
    assert "resume=2" in proc.stdout
    one_line(Result(2, "", (tmp_path / "resume.err").read_text()), 2, "Read-only file system")
