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
    # And quoted, as the harness prints a list in a command to paste (JSON is YAML flow).
    quoted = load("gelu.yaml", ['--config.select=["xla", "eager"]'])
    assert quoted.experiment.select == exp.select


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
        # list-valued keys are bounded by what they mean: a batch rank of at most 8
        (
            MINIMAL,
            ["--config.problem.batch=[" + ",".join(["2"] * 9) + "]"],
            "problem.batch",
            "has 9 entries; at most 8",
        ),
        (
            MINIMAL,
            ["--config.select=[" + ",".join(["xla"] * 300) + "]"],
            "select",
            "has 300 entries; at most 256",
        ),
        # a name the harness gives its own files would make R/index.html/ a folder
        (
            MINIMAL.replace("experiment: t", "experiment: index.html"),
            [],
            "experiment",
            "a name the harness gives its own files",
        ),
        (
            MINIMAL.replace("experiment: t", "experiment: latest"),
            [],
            "experiment",
            "a name the harness gives its own files",
        ),
        (
            MINIMAL.replace("experiment: t", "experiment: summary.json"),
            [],
            "experiment",
            "a name the harness gives its own files",
        ),
    ],
)
def test_bad_configs_name_the_key_and_what_is_allowed(tmp_path, text, overrides, key, words):
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, text), overrides)
    assert e.value.key == key
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_every_mistake_of_a_file_is_reported_at_once(tmp_path: Path):
    """Three mistakes in three places: one error, one line each, each naming the file and
    the key, the "did you mean" kept; the flag's own mistake comes with them."""
    text = """
experiment: t
seeed: 3
problem: {m: eight, k: 4, n: 4}
variants:
  - {name: xla, mod: jit}
"""
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, text), ["--config.problem.dtyp=float16"])
    lines = str(e.value).splitlines()
    assert len(lines) == 4, lines
    # Each line names where its value came from: the file, or the flag.
    assert sorted(line.split(":")[0].rsplit("/", 1)[-1] for line in lines) == [
        "c.yaml",
        "c.yaml",
        "c.yaml",
        "flag --config.problem.dtyp",
    ]
    assert any(line.endswith("seeed: unknown key (did you mean 'seed'?)") for line in lines)
    assert any(line.endswith("problem.m: expected int, got 'eight'") for line in lines)
    assert any(
        line.endswith("variants.xla.mod: unknown key (did you mean 'mode'?)") for line in lines
    )
    assert any("problem.dtyp: unknown key (did you mean 'dtype'?)" in line for line in lines)


def test_every_value_that_fails_validation_is_reported_at_once(tmp_path: Path):
    """What validation refuses is gathered too, and a mistake of the study's problem is
    listed once, not again under each variant that inherits it."""
    text = """
experiment: t
problem: {m: 0, k: 4, n: 4}
variants:
  - {name: xla, mode: graph}
  - {name: eager, mode: eager, platforms: [abacus]}
baseline: nope
"""
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, text))
    lines = str(e.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "problem.m",
        "variants.xla.mode",
        "variants.eager.platforms",
        "baseline",
    ]
    assert "allowed: eager, jit" in lines[1]


# --- the one JSON<->dataclass layer, and the config's one validation --------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIG_DIR.glob("*.yaml")))
def test_the_worker_rebuilds_the_validated_config_exactly(name: str):
    """The hello job carries the plain config (records.to_json); the worker's from_plain gives
    back the very Experiment the supervisor validated, program inputs and variants included."""
    from harness.config.schema import from_plain
    from harness.store.records import to_json

    exp = load(name).experiment
    plain = to_json(exp)
    assert from_plain(plain, "hello") == exp
    assert to_json(from_plain(plain, "hello")) == plain


def test_the_worker_does_not_validate_the_config_again(tmp_path: Path):
    """Validation is the supervisor's (harness.config.load), once: a plain config that would
    fail it is rebuilt as sent, and neither refused nor resolved a second time."""
    from harness.config.schema import build_experiment, from_plain
    from harness.store.records import to_json

    plain = to_json(load(write(tmp_path, MINIMAL)).experiment)
    plain.update(baseline="no_such_variant", seed=-1)
    plain["program"]["function"] = "not/resolved.py:f"
    with pytest.raises(ConfigError):  # the program's file first, else the seed, else the baseline
        build_experiment(plain, "c.yaml")
    rebuilt = from_plain(plain, "hello")
    assert (rebuilt.baseline, rebuilt.seed) == ("no_such_variant", -1)
    assert rebuilt.program.function == "not/resolved.py:f"


def test_the_records_and_the_config_read_through_one_layer(tmp_path: Path):
    """The same walk reads a run's records and the config: the same "did you mean", the same
    words for a wrong type, each naming the file and the key, in one line."""
    from harness.records.summary import Failure
    from harness.store.records import SchemaError, from_json

    with pytest.raises(SchemaError) as record:
        from_json(Failure, {"kindd": "crash"}, "result.json", "failure")
    with pytest.raises(ConfigError) as config:
        load(write(tmp_path, MINIMAL.replace("mode: jit", "mod: jit")))
    assert str(record.value) == "result.json: failure.kindd: unknown key (did you mean 'kind'?)"
    assert str(config.value).endswith("variants.xla.mod: unknown key (did you mean 'mode'?)")
    with pytest.raises(SchemaError) as record:
        from_json(Failure, {"kind": 3}, "result.json")
    with pytest.raises(ConfigError) as config:
        load(write(tmp_path, MINIMAL.replace("m: 8", "m: eight")))
    assert str(record.value) == "result.json: kind: expected str, got 3"
    assert str(config.value).endswith("problem.m: expected int, got 'eight'")
