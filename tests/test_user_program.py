"""Your own function through the full study: a tiny flax MLP (examples/mlp.py) as the program.

One real run of a small program config is shared by the tests: every applicable variant runs,
its numerics are checked against the function itself in float64, its FLOPs are our cost model
of the unoptimized HLO, the recompile halves the first input, and the report ranks the clusters
and rolls them up by source line. Config mistakes are refused in one line naming file and key.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, harness_env, read_summary, run_harness

from harness.config import ConfigError, load
from harness.findings import read_facts, words
from harness.records import events_file, run_files
from harness.records.summary import load_summary
from harness.store.runfolder import VariantFolder

MLP_FILE = REPO / "examples" / "mlp.py"
ROWS, FEATURES = 16, 32

CONFIG = f"""
experiment: tiny_mlp
seed: 3
baseline: xla
program:
  function: examples.mlp:apply
  init: examples.mlp:init
  inputs:
    - {{shape: [{ROWS}, {FEATURES}], dtype: float32}}
variants:
  - {{name: eager, mode: eager}}
  - {{name: xla, mode: jit}}
  - name: xla_no_fusion
    mode: jit
    xla_options: {{xla_disable_hlo_passes: "fusion,priority-fusion,multi_output_fusion"}}
  - {{name: xla_bf16, mode: jit, program: {{dtype: bfloat16, w_dtype: bfloat16}}}}
"""

# The study shrunk as conftest's TINY shrinks the GELU one (its shapes are in CONFIG).
TINY_PROGRAM = (
    "--config.measure.steps=3",
    "--config.measure.warmup=1",
    "--config.profile.steps=2",
    "--config.timing.rounds=4",
    "--config.timing.budget_s=0.5",
    "--config.dump.passes=false",  # per-pass dumps slow every compile; nothing here reads them
)


@pytest.fixture(scope="module")
def program_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one complete run of the tiny MLP program on the CPU."""
    root = tmp_path_factory.mktemp("program")
    config = root / "tiny_mlp.yaml"
    config.write_text(CONFIG)
    proc = run_harness(f"--config={config}", *TINY_PROGRAM, results_root=root / "results")
    if proc.returncode != 0:
        raise AssertionError(f"the program study failed:\n{proc.stdout}\n{proc.stderr}")
    return (root / "results" / "tiny_mlp" / "latest").resolve()


def mlp_lines() -> dict[str, int]:
    """The line of each layer in examples/mlp.py, found by its text."""
    found = {}
    for i, line in enumerate(MLP_FILE.read_text().splitlines(), 1):
        for name, text in (
            ("up", 'name="up"'),
            ("norm", 'name="norm"'),
            ("gelu", "nn.gelu("),
            ("down", 'name="down"'),
        ):
            if text in line:
                found[name] = i
    assert len(found) == 4, found
    return found


# --- the run ----------------------------------------------------------------------------------


def test_every_variant_runs_and_passes_its_numerics(program_run: Path) -> None:
    variants = read_summary(program_run)
    assert list(variants) == ["eager", "xla", "xla_no_fusion", "xla_bf16"]
    for name, v in variants.items():
        assert v.identity.status == "ok", (name, v.identity.reason)
        assert v.numerics.ok, (name, v.numerics)
        assert v.timing.step_s is not None and v.profile.kernels_per_step, name
        assert not v.analysis_errors, (name, v.analysis_errors)
    assert variants["xla_bf16"].numerics.tolerance == 2e-2
    assert variants["xla"].numerics.tolerance == 2e-3
    assert variants["xla"].identity.roles == ("baseline", "compiled")
    assert variants["eager"].identity.roles == ("eager",)


def test_the_summary_records_what_was_studied(program_run: Path) -> None:
    variants = read_summary(program_run)
    p = variants["xla"].identity.program
    hidden = 2 * FEATURES  # examples.mlp.EXPAND
    count = (FEATURES * hidden + hidden) + 2 * hidden + (hidden * FEATURES + FEATURES)
    assert (p.function, p.init) == ("examples.mlp:apply", "examples.mlp:init")
    assert [(i.shape, i.dtype) for i in p.inputs] == [((ROWS, FEATURES), "float32")]
    assert [(o.shape, o.dtype) for o in p.output] == [((ROWS, FEATURES), "float32")]
    assert (p.param_leaves, p.param_count, p.param_bytes) == (6, count, 4 * count)
    assert p.param_dtypes == ("float32",)
    assert variants["xla"].identity.problem == {}
    assert variants["xla"].identity.module == "jit_apply"
    bf16 = variants["xla_bf16"].identity.program
    assert [i.dtype for i in bf16.inputs] == ["bfloat16"]
    assert (bf16.param_dtypes, bf16.param_bytes) == (("bfloat16",), 2 * count)
    assert variants["xla_bf16"].cost.peak_precision == "bf16"


def test_the_recompile_halves_the_first_input_and_jax_says_so(program_run: Path) -> None:
    variants = read_summary(program_run)
    p = variants["xla"].identity.program
    assert [i.shape for i in p.recompile_inputs] == [(ROWS // 2, FEATURES)]
    c = variants["xla"].compile
    assert c.recompile_backend_compiles == 1
    assert f"now f32[{ROWS // 2},{FEATURES}] and before f32[{ROWS},{FEATURES}]" in (
        c.recompile_explanation or ""
    )
    assert variants["eager"].compile.recompile_s is not None


def test_flops_analytic_is_our_cost_model_of_the_unoptimized_hlo(program_run: Path) -> None:
    from harness.hlo.cost import module_cost
    from harness.hlo.parser import parse_file
    from harness.records import ladder

    variants = read_summary(program_run)
    (before,) = ladder.read_ladder(program_run / "variants" / "xla" / "ir").hlo_files("hlo_before")
    expected = module_cost(parse_file(before)).flops
    dots = 2 * 2 * ROWS * FEATURES * (2 * FEATURES)  # two GEMMs
    assert dots < expected < 1.2 * dots
    for name in ("xla", "xla_no_fusion", "eager"):
        cost = variants[name].cost
        assert cost.flops_analytic == expected, name
        assert cost.flops_analytic_source == "hlo_before", name
    assert variants["xla"].identity.program.gemm_flops == dots
    assert variants["xla"].identity.program.flops_source == "hlo_before"


def test_the_numerics_are_against_a_float64_reference(program_run: Path) -> None:
    """A float32 result can only be exactly right against itself: a reference that were the
    float32 computation would give zero error, a float64 one gives float32's rounding."""
    variants = read_summary(program_run)
    assert variants["xla"].identity.program.reference_dtypes == ("float64",)
    err = variants["xla"].numerics.rel_fro_err
    assert 1e-9 < err < 1e-5
    assert variants["xla_bf16"].numerics.rel_fro_err > 100 * err


def test_the_report_ranks_the_clusters_and_rolls_them_up_by_line(program_run: Path) -> None:
    md = (program_run / "variants" / "xla" / "report.md").read_text()  # the baseline's page
    section = md[md.index("## Where its time goes") :].split("\n## ", 1)[0]
    assert "| # | cluster | kind | time a step | % of step |" in section
    assert "| source line | time a step | % of step | clusters | largest cluster |" in section
    lines = mlp_lines()
    shown = {int(n) for n in re.findall(r"`mlp\.py:(\d+)`", section)}
    assert {lines["up"], lines["down"]} <= shown <= set(lines.values())
    # The attributed timeline is written beside it and linked (harness.program.timeline).
    timeline = run_files.read_gzipped(
        run_files.TIMELINE, program_run / "variants" / "xla" / "timeline.perfetto.json.gz"
    )
    assert any(e.cat == "cluster" for e in timeline.traceEvents)
    assert "[`timeline.perfetto.json.gz`](timeline.perfetto.json.gz)" in section
    ranking = json.loads((program_run / "variants" / "xla" / "ranking.json").read_text())
    (module,) = ranking["modules"]
    assert ranking["ranked_by"] == "device time" and module["name"] == "jit_apply"
    times = [c["time_s"] for c in module["clusters"]]
    assert times == sorted(times, reverse=True) and times[0] > 0
    by_line = {r["label"]: r for r in module["by_line"]}
    assert set(by_line) <= {f"{MLP_FILE}:{n}" for n in lines.values()}
    assert sum(r["value"] for r in by_line.values()) == pytest.approx(sum(times))
    # each cluster's time is its events' time in the profile (none nests here), per step
    kernels = json.loads((program_run / "variants" / "xla" / "kernels.json").read_text())
    steps = kernels["match"]["steps"]
    direct: dict[str, float] = {}
    for e in events_file.read(VariantFolder(program_run / "variants" / "xla")):
        direct[e.cluster] = direct.get(e.cluster, 0.0) + e.duration_ns * 1e-9 / steps
    assert {c["name"]: c["time_s"] for c in module["clusters"]} == pytest.approx(direct)
    assert sum(c["share"] for c in module["clusters"]) == pytest.approx(1.0, abs=1e-6)
    # every compiled variant has its ranking; eager runs one module per primitive
    assert {p.parent.name for p in program_run.glob("variants/*/ranking.json")} == {
        "xla",
        "xla_no_fusion",
        "xla_bf16",
    }


def test_the_report_says_what_the_study_did_not_measure(program_run: Path) -> None:
    md = (program_run / "report.md").read_text()
    assert "## The program" in md and "`examples.mlp:apply`" in md
    assert "our cost model of the unoptimized HLO" in md
    # No variant in the `host_callback` role: the claim is left out, not "not measured".
    assert "A host callback (print) splits" not in md
    keys = {o.key for o in load_summary(program_run / "summary.json").findings.observations}
    assert "host_callback_split" not in keys and "eager_launches" in keys
    assert "the tanh GELU" not in md  # a GELU-study suggestion, not this program's
    facts = read_facts(program_run, load_summary(program_run / "summary.json"))
    changes = words.config_changes(facts.variant("xla_bf16"), facts.variant("xla"))
    assert [(c.key, c.phrase) for c in changes] == [
        ("program.inputs", "the inputs' dtype bfloat16 (was float32)"),
        ("program.params", "the parameters' dtype bfloat16 (was float32)"),
    ]


# --- the reference, in this process -----------------------------------------------------------


def numpy_mlp(params: dict, x: np.ndarray) -> np.ndarray:
    """examples.mlp in float64 NumPy: Dense, LayerNorm (eps 1e-6), tanh GELU, Dense."""
    p = {k: {n: np.asarray(a, np.float64) for n, a in v.items()} for k, v in params.items()}
    h = x @ p["up"]["kernel"] + p["up"]["bias"]
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-6) * p["norm"]["scale"] + p["norm"]["bias"]
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    return h @ p["down"]["kernel"] + p["down"]["bias"]


def test_the_reference_is_the_function_in_float64_and_x64_does_not_leak(tmp_path: Path) -> None:
    import jax
    import jax.numpy as jnp

    from harness.variants import program

    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    p = load(str(config)).experiment.variant("xla").program
    args = program.args_for(p, 3)
    (ref,) = program.reference(p, args, 3)
    assert ref.dtype == np.float64
    expected = numpy_mlp(args.params, np.asarray(args.inputs[0], np.float64))
    assert np.allclose(ref, expected, rtol=1e-10, atol=1e-12)
    # x64 was on only inside the reference: nothing after it sees 64-bit types
    assert not jax.config.jax_enable_x64 and jnp.zeros(2).dtype == jnp.float32
    y32 = jax.jit(program.load_callable(p.function))(*args.args)
    assert y32.dtype == jnp.float32
    judged = program.numerics(y32, (ref,), "float32")
    # float32 is within float32's tolerance of float64, and no closer than its rounding:
    assert judged.ok and judged.tolerance == 2e-3 and judged.rel_fro_err > 1e-10
    # a reference that were the float32 computation itself would not tell the two apart
    assert program.numerics(y32, (np.asarray(y32, np.float64),), "float32").rel_fro_err == 0


# --- config errors: one line naming the file and key -------------------------------------------

GOOD = """
experiment: t
program:
  function: examples.mlp:apply
  init: examples.mlp:init
  inputs:
    - {shape: [8, 4], dtype: float32}
variants:
  - {name: xla, mode: jit}
"""


def _error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load(str(path))
    message = str(e.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{path}: "), message
    return e.value


@pytest.mark.parametrize(
    "old, new, key, says",
    [
        ("examples.mlp:apply", "examples.nowhere:apply", "program.function", "not found"),
        ("examples.mlp:apply", "examples.mlp:missing", "program.function", "no top-level"),
        ("examples.mlp:apply", "examples.mlp:EXPAND", "program.function", "not a function"),
        ("examples.mlp:apply", "examples.mlp", "program.function", "module:function"),
        ("examples.mlp:apply", "no/such/file.py:f", "program.function", "not found"),
        ("examples.mlp:init", "examples.mlp:nope", "program.init", "no top-level"),
        ("{name: xla, mode: jit}", "{name: xla, mode: matmul_only}", "variants.xla.mode", ""),
        ("{name: xla, mode: jit}", "{name: xla, mode: jit_host_callback}", "variants.xla.mode", ""),
        ("{name: xla, mode: jit}", "{name: xla, mode: torch_eager}", "variants.xla.mode", ""),
        ("[8, 4]", "[8, -4]", "program.inputs[0].shape[1]", "must be in [1,"),
        ("dtype: float32}", "dtype: float8}", "program.inputs[0].dtype", "not supported"),
        ("dtype: float32}", "dtype: float64}", "program.inputs[0].dtype", "x64"),
        ("[8, 4]", "[1, 4]", "program.inputs[0].shape", "halves"),
        ("    - {shape: [8, 4], dtype: float32}", "    - [8, 4]", "program.inputs[0]", "mapping"),
        (
            "{name: xla, mode: jit}",
            "{name: xla, mode: jit, problem: {frontend: flax_linen}}",
            "variants.xla.problem.frontend",
            "no `problem`",
        ),
        (
            "{name: xla, mode: jit}",
            "{name: xla, mode: jit, program: {function: examples.mlp:init}}",
            "variants.xla.program.function",
            "changes only",
        ),
        (
            "{name: xla, mode: jit}",
            "{name: xla, mode: jit, program: {w_dtype: int8}}",
            "variants.xla.program.w_dtype",
            "not supported",
        ),
        (
            "{name: xla, mode: jit}",
            "{name: xla, mode: jit, sharding: {mesh: [2], axes: [x], x: [x, null]}}",
            "variants.xla.sharding",
            "only `mesh` and `axes`",
        ),
    ],
)
def test_a_bad_program_config_is_one_line_naming_file_and_key(
    tmp_path: Path, old: str, new: str, key: str, says: str
) -> None:
    assert old in GOOD
    e = _error(tmp_path, GOOD.replace(old, new))
    assert e.key == key and says in e.problem, str(e)
    if key.endswith(".mode"):
        assert "program study" in e.problem and "allowed: eager, jit" in e.problem


@pytest.mark.study
def test_a_search_runs_on_a_program(tmp_path: Path) -> None:
    """`make search` with a program: each candidate compiled, checked against the float64
    reference and timed against the default."""
    config = tmp_path / "search.yaml"
    config.write_text(
        GOOD.replace("[8, 4]", f"[{ROWS}, {FEATURES}]")
        + "search: {base: xla, budget_s: 60, max_candidates: 2,"
        + " space: {xla_options: {xla_cpu_enable_fast_math: [false, true]}}}\n"
        + "profile: {enabled: false}\nmeasure: {warmup: 1, steps: 3}\n"
        + "timing: {rounds: 4, batch_s: 0.005, budget_s: 0.5, max_budget_s: 0.5}\n"
    )
    proc = run_harness(f"--config={config}", results_root=tmp_path / "results")
    assert proc.returncode == 0, proc.stderr
    found = json.loads((tmp_path / "results" / "t" / "latest" / "search.json").read_text())
    candidates = {c["name"]: c for c in found["candidates"]}
    assert set(candidates) == {"default", "c01"}
    for c in candidates.values():
        assert c["status"] in ("ok", "same_program") and c["numerics_ok"], c
    assert candidates["c01"]["xla_options"] == {"xla_cpu_enable_fast_math": True}
    assert candidates["default"]["step_s"] is not None


def test_a_search_of_a_program_varies_options_only(tmp_path: Path) -> None:
    search = "search: {base: xla, space: {xla_options: {xla_cpu_enable_fast_math: [false, true]}}}"
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD + search + "\n")
    assert load(str(path)).experiment.search.base == "xla"
    e = _error(tmp_path, GOOD + "search: {base: xla, space: {w_dtype: [bfloat16]}}\n")
    assert e.key == "search.space.w_dtype"


def test_the_worker_refuses_what_is_no_callable_or_refuses_the_arguments(tmp_path: Path) -> None:
    """Validation reads the module; only an import can tell that `apply = VALUE` is no function."""
    from harness.capture.preflight import check_program

    def config(source: str, name: str) -> Path:
        module = tmp_path / f"{name}.py"  # a file imports once per process: one per case
        module.write_text(source)
        text = GOOD.replace("examples.mlp:apply", f"{module}:apply")
        path = tmp_path / f"{name}.yaml"
        path.write_text(text.replace("examples.mlp:init", f"{module}:init"))
        return path

    init = "def init(key, x):\n    return {}\n"
    # the source alone does not say that `apply = VALUE` is no function: load accepts it
    exp = load(str(config("VALUE = 3\napply = VALUE\n" + init, "value"))).experiment
    with pytest.raises(ConfigError) as e:
        check_program(exp)
    assert e.value.key == "program.function" and "not callable" in e.value.problem
    # the worker also traces both on the configured shapes, so a wrong signature is refused
    exp = load(str(config("def apply(params, x, y):\n    return x\n" + init, "arity"))).experiment
    with pytest.raises(ConfigError) as e:
        check_program(exp)
    assert e.value.key == "program.function" and "function(params, *inputs) raised" in str(e.value)
    source = "def apply(params, x):\n    return x\n\ndef init(key):\n    return {}\n"
    with pytest.raises(ConfigError) as e:
        check_program(load(str(config(source, "init_arity"))).experiment)
    assert e.value.key == "program.init" and "TypeError" in e.value.problem
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.study
def test_the_cli_refuses_a_missing_module_in_one_line_with_status_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(GOOD.replace("examples.mlp:apply", "examples.nowhere:apply"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", f"--config={config}", f"--results_root={tmp_path}"],
        cwd=REPO,
        env=harness_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: program.function: ")
    assert not (tmp_path / "t").exists()
