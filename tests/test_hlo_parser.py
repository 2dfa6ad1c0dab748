"""Specification of harness.hlo.parser on real XLA dumps (H200 fixtures, live CPU compiles)."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hlo_helpers import cpu_dump, gpu_file, hlo_text_files, require_fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.hlo.instruction import ParseError
from harness.hlo.parser import parse_file, parse_module, print_module
from harness.hlo.shapes import ArrayShape, TupleShape, parse_shape

INSTRUCTION_LINE = re.compile(r"^\s+(?:ROOT )?%[^\s=]+ = ", re.M)
ENTRY_LINE = re.compile(r"^ENTRY %(\S+)", re.M)
FILES = hlo_text_files()


@pytest.mark.skipif(not FILES, reason="shared fixtures not found beside the repo")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.name[:70]}")
def test_every_fixture_module_parses_with_all_instructions(path: Path) -> None:
    text = path.read_text()
    module = parse_module(text, str(path))
    assert module.instruction_count() == len(INSTRUCTION_LINE.findall(text))
    assert module.entry_name == ENTRY_LINE.search(text).group(1)
    assert module.entry.is_entry
    for _, inst in module.instructions():
        assert inst.shape.bytes >= 0
        assert all(inst.operand_names)


def test_tuple_index_operands_keep_their_index() -> None:
    module = parse_file(gpu_file("jit_bf16_tanh_large", "sm_9.0a_gpu_after_optimizations.txt"))
    fusion = module.entry.get("loop_multiply_fusion")
    assert fusion.operands == ("cublas-lt-matmul.1#0",)
    assert fusion.operand_names == ("cublas-lt-matmul.1",)
    gemm = module.entry.get("cublas-lt-matmul.1")
    assert isinstance(gemm.shape, TupleShape)
    assert [str(s) for s in gemm.shape.leaves()] == ["bf16[8192,8192]{1,0}", "s8[33554432]{0}"]
    assert gemm.custom_call_target == "__cublas$lt$matmul"
    assert gemm.backend_config["gemm_backend_config"]["epilogue"] == "BIAS"
    assert fusion.attr("kind") == "kLoop"
    assert fusion.called_computations == ("fused_multiply",)


def test_jaxlib_cpp_parser_rejects_what_we_accept() -> None:
    from jaxlib import _hlo

    text = gpu_file("jit_bf16_tanh_large", "sm_9.0a_gpu_after_optimizations.txt").read_text()
    with pytest.raises(Exception, match=r"(?i)syntax|expect|error"):
        _hlo.hlo_module_from_text(text)
    assert parse_module(text).entry.root.name == "loop_multiply_fusion"


def test_header_tables_and_stack_frames_resolve_to_source() -> None:
    path = gpu_file("jit_bf16_tanh_large_notriton", "sm_9.0a_gpu_after_optimizations.txt")
    module = parse_file(path)
    assert module.name == "jit_gelu_linear"
    assert module.header["is_scheduled"] == "true"
    assert module.header["entry_computation_layout"].startswith("{(bf16[8192,8192]{1,0}")
    assert module.file_names[1] == "/work/steering/lab/gpu_probe.py"
    loc = module.resolve_frame(4)
    assert (loc.file, loc.line, loc.function) == (
        "/work/steering/lab/gpu_probe.py",
        50,
        "child.<locals>.gelu_linear",
    )
    gemm = module.entry.get("cublas-lt-matmul.3")
    assert gemm.metadata["op_name"] == "jit(gelu_linear)/dot_general"
    assert gemm.metadata["scheduling_name"] == "cublas-lt-matmul.3"
    assert str(module.source_location(gemm)) == "/work/steering/lab/gpu_probe.py:50"
    assert module.resolve_frame(999) is None


def test_emitters_fusions_carry_frontend_attributes_and_block_configs() -> None:
    module = parse_file(
        gpu_file("jit_bf16_tanh_large_emitters", "sm_9.0a_gpu_after_optimizations.txt")
    )
    gemm = module.entry.get("gemm_fusion_dot")
    assert gemm.frontend_attributes == {"xla.pdl_launch": "true"}
    assert gemm.backend_config["fusion_backend_config"]["kind"] == "__triton_nested_gemm_fusion"
    dot = module.computations["gemm_fusion_dot_computation"].root
    assert dot.attrs["lhs_batch_dims"] == "{1}"
    assert dot.attrs["lhs_contracting_dims"] == "{2}"
    fused = module.computations["fused_multiply"]
    reduce = fused.get("reduce.6")
    assert reduce.called_computations == ("dot.reduce_sub_computation",)
    assert fused.get("constant_13").literal == "0"


def test_live_cpu_dumps_parse(tmp_path: Path) -> None:
    def f(x, w, b):
        return jax.nn.gelu(x @ w + b)

    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)))
    dump, compiled = cpu_dump(tmp_path, f, *args)
    texts = [p for p in dump.glob("*.txt") if p.read_bytes()[:9] == b"HloModule"]
    assert len(texts) > 10
    for p in texts:
        parse_file(p)
    after = parse_file(next(dump.glob("*cpu_after_optimizations.txt")))
    assert after.header["is_scheduled"] == "true"
    assert any(i.opcode == "fusion" for i in after.entry)
    ours = parse_module(compiled.as_text())
    assert ours.instruction_count() == after.instruction_count()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bf16[8192,8192]{1,0}", ArrayShape("bf16", (8192, 8192), "1,0")),
        ("f32[8,128]{1,0:T(8,128)S(1)}", ArrayShape("f32", (8, 128), "1,0:T(8,128)S(1)")),
        ("f32[]", ArrayShape("f32", ())),
        ("s32[<=4,3]{1,0}", ArrayShape("s32", (4, 3), "1,0", (True, False))),
    ],
)
def test_array_shapes(text: str, expected: ArrayShape) -> None:
    assert parse_shape(text) == expected
    assert str(parse_shape(text)) == text


def test_nested_tuple_shapes_and_bytes() -> None:
    shape = parse_shape("(bf16[2,3]{1,0}, (s8[16]{0}, /*index=2*/f32[]), token[])")
    assert isinstance(shape, TupleShape)
    assert [s.dtype for s in shape.leaves()] == ["bf16", "s8", "f32", "token"]
    assert shape.bytes == 12 + 16 + 4


def test_attributes_with_nested_braces_quotes_and_escapes() -> None:
    text = (
        "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n"
        "ENTRY %main (p: f32[2]) -> f32[2] {\n"
        "  %p = f32[2]{0} parameter(0), sharding={devices=[2]0,1}\n"
        '  ROOT %c = f32[2]{0} custom-call(%p), custom_call_target="x\\"y", '
        'backend_config="{\\"a\\": {\\"b\\": [1, 2]}}", '
        'metadata={op_name="a, b {c}" source_file="f.py" source_line=7}, weird_attr={{1},{2}}\n'
        "}\n"
    )
    c = parse_module(text).entry.get("c")
    assert c.custom_call_target == 'x"y'
    assert c.backend_config == {"a": {"b": [1, 2]}}
    assert c.metadata == {"op_name": "a, b {c}", "source_file": "f.py", "source_line": "7"}
    assert c.attrs["weird_attr"] == "{{1},{2}}"
    assert parse_module(text).entry.get("p").attrs["sharding"] == "{devices=[2]0,1}"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("", 1, "empty input"),
        ("garbage here\n", 1, "HloModule"),
        ("HloModule m\n\nENTRY %e {\n  %a = f32[] parameter(0)\n", 4, "not closed"),
        ("HloModule m\n\nENTRY %e {\n  ROOT %a = f32[] add(%a, %zz)\n}\n", 4, "unknown operand"),
        ("HloModule m\n\nENTRY %e {\n  %a = f32[ parameter(0)\n}\n", 4, "shape"),
    ],
)
def test_bad_input_raises_located_parse_error(text: str, line: int, what: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_module(text, "bad.hlo")
    e = err.value
    assert (e.path, e.line) == ("bad.hlo", line)
    assert what in str(e)
    assert str(e).startswith(f"bad.hlo:{line}:{e.column}: ")
    assert e.text in str(e)


def test_parse_file_rejects_non_utf8(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_bytes(b"HloModule m\n\xff\xfe")
    with pytest.raises(ParseError, match="UTF-8"):
        parse_file(p)


def test_fixture_round_trip_is_a_fixed_point() -> None:
    path = gpu_file("jit_bf16_tanh_large_emitters", "sm_9.0a_gpu_after_optimizations.txt")
    module = parse_file(path)
    again = parse_module(print_module(module))
    assert print_module(again) == print_module(module)
    assert [i.text() for _, i in again.instructions()] == [
        i.text() for _, i in module.instructions()
    ]


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[0-9]{1,2})?", fullmatch=True)
DTYPES = st.sampled_from(["f32", "bf16", "s32", "pred", "s8"])
DIMS = st.lists(st.integers(0, 64), max_size=3)
UNARY = st.sampled_from(["tanh", "exponential", "negate", "copy", "convert"])
BINARY = st.sampled_from(["add", "multiply", "subtract", "maximum"])
META = st.text(alphabet=st.sampled_from('abc /(){},="\\'), max_size=12)


@st.composite
def modules(draw: st.DrawFn) -> str:
    """Random but well-formed HLO module text: parameters feeding unary/binary chains."""
    dtype, dims = draw(DTYPES), draw(DIMS)
    shape = (
        f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, reversed(range(len(dims)))))}}}"
    )
    names = draw(st.lists(NAMES, min_size=2, max_size=12, unique=True))
    lines, defined = [], []
    n_params = draw(st.integers(1, min(3, len(names) - 1)))
    for i, name in enumerate(names):
        if i < n_params:
            lines.append(f"%{name} = {shape} parameter({i})")
        else:
            if draw(st.booleans()) and len(defined) > 1:
                a, b = draw(st.sampled_from(defined)), draw(st.sampled_from(defined))
                body = f"{draw(BINARY)}(%{a}, %{b})"
            else:
                body = f"{draw(UNARY)}(%{draw(st.sampled_from(defined))})"
            meta = draw(META).replace("\\", "\\\\").replace('"', '\\"')
            attrs = (
                f', metadata={{op_name="{meta}" stack_frame_id={i}}}' if draw(st.booleans()) else ""
            )
            if draw(st.booleans()):
                attrs += ', backend_config={"k":[1,{"x":"}"}]}'
            lines.append(f"%{name} = {shape} {body}{attrs}")
        defined.append(name)
    lines[-1] = "ROOT " + lines[-1]
    body = "\n".join("  " + ln for ln in lines)
    return f"HloModule gen, entry_computation_layout={{()->{shape}}}\n\nENTRY %main () -> {shape} {{\n{body}\n}}\n"


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_generated_modules_survive_print_parse_round_trip(text: str) -> None:
    module = parse_module(text)
    printed = print_module(module)
    again = parse_module(printed)
    assert print_module(again) == printed
    for (_, a), (_, b) in zip(module.instructions(), again.instructions(), strict=True):
        assert (a.name, a.opcode, a.shape, a.operands, a.metadata, a.backend_config) == (
            b.name,
            b.opcode,
            b.shape,
            b.operands,
            b.metadata,
            b.backend_config,
        )


def _fuzz_sources() -> list[str]:
    root = require_fixtures()
    picks = [
        "jit_bf16_tanh_large_notriton/dump/module_5970.jit_gelu_linear.sm_9.0a_gpu_after_optimizations.txt",
        "jit_bf16_tanh_large_emitters/dump/module_23838.jit_gelu_linear.sm_9.0a_gpu_after_optimizations.txt",
        "jit_bf16_tanh_large/dump/module_5970.jit_gelu_linear.before_optimizations.txt",
    ]
    return [(root / p).read_text() for p in picks if (root / p).is_file()]


@pytest.mark.slow
@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_or_mutated_fixtures_raise_only_parse_error(data: st.DataObject) -> None:
    sources = _fuzz_sources()
    text = data.draw(st.sampled_from(sources))
    action = data.draw(st.sampled_from(["truncate", "replace", "insert", "delete", "swap_lines"]))
    pos = data.draw(st.integers(0, len(text)))
    if action == "truncate":
        text = text[:pos]
    elif action == "replace":
        text = text[:pos] + data.draw(st.text(min_size=1, max_size=4)) + text[pos + 1 :]
    elif action == "insert":
        text = text[:pos] + data.draw(st.sampled_from([*'{}()[]",=%#\n ', "\x00"])) + text[pos:]
    elif action == "delete":
        end = data.draw(st.integers(pos, min(len(text), pos + 40)))
        text = text[:pos] + text[end:]
    else:
        lines = text.split("\n")
        i, j = data.draw(st.integers(0, len(lines) - 1)), data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        text = "\n".join(lines)
    try:
        module = parse_module(text, "fuzz.txt")
    except ParseError as e:
        assert e.path == "fuzz.txt" and e.line >= 1
        return
    for _, inst in module.instructions():
        # Lazy parts either read as dicts or raise a ParseError located at the instruction.
        try:
            parsed = (inst.attrs, inst.metadata, inst.backend_config, inst.frontend_attributes)
        except ParseError as e:
            assert (e.path, e.line) == ("fuzz.txt", inst.line)
            continue
        assert all(isinstance(p, dict) for p in parsed)
    print_module(module)
