"""The HLO parser on hostile input: 1 MB lines, deep nesting, huge numbers, malformed configs.

Every case ends as a parsed module whose lazy parts read cleanly, or as a ParseError naming the
file and line; never a hang, a RecursionError or another traceback. The old regexes that
backtracked are kept here, compiled, as the reference the new scanners must agree with.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hlo_helpers import gpu_file
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.hlo import instruction, parser
from harness.hlo.clusters import find_clusters, members
from harness.hlo.cost import module_cost
from harness.hlo.instruction import GemmConfig, ParseError
from harness.hlo.parser import parse_file, parse_module, print_module
from harness.hlo.passes import _computation_order, structural_fingerprint
from harness.hlo.shapes import MAX_TUPLE_DEPTH, ShapeError, leaves, parse_shape, strip_comments

MB = 1 << 20
# Reading 4x the text may cost at most SLOPE x the CPU time: linear is 4, quadratic 16, and
# the old regexes were cubic or worse. FLOOR_S absorbs the timer's grain on cases that take
# milliseconds, where a ratio means nothing; a superlinear read of 1 MB takes minutes.
SLOPE = 8.0
FLOOR_S = 0.05
X = "%x = f32[4]{0} parameter(0)"
NEG = "ROOT %n = f32[4]{0} negate(%x)"


def module(*body: str, comps: str = "", header: str = "") -> str:
    """A module whose ENTRY holds `body` (one instruction a line) after `comps`."""
    lines = "\n".join("  " + b for b in body)
    return f"HloModule m{header}\n\n{comps}ENTRY %main (x: f32[4]) -> f32[4] {{\n{lines}\n}}\n"


def read_everything(text: str) -> str:
    """'parsed' or 'ParseError' (located in b.hlo); reads every lazy part and runs the
    cluster, cost and fingerprint code on what parses. Anything else propagates."""
    try:
        m = parse_module(text, "b.hlo")
        for _, inst in m.instructions():
            try:
                _ = (inst.attrs, inst.metadata, inst.backend_config, inst.frontend_attributes)
                _ = (inst.gemm_config(), inst.fusion_backend_kind(), inst.shape.bytes)
                _ = (str(inst.shape), m.source_location(inst))
            except ParseError as e:
                assert (e.path, e.line) == ("b.hlo", inst.line)
                raise
        find_clusters(m)
        module_cost(m)
        structural_fingerprint(m)
        print_module(m)
    except ParseError as e:
        assert e.path == "b.hlo" and e.line >= 1 and e.column >= 1
        return "ParseError"
    return "parsed"


def cpu_seconds(text: str) -> tuple[str, float]:
    """read_everything(text) and the CPU time this thread spent on it: work, not wall time, so a
    busy machine (other processes on both cores) slows the clock but not this figure."""
    t0 = time.thread_time()
    outcome = read_everything(text)
    return outcome, time.thread_time() - t0


def assert_linear(build: Callable[[int], str], full: float, what: str) -> None:
    """Reading build(MB), measured at `full` CPU seconds, costs at most SLOPE times reading
    build(MB // 4): the calibration is the same case at a quarter of the size, measured here.
    A pair that misses is measured again (the best of three), so one preempted or
    cache-cold read cannot fail the test, while a superlinear reader fails every time."""
    quarter = build(MB // 4)
    for _ in range(3):
        small = min(cpu_seconds(quarter)[1] for _ in range(2))
        if full <= SLOPE * small + FLOOR_S:
            return
        full = min(full, cpu_seconds(build(MB))[1])
    raise AssertionError(f"{what}: 1 MB took {full:.3f} s of CPU, MB/4 took {small:.3f} s")


# One line of about n bytes (the tests: 1 MB) in each position, with the outcome it must have.
LONG_LINES: dict[str, tuple[Callable[[int], str], str]] = {
    "module name": (lambda n: f"HloModule {'m' * n}\n\nENTRY %e {{\n  ROOT {X}\n}}\n", "parsed"),
    "module attributes": (
        lambda n: module(f"ROOT {X}", header="".join(f", a{i}={{x=1}}" for i in range(n // 14))),
        "parsed",
    ),
    "module attribute brackets": (
        lambda n: module(f"ROOT {X}", header=", a=" + "{}" * (n // 2)),
        "parsed",
    ),
    "computation signature": (
        lambda n: (
            "HloModule m\n\nENTRY %main ("
            + ", ".join(f"p{i}: f32[4]" for i in range(n // 12))
            + f") -> f32[4] {{\n  ROOT {X}\n}}\n"
        ),
        "parsed",
    ),
    "computation name": (
        lambda n: f"HloModule m\n\nENTRY %{'c' * n} () -> f32[4] {{\n  ROOT {X}\n}}\n",
        "parsed",
    ),
    "instruction name": (
        lambda n: module(
            f"%{'v' * n} = f32[4]{{0}} parameter(0)", f"ROOT %n = f32[4]{{0}} negate(%{'v' * n})"
        ),
        "parsed",
    ),
    "instruction dims": (
        lambda n: module(X, f"ROOT %n = f32[{','.join(['1'] * (n // 2))}]{{0}} negate(%x)"),
        "parsed",
    ),
    "instruction operands": (
        lambda n: module(X, f"ROOT %n = f32[4]{{0}} add({', '.join(['%x'] * (n // 4))})"),
        "parsed",
    ),
    "instruction literal": (
        lambda n: module(
            f"ROOT %c = f32[{n // 3}]{{0}} constant({{{', '.join(['1'] * (n // 3))}}})"
        ),
        "parsed",
    ),
    "tuple shape": (
        lambda n: module(X, "ROOT %t = (" + "f32[4]{0}, " * (n // 11) + ") tuple(%x)"),
        "parsed",
    ),
    "attribute": (
        lambda n: module(X, NEG + ", sharding={" + "devices=[2]0,1 " * (n // 15) + "}"),
        "parsed",
    ),
    "attribute brackets": (lambda n: module(X, NEG + ", sharding=" + "{}" * (n // 2)), "parsed"),
    "metadata": (
        lambda n: module(X, NEG + ', metadata={op_name="' + "a" * n + '" stack_frame_id=1}'),
        "parsed",
    ),
    "metadata items": (
        lambda n: module(X, NEG + ", metadata={" + "op_type=add " * (n // 12) + "}"),
        "parsed",
    ),
    "backend_config": (
        lambda n: module(X, NEG + ', backend_config={"s":"' + "z" * n + '"}'),
        "parsed",
    ),
    "table row": (
        lambda n: f'HloModule m\n\nFileNames\n1 "{"f" * n}"\n\nENTRY %e {{\n  ROOT {X}\n}}\n',
        "parsed",
    ),
    "comment": (lambda n: module(X, f"ROOT %n = f32[4]{{0}} add(%x, /*{'c' * n}*/ %x)"), "parsed"),
}

# Lines built against each old regex: what made it backtrack, about n bytes long (1 MB). The old
# regexes took minutes (cubic) or hours (quadratic) on these; see test_old_regexes_backtrack.
PATHOLOGICAL: dict[str, Callable[[int], str]] = {
    "_COMP: blanks not followed by `{`": lambda n: f"HloModule m\n\n%c{' ' * n}x\n  ROOT {X}\n}}\n",
    "_COMP: blanks after `{`": lambda n: f"HloModule m\n\n%c {{{' ' * n}x\n  ROOT {X}\n}}\n",
    "_META_ITEM: a long key without `=`": lambda n: module(X, NEG + ", metadata={" + "k" * n + "}"),
    "_TOKEN: escaped quotes in an unclosed string": lambda n: module(
        X, NEG + ', custom_call_target="' + '\\"' * (n // 2)
    ),
    "_COMMENT: unclosed comments": lambda n: module(
        X, f"ROOT %n = (f32[4]{{0}} /*{' /*' * (n // 3)}) tuple(%x)"
    ),
    "_COMMENT: unclosed comment in operands": lambda n: module(
        X, f"ROOT %n = f32[4]{{0}} add(%x, {'/*' * (n // 2)} %x)"
    ),
    "_FAST/_HEAD: a name with no `=`": lambda n: module(X, "%" + "h" * n + " negate(%x)"),
    "_FAST: dims that never close": lambda n: module(
        X, "%n = f32[" + "1," * (n // 2) + " negate(%x)"
    ),
    "_FAST: blanks before the name": lambda n: module(X, " " * n + "%n = f32[4]{0} negate(%x)"),
    "_ARRAY_SHAPE: layout that never closes": lambda n: module(X, "%n = f32[4]{" + "0," * (n // 2)),
    "_HEADER: a name then junk": lambda n: "HloModule " + "m" * n + " junk\n",
    "_TABLE_ROW: digits without a value": lambda n: "HloModule m\n\nFileNames\n" + "1" * n + "\n",
    "split_top_level: deep open brackets": lambda n: module(X, NEG + ", sharding=" + "{" * n),
}


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(LONG_LINES))
def test_a_1mb_line_in_each_position_reads_in_linear_time(where: str) -> None:
    build, expected = LONG_LINES[where]
    text = build(MB)
    assert len(max(text.split("\n"), key=len)) >= MB // 2
    outcome, seconds = cpu_seconds(text)
    assert outcome == expected
    assert_linear(build, seconds, where)


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(PATHOLOGICAL))
def test_lines_built_against_the_old_regexes_are_linear(what: str) -> None:
    text = PATHOLOGICAL[what](MB)
    assert len(text) >= MB // 2
    _, seconds = cpu_seconds(text)
    assert_linear(PATHOLOGICAL[what], seconds, what)


OLD_COMP = re.compile(r"(ENTRY\s+)?%?([^\s(){}]+)\s*(.*?)\s*\{\s*$")
OLD_META_ITEM = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|[^\s}]*)')
OLD_COMMENT = re.compile(r"/\*.*?\*/")
OLD_FAST = re.compile(
    r"\s+(ROOT\s+)?%?([^\s=%]+) = ([a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?) "
    r"([a-z][a-z0-9\-_]*)\(([^(){}\"\[]*)\)(?:, (.*))?$"
)
OLD_HEAD = re.compile(r"\s+(ROOT\s+)?%?([^\s=%]+)\s*=\s*")
OLD_HEADER = re.compile(r"HloModule\s+([^\s,]+)\s*(?:,\s*(.*))?$")


@pytest.mark.slow
def test_old_regexes_backtrack() -> None:
    """The reason for all of this: the old header regex is cubic in a run of blanks (1,000
    took a second, 4,000 took 50), the new scanner is linear."""
    line = "%c" + " " * 600 + "x"

    def cpu(fn: Callable[[], object]) -> float:
        t0 = time.thread_time()
        assert fn() is None
        return time.thread_time() - t0

    slow = cpu(lambda: OLD_COMP.match(line))
    # The best of five: the new scanner takes microseconds, near the CPU clock's grain.
    fast = min(cpu(lambda: parser._computation_header(line)) for _ in range(5))
    assert fast < slow / 20, (fast, slow)


LINE = st.lists(
    st.sampled_from([*'%(){}[]=,"\\ \t/*af1s.#:-<>', "ENTRY", "ENTRY ", "ROOT ", "HloModule "]),
    max_size=24,
).map("".join)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(LINE)
def test_new_scanners_read_short_lines_as_the_old_regexes_did(line: str) -> None:
    old = OLD_COMP.match(line)
    new = parser._computation_header(line)
    assert (None if old is None else (bool(old[1]), old[2], old[3])) == new
    assert OLD_META_ITEM.findall(line) == instruction._META_ITEM.findall(line)
    assert OLD_COMMENT.sub("", line) == strip_comments(line)
    for old_re, new_re in (
        (OLD_FAST, parser._FAST),
        (OLD_HEAD, parser._HEAD),
        (OLD_HEADER, parser._HEADER),
    ):
        a, b = old_re.match(line), new_re.match(line)
        assert (a and a.groups(), a and a.span()) == (b and b.groups(), b and b.span())


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ENTRY %main.5 (a: f32[]) -> f32[] {", (True, "main.5", "(a: f32[]) -> f32[]")),
        ("%fused (p: f32[8]) -> f32[8] {  ", (False, "fused", "(p: f32[8]) -> f32[8]")),
        ("ENTRY {", (False, "ENTRY", "")),
        ("% (x) {", (False, "%", "(x)")),
        ("%%a {", (False, "%a", "")),
        ('%c, execution_thread="host" {', (False, "c,", 'execution_thread="host"')),
        ("  %c {", None),
        ("%c (x)", None),
    ],
)
def test_computation_headers(line: str, expected: tuple | None) -> None:
    assert parser._computation_header(line) == expected


def test_unclosed_quotes_make_attributes_unsplittable_not_slow() -> None:
    assert instruction.split_top_level('a="x", b={1}') == ['a="x"', "b={1}"]
    assert instruction.split_top_level('a="x\\", b={1}') is None
    assert instruction.parse_attributes('a="x, b={1}') == {"": 'a="x, b={1}'}


# Depth -------------------------------------------------------------------------------------


def test_tuple_shapes_nest_to_the_limit_and_no_deeper() -> None:
    deep = "(" * MAX_TUPLE_DEPTH + "f32[2]{0}" + ")" * MAX_TUPLE_DEPTH
    shape = parse_shape(deep)
    assert [str(s) for s in leaves(shape)] == ["f32[2]{0}"]
    assert shape.bytes == 8 and str(shape) == deep and shape == parse_shape(deep)
    for depth in (MAX_TUPLE_DEPTH + 1, 100_000):
        with pytest.raises(ShapeError, match="nested deeper than 64"):
            parse_shape("(" * depth + "f32[]" + ")" * depth)
    text = module(X, f"ROOT %t = {'(' * 100_000}f32[4]{{0}}{')' * 100_000} tuple(%x)")
    with pytest.raises(ParseError, match="nested deeper") as err:
        parse_module(text, "b.hlo")
    assert err.value.line == 5


@pytest.mark.parametrize(
    ("where", "text", "expected"),
    [
        ("attribute", module(X, NEG + ", sharding=" + "{" * 100_000 + "}" * 100_000), "parsed"),
        ("unbalanced attribute", module(X, NEG + ", sharding=" + "{" * 100_000), "ParseError"),
        ("header", module(f"ROOT {X}", header=", a=" + "[" * 100_000 + "]" * 100_000), "parsed"),
        ("unbalanced header", module(f"ROOT {X}", header=", a=" + "[" * 100_000), "ParseError"),
        (
            "operands",
            module(X, f"ROOT %n = f32[4]{{0}} add({'(' * 100_000}%x{')' * 100_000})"),
            "ParseError",
        ),
        (
            "layout",
            module(X, f"ROOT %n = f32[4]{{{'{' * 100_000}0{'}' * 100_000}}} negate(%x)"),
            "ParseError",
        ),
        (
            "metadata",
            module(X, NEG + ", metadata={op_name=" + "{" * 100_000 + "}" * 100_000 + "}"),
            "parsed",
        ),
        (
            "json",
            module(X, NEG + ', backend_config={"a":' + "[" * 100_000 + "]" * 100_000 + "}"),
            "ParseError",
        ),
        (
            "json in a custom-call",
            module(
                X,
                'ROOT %n = f32[4]{0} custom-call(%x), custom_call_target="t", backend_config={"a":'
                + "[" * 100_000
                + "]" * 100_000
                + "}",
            ),
            "ParseError",
        ),
    ],
)
@pytest.mark.slow
def test_brackets_100k_deep(where: str, text: str, expected: str) -> None:
    assert read_everything(text) == expected, where


def call_chain(n: int, how: str, cycle: bool = False) -> str:
    """ENTRY calls c0, each c<k> runs c<k+1> through `how`; the last runs c0 when `cycle`."""
    comps = []
    for k in range(n):
        target = f"c{k + 1}" if k + 1 < n else ("c0" if cycle else "")
        p = f"  %p{k} = f32[4]{{0}} parameter(0)\n"
        if not target:
            body = f'  ROOT %r{k} = f32[4]{{0}} tanh(%p{k}), metadata={{op_name="leaf"}}'
        elif how == "call":
            body = f"  ROOT %r{k} = f32[4]{{0}} call(%p{k}), to_apply=%{target}"
        elif how == "fusion":
            body = f"  ROOT %r{k} = f32[4]{{0}} fusion(%p{k}), kind=kLoop, calls=%{target}"
        else:
            body = f"  ROOT %r{k} = f32[4]{{0}} while(%p{k}), condition=%{target}, body=%{target}"
        comps.append(f"%c{k} (p{k}: f32[4]) -> f32[4] {{\n{p}{body}\n}}\n")
    entry = (X, "ROOT %e = f32[4]{0} call(%x), to_apply=%c0")
    return module(*entry, comps="\n".join(comps) + "\n")


@pytest.fixture(scope="module")
def chains() -> dict[str, object]:
    return {
        how: parse_module(call_chain(10_000, how, cycle=how == "while"), "chain.hlo")
        for how in ("call", "fusion", "while")
    }


@pytest.mark.slow
def test_10k_deep_call_chains_walk_without_recursion(chains: dict) -> None:
    calls, fusions, whiles = chains["call"], chains["fusion"], chains["while"]
    (leaf,) = find_clusters(calls)
    assert (leaf.name, leaf.parent) == ("r9999", "r9998")
    (fusion,) = find_clusters(fusions)
    assert fusion.name == "r0" and dict(fusion.member_opcodes) == {"fusion": 9_998, "tanh": 1}
    assert len(members(fusions, fusions.computations["c0"].root)) == 9_999
    assert module_cost(fusions, (fusion,)).clusters[0].transcendentals == 4.0
    # A while is a unit itself, then its body: c0..c9999 each once although c9999 calls c0.
    assert [c.name for c in find_clusters(whiles)] == [f"r{k}" for k in range(10_000)]
    expected = ["main"] + [f"c{k}" for k in range(10_000)]
    for m in (calls, fusions, whiles):
        assert [c.name for c in _computation_order(m)] == expected
    assert structural_fingerprint(calls) != structural_fingerprint(whiles)


def test_computation_order_is_depth_first_preorder_as_before() -> None:
    comps = (
        "%a (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n"
        "  %u = f32[4]{0} call(%p), to_apply=%c\n  ROOT %v = f32[4]{0} call(%u), to_apply=%b\n}\n\n"
        "%b (q: f32[4]) -> f32[4] {\n  %q = f32[4]{0} parameter(0)\n  ROOT %w = f32[4]{0} tanh(%q)\n}\n\n"
        "%c (s: f32[4]) -> f32[4] {\n  %s = f32[4]{0} parameter(0)\n"
        "  ROOT %t = f32[4]{0} call(%s), to_apply=%b\n}\n\n"
    )
    m = parse_module(
        module(
            X,
            "%y = f32[4]{0} call(%x), to_apply=%b",
            "ROOT %z = f32[4]{0} call(%y), to_apply=%a",
            comps=comps,
        )
    )
    assert [c.name for c in _computation_order(m)] == ["main", "b", "a", "c"]
    assert [(c.name, c.parent) for c in find_clusters(m)] == [("w", "y")]


# Numbers -----------------------------------------------------------------------------------

HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        (module(f"ROOT %x = f32[{2**62 + 1}]{{0}} parameter(0)"), 4, "above 2**62"),
        (module(f"ROOT %x = f32[{HUGE}]{{0}} parameter(0)"), 4, "0..2**62"),
        (module(f"ROOT %x = f32[{2**62},4]{{0}} parameter(0)"), 4, "more than 2**63-1 elements"),
        (module(f"ROOT %x = (f32[8]{{0}}, f32[{'4,' * 40}4]) parameter(0)"), 4, "2**63-1"),
        (module("ROOT %x = f32[²]{0} parameter(0)"), 4, "bad dimension"),
        (module("ROOT %x = f32[-1]{0} parameter(0)"), 4, "bad dimension"),
        (module(X, f"ROOT %g = f32[4]{{0}} negate(%x#{HUGE})"), 5, "tuple index"),
        (module(X, "ROOT %g = f32[4]{0} negate(%x#٣)"), 5, "tuple index"),
        (module(X, "ROOT %g = (f32[4]{0}) tuple(%x#-1)"), 5, "tuple index"),
        (
            "HloModule m\n\nFileNames\n" + HUGE + ' "a"\n\n' + "ENTRY %e {\n  ROOT " + X + "\n}\n",
            4,
            "FileNames id",
        ),
        (
            "HloModule m\n\nStackFrames\n1 {file_location_id=" + HUGE + " parent_frame_id=1}\n",
            4,
            "file_location_id",
        ),
        ("HloModule m\n\nFileLocations\n1 {file_name_id=1 line=²}\n", 4, "line="),
    ],
)
def test_numbers_out_of_range_are_parse_errors_at_their_line(
    text: str, line: int, what: str
) -> None:
    with pytest.raises(ParseError, match=re.escape(what)) as err:
        parse_module(text, "b.hlo")
    assert (err.value.path, err.value.line) == ("b.hlo", line)
    assert len(str(err.value)) < 1000


@pytest.mark.parametrize(
    ("attrs", "what"),
    [
        (f'metadata={{op_name="n" stack_frame_id={HUGE}}}', "stack_frame_id"),
        ('metadata={source_file="f.py" source_line=²}', "source_line"),
        ("metadata={stack_frame_id=-1}", "stack_frame_id"),
        (f"dimensions={{{HUGE}}}", "dimensions"),
        ("dimensions={٣}", "dimensions"),
        ("lhs_contracting_dims={x}", "lhs_contracting_dims"),
    ],
)
def test_lazy_numbers_out_of_range_raise_at_the_instruction(attrs: str, what: str) -> None:
    m = parse_module(module(X, f"ROOT %n = f32[4]{{0}} negate(%x), {attrs}"), "b.hlo")
    with pytest.raises(ParseError, match=what) as err:
        _ = (m.entry.root.attrs, m.entry.root.metadata)
    e = err.value
    assert (e.path, e.line) == ("b.hlo", 5)
    assert e.text.startswith("ROOT %n = f32[4]{0} negate(%x)")
    with pytest.raises(ParseError):
        find_clusters(m)


# backend_config and shapes -----------------------------------------------------------------

GEMM = (
    'ROOT %g = {shape} custom-call(%x, %x), custom_call_target="__cublas$lt$matmul", '
    "backend_config={config}"
)


def gemm_module(config: str, shape: str = "(f32[4]{0}, s8[64]{0})") -> str:
    return module(X, GEMM.format(shape=shape, config=config))


@pytest.mark.parametrize(
    ("config", "what"),
    [
        ('{"a": 1,}', "not valid JSON"),
        ('"{\\"a\\": 1"', "not valid JSON"),
        ('{"gemm_backend_config": []}', "gemm_backend_config is list"),
        ('{"gemm_backend_config": {"dot_dimension_numbers": []}}', "dot_dimension_numbers is list"),
        (
            '{"gemm_backend_config": {"dot_dimension_numbers": null}}',
            "dot_dimension_numbers is NoneType",
        ),
        (
            '{"gemm_backend_config": {"dot_dimension_numbers": {"lhs_contracting_dimensions": "1"}}}',
            "lhs_contracting_dimensions is str",
        ),
        (
            '{"gemm_backend_config": {"dot_dimension_numbers": {"lhs_contracting_dimensions": [1.5]}}}',
            "not a dimension number",
        ),
        (
            '{"gemm_backend_config": {"dot_dimension_numbers": {"lhs_contracting_dimensions": ["²"]}}}',
            "not a dimension number",
        ),
        ('{"gemm_backend_config": {"epilogue": 5}}', "epilogue is int"),
        ('{"fusion_backend_config": {"kind": 5}}', "kind is int"),
        ('{"a": ' + HUGE + "}", "not valid JSON"),
    ],
)
def test_malformed_backend_configs_are_located_parse_errors(config: str, what: str) -> None:
    text = gemm_module(config)
    m = parse_module(text, "b.hlo")
    gemm = m.entry.root
    with pytest.raises(ParseError, match=re.escape(what)) as err:
        gemm.backend_config  # noqa: B018
    e = err.value
    line = text.split("\n")[4]
    assert (e.path, e.line, e.column) == ("b.hlo", 5, line.index("backend_config=") + 1)
    # What crashed the cost code before (AttributeError, ValueError) is now this ParseError.
    with pytest.raises(ParseError, match=re.escape(what)):
        module_cost(m)


@pytest.mark.parametrize(
    ("config", "what"),
    [("{not json}", "not valid JSON"), ("[1, 2]", "JSON list, not an object"), ("7", "JSON int")],
)
def test_non_json_configs_are_errors_except_on_custom_calls(config: str, what: str) -> None:
    custom = parse_module(gemm_module(config), "b.hlo").entry.root
    assert custom.backend_config == {} and custom.gemm_config() is None
    fusion = parse_module(module(X, f"{NEG}, backend_config={config}"), "b.hlo").entry.root
    with pytest.raises(ParseError, match=re.escape(what)) as err:
        fusion.fusion_backend_kind()
    assert err.value.line == 5


def test_a_library_gemm_without_an_output_array_is_a_parse_error_not_an_index_error() -> None:
    config = '{"gemm_backend_config": {"epilogue": "DEFAULT"}}'
    for shape in ("()", "(())", "((), ())"):
        m = parse_module(gemm_module(config, shape), "b.hlo")
        gemm = m.entry.root
        assert leaves(gemm.shape) == ()
        with pytest.raises(ParseError, match="no output array") as err:
            gemm.output_array()
        assert err.value.line == 5
        with pytest.raises(ParseError, match="GEMM custom-call has no output array"):
            module_cost(m)
    # Without a GEMM config the call is just not costed.
    m = parse_module(gemm_module('{"operation_queue_id": "0"}', "()"), "b.hlo")
    (cost,) = module_cost(m).clusters
    assert (cost.flops, cost.bytes) == (0.0, 16.0)


def test_real_gemm_and_fusion_configs_read_through_typed_accessors() -> None:
    gemm = parse_file(
        gpu_file("jit_bf16_tanh_large_notriton", "sm_9.0a_gpu_after_optimizations.txt")
    )
    call = gemm.entry.get("cublas-lt-matmul.3")
    assert call.gemm_config() == GemmConfig((1,), (0,), (), (), "BIAS_GELU")
    assert str(call.output_array()) == "bf16[8192,8192]{1,0}"
    assert call.gemm_config() is not None and call.fusion_backend_kind() == ""
    emitters = parse_file(
        gpu_file("jit_bf16_tanh_large_emitters", "sm_9.0a_gpu_after_optimizations.txt")
    )
    fusion = emitters.entry.get("gemm_fusion_dot")
    assert fusion.fusion_backend_kind() == "__triton_nested_gemm_fusion"
    assert fusion.gemm_config() is None
    dot = emitters.computations["gemm_fusion_dot_computation"].root
    assert dot.int_list_attr("lhs_contracting_dims") == (2,)
    assert dot.int_list_attr("lhs_batch_dims") == (1,)
    assert dot.int_list_attr("absent") == ()


def test_typed_ffi_custom_calls_keep_their_non_json_config_opaque() -> None:
    """jax callbacks on CPU write MLIR attribute dicts (`{index = 0 : ui64}`), not JSON."""

    def f(x: jax.Array) -> jax.Array:
        y = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y + 1

    m = parse_module(jax.jit(f).lower(jnp.ones(3)).compile().as_text(), "cb.hlo")
    calls = [i for _, i in m.instructions() if i.opcode == "custom-call"]
    assert calls and all(i.attr("backend_config", "").startswith("{index = ") for i in calls)
    assert all(i.backend_config == {} and i.gemm_config() is None for i in calls)
    assert module_cost(m).clusters
    # The same text on an instruction XLA configures with JSON is an error.
    text = module(X, NEG + ", backend_config={index = 0 : ui64}")
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_module(text, "b.hlo").entry.root.backend_config  # noqa: B018


def test_instructions_know_their_file_and_line() -> None:
    path = gpu_file("jit_bf16_tanh_large", "sm_9.0a_gpu_after_optimizations.txt")
    lines = path.read_text().split("\n")
    m = parse_file(path)
    for _, inst in m.instructions():
        assert inst.path == str(path)
        assert f"%{inst.name} = " in lines[inst.line - 1]
        if inst.attr_text:
            assert lines[inst.line - 1][inst.attr_col - 1 :] == inst.attr_text


def test_lone_surrogates_are_parse_errors() -> None:
    text = module(X, NEG + ', metadata={op_name="\udc80"}')
    with pytest.raises(ParseError, match="not Unicode text") as err:
        parse_module(text, "b.hlo")
    assert (err.value.line, err.value.column) == (5, text.split("\n")[4].index("\udc80") + 1)
