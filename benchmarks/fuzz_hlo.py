"""Fuzz the HLO parser with mutated and truncated copies of the fixture HLO files.

    python benchmarks/fuzz_hlo.py                 # 100,000 cases, about two minutes
    python benchmarks/fuzz_hlo.py --cases 5000 --seed 1

Each case takes one fixture module (every `HloModule` text file under ../shared/fixtures),
mutates it (truncate, replace, insert, delete, swap/duplicate lines, splice two files, flip a
number, drop a bracket), parses it with `parse_module`, and for a module that parses also reads
every instruction's lazy attributes and prints it back. A case ends as one of:

    parsed      the parser accepted the text and everything lazy read cleanly
    ParseError  rejected with a located ParseError (path given, line >= 1)
    FAIL        anything else: another exception, or a ParseError without a location

Prints the case count, elapsed time and outcome counts, and every FAIL with its example
(the first few in full); exits 1 when any case failed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.hlo.parser import ParseError, parse_module, print_module  # noqa: E402

FIXTURES = REPO.parent / "shared" / "fixtures"
ACTIONS = (
    "truncate",
    "replace",
    "insert",
    "delete",
    "swap_lines",
    "duplicate_line",
    "splice",
    "number",
    "drop_bracket",
)
STRUCTURAL = [*'{}()[]",=%#:\n ', "\x00", "\t", "/*", "*/", "->", "ENTRY ", "ROOT "]
NUMBERS = ["-1", "0", "99999999999999999999", "1e400", "nan", "-0", "4294967296"]


def fixture_texts() -> list[tuple[str, str]]:
    """Returns (name, text) of every HLO module text file in the shared fixtures."""
    out = []
    for path in sorted(FIXTURES.rglob("*")):
        if (
            path.is_file()
            and path.suffix in (".txt", ".hlo")
            and path.read_bytes()[:9] == b"HloModule"
        ):
            out.append((str(path.relative_to(FIXTURES)), path.read_text()))
    return out


def mutate(data: st.DataObject, sources: list[tuple[str, str]]) -> tuple[str, str, str]:
    """Returns (fixture name, description of the mutation, mutated text)."""
    name, text = data.draw(st.sampled_from(sources))
    action = data.draw(st.sampled_from(ACTIONS))
    pos = data.draw(st.integers(0, len(text)))
    what = f"{action}@{pos}"
    if action == "truncate":
        text = text[:pos]
    elif action == "replace":
        new = data.draw(st.text(min_size=1, max_size=6))
        text, what = text[:pos] + new + text[pos + 1 :], f"{what} {new!r}"
    elif action == "insert":
        new = data.draw(st.sampled_from(STRUCTURAL))
        text, what = text[:pos] + new + text[pos:], f"{what} {new!r}"
    elif action == "delete":
        end = data.draw(st.integers(pos, min(len(text), pos + 80)))
        text, what = text[:pos] + text[end:], f"{what}..{end}"
    elif action in ("swap_lines", "duplicate_line"):
        lines = text.split("\n")
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        if action == "swap_lines":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(j, lines[i])
        text, what = "\n".join(lines), f"{action} {i},{j}"
    elif action == "splice":
        other_name, other = data.draw(st.sampled_from(sources))
        cut = data.draw(st.integers(0, len(other)))
        text, what = text[:pos] + other[cut:], f"splice@{pos} + {other_name}[{cut}:]"
    elif action == "number":
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        if digits:
            at = digits[pos % len(digits)]
            end = at
            while end < len(text) and text[end].isdigit():
                end += 1
            new = data.draw(st.sampled_from(NUMBERS))
            text, what = text[:at] + new + text[end:], f"number@{at} {new}"
    else:  # drop_bracket
        brackets = [i for i, c in enumerate(text) if c in "{}()[]"]
        if brackets:
            at = brackets[pos % len(brackets)]
            text, what = text[:at] + text[at + 1 :], f"drop_bracket@{at} {text[at]!r}"
    return name, what, text


def check(text: str) -> str:
    """Returns 'parsed' or 'ParseError'; raises anything else (the FAIL cases)."""
    try:
        module = parse_module(text, "fuzz.txt")
    except ParseError as e:
        if e.path != "fuzz.txt" or e.line < 1:
            raise AssertionError(f"ParseError without a location: {e!r}") from e
        return "ParseError"
    for _, inst in module.instructions():
        for lazy in (inst.attrs, inst.metadata, inst.backend_config, inst.frontend_attributes):
            if not isinstance(lazy, dict):
                raise AssertionError(f"lazy attribute is {type(lazy).__name__}, not dict")
    print_module(module)
    return "parsed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=5, help="print this many failures in full")
    args = ap.parse_args()

    sources = fixture_texts()
    if not sources:
        print(f"no HLO fixtures under {FIXTURES}", file=sys.stderr)
        return 2
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []

    @seed(args.seed)
    @settings(
        max_examples=args.cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        name, what, text = mutate(data, sources)
        try:
            counts[check(text)] += 1
        except Exception:
            counts["FAIL"] += 1
            failures.append(f"{name} {what}\n{traceback.format_exc()}--- text ---\n{text[:2000]}")

    print(f"fuzzing the HLO parser: {len(sources)} fixture modules under {FIXTURES}")
    t0 = time.perf_counter()
    case()
    elapsed = time.perf_counter() - t0
    total = sum(counts.values())
    print(f"cases       {total}")
    print(f"elapsed     {elapsed:.1f} s ({total / elapsed:.0f} cases/s)")
    for outcome in ("parsed", "ParseError", "FAIL"):
        print(f"{outcome:<11} {counts[outcome]}")
    for i, failure in enumerate(failures[: args.show]):
        print(f"\nFAIL {i + 1}: {failure}")
    if len(failures) > args.show:
        print(f"\n... and {len(failures) - args.show} more failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
