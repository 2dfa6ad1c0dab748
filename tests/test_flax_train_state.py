"""Programs as users write them (issue 61): typed PRNG keys in the parameters, the inputs
(`{dtype: key}`) and the result, uint32 and uint8 inputs, and a Flax TrainState (BatchNorm
statistics, dropout with a typed key, Adam's state) run as a study, every variant ok."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import REPO, read_summary, run_harness

from harness.config import ConfigError, load
from harness.config.program import parse_inputs
from harness.variants import program

KEY_PROGRAM = dataclasses.replace(
    load("configs/flax_cnn.yaml").experiment.program,
    function=f"{REPO}/tests/key_program.py:noisy",
    init=f"{REPO}/tests/key_program.py:init",
    inputs=parse_inputs(
        [
            {"shape": [], "dtype": "key"},
            {"shape": [4, 3], "dtype": "float32"},
            {"shape": [5], "dtype": "uint32", "low": 0, "high": 1000},
        ]
    ),
)


def test_a_key_input_is_a_typed_key_and_uint32_inputs_are_drawn_in_range() -> None:
    key, x, counts = program.make_inputs(KEY_PROGRAM, seed=3)
    assert program.is_key(key.dtype) and key.shape == ()
    assert x.dtype == np.float32 and counts.dtype == np.uint32
    assert int(counts.min()) >= 0 and int(counts.max()) < 1000
    # the same seed gives the same key: every variant draws the same noise
    again = program.make_inputs(KEY_PROGRAM, seed=3)[0]
    assert np.array_equal(jax.random.key_data(key), jax.random.key_data(again))
    assert program.input_bytes(KEY_PROGRAM) == 8 + 4 * 3 * 4 + 5 * 4


def test_keys_in_params_inputs_and_result_are_judged_by_their_data_exactly() -> None:
    args = program.args_for(KEY_PROGRAM, seed=0)
    y = jax.jit(program.bound(KEY_PROGRAM))(*args.args)
    ref = program.reference(KEY_PROGRAM, args, seed=0)
    leaves = program.judged_leaves(y, ref, program.computed_in(args))
    # the next key's data (uint32, compared exactly), the count and the noisy values all agree:
    # the float64 reference draws the same normal noise and the same bernoulli mask
    assert [(leaf.path, leaf.dtype, leaf.ok) for leaf in leaves] == [
        ("[0]", "float32", True),
        ("[1]", "uint32", True),
        ("[2]", "uint32", True),
    ]
    record = program.describe(KEY_PROGRAM, args, None, y, ref, "hlo_before", None)
    assert [s.dtype for s in record.inputs] == ["key<fry>", "float32", "uint32"]
    assert record.output[2].dtype == "key<fry>" and "key<fry>" in record.param_dtypes
    # a cast of the parameters leaves the key alone
    cast = program.cast_params(args.params, "bfloat16")
    assert cast["scale"].dtype == jax.numpy.bfloat16 and program.is_key(cast["key"].dtype)


def test_the_float64_reference_draws_what_the_variant_drew() -> None:
    key = jax.random.key(11)
    mask = np.asarray(jax.random.bernoulli(key, 0.9, (4096,)))
    noise = np.asarray(jax.random.normal(key, (4096,)))
    with program.float64_on_cpu():
        wide_mask = np.asarray(jax.random.bernoulli(key, 0.9, (4096,)))
        wide_noise = np.asarray(jax.random.normal(key, (4096,)))
    assert wide_noise.dtype == np.float64
    assert np.array_equal(mask, wide_mask)
    assert np.allclose(wide_noise, noise, rtol=1e-4, atol=1e-6)  # float32 erfinv in the tails


@pytest.mark.parametrize(
    "spec, key, says",
    [
        ({"shape": [4], "dtype": "uint8", "low": 0, "high": 300}, "high", "uint8 holds"),
        ({"shape": [4], "dtype": "uint32", "low": -1, "high": 3}, "low", "uint32 holds no -1"),
        ({"shape": [4], "dtype": "uint16"}, "dtype", "key"),
    ],
)
def test_an_input_its_dtype_cannot_hold_is_refused_naming_the_key(
    tmp_path: Path, spec: dict, key: str, says: str
) -> None:
    import yaml

    raw = yaml.safe_load((REPO / "configs" / "flax_cnn.yaml").read_text())
    raw["program"]["inputs"][0]["label"] = spec
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load(str(path))
    assert e.value.key == f"program.inputs[0].label.{key}", str(e.value)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1


@pytest.mark.study
def test_a_flax_train_state_runs_as_written_every_variant_ok(tmp_path: Path) -> None:
    proc = run_harness(
        "--config=configs/flax_cnn.yaml",
        "--config.program.inputs=[{image: {shape: [8, 8, 8, 3], dtype: float32}, "
        "label: {shape: [8], dtype: uint8, low: 0, high: 10}}]",
        "--config.select=xla,xla_no_fusion",
        "--config.measure.steps=3",
        "--config.measure.warmup=1",
        "--config.profile.steps=2",
        "--config.timing.rounds=4",
        "--config.timing.budget_s=0.5",
        "--config.timing.max_budget_s=0.5",
        results_root=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    variants = read_summary((tmp_path / "flax_cnn" / "latest").resolve())
    assert set(variants) == {"xla", "xla_no_fusion"}
    for name, v in variants.items():
        assert v.identity.status == "ok", name
        # every leaf of the new state, the key's data and BatchNorm's statistics included
        assert v.numerics.ok, (name, v.numerics)
    outputs = variants["xla"].identity.program.output
    assert sum(o.dtype == "key<fry>" for o in outputs) == 1
