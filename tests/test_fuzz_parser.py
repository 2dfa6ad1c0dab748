"""A small sample of benchmarks/fuzz_hlo.py: mutated fixture modules (every fixture, duplicated
lines, spliced files, extreme numbers, dropped brackets) and the structure-level cases (deep
nesting, long lines, huge numbers in every slot, malformed attributes, truncated quotes, odd
Unicode, GEMMs without an output array). Outcome: a parsed module whose lazy parts, clusters,
cost and fingerprint read cleanly or raise a located ParseError, or a located ParseError from
the parser; anything else fails. The benchmark runs the same cases 100,000 at a time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from fixture_root import fixtures_root
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.hlo.instruction import ParseError
from harness.hlo.parser import parse_module

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_hlo.py"
_spec = importlib.util.spec_from_file_location("fuzz_hlo", SCRIPT)
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_hlo"] = fuzz  # its dataclasses look their module up while being defined
_spec.loader.exec_module(fuzz)
# ../shared/fixtures where it is beside the checkout, else the fixtures the project ships.
FIXTURE_ROOT = fixtures_root()
SOURCES = fuzz.fixture_texts(FIXTURE_ROOT)
OUTCOMES = ("parsed", "ParseError", "lazy")


@pytest.fixture(autouse=True)
def _need_fixtures() -> None:
    if not SOURCES:
        pytest.skip(f"no HLO fixtures under {FIXTURE_ROOT}")


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_fixture_modules_parse_or_raise_a_located_parse_error(data: st.DataObject) -> None:
    _, _, text = fuzz.mutate(data.draw(st.randoms(use_true_random=False)), SOURCES)
    assert fuzz.check(text) in OUTCOMES


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_structure_level_cases_parse_or_raise_a_located_parse_error(data: st.DataObject) -> None:
    # Sizes to 2**13 here; the benchmark goes to 1 MB lines and 131,072 levels.
    _, _, text = fuzz.generate(data.draw(st.randoms(use_true_random=False)), SOURCES, max_exp=13)
    assert fuzz.check(text) in OUTCOMES


def test_every_malformed_attribute_and_the_template_itself() -> None:
    assert fuzz.check(fuzz.BASE) == "parsed"
    outcomes = {
        (slot, value): fuzz.check(fuzz.template(**{slot: value}))
        for slot, values in fuzz.MALFORMED.items()
        for value in values
    }
    assert set(outcomes.values()) <= set(OUTCOMES)
    # A GEMM config with a field of the wrong type is caught where it is read, located.
    assert outcomes[("gemm_config", fuzz._gemm(epilogue="5"))] == "lazy"


@pytest.mark.parametrize(
    "text",
    ["", "\n", "HloModule", "HloModule m\n", "HloModule m\nENTRY", "\x00" * 64, "{" * 5000],
)
def test_degenerate_texts_are_parse_errors_with_a_line(text: str) -> None:
    try:
        parse_module(text, "d.txt")
    except ParseError as e:
        assert e.path == "d.txt" and e.line >= 1
    else:
        assert fuzz.check(text) == "parsed"
