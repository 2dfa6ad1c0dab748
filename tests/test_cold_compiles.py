"""A study measures its compiles from cold, whatever cache the user's environment turns on
(harness.capture.environment.cold_compiles).

JAX_COMPILATION_CACHE_DIR is a common setting. With it on, a second run loaded its
executables: its first calls were cache hits, XLA wrote no dump and the report found no
fusion, none of which it said. An autotune cache in XLA_FLAGS is turned off too. The study here runs with the cache set and its threshold at
zero, so every compile would be written there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY, run_harness


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
    assert any((run / "variants" / "xla" / "dump").glob("*after_optimizations.txt"))
    assert "compilation_cache" in (run / "report.md").read_text()
