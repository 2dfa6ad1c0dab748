"""One mistake, one error (issue 61): a battery of bad configs, each a single mistake in
configs/gelu.yaml or in a `program:` config, loaded in-process; each gives exactly one error
line, at the key the user wrote, however many variants inherit the value."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from harness.config import ConfigError, load

GELU = (REPO / "configs" / "gelu.yaml").read_text()
PROGRAM = (REPO / "configs" / "flax_cnn.yaml").read_text()

# (config text, what is replaced, by what, the key the one error names)
BATTERY = [
    (GELU, "  m: 256\n", "  m: -4\n", "problem.m"),
    (GELU, "  k: 512\n", "  k: 0\n", "problem.k"),
    (GELU, "  dtype: float32\n", "  dtype: float33\n", "problem.dtype"),
    (GELU, "  w_dtype: null ", "  w_dtype: int4 ", "problem.w_dtype"),
    (GELU, "  gelu: tanh ", "  gelu: relu ", "problem.gelu"),
    (GELU, "  frontend: jnp ", "  frontend: torch ", "problem.frontend"),
    (GELU, "  batch: []\n", "  batch: [0]\n", "problem.batch[0]"),
    (GELU, "problem: {gelu: erf}", "problem: {gelu: erff}", "variants.xla_exact_gelu.problem.gelu"),
    (GELU, "  steps: 20\n", "  steps: -1\n", "measure.steps"),
    (GELU, "  rounds: 40 ", "  rounds: -40 ", "timing.rounds"),
    (GELU, "baseline: xla ", "baseline: xlaa ", "baseline"),
    (GELU, "    mode: eager\n", "    mode: eagre\n", "variants.eager.mode"),
    (GELU, "  - name: xla_lax_cond\n", "  - name: xla lax cond\n", "variants[9].name"),
    (PROGRAM, "dtype: uint8, low: 0, high: 10", "dtype: uint8, low: 0, high: 300", "high"),
    (PROGRAM, "dtype: uint8, low: 0,", "dtype: uint16, low: 0,", "dtype"),
    (PROGRAM, "shape: [32, 16, 16, 3]", "shape: [32, 16, 16, -3]", "shape[3]"),
    (PROGRAM, "examples.flax_cnn:step", "examples.flax_cnn:stepp", "program.function"),
    (PROGRAM, "program: {dtype: bfloat16,", "program: {dtype: bfloat17,", "program.dtype"),
    (PROGRAM, "seed: 0\n", "seed: 0\nproblem: {m: 64}\n", "problem.m"),
    (PROGRAM, "seed: 0\n", "seed: 0\nproblem: {gelu: tanh}\n", "problem.gelu"),
    (
        PROGRAM,
        "    mode: jit\n",
        "    mode: jit\n    problem: {gelu: tanh}\n",
        "xla_no_fusion.problem.gelu",
    ),
]


@pytest.mark.parametrize(
    "text, old, new, key",
    BATTERY,
    ids=[f"{'gelu' if t is GELU else 'program'}:{k}:{n.strip()[:24]}" for t, _, n, k in BATTERY],
)
def test_one_mistake_gives_one_error_line_at_its_key(
    tmp_path: Path, text: str, old: str, new: str, key: str
) -> None:
    assert old in text, old
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError) as e:
        load(str(path))
    lines = str(e.value).splitlines()
    assert len(lines) == 1, "\n".join(lines)
    assert e.value.key.endswith(key), lines[0]


@pytest.mark.parametrize("flag", ["--config.problem.m=-4", "--config.problem.dtype=float33"])
def test_an_inherited_mistake_given_as_a_flag_is_blamed_on_the_flag_once(flag: str) -> None:
    with pytest.raises(ConfigError) as e:
        load("configs/gelu.yaml", [flag])
    lines = str(e.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"flag {flag.split('=')[0]} "), lines


@pytest.mark.parametrize(
    "flag",
    [
        "--config.problem.gelu=tanh",
        "--config.variants.xla.problem.gelu=tanh",
    ],
)
def test_a_problem_in_a_program_study_is_refused_as_a_flag_too(flag: str) -> None:
    with pytest.raises(ConfigError) as e:
        load("configs/flax_cnn.yaml", [flag])
    lines = str(e.value).splitlines()
    assert len(lines) == 1 and "a program study has no `problem`" in lines[0], lines
    assert lines[0].startswith("flag --config."), lines
