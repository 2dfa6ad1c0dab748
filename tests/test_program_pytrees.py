"""Programs as users write them (issue 29): pytree and integer inputs, a new shape that fits
every input, static keyword knobs, flags in YAML flow, per-leaf numerics, and optional probes
that never kill a variant.

One tiny run of examples/two_input.py (x and integer labels, no recompile_shapes) is shared by
the study tests; the config tests build configs only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, read_summary, run_harness

from harness.config import ConfigError, load
from harness.findings import read_facts, words
from harness.records.summary import load_summary

ROWS, FEATURES = 16, 8

CONFIG = f"""
experiment: two_input
seed: 1
baseline: xla
program:
  function: examples.two_input:loss
  init: examples.two_input:init
  inputs:
    - {{shape: [{ROWS}, {FEATURES}], dtype: float32}}
    - {{shape: [{ROWS}], dtype: int32, low: 0, high: 64}}
  kwargs: {{logits: vectorized}}
variants:
  - {{name: eager, mode: eager}}
  - {{name: xla, mode: jit}}
  - {{name: xla_loop, mode: jit, program: {{kwargs: {{logits: loop}}}}}}
  - {{name: xla_fixed_rows, mode: jit, program: {{kwargs: {{rows: {ROWS}}}}}}}
"""
TINY = (
    "--config.measure.steps=3",
    "--config.measure.warmup=1",
    "--config.profile.steps=2",
    "--config.timing.rounds=4",
    "--config.timing.budget_s=0.5",
    "--config.dump.passes=false",
)


@pytest.fixture(scope="module")
def two_input_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The folder of one run of the two-input loss, and what it printed."""
    root = tmp_path_factory.mktemp("two_input")
    config = root / "two_input.yaml"
    config.write_text(CONFIG)
    proc = run_harness(f"--config={config}", *TINY, results_root=root / "results")
    if proc.returncode != 0:
        raise AssertionError(f"the study failed:\n{proc.stdout}\n{proc.stderr}")
    return (root / "results" / "two_input" / "latest").resolve(), proc.stdout


def test_two_inputs_run_and_the_new_shape_halves_the_batch_of_both(two_input_run) -> None:
    run, _ = two_input_run
    variants = read_summary(run)
    for name, v in variants.items():
        assert v.identity.status == "ok", (name, v.identity.reason)
        assert v.numerics.ok, (name, v.numerics)
    p = variants["xla"].identity.program
    assert [(i.shape, i.dtype) for i in p.inputs] == [
        ((ROWS, FEATURES), "float32"),
        ((ROWS,), "int32"),
    ]
    assert [i.shape for i in p.recompile_inputs] == [(ROWS // 2, FEATURES), (ROWS // 2,)]
    assert p.kwargs == {"logits": "vectorized"}
    assert variants["xla_loop"].identity.program.kwargs == {"logits": "loop"}
    c = variants["xla"].compile
    assert c.recompile_backend_compiles == 1
    # the explanation is against the variant's own first trace, not the float64 reference
    text = c.recompile_explanation or ""
    assert f"now f32[{ROWS // 2},{FEATURES}] and before f32[{ROWS},{FEATURES}]" in text
    assert f"now i32[{ROWS // 2}] and before i32[{ROWS}]" in text
    assert "x64" not in text


def test_a_failing_recompile_probe_leaves_its_variant_ok(two_input_run) -> None:
    run, printed = two_input_run
    v = read_summary(run)["xla_fixed_rows"]
    assert v.identity.status == "ok" and v.numerics.ok and v.timing.step_s is not None
    (failure,) = v.identity.probe_failures
    assert failure.probe == "recompile" and f"exactly {ROWS} rows" in failure.reason
    assert v.compile.recompile_s is None
    line = next(x for x in printed.splitlines() if "xla_fixed_rows" in x and "ok" in x)
    assert "probe failed: recompile" in line
    md = (run / "report.md").read_text()
    assert "`xla_fixed_rows`: the optional recompile probe failed (ValueError" in md
    assert not read_summary(run)["xla"].identity.probe_failures


def test_a_keyword_knob_is_named_like_an_xla_option(two_input_run) -> None:
    run, _ = two_input_run
    facts = read_facts(run, load_summary(run / "summary.json"))
    (knob,) = words.config_changes(facts.variant("xla_loop"), facts.variant("xla"))
    assert (knob.key, knob.value, knob.was) == ("program.kwargs.logits", "loop", "vectorized")
    assert knob.phrase == "`logits=loop` (was `logits=vectorized`)"
    assert knob.reverse == "`logits=vectorized` (not `logits=loop`)"
    assert "| `logits=loop` |" in (run / "report.md").read_text()


# --- per-leaf numerics, in this process -----------------------------------------------------


def test_each_leaf_is_judged_by_its_own_dtype_and_integers_exactly() -> None:
    import jax.numpy as jnp

    from harness.variants import program

    ref = (np.ones(4), np.full(3, 7.0), np.arange(5.0))
    y = {"a": jnp.ones(4, jnp.bfloat16) * 1.01, "b": jnp.full(3, 7.0), "n": jnp.arange(5)}
    judged = program.numerics(y, ref, "float32")
    assert judged.ok and judged.worst_leaf == "['a']" and judged.tolerance == 2e-2
    wrong = {**y, "n": jnp.arange(5).at[2].set(3)}
    judged = program.numerics(wrong, ref, "float32")
    assert not judged.ok and judged.worst_leaf == "['n']" and judged.failed_leaves == ("['n']",)
    assert judged.tolerance == 0.0 and judged.max_abs_err == 1.0


def test_a_knob_that_cannot_run_in_float64_is_judged_against_the_default_knob(
    tmp_path: Path,
) -> None:
    """cuDNN attention takes fp16/bf16/fp8 only (its numerics probe failed on the H200): the
    reference is then the function with the experiment's kwargs, and says so."""
    from harness.variants import program

    block = REPO / "examples" / "transformer_block.py"
    exp = _load(
        tmp_path,
        f"""
experiment: attention
program:
  function: {block}:block
  init: {block}:init
  inputs: [{{shape: [2, 8, 32], dtype: float32}}]
  kwargs: {{attention: xla}}
variants:
  - {{name: xla, mode: jit}}
  - {{name: cudnn, mode: jit, program: {{kwargs: {{attention: cudnn}}}}, platforms: [cpu]}}
""",
    )
    xla, cudnn = (v.program for v in exp.variants)
    args = program.args_for(cudnn, exp.seed)
    ref, note = program.reference_for(cudnn, exp.program.kwargs, args, exp.seed)
    assert note is not None and "`attention=cudnn` does not run in float64" in note
    assert "(attention=xla)" in note
    own, none = program.reference_for(xla, exp.program.kwargs, args, exp.seed)
    assert none is None and all(np.array_equal(a, b) for a, b in zip(ref, own, strict=True))
    judged = program.numerics(program.bound(xla)(args.params, *args.inputs), ref, "float32")
    assert judged.ok


# --- config: pytrees, new shapes, kwargs, flags -----------------------------------------------

TREE = """
experiment: t
program:
  function: examples.two_input:loss
  init: examples.two_input:init
  inputs:
    - {shape: [8, 4], dtype: float32}
    - {labels: {shape: [8], dtype: int32, high: 4}, w: [{shape: [3, 8]}]}
  kwargs: {logits: vectorized}
variants:
  - {name: xla, mode: jit}
  - {name: cudnn, mode: jit, program: {kwargs: {logits: cudnn}}}
"""


def _load(tmp_path: Path, text: str, *flags: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return load(str(path), flags).experiment


def test_pytree_inputs_and_the_default_new_shape(tmp_path: Path) -> None:
    from harness.config.program import FrozenMap, InputSpec

    p = _load(tmp_path, TREE).program
    assert p.inputs[1] == FrozenMap(
        {"labels": InputSpec((8,), "int32", 0, 4), "w": (InputSpec((3, 8)),)}
    )
    # every leaf sized like the first leaf's leading 8 is halved; w's 3 is not
    assert p.new_shapes() == ((4, 4), FrozenMap({"labels": (4,), "w": ((3, 8),)}))


def test_a_gpu_only_knob_is_skipped_on_the_cpu_with_the_reason(tmp_path: Path) -> None:
    from harness.config.program import gpu_only_note

    exp = _load(tmp_path, TREE)
    assert exp.variant("cudnn").platforms == ("gpu",) and "cpu" in exp.variant("xla").platforms
    assert gpu_only_note(exp.variant("cudnn").program.kwargs) == (
        " (`logits=cudnn` works only on a GPU)"
    )
    attention = load("configs/attention_h200.yaml").experiment
    assert attention.variant("cudnn").platforms == ("gpu",)
    assert dict(attention.variant("cudnn").program.kwargs) == {"attention": "cudnn"}


def test_nested_flags_are_read_as_yaml_flow(tmp_path: Path) -> None:
    exp = _load(
        tmp_path,
        TREE,
        "--config.program.recompile_shapes=[[2,4],{labels: [2], w: [[3,2]]}]",
        "--config.program.kwargs={logits: loop}",
    )
    assert exp.program.recompile_shapes[0] == (2, 4)
    assert dict(exp.variant("xla").program.kwargs) == {"logits": "loop"}
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, TREE, "--config.program.kwargs={logits: [loop")
    assert str(e.value).startswith("flag --config.program.kwargs")
    assert "YAML flow" in str(e.value) and len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize(
    "old, new, key, says",
    [
        ("[8, 4], dtype: float32}", "[1, 4], dtype: float32}", "program.inputs[0].shape", "halves"),
        ("{logits: vectorized}", "{logits: [a]}", "program.kwargs.logits", "not hashable"),
        ("high: 4}", "low: 4, high: 4}", "program.inputs[1].labels.high", "above low"),
        (
            "  kwargs: {logits: vectorized}",
            "  recompile_shapes: [[4, 4], {labels: [4]}]",
            "program.recompile_shapes[1]",
            "the input's keys",
        ),
        ("{shape: [3, 8]}", "{shap: [3, 8]}", "program.inputs[1].w[0].shap", "expected a mapping"),
    ],
)
def test_a_program_that_cannot_be_satisfied_is_refused_naming_the_input(
    tmp_path: Path, old: str, new: str, key: str, says: str
) -> None:
    assert old in TREE
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, TREE.replace(old, new))
    assert e.value.key == key and says in e.value.problem, str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_the_train_step_config_loads() -> None:
    from harness.config.program import FrozenMap

    exp = load("configs/train_step.yaml").experiment
    assert [v.name for v in exp.variants] == ["eager", "xla", "xla_no_fusion", "xla_bf16"]
    assert exp.program.new_shapes() == (FrozenMap({"x": (128, 128), "y": (128, 8)}),)
