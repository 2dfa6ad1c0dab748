"""Fuzz the HLO parser and what reads its output, with mutated fixtures and hostile structure.

    python benchmarks/fuzz_hlo.py                 # 100,000 cases, ten minutes or so
    python benchmarks/fuzz_hlo.py --cases 5000 --seed 1
    python benchmarks/fuzz_hlo.py --case 4711     # replay one case (same --seed)

Each case is one HLO text from one family (drawn with the weights in fuzz_hlo_cases.WEIGHTS, from a random
generator seeded by `seed:index`, so any case replays alone):

    mutate      a fixture module (every `HloModule` text file under ../shared/fixtures),
                truncated, replaced, inserted, deleted, lines swapped/duplicated, two files
                spliced, a number flipped (to huge or odd ones too), a bracket dropped
    nesting     tuple shapes, brackets (attributes, JSON, metadata, header, operands, layout)
                up to 131,072 deep, and chains of computations calling each other (call,
                fusion, while, conditional; cycles too) up to CHAIN_MAX long
    long_line   a line of up to 1 MB in the module header, a computation header, an
                instruction, an attribute, metadata, a table row, a comment, and lines built
                to defeat the parser's old backtracking regexes
    number      a huge or odd number (5000 digits, 2**63, -1, 1e400, Unicode digits, ...) in
                one numeric slot of a module that uses every kind of slot
    attribute   a malformed backend_config (bad JSON, wrong types in the GEMM or fusion
                config), metadata, replica_groups, dimension lists, tuple index, shape
    quote       a quote deleted, added or escaped, or the text cut just after one
    unicode     odd Unicode (zero-width, bidi, combining, line separators, lone surrogates,
                lookalike punctuation, non-ASCII digits) put in, or swapped for ASCII
    gemm_shape  a library GEMM custom-call whose shape is `()`, `(())` or a tuple of tokens

and `check` parses it with `parse_module` and, when it parses, reads every lazy part of every
instruction (attrs, metadata, backend_config, gemm_config, fusion_backend_kind, dimension lists,
shape, output_array, source location), then runs find_clusters, module_cost and
structural_fingerprint, prints the module and parses the print again. A case ends as:

    parsed      everything ran cleanly
    ParseError  parse_module rejected the text with a located ParseError
    lazy        it parsed, and a lazy accessor or the cluster/cost code raised a located
                ParseError (at the instruction's own line when the accessor is per-instruction)
    FAIL        anything else: another exception, a ParseError without a location, or a
                printed module that does not parse back

Prints the case count and outcomes per family with the mean and slowest CPU time of a case
(CPU, not wall, time: the machines this runs on are shared), the slowest case, and every FAIL
(the first few in full); exits 1 when any case failed or took more than --max-seconds.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

# The cases (and what the tests sample of them, through this module).
from fuzz_hlo_cases import (  # noqa: E402, F401
    BASE,
    FAMILIES,
    FIXTURES,
    MALFORMED,
    PATH,
    _gemm,
    case_rng,
    fixture_texts,
    generate,
    mutate,
    template,
)

from harness.hlo.clusters import find_clusters  # noqa: E402
from harness.hlo.cost import module_cost  # noqa: E402
from harness.hlo.instruction import Instruction, ParseError  # noqa: E402
from harness.hlo.parser import HloModule, parse_module, print_module  # noqa: E402
from harness.hlo.passes import structural_fingerprint  # noqa: E402


def _located(e: ParseError, lines: int, inst: Instruction | None = None) -> None:
    """Raise AssertionError unless `e` names the fuzz file and a line of it (inst's own)."""
    if e.path != PATH or not 1 <= e.line <= max(lines, 1) or e.column < 1:
        raise AssertionError(f"ParseError without a location: {e!r}")
    if inst is not None and e.line != inst.line:
        raise AssertionError(f"ParseError at line {e.line}, not at {inst.name}'s {inst.line}")


READERS: tuple[Callable[[HloModule, Instruction], object], ...] = (
    lambda m, i: i.attrs,
    lambda m, i: i.metadata,
    lambda m, i: i.backend_config,
    lambda m, i: i.frontend_attributes,
    lambda m, i: i.gemm_config(),
    lambda m, i: i.fusion_backend_kind(),
    lambda m, i: [i.int_list_attr(k) for k in ("dimensions", "lhs_contracting_dims")],
    lambda m, i: (i.shape.bytes, str(i.shape), i.operand_names, i.called_computations),
    lambda m, i: i.output_array(),
    lambda m, i: (i.custom_call_target, i.op_name, i.text()),
    lambda m, i: m.source_location(i),
)
WHOLE: tuple[Callable[[HloModule], object], ...] = (
    find_clusters,
    module_cost,
    structural_fingerprint,
)


def check(text: str) -> str:
    """Returns 'parsed', 'ParseError' or 'lazy'; raises anything else (the FAIL cases)."""
    lines = text.count("\n") + 1
    try:
        module = parse_module(text, PATH)
    except ParseError as e:
        _located(e, lines)
        return "ParseError"
    lazy = False
    for _, inst in module.instructions():
        for read in READERS:
            try:
                read(module, inst)
            except ParseError as e:
                _located(e, lines, inst)
                lazy = True
    for run in WHOLE:
        try:
            run(module)
        except ParseError as e:
            _located(e, lines)
            lazy = True
    printed = print_module(module)
    again = parse_module(printed, "printed.txt")
    if print_module(again) != printed:
        raise AssertionError("print_module is not a fixed point of parse_module")
    return "lazy" if lazy else "parsed"


@dataclass
class Tally:
    """Outcome counts, CPU seconds and the slowest case (by CPU time) of one family."""

    outcomes: collections.Counter[str]
    seconds: float = 0.0
    slowest: float = 0.0
    slowest_wall: float = 0.0
    slowest_case: str = ""


def timed_check(text: str) -> tuple[str, float, float, str]:
    """(outcome, CPU seconds, wall seconds, failure report or '') of one case."""
    c0, w0 = time.process_time(), time.perf_counter()
    report = ""
    try:
        outcome = check(text)
    except Exception:
        outcome, report = "FAIL", traceback.format_exc()
    return outcome, time.process_time() - c0, time.perf_counter() - w0, report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", type=int, default=-1, help="replay this one case (its index)")
    ap.add_argument("--show", type=int, default=5, help="print this many failures in full")
    ap.add_argument("--max-seconds", type=float, default=1.0, help="most CPU time for a case")
    ap.add_argument("--max-exp", type=int, default=20, help="sizes up to 2**max_exp")
    args = ap.parse_args()

    sources = fixture_texts()
    if not sources:
        print(f"no HLO fixtures under {FIXTURES}", file=sys.stderr)
        return 2
    if args.case >= 0:
        family, what, text = generate(case_rng(args.seed, args.case), sources, args.max_exp)
        outcome, cpu, wall, report = timed_check(text)
        print(f"case {args.case}: {family}: {what}: {outcome} ({cpu:.3f} s CPU, {wall:.3f} s)")
        print(report, end="")
        return 1 if report else 0

    tallies = {f: Tally(collections.Counter()) for f in FAMILIES}
    failures: list[str] = []
    slow: list[str] = []
    print(f"fuzzing the HLO parser: {len(sources)} fixture modules under {FIXTURES}")
    t0 = time.perf_counter()
    for index in range(args.cases):
        family, what, text = generate(case_rng(args.seed, index), sources, args.max_exp)
        outcome, cpu, wall, report = timed_check(text)
        if report:
            failures.append(f"case {index} {family}: {what}\n{report}--- text ---\n{text[:2000]}")
        tally = tallies[family]
        tally.outcomes[outcome] += 1
        tally.seconds += cpu
        if cpu > tally.slowest:
            tally.slowest, tally.slowest_wall = cpu, wall
            tally.slowest_case = f"case {index}: {what} ({len(text)} chars, {outcome})"
        if cpu > args.max_seconds:
            slow.append(f"case {index} {family}: {what} took {cpu:.2f} s CPU ({wall:.2f} s)")
    elapsed = time.perf_counter() - t0

    total = sum(sum(t.outcomes.values()) for t in tallies.values())
    print(f"cases       {total} (seed {args.seed})")
    print(f"elapsed     {elapsed:.1f} s ({total / elapsed:.0f} cases/s)")
    print(
        f"{'family':<11} {'cases':>7} {'parsed':>7} {'ParseErr':>8} {'lazy':>6} {'FAIL':>5} "
        f"{'mean':>8} {'slowest':>9}  slowest case (CPU time)"
    )
    for family, t in tallies.items():
        o = t.outcomes
        n = sum(o.values())
        print(
            f"{family:<11} {n:>7} {o['parsed']:>7} {o['ParseError']:>8} {o['lazy']:>6} "
            f"{o['FAIL']:>5} {t.seconds / max(n, 1) * 1e3:5.1f} ms {t.slowest * 1e3:6.1f} ms  "
            f"{t.slowest_case[:90]}"
        )
    totals: collections.Counter[str] = sum(
        (t.outcomes for t in tallies.values()), collections.Counter()
    )
    worst = max(tallies.values(), key=lambda t: t.slowest)
    for outcome in ("parsed", "ParseError", "lazy", "FAIL"):
        print(f"{outcome:<11} {totals[outcome]}")
    print(
        f"slowest     {worst.slowest:.3f} s CPU ({worst.slowest_wall:.3f} s wall): "
        f"{worst.slowest_case}"
    )
    for line in slow[:20]:
        print(f"SLOW {line}")
    for i, failure in enumerate(failures[: args.show]):
        print(f"\nFAIL {i + 1}: {failure}")
    if len(failures) > args.show:
        print(f"\n... and {len(failures) - args.show} more failures")
    return 1 if failures or slow else 0


if __name__ == "__main__":
    sys.exit(main())
