"""harness.common.textsafety: a user's pattern is matched in linear time, by RE2 or, where RE2 is not
installed, by `re` only when the pattern cannot backtrack."""

from __future__ import annotations

import pytest

from harness.common.textsafety import UnsafePattern, user_pattern

NAME = "a" * 40 + "!.txt"


@pytest.mark.parametrize(
    ("pattern", "found"),
    [("^(a+)+$", False), ("(a|a)*c", False), ("^(a+)+!", True), ("(.*a)*!", True)],
)
def test_re2_ends_at_once_on_patterns_that_backtrack_in_re(pattern: str, found: bool) -> None:
    assert (user_pattern(pattern).search(NAME * 1000) is not None) == found


@pytest.mark.parametrize("pattern", ["^(a+)+$", "(a|a)*c", "(.*a)*!", "((m|o)+d)+"])
def test_without_re2_a_pattern_that_could_backtrack_is_refused(pattern: str) -> None:
    with pytest.raises(UnsafePattern, match="install google-re2"):
        user_pattern(pattern, engine=None)


@pytest.mark.parametrize(("pattern", "hit"), [("jit_.*gelu", True), ("(foo|bar)x", False)])
def test_without_re2_plain_patterns_run_on_re(pattern: str, hit: bool) -> None:
    assert (
        user_pattern(pattern, engine=None).search("module_0001.jit_gelu_linear") is not None
    ) == hit


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=a)a", "x" * 1001, "(unclosed"])
def test_what_re2_cannot_run_is_one_line(pattern: str) -> None:
    with pytest.raises(UnsafePattern) as err:
        user_pattern(pattern)
    assert "\n" not in str(err.value)


def test_printed_output_is_kept_to_its_bound_and_says_so() -> None:
    """A callback printing 100 MB a call wrote a 954 MB callback_output.txt (issue 59)."""
    import contextlib

    from harness.common.bounded import BoundedText

    for text in ("a\nb", "a\n", "", "x" * 50 + "\n" + "y" * 50):
        small = BoundedText(limit=1000)
        small.write(text)
        assert small.getvalue() == text
        assert small.line_count() == len(text.splitlines())
    buffer = BoundedText(limit=100)
    with contextlib.redirect_stdout(buffer):
        for _ in range(1000):
            print("z" * 999)  # 1 MB in all
    kept = buffer.getvalue()
    assert len(kept) < 300 and kept.startswith("z" * 100)
    assert "999900 more characters not kept" in kept and "first 100 characters" in kept
    assert buffer.line_count() == 1000
