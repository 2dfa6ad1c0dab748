"""first_divergence on ladders written from tiny live CPU compiles."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hlo_helpers import write_ladder

from harness.analyze import files, sections
from harness.hlo.diverge import first_divergence, normalize_jaxpr
from harness.records.ladder import read_ladder
from harness.store.runfolder import VariantFolder

ARGS = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)))


def gelu_tanh(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=True)


def gelu_erf(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=False)


def gelu_mixed(x, w, b):
    y = x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)
    return jax.nn.gelu(y.astype(jnp.float32) + b, approximate=True)


def gelu_nofusion(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=True)


@pytest.fixture(scope="module")
def ladders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ladders")
    return {
        "tanh": write_ladder(root / "tanh", gelu_tanh, *ARGS),
        "tanh_again": write_ladder(root / "tanh_again", gelu_tanh, *ARGS),
        "erf": write_ladder(root / "erf", gelu_erf, *ARGS),
        "mixed": write_ladder(root / "mixed", gelu_mixed, *ARGS),
        "nofusion": write_ladder(
            root / "nofusion", gelu_nofusion, *ARGS, options={"xla_disable_hlo_passes": "fusion"}
        ),
    }


def test_identical_programs_do_not_diverge(ladders: dict[str, Path]) -> None:
    assert first_divergence(ladders["tanh"], ladders["tanh_again"]).stage == "none"


def test_erf_replaces_tanh_in_the_jaxpr(ladders: dict[str, Path]) -> None:
    d = first_divergence(ladders["tanh"], ladders["erf"])
    assert d.stage == "jaxpr"
    assert "erfc" in d.detail.split("replaces")[0] and "tanh" in d.detail.split("replaces")[1]
    assert "-tanh" in d.detail


def test_mixed_dtype_adds_convert_element_type(ladders: dict[str, Path]) -> None:
    d = first_divergence(ladders["tanh"], ladders["mixed"])
    assert d == first_divergence(ladders["tanh"], ladders["mixed"])
    assert d.stage == "jaxpr"
    assert "+convert_element_type" in d.detail


def test_disabled_fusion_is_equal_until_the_fusion_pass(ladders: dict[str, Path]) -> None:
    d = first_divergence(ladders["tanh"], ladders["nofusion"])
    assert d.stage == "passes"
    assert "fusion" in d.detail and d.detail.startswith("first differs at pass")
    assert "wrapped_" in d.detail


def test_kernel_lists_are_compared_last(ladders: dict[str, Path]) -> None:
    d = first_divergence(ladders["tanh"], ladders["tanh_again"], ["a", "b"], ["a", "c"])
    assert (d.stage, d.detail) == ("kernels", "kernels differs: c replaces b (counts: +c, -b)")


def test_jaxpr_normalisation_ignores_variable_names() -> None:
    a = "{ lambda ; a:f32[8]. let b:f32[8] = tanh a in (b,) }"
    b = "{ lambda ; x:f32[8]. let y:f32[8] = tanh x in (y,) }"
    assert normalize_jaxpr(a) == normalize_jaxpr(b)


def test_the_hlo_section_writes_its_files_and_fingerprints_the_program(
    ladders: dict[str, Path], tmp_path: Path
) -> None:
    hlo, made = sections.hlo(tmp_path, read_ladder(ladders["tanh"]))
    assert list(tmp_path.iterdir()) == []  # a producer returns its files; it writes none
    files.write(VariantFolder(tmp_path), made)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fusions.json", "passes.json"]
    assert hlo.fusion_count >= 1 and hlo.cluster_count >= hlo.fusion_count
    again, _ = sections.hlo(tmp_path / "again", read_ladder(ladders["tanh_again"]))
    other, _ = sections.hlo(tmp_path / "erf", read_ladder(ladders["erf"]))
    assert hlo.fingerprint.digest == again.fingerprint.digest
    assert hlo.fingerprint.digest != other.fingerprint.digest
