"""A catalogue of bad inputs, each run through `python -m harness` as a user would run it.

Every case is a real file or a real flag. Each one must: exit 2; print exactly one line on
stderr that names the file or flag, the key, and what would be valid; print no traceback; and
leave no results folder behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import run_harness

pytestmark = pytest.mark.study  # each case is a `python -m harness` process

MINIMAL = """\
experiment: t
problem: {m: 8, k: 4, n: 4}
variants:
  - {name: xla, mode: jit}
"""

CFG = "{cfg}"  # replaced by the path of the case's config file


class Case(NamedTuple):
    text: str | None  # the config file's text; None: no file is written
    args: tuple[str, ...]  # flags after --config=<file>
    where: str  # the file or flag the error must name
    key: str  # the key it must name ('' when the whole file or flag is wrong)
    valid: str  # what would be valid, as the message words it


def _with(old: str, new: str) -> str:
    assert old in MINIMAL
    return MINIMAL.replace(old, new)


XLA_OPTION = MINIMAL.replace("mode: jit}", "mode: jit, xla_options: {OPT}}")

CASES = {
    # Unknown keys, with a suggestion when one is close and the valid keys when none is.
    "unknown_top_level_key": Case(
        _with("problem:", "problm:"), (), CFG, "problm", "did you mean 'problem'"
    ),
    "unknown_variant_key": Case(
        _with("mode: jit", "mod: jit"), (), CFG, "variants.xla.mod", "did you mean 'mode'"
    ),
    "unknown_key_far_from_any": Case(
        MINIMAL,
        ("--config.problem.zz=1",),
        "flag --config.problem.zz",
        "problem.zz",
        "valid: m, k, n, batch, dtype",
    ),
    "override_of_missing_key": Case(
        MINIMAL,
        ("--config.problem.mm=3",),
        "flag --config.problem.mm",
        "problem.mm",
        "did you mean 'm'",
    ),
    "override_of_missing_variant": Case(
        MINIMAL,
        ("--config.variants.xlaa.mode=jit",),
        "flag --config.variants.xlaa.mode",
        "variants.xlaa.mode",
        "did you mean 'xla'",
    ),
    # Wrong types and bad sizes.
    "wrong_type_seed": Case(MINIMAL + "seed: abc\n", (), CFG, "seed", "expected int"),
    "wrong_type_bool": Case(
        _with("n: 4}", "n: 4, bias: maybe}"), (), CFG, "problem.bias", "expected bool"
    ),
    "wrong_type_section": Case(MINIMAL + "measure: 3\n", (), CFG, "measure", "expected a mapping"),
    "m_zero": Case(_with("m: 8", "m: 0"), (), CFG, "problem.m", "must be in [2, 1048576]"),
    "k_negative_flag": Case(
        MINIMAL,
        ("--config.problem.k=-1",),
        "flag --config.problem.k",
        "problem.k",
        "must be in [1, 1048576]",
    ),
    "n_not_integer": Case(_with("n: 4", "n: 4.5"), (), CFG, "problem.n", "expected int"),
    "m_not_integer_flag": Case(
        MINIMAL,
        ("--config.problem.m=eight",),
        "flag --config.problem.m",
        "problem.m",
        "expected int",
    ),
    "variant_batch_negative": Case(
        _with("mode: jit}", "mode: jit, problem: {batch: [2, -1]}}"),
        (),
        CFG,
        "variants.xla.problem.batch[1]",
        "must be in [1, 4096]",
    ),
    "unsupported_dtype": Case(
        _with("n: 4}", "n: 4, dtype: float8}"),
        (),
        CFG,
        "problem.dtype",
        "allowed: float32, bfloat16, float16",
    ),
    "too_big_for_memory": Case(
        _with("m: 8, k: 4, n: 4", "m: 131072, k: 131072, n: 8"),
        (),
        CFG,
        "variants.xla.problem",
        "host physical memory; make m, k or n smaller",
    ),
    "unknown_mode": Case(
        _with("mode: jit", "mode: graph"), (), CFG, "variants.xla.mode", "allowed: eager, jit"
    ),
    "duplicate_variant": Case(
        MINIMAL + "  - {name: xla, mode: eager}\n",
        (),
        CFG,
        "variants[1].name",
        "each variant needs a unique name",
    ),
    "empty_variant_list": Case(
        "experiment: t\nvariants: []\n", (), CFG, "variants", "name at least one variant"
    ),
    "baseline_names_no_variant": Case(
        MINIMAL + "baseline: nope\n", (), CFG, "baseline", "allowed: xla"
    ),
    "select_names_no_variant": Case(
        MINIMAL, ("--config.select=xla,nope",), CFG, "select", "allowed: xla"
    ),
    "variant_name_with_slash": Case(
        _with("name: xla", "name: a/b"), (), CFG, "variants[0].name", "without '/'"
    ),
    # XLA options: names and values are checked by the installed jaxlib before any compile.
    "xla_option_unknown_name": Case(
        XLA_OPTION.replace("OPT", "xla_no_such_option: true"),
        (),
        CFG,
        "variants.xla.xla_options.xla_no_such_option",
        "DebugOptions fields",
    ),
    "xla_option_unknown_name_flag": Case(
        MINIMAL,
        ("--config.variants.xla.xla_options.xla_cpu_fast_maths=true",),
        "flag --config.variants.xla.xla_options.xla_cpu_fast_maths",
        "variants.xla.xla_options.xla_cpu_fast_maths",
        "No such compile option",
    ),
    "xla_option_value_wrong_type": Case(
        XLA_OPTION.replace("OPT", "xla_cpu_enable_fast_math: banana"),
        (),
        CFG,
        "variants.xla.xla_options.xla_cpu_enable_fast_math",
        "not a valid bool value",
    ),
    "xla_option_int_value_wrong_type": Case(
        XLA_OPTION.replace("OPT", "xla_backend_optimization_level: high"),
        (),
        CFG,
        "variants.xla.xla_options.xla_backend_optimization_level",
        "not a valid int32 value",
    ),
    "xla_option_value_that_aborts_xla": Case(
        XLA_OPTION.replace("OPT", "xla_cpu_parallel_codegen_split_count: -1"),
        (),
        CFG,
        "variants.xla.xla_options.xla_cpu_parallel_codegen_split_count",
        "crashed the process (SIGABRT)",
    ),
    "xla_options_that_abort_together": Case(
        XLA_OPTION.replace(
            "OPT", "xla_disable_hlo_passes: fusion, xla_enable_hlo_passes_only: fusion"
        ),
        (),
        CFG,
        "variants.xla.xla_options",
        "options that XLA accepts together",
    ),
    "xla_option_value_a_list": Case(
        XLA_OPTION.replace("OPT", "xla_disable_hlo_passes: [fusion]"),
        (),
        CFG,
        "variants.xla.xla_options.xla_disable_hlo_passes",
        "bool, number or string",
    ),
    "xla_option_without_prefix": Case(
        XLA_OPTION.replace("OPT", "fast_math: true"),
        (),
        CFG,
        "variants.xla.xla_options.fast_math",
        "start with 'xla_'",
    ),
    # The file itself.
    "missing_file": Case(None, (), CFG, "", "config file not found"),
    "yaml_syntax_error": Case(
        "experiment: t\nproblem: {m: 8\n  k: 4\n", (), CFG, "", "YAML syntax error at line 3"
    ),
    "yaml_not_a_mapping": Case("- a\n- b\n", (), CFG, "", "must be a mapping of keys"),
    "yaml_python_tag": Case(
        "experiment: !!python/object/apply:os.system [echo hi]\n",
        (),
        CFG,
        "",
        "configs are plain YAML",
    ),
    # Experiment names become folder names.
    "experiment_name_slash": Case(
        MINIMAL,
        ("--config.experiment=a/b",),
        "flag --config.experiment",
        "experiment",
        "without '/' or '..'",
    ),
    "experiment_name_dotdot": Case(
        _with("experiment: t", "experiment: .."), (), CFG, "experiment", "without '/' or '..'"
    ),
    "experiment_name_control_char": Case(
        _with("experiment: t", 'experiment: "a\\nb"'),
        (),
        CFG,
        "experiment",
        "letters, digits",
    ),
    # Override syntax.
    "override_without_value": Case(
        MINIMAL,
        ("--config.problem.m",),
        "flag --config.problem.m",
        "problem.m",
        "write --config.problem.m=VALUE",
    ),
    "override_empty_key_part": Case(
        MINIMAL, ("--config..m=1",), "flag --config..m=1", ".m", "write --config.problem.m=64"
    ),
    "override_misspelled_prefix": Case(
        MINIMAL,
        ("--confg.problem.m=1",),
        "flag --confg.problem.m=1",
        "",
        "did you mean --config.problem.m=1?",
    ),
    "override_of_a_section": Case(
        MINIMAL,
        ("--config.problem=3",),
        "flag --config.problem",
        "problem",
        "override one key inside it",
    ),
    "override_with_control_char": Case(
        MINIMAL,
        ("--config.problem.m\nx",),
        "flag --config.problem.m\\nx",
        "problem.m\\nx",
        "=VALUE",
    ),
    "positional_argument": Case(
        MINIMAL, ("positional",), "argument 'positional'", "", "--config.KEY=VALUE"
    ),
    # --resume.
    "resume_unknown_run": Case(
        MINIMAL,
        ("--resume=20990101-000000",),
        "flag --resume=20990101-000000",
        "resume",
        "runs there: none yet",
    ),
    "resume_escapes_results": Case(
        MINIMAL,
        ("--resume=../../etc",),
        "flag --resume=../../etc",
        "resume",
        "without '/' or '..'",
    ),
    "resume_absolute_path": Case(
        MINIMAL, ("--resume=/etc",), "flag --resume=/etc", "resume", "without '/' or '..'"
    ),
}


def _config_file(tmp_path: Path, case: Case) -> Path:
    path = tmp_path / "case.yaml"
    if case.text is not None:
        path.write_text(case.text)
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_and_no_results(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    cfg = _config_file(tmp_path, case)
    results = tmp_path / "results"
    proc = run_harness(f"--config={cfg}", *case.args, results_root=results, timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("error: ") and "Traceback" not in proc.stderr
    assert case.where.replace(CFG, str(cfg)) in line, line
    assert case.key in line, line
    assert case.valid in line, line
    assert not results.exists() or not any(results.iterdir())


def test_verbosity_1_adds_the_traceback_and_still_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "case.yaml"
    cfg.write_text(MINIMAL.replace("m: 8", "m: 0"))
    proc = run_harness(
        f"--config={cfg}", "--verbosity=1", results_root=tmp_path / "results", timeout=60
    )
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"error: {cfg}: problem.m: must be")
    assert not (tmp_path / "results").exists()


def test_resume_of_an_unknown_run_lists_the_runs_that_exist(tmp_path: Path) -> None:
    cfg = tmp_path / "case.yaml"
    cfg.write_text(MINIMAL)
    results = tmp_path / "results"
    (results / "t" / "20240101-000000").mkdir(parents=True)
    (results / "t" / "20240101-000000" / "manifest.json").write_text("{}")
    proc = run_harness(f"--config={cfg}", "--resume=20240101-000001", results_root=results)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("runs there: 20240101-000000")
    assert sorted(p.name for p in (results / "t").iterdir()) == ["20240101-000000"]
