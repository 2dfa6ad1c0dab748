"""A study measures its compiles from cold, whatever cache the user's environment turns on
(harness.capture.environment.cold_compiles).

JAX_COMPILATION_CACHE_DIR is a common setting. With it on, a second run loaded its
executables: its first calls were cache hits, XLA wrote no dump and the report found no
fusion, none of which it said. An autotune cache in XLA_FLAGS is turned off too. The study here runs with the cache set and its threshold at
zero, so every compile would be written there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, TINY, run_harness


@pytest.mark.study
def test_a_users_compilation_cache_is_turned_off_and_said(tmp_path: Path) -> None:
    cache, tuned = tmp_path / "jax-cache", tmp_path / "autotune"
    proc = run_harness(
        "--config=gelu.yaml",
        *TINY,
        "--config.select=xla,matmul_only",
        results_root=tmp_path / "results",
        env={
            "JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "XLA_FLAGS": f"--xla_gpu_per_fusion_autotune_cache_dir={tuned} --xla_dump_disable_metadata=false",
        },
    )
    assert proc.returncode == 0, proc.stderr
    assert not cache.exists() or not any(cache.iterdir())  # nothing written, so nothing loaded
    run = tmp_path / "results" / "gelu" / "latest"
    said = json.loads((run / "manifest.json").read_text())["environment"]["compilation_cache"]
    assert str(cache) in said and f"xla_gpu_per_fusion_autotune_cache_dir={tuned}" in said
    assert "metadata" not in said  # the user's other flags stay as they are
    assert any(
        (run / "variants" / "xla" / "dump").glob("*after_optimizations.txt*")
    )  # kept gzipped
    assert "compilation_cache" in (run / "details.md").read_text()  # its environment
    assert f"note: JAX's persistent compilation cache ({cache})" in proc.stderr


PROGRAM = """
import jax
import jax.numpy as jnp

jax.config.update("jax_compilation_cache_dir", {cache!r})
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def init(key, x):
    return {{"w": jax.random.normal(key, (x.shape[-1], 8))}}


def step(params, x):
    return jnp.tanh(x @ params["w"]).sum()
"""

CONFIG = """
experiment: cachy
program: {function: "cachy:step", init: "cachy:init", inputs: [{shape: [8, 16], dtype: float32}]}
measure: {warmup: 1, steps: 2}
profile: {steps: 1}
timing: {budget_s: 0.3, rounds: 4}
variants:
  - {name: xla, mode: jit}
"""


@pytest.mark.study
def test_a_program_that_turns_the_cache_on_when_imported_compiles_from_cold(
    tmp_path: Path,
) -> None:
    """The user's module sets the cache's folder itself, after the worker started: the cache
    stays off all the same (it was turned off whether or not a folder was set)."""
    cache = tmp_path / "jax-cache"
    (tmp_path / "cachy.py").write_text(PROGRAM.format(cache=str(cache)))
    (tmp_path / "cachy.yaml").write_text(CONFIG)
    proc = run_harness(
        f"--config={tmp_path / 'cachy.yaml'}",
        results_root=tmp_path / "results",
        env={"PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"},
    )
    assert proc.returncode == 0, proc.stderr
    assert not cache.exists() or not any(cache.iterdir())
