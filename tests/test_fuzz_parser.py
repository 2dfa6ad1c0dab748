"""The HLO parser on mutated fixtures, beyond test_hlo_parser's fuzz: every fixture module, and
the mutations of benchmarks/fuzz_hlo.py (duplicated lines, spliced files, extreme numbers,
dropped brackets). Outcome: a parsed module whose lazy parts read cleanly, or a located
ParseError; anything else fails. The benchmark runs the same cases 100,000 at a time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.hlo.parser import ParseError, parse_module

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_hlo.py"
_spec = importlib.util.spec_from_file_location("fuzz_hlo", SCRIPT)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)
SOURCES = fuzz.fixture_texts()


@pytest.fixture(autouse=True)
def _need_fixtures() -> None:
    if not SOURCES:
        pytest.skip(f"no HLO fixtures under {fuzz.FIXTURES}")


@settings(max_examples=2500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_fixture_modules_parse_or_raise_a_located_parse_error(data: st.DataObject) -> None:
    _, _, text = fuzz.mutate(data, SOURCES)
    assert fuzz.check(text) in ("parsed", "ParseError")


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
