"""A misspelled XLA option: the compile refuses it, and preflight names the closest option
the installed jaxlib accepts, read from XLA's own DebugOptions descriptor."""

from __future__ import annotations

import pytest

from harness.capture import preflight, xla_names
from harness.config import ConfigError, load

MINIMAL = """
experiment: t
problem: {m: 8, k: 4, n: 4}
variants:
  - {name: xla, mode: jit}
"""


def test_the_names_are_the_debug_options_of_the_installed_jaxlib():
    """Every option jaxlib's bindings expose is among them, and the descriptor holds far more
    (the bindings show a few dozen of XLA's hundreds)."""
    from jax._src.lib import _jax

    bound = {n for n in dir(_jax.DebugOptions) if n.startswith("xla_")}
    known = xla_names.known()
    assert bound and bound <= known
    assert len(known) > 3 * len(bound)


def test_a_misspelled_option_gets_the_closest_name(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL)
    key = "variants.xla.xla_options.xla_cpu_enable_fast_maths"
    exp = load(str(path), [f"--config.{key}=true"]).experiment
    with pytest.raises(ConfigError) as err:
        preflight.check_options(exp, "cpu", lambda key, options: None)
    assert err.value.key == key
    assert "No such compile option" in err.value.problem
    assert "'xla_cpu_enable_fast_maths' (did you mean 'xla_cpu_enable_fast_math'?)" in str(
        err.value
    )


def test_a_name_close_to_none_says_where_the_names_are():
    assert preflight.unknown_option_hint({"xla_no_such_option": True}) == (
        "; valid names are the DebugOptions fields of this jaxlib"
    )
