"""The config system: YAML plus --config.* overrides, validated in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import ConfigError, load
from harness.config.load import CONFIG_DIR


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


MINIMAL = """
experiment: t
problem: {m: 8, k: 4, n: 4}
variants:
  - {name: xla, mode: jit}
"""


def test_default_configs_load():
    for name in ("gelu.yaml", "gelu_h200.yaml"):
        exp = load(name).experiment
        names = [v.name for v in exp.variants]
        assert {
            "eager",
            "xla",
            "xla_no_fusion",
            "xla_exact_gelu",
            "xla_host_callback",
            "xla_mixed_dtype",
            "xla_flax_linen",
            "matmul_only",
            "xla_library_epilogue",
        } <= set(names)
        assert exp.baseline == "xla"


def test_bare_name_resolves_to_configs_dir():
    assert load("gelu.yaml").path == CONFIG_DIR / "gelu.yaml"


def test_variant_problem_starts_from_the_shared_problem():
    exp = load("gelu.yaml").experiment
    mixed = exp.variant("xla_mixed_dtype").problem
    assert (mixed.dtype, mixed.w_dtype, mixed.m) == ("bfloat16", "float32", exp.problem.m)
    assert exp.variant("xla_exact_gelu").problem.gelu == "erf"
    assert exp.variant("xla").problem == exp.problem


def test_overrides_are_cast_to_the_schema_type_and_recorded():
    cfg = load(
        "gelu.yaml",
        [
            "--config.problem.m=64",
            "--config.profile.enabled=false",
            "--config.problem.batch=2,3",
            "--config.select=xla,eager",
        ],
    )
    exp = cfg.experiment
    assert exp.problem.m == 64 and exp.variant("xla").problem.m == 64
    assert exp.profile.enabled is False
    assert exp.problem.batch == (2, 3)
    assert [v.name for v in exp.selected_variants] == ["eager", "xla"]
    assert cfg.overrides[0].key == "problem.m" and cfg.overrides[0].value == 64
    assert cfg.overrides[0].previous == 256
    # A list in YAML's flow form, as the config file writes it, reads the same.
    flow = load("gelu.yaml", ["--config.select=[xla, eager]", "--config.problem.batch=[2,3]"])
    assert flow.experiment.select == exp.select and flow.experiment.problem.batch == (2, 3)


def test_override_addresses_one_variant_by_name():
    cfg = load(
        "gelu.yaml",
        [
            "--config.variants.xla_no_fusion.xla_options.xla_disable_hlo_passes=fusion",
            "--config.variants.eager.problem.dtype=bfloat16",
            "--config.variants.xla.xla_options.xla_cpu_enable_fast_math=true",
        ],
    )
    exp = cfg.experiment
    assert exp.variant("xla_no_fusion").xla_options["xla_disable_hlo_passes"] == "fusion"
    assert exp.variant("eager").problem.dtype == "bfloat16"
    assert exp.variant("xla").problem.dtype == "float32"
    assert exp.variant("xla").xla_options["xla_cpu_enable_fast_math"] is True


def test_config_is_immutable():
    exp = load("gelu.yaml").experiment
    with pytest.raises(AttributeError):
        exp.problem.m = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        exp.variant("xla_no_fusion").xla_options["xla_x"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("text", "overrides", "key", "words"),
    [
        (MINIMAL.replace("problem:", "problm:"), [], "problm", "did you mean 'problem'"),
        (MINIMAL.replace("mode: jit", "mod: jit"), [], "variants.xla.mod", "did you mean 'mode'"),
        (MINIMAL.replace("m: 8", "m: 0"), [], "problem.m", "must be in [2, 1048576]"),
        (MINIMAL.replace("m: 8", "m: eight"), [], "problem.m", "expected int"),
        (
            MINIMAL,
            ["--config.problem.dtype=float8"],
            "problem.dtype",
            "allowed: float32, bfloat16, float16",
        ),
        (MINIMAL, ["--config.problem.mm=3"], "problem.mm", "did you mean 'm'"),
        (MINIMAL, ["--config.variants.xlaa.mode=jit"], "variants.xlaa.mode", "did you mean 'xla'"),
        (
            MINIMAL.replace("mode: jit", "mode: graph"),
            [],
            "variants.xla.mode",
            "allowed: eager, jit",
        ),
        (MINIMAL + "baseline: nope\n", [], "baseline", "names no variant"),
    ],
)
def test_bad_configs_name_the_key_and_what_is_allowed(tmp_path, text, overrides, key, words):
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, text), overrides)
    assert e.value.key == key
    assert words in str(e.value)
    assert "\n" not in str(e.value)
