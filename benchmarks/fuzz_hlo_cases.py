"""The cases benchmarks/fuzz_hlo.py feeds the HLO parser: mutated fixture modules and the
hostile families (nesting, long lines, numbers, attributes, quotes, Unicode, GEMM shapes),
each drawn from a generator seeded by `seed:index` (`case_rng`), so any case replays alone.
fuzz_hlo.py's docstring says what each family holds."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FIXTURES = REPO.parent / "shared" / "fixtures"
PATH = "fuzz.txt"
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
NUMBERS = [
    "-1",
    "0",
    "99999999999999999999",
    "1e400",
    "nan",
    "-0",
    "4294967296",
    str(2**62),
    str(2**62 + 1),
    str(2**63),
    "9" * 400,
    "9" * 4301,
    "9" * 5000,
    "0" * 30 + "1",
    "²",
    "٣",
    "１",
    "0x10",
    "1_000",
    "+1",
    "",
]
ODD_UNICODE = [
    "\u200b",
    "\u202e",
    "\ufeff",
    "\u0301",
    "\u2028",
    "\u2029",
    "\x85",
    "\xa0",
    "\u3000",
    "\x1c",
    "\x0b",
    "\x0c",
    "\r",
    "\x00",
    "\ud800",
    "\udfff",
    "²",
    "٣",
    "１",
    "％",
    "＝",
    "（",
    "｛",
    "＂",
    "İ",
    "ſ",
    "\u212a",
    "😀",
]
LOOKALIKES = {"%": "％", "=": "＝", "(": "（", "{": "｛", '"': "＂", "1": "１", " ": "\xa0"}

# A compact module that uses every kind of slot the parser and its readers look at: source
# tables, metadata with stack frames, a cuBLAS GEMM with a gemm_backend_config and a tuple
# output read through `#0`, a dot, a fusion with a backend kind, a collective with
# replica_groups, a reduce with a reducer, a call, a while loop and a conditional.
# Call chains stop at 1,024 computations here: clusters, cost, fingerprint and the reparse
# take 0.15 to 0.25 ms of CPU per computation between them, so a 10,000-deep chain would pass
# the 1 s per case on its own. tests/test_parser_bounds.py runs the 10,000-deep chains.
CHAIN_EXP = 10
CHAIN_MAX = 1024
# Nesting goes to 2**17 = 131,072 levels; long lines to 2**max_exp characters (1 MB).
NEST_EXP = 17
GEMM_CONFIG = (
    '{"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"dot_dimension_numbers":'
    '{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],'
    '"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"BIAS"}}'
)
FUSION_CONFIG = '{"fusion_backend_config":{"kind":"__triton_gemm"}}'
GEMM_SHAPE = "(f32[8,32]{1,0}, s8[1024]{0})"
TEMPLATE = """HloModule fuzz_module, is_scheduled=true, entry_computation_layout={{(f32[8,16]{{1,0}}, f32[16,32]{{1,0}}, f32[32]{{0}})->f32[8,32]{{1,0}}}}{header}

FileNames
1 "/src/model.py"

FunctionNames
1 "forward"

FileLocations
1 {{file_name_id=1 function_name_id=1 line=12 end_line=12 column=4 end_column=9}}

StackFrames
1 {{file_location_id=1 parent_frame_id=1}}

%add_f32 (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}}

%fused_gelu (p0: f32[8,32]) -> f32[8,32] {{
  %p0 = f32[8,32]{{1,0}} parameter(0)
  %t = f32[8,32]{{1,0}} tanh(%p0), metadata={{op_name="jit(f)/tanh" stack_frame_id=1}}
  ROOT %m = f32[8,32]{{1,0}} multiply(%p0, %t)
}}

%callee (q: f32[8,32]) -> f32[8,32] {{
  %q = f32[8,32]{{1,0}} parameter(0)
  ROOT %n = f32[8,32]{{1,0}} negate(%q)
}}

%cond (s: (s32[], f32[8,32])) -> pred[] {{
  %s = (s32[], f32[8,32]{{1,0}}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %limit = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %limit), direction=LT
}}

%body (r: (s32[], f32[8,32])) -> (s32[], f32[8,32]) {{
  %r = (s32[], f32[8,32]{{1,0}}) parameter(0)
  %j = s32[] get-tuple-element(%r), index=0
  %v = f32[8,32]{{1,0}} get-tuple-element(%r), index=1
  %one = s32[] constant(1)
  %j1 = s32[] add(%j, %one)
  %v1 = f32[8,32]{{1,0}} exponential(%v)
  ROOT %next = (s32[], f32[8,32]{{1,0}}) tuple(%j1, %v1)
}}

ENTRY %main (x: f32[8,16], w: f32[16,32], bias: f32[32]) -> f32[8,32] {{
  %x = f32[8,16]{{1,0}} parameter(0), metadata={{op_name="x"}}
  %w = f32[16,32]{{1,0}} parameter(1)
  %bias = f32[32]{{0}} parameter(2)
  %gemm = {gemm_shape} custom-call(%x, %w, %bias), custom_call_target="__cublas$lt$matmul", metadata={{{gemm_meta}}}, backend_config={gemm_config}
  %dot = f32[8,32]{{1,0}} dot(%x, %w), {dot_attrs}
  %fusion = f32[8,32]{{1,0}} fusion({gemm_operand}), kind=kCustom, calls=%fused_gelu, backend_config={fusion_config}
  %ar = f32[8,32]{{1,0}} all-reduce(%fusion), replica_groups={replica_groups}, to_apply=%add_f32
  %c0 = f32[] constant(0)
  %red = f32[8]{{0}} reduce(%ar, %c0), dimensions={reduce_dims}, to_apply=%add_f32
  %bc = f32[8,32]{{1,0}} broadcast(%red), dimensions={{0}}
  %call = f32[8,32]{{1,0}} call(%bc), to_apply=%callee
  %i0 = s32[] constant(0)
  %init = (s32[], f32[8,32]{{1,0}}) tuple(%i0, %call)
  %loop = (s32[], f32[8,32]{{1,0}}) while(%init), condition=%cond, body=%body
  %lv = f32[8,32]{{1,0}} get-tuple-element(%loop), index=1
  %p = pred[] constant(true)
  %cnd = f32[8,32]{{1,0}} conditional(%p, %lv, %dot), true_computation=%callee, false_computation=%callee
  ROOT %out = f32[8,32]{{1,0}} add(%cnd, %dot), frontend_attributes={{_xla_stream="1"}}
}}
"""
SLOTS = {
    "header": "",
    "gemm_shape": GEMM_SHAPE,
    "gemm_meta": 'op_name="jit(f)/dot_general" source_file="/src/model.py" source_line=12 '
    "stack_frame_id=1",
    "gemm_config": GEMM_CONFIG,
    "dot_attrs": "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    "gemm_operand": "%gemm#0",
    "fusion_config": FUSION_CONFIG,
    "replica_groups": "{{0,1},{2,3}}",
    "reduce_dims": "{1}",
}


def template(**slots: str) -> str:
    """The template module with some slots replaced (each slot's text as written)."""
    return TEMPLATE.format(**{**SLOTS, **slots})


BASE = template()


def _gemm(**fields: str) -> str:
    """A backend_config whose gemm_backend_config has `fields` (JSON texts) in place."""
    dnums = {
        "lhs_contracting_dimensions": '["1"]',
        "rhs_contracting_dimensions": '["0"]',
        "lhs_batch_dimensions": "[]",
        "rhs_batch_dimensions": "[]",
    }
    top = {"alpha_real": "1", "dot_dimension_numbers": None, "epilogue": '"BIAS"'}
    for key, value in fields.items():
        if key in dnums:
            dnums[key] = value
        else:
            top[key] = value
    if top["dot_dimension_numbers"] is None:
        top["dot_dimension_numbers"] = "{" + ",".join(f'"{k}":{v}' for k, v in dnums.items()) + "}"
    body = ",".join(f'"{k}":{v}' for k, v in top.items() if v != "<absent>")
    return '{"gemm_backend_config":{' + body + "}}"


HUGE = "9" * 5000
BAD_DIMS = ['["x"]', "[1.5]", "[-1]", "[1e400]", "[true]", "[null]", '["²"]', f'["{HUGE}"]']
BAD_DIMS += ["[5]", '"1"', "{}", "[[1]]", f"[{HUGE}]", "[NaN]", "[Infinity]", '["1 "]']
MALFORMED: dict[str, list[str]] = {
    "gemm_config": [
        "not json",
        "{",
        '"{\\"a\\""',
        "[]",
        "123",
        '"just a string"',
        "{index = 0 : ui64}",
        '{"gemm_backend_config":[]}',
        '{"gemm_backend_config":"x"}',
        '{"gemm_backend_config":null}',
        '{"gemm_backend_config":{}}',
        _gemm(dot_dimension_numbers="[]"),
        _gemm(dot_dimension_numbers='"x"'),
        _gemm(dot_dimension_numbers="null"),
        *(_gemm(lhs_contracting_dimensions=d) for d in BAD_DIMS),
        *(_gemm(rhs_batch_dimensions=d) for d in BAD_DIMS[:4]),
        _gemm(epilogue="5"),
        _gemm(epilogue="null"),
        _gemm(epilogue="{}"),
        _gemm(epilogue='"BIAS_GELU_AUX_RELU_SILU"'),
        _gemm(epilogue="<absent>"),
        '{"a":' + "[" * 5000 + "]" * 5000 + "}",
        '{"a":' + HUGE + "}",
        '{"a":NaN,"b":-Infinity}',
        '{"gemm_backend_config":{},"gemm_backend_config":5}',
        '"{\\"gemm_backend_config\\":{\\"epilogue\\":\\"DEFAULT\\"}}"',
    ],
    "fusion_config": [
        '{"fusion_backend_config":{"kind":5}}',
        '{"fusion_backend_config":"x"}',
        '{"fusion_config":[]}',
        '{"fusion_backend_config":{}}',
        '{"fusion_backend_config":null,"fusion_config":{"kind":"__ynn_fusion"}}',
        "{kind = 1}",
        "{",
        "nope",
        "[]",
    ],
    "gemm_meta": [
        'op_name="unterminated',
        "stack_frame_id=-1",
        "stack_frame_id=" + "9" * 30,
        "stack_frame_id=" + HUGE,
        "stack_frame_id=77",
        "source_line=²",
        'source_file="a.py" source_line=x',
        'source_file="a.py" source_line=' + HUGE,
        'op_name="a\\"',
        "=",
        'op_name=="x"',
        "{{{",
        "stack_frame_id=1 stack_frame_id=٣",
    ],
    "replica_groups": [
        "{{0,1},{2,3}",
        "{}",
        "[2,2]<=[4]",
        "{{0,1},{2,3}}}",
        "{{-1}}",
        "{{99999999999999999999999}}",
        "{{" + HUGE + "}}",
        "{" * 1000,
    ],
    "reduce_dims": [
        "{a}",
        "{-1}",
        "{1,}",
        "{}",
        "{99999999999999999999}",
        "{²}",
        "{1",
        "",
        "{" + HUGE + "}",
        "{9}",
        "1",
        "{ 1 }",
        "{1,1,1}",
    ],
    "dot_attrs": [
        "lhs_contracting_dims={5}, rhs_contracting_dims={0}",
        "lhs_contracting_dims={" + HUGE + "}",
        "lhs_contracting_dims={²}",
        "lhs_contracting_dims={x}",
        "lhs_contracting_dims=1",
        "lhs_batch_dims={0,0,0}",
        "lhs_contracting_dims",
    ],
    "gemm_operand": [
        "%gemm#99999999999999999999999",
        "%gemm#²",
        "%gemm#5",
        "%gemm#",
        "%gemm#-1",
        "%gemm#" + HUGE,
        "%gemm#0#1",
        "%x#0",
    ],
    "gemm_shape": [
        "()",
        "(())",
        "(token[], token[])",
        "f32[-1]",
        "f32[1e3]",
        f"f32[{2**63}]",
        f"f32[{2**62},{2**62}]",
        f"f32[{2**31},{2**31},{2**31}]",
        "f32[?,32]",
        "f32[<=8,32]",
        "opaque[]",
        "zzz[2]",
        "f32[8,32]{",
        "f32[8,32]{1,0:T(8,128)S(1)}",
    ],
    "header": [
        ", x={",
        ", x={{{}}}",
        ', x="unterminated',
        ", =",
        ", frontend_attributes={a=" + "9" * 5000 + "}",
    ],
}


def fixture_texts(root: Path = FIXTURES) -> list[tuple[str, str]]:
    """Returns (name, text) of every HLO module text file under `root` (the shared fixtures,
    or the copy the project ships, unpacked: tests/fixture_root.py)."""
    out = []
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and path.suffix in (".txt", ".hlo")
            and path.read_bytes()[:9] == b"HloModule"
        ):
            out.append((str(path.relative_to(root)), path.read_text()))
    return out


def mutate(rng: random.Random, sources: list[tuple[str, str]]) -> tuple[str, str, str]:
    """Returns (fixture name, description of the mutation, mutated text)."""
    name, text = rng.choice(sources)
    action = rng.choice(ACTIONS)
    pos = rng.randint(0, len(text))
    what = f"{action}@{pos}"
    if action == "truncate":
        text = text[:pos]
    elif action == "replace":
        new = _random_text(rng)
        text, what = text[:pos] + new + text[pos + 1 :], f"{what} {new!r}"
    elif action == "insert":
        new = rng.choice(STRUCTURAL)
        text, what = text[:pos] + new + text[pos:], f"{what} {new!r}"
    elif action == "delete":
        end = rng.randint(pos, min(len(text), pos + 80))
        text, what = text[:pos] + text[end:], f"{what}..{end}"
    elif action in ("swap_lines", "duplicate_line"):
        lines = text.split("\n")
        i = rng.randint(0, len(lines) - 1)
        j = rng.randint(0, len(lines) - 1)
        if action == "swap_lines":
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(j, lines[i])
        text, what = "\n".join(lines), f"{action} {i},{j}"
    elif action == "splice":
        other_name, other = rng.choice(sources)
        cut = rng.randint(0, len(other))
        text, what = text[:pos] + other[cut:], f"splice@{pos} + {other_name}[{cut}:]"
    elif action == "number":
        text, what = _replace_number(text, pos, rng.choice(NUMBERS))
    else:  # drop_bracket
        brackets = [i for i, c in enumerate(text) if c in "{}()[]"]
        if brackets:
            at = brackets[pos % len(brackets)]
            text, what = text[:at] + text[at + 1 :], f"drop_bracket@{at} {text[at]!r}"
    return name, what, text


def _replace_number(text: str, pick: int, new: str) -> tuple[str, str]:
    """`text` with its (pick mod count)-th run of digits replaced by `new`, and a description."""
    starts = [
        i for i, c in enumerate(text) if c.isdigit() and (i == 0 or not text[i - 1].isdigit())
    ]
    if not starts:
        return text, "number (none)"
    at = starts[pick % len(starts)]
    end = at
    while end < len(text) and text[end].isdigit():
        end += 1
    shown = new if len(new) <= 24 else f"{new[:8]}...({len(new)} chars)"
    return text[:at] + new + text[end:], f"number@{at} {text[at:end]}->{shown}"


def _random_text(rng: random.Random) -> str:
    """1 to 6 characters: mostly HLO punctuation and ASCII, sometimes any code point."""
    out = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(STRUCTURAL))
        elif r < 0.8:
            out.append(chr(rng.randint(32, 126)))
        elif r < 0.9:
            out.append(rng.choice(ODD_UNICODE))
        else:
            out.append(chr(rng.randint(0, 0x10FFFF)))
    return "".join(out)


def _size(rng: random.Random, max_exp: int) -> int:
    """A size spread evenly over orders of magnitude: 2**e plus a little, e <= max_exp."""
    e = rng.randint(0, max_exp)
    return (1 << e) + rng.randint(0, 3)


def _one_module(body: list[str], comps: str = "", header: str = "") -> str:
    lines = "\n".join("  " + b for b in body)
    return f"HloModule m{header}\n\n{comps}ENTRY %main (x: f32[4]) -> f32[4] {{\n{lines}\n}}\n"


def gen_nesting(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """Deep tuples, brackets and call chains."""
    kind = rng.choice(
        [
            "tuple_shape",
            "tuple_shape_wide",
            "tuple_param",
            "attr_braces",
            "attr_unbalanced",
            "json",
            "json_unbalanced",
            "metadata",
            "header",
            "operands",
            "layout",
            "call_chain",
        ]
    )
    depth = _size(rng, min(max_exp, NEST_EXP))
    o, c = "(" * depth, ")" * depth
    x = "%x = f32[4]{0} parameter(0)"
    if kind == "tuple_shape":
        text = _one_module([x, f"ROOT %t = {o}f32[4]{{0}}{c} tuple(%x)"])
    elif kind == "tuple_shape_wide":
        shape = "f32[]"
        for _ in range(min(depth, 5000)):
            shape = f"(f32[], {shape}, s8[2]{{0}})"
        text = _one_module([x, f'ROOT %t = {shape} custom-call(%x), custom_call_target="t"'])
    elif kind == "tuple_param":
        text = _one_module(
            [
                f"%p = {o}f32[4]{{0}}{c} parameter(0)",
                "ROOT %g = f32[4]{0} get-tuple-element(%p), index=0",
            ]
        )
    elif kind == "attr_braces":
        text = _one_module(
            [x, f"ROOT %n = f32[4]{{0}} negate(%x), sharding={'{' * depth}{'}' * depth}"]
        )
    elif kind == "attr_unbalanced":
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} negate(%x), sharding={'{' * depth}"])
    elif kind == "json":
        cfg = '{"a":' + "[" * depth + "]" * depth + "}"
        op = rng.choice(["negate", "custom-call"])
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} {op}(%x), backend_config={cfg}"])
    elif kind == "json_unbalanced":
        cfg = '{"a":' + '[{"b":' * depth
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} negate(%x), backend_config={cfg}"])
    elif kind == "metadata":
        meta = "{op_name=" + "{" * depth + "x" + "}" * depth + " stack_frame_id=1}"
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} negate(%x), metadata={meta}"])
    elif kind == "header":
        text = _one_module([f"ROOT {x}"], header=f", attr={'{' * depth}{'}' * depth}")
    elif kind == "operands":
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} add({o}%x, %x{c})"])
    elif kind == "layout":
        text = _one_module([x, f"ROOT %n = f32[4]{{{'{' * depth}0{'}' * depth}}} negate(%x)"])
    else:
        return gen_call_chain(rng, max_exp)
    return f"{kind} depth={depth}", text


def gen_call_chain(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """Computations calling each other in a chain (or a cycle) up to CHAIN_MAX long."""
    n = min(_size(rng, min(max_exp, CHAIN_EXP)), CHAIN_MAX)
    how = rng.choice(["call", "fusion", "while", "conditional", "mixed"])
    cycle = rng.random() < 0.5
    ops = ["call", "fusion", "while", "conditional"]
    comps = []

    def calling(k: int, target: str) -> str:
        op = ops[k % 4] if how == "mixed" else how
        if op == "call":
            return f"ROOT %r{k} = f32[4]{{0}} call(%p{k}), to_apply=%{target}"
        if op == "fusion":
            return f"ROOT %r{k} = f32[4]{{0}} fusion(%p{k}), kind=kLoop, calls=%{target}"
        if op == "while":
            return f"ROOT %r{k} = f32[4]{{0}} while(%p{k}), condition=%{target}, body=%{target}"
        return (
            f"%b{k} = pred[] constant(true)\n  ROOT %r{k} = f32[4]{{0}} conditional(%b{k}, %p{k}, "
            f"%p{k}), branch_computations={{%{target}, %{target}}}"
        )

    for k in range(n):
        target = f"c{k + 1}" if k + 1 < n else ("c0" if cycle else "")
        body = f"  %p{k} = f32[4]{{0}} parameter(0)\n  "
        if target:
            body += calling(k, target)
        else:
            body += f'ROOT %r{k} = f32[4]{{0}} tanh(%p{k}), metadata={{op_name="leaf"}}'
        comps.append(f"%c{k} (p{k}: f32[4]) -> f32[4] {{\n{body}\n}}\n")
    entry = ["%x = f32[4]{0} parameter(0)", "ROOT %e = f32[4]{0} call(%x), to_apply=%c0"]
    return f"call_chain {how} n={n} cycle={cycle}", _one_module(entry, "\n".join(comps) + "\n")


def gen_long_line(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """One line of up to 2**max_exp characters in each position, plain or pathological."""
    where = rng.choice(
        [
            "module_header",
            "module_attr",
            "comp_header",
            "comp_name",
            "comp_blanks",
            "inst_name",
            "dims",
            "layout",
            "operands",
            "attribute",
            "metadata",
            "metadata_key",
            "backend_config",
            "literal",
            "comment",
            "comments_unclosed",
            "quotes_escaped",
            "table_row",
            "blank_run",
            "head_no_equals",
            "fast_no_close",
        ]
    )
    n = _size(rng, max_exp)
    x = "%x = f32[4]{0} parameter(0)"
    neg = "ROOT %n = f32[4]{0} negate(%x)"
    if where == "module_header":
        text = f"HloModule {'m' * n}\n\nENTRY %e {{\n  ROOT {x}\n}}\n"
    elif where == "module_attr":
        text = _one_module([f"ROOT {x}"], header=", a=" + "{x=1, " * (n // 6) + "}")
    elif where == "comp_header":
        sig = "(" + ", ".join(f"p{i}: f32[4]" for i in range(n // 12 + 1)) + ") -> f32[4]"
        text = f"HloModule m\n\nENTRY %main {sig} {{\n  ROOT {x}\n}}\n"
    elif where == "comp_name":
        text = f"HloModule m\n\nENTRY %{'c' * n} (x: f32[4]) -> f32[4] {{\n  ROOT {x}\n}}\n"
    elif where == "comp_blanks":
        # The old header regex backtracked cubically over blanks not followed by `{`.
        tail = rng.choice(["x", "{ x", "", "{"])
        text = f"HloModule m\n\n%c{' ' * n}{tail}\n  ROOT {x}\n}}\n"
    elif where == "inst_name":
        text = _one_module(
            [f"%{'v' * n} = f32[4]{{0}} parameter(0)", f"ROOT %n = f32[4]{{0}} negate(%{'v' * n})"]
        )
    elif where == "dims":
        text = _one_module([x, f"ROOT %n = f32[{','.join(['1'] * (n // 2 + 1))}]{{0}} negate(%x)"])
    elif where == "layout":
        text = _one_module([x, f"ROOT %n = f32[4]{{{'0,' * (n // 2)}0}} negate(%x)"])
    elif where == "operands":
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} add({', '.join(['%x'] * (n // 4 + 1))})"])
    elif where == "attribute":
        text = _one_module([x, neg + ", sharding={" + "devices=[2]0,1 " * (n // 15) + "}"])
    elif where == "metadata":
        text = _one_module([x, neg + ', metadata={op_name="' + "a" * n + '" stack_frame_id=1}'])
    elif where == "metadata_key":
        # The old metadata regex retried a long key without `=` from every character.
        text = _one_module([x, neg + ", metadata={" + "k" * n + "}"])
    elif where == "backend_config":
        text = _one_module([x, neg + ', backend_config={"s":"' + "z" * n + '"}'])
    elif where == "literal":
        text = _one_module(
            [f"ROOT %c = f32[{n // 3 + 1}]{{0}} constant({{{', '.join(['1'] * (n // 3 + 1))}}})"]
        )
    elif where == "comment":
        text = _one_module([x, f"ROOT %n = f32[4]{{0}} add(%x, /*{'c' * n}*/ %x)"])
    elif where == "comments_unclosed":
        # The old comment regex rescanned to the end for every unclosed `/*`.
        text = _one_module([x, f"ROOT %n = (f32[4]{{0}} /*{' /*' * (n // 3)}) tuple(%x)"])
    elif where == "quotes_escaped":
        # The old token regex rescanned to the end from every escaped quote of an open string.
        text = _one_module([x, neg + ', custom_call_target="' + '\\"' * (n // 2)])
    elif where == "table_row":
        text = 'HloModule m\n\nFileNames\n1 "' + "f" * n + f'"\n\nENTRY %e {{\n  ROOT {x}\n}}\n'
    elif where == "blank_run":
        text = _one_module([x, neg + "," + " " * n + "x=1"])
    elif where == "head_no_equals":
        text = _one_module([x, "%" + "h" * n + " negate(%x)"])
    else:  # fast_no_close: the instruction regex's pieces never close
        text = _one_module([x, "%n = f32[" + "1," * (n // 2) + " negate(%x" + "," * (n // 2)])
    return f"long_line {where} n={n}", text


def gen_number(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """One numeric slot of the template replaced by a huge or odd number."""
    del max_exp
    pick = rng.randint(0, 10_000)
    new = rng.choice(NUMBERS)
    text, what = _replace_number(BASE, pick, new)
    return what, text


def gen_attribute(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """One slot of the template (backend_config, metadata, replica_groups, ...) malformed."""
    del max_exp
    slot = rng.choice(sorted(MALFORMED))
    value = rng.choice(MALFORMED[slot])
    shown = value if len(value) <= 60 else f"{value[:40]}...({len(value)} chars)"
    return f"attribute {slot}={shown}", template(**{slot: value})


def gen_quote(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """A quote deleted or added, or the text cut just after a quote."""
    del max_exp
    text = BASE
    quotes = [i for i, c in enumerate(text) if c == '"']
    at = quotes[rng.randint(0, len(quotes) - 1)]
    how = rng.choice(["delete", "double", "cut", "escape"])
    if how == "delete":
        return f"quote delete@{at}", text[:at] + text[at + 1 :]
    if how == "double":
        return f"quote double@{at}", text[:at] + '"' + text[at:]
    if how == "escape":
        return f"quote escape@{at}", text[:at] + "\\" + text[at:]
    return f"quote cut@{at}", text[: at + 1]


def gen_unicode(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """Odd Unicode put into the template, or its ASCII punctuation swapped for lookalikes."""
    del max_exp
    text = BASE
    if rng.randint(0, 3) == 0:
        old = rng.choice(sorted(LOOKALIKES))
        count = rng.choice([1, 2, 10_000])
        return f"unicode {old!r}->{LOOKALIKES[old]!r} x{count}", text.replace(
            old, LOOKALIKES[old], count
        )
    char = rng.choice(ODD_UNICODE)
    at = rng.randint(0, len(text))
    if rng.random() < 0.5:
        return f"unicode insert@{at} {char!r}", text[:at] + char + text[at:]
    return f"unicode replace@{at} {char!r}", text[:at] + char + text[at + 1 :]


def gen_gemm_shape(rng: random.Random, max_exp: int) -> tuple[str, str]:
    """A library GEMM whose output shape has no array, with or without its GEMM config."""
    del max_exp
    shape = rng.choice(["()", "(())", "(token[], token[])", "((), ())"])
    config = rng.choice([GEMM_CONFIG, "{}", '{"operation_queue_id":"0"}'])
    operand = rng.choice(["%gemm#0", "%gemm", "%x"])
    text = template(gemm_shape=shape, gemm_config=config, gemm_operand=operand)
    return f"gemm_shape {shape} config={config[:24]} operand={operand}", text


GENERATORS: dict[str, Callable[[random.Random, int], tuple[str, str]]] = {
    "nesting": gen_nesting,
    "long_line": gen_long_line,
    "number": gen_number,
    "attribute": gen_attribute,
    "quote": gen_quote,
    "unicode": gen_unicode,
    "gemm_shape": gen_gemm_shape,
}
FAMILIES = ("mutate", *GENERATORS)


# How often each family is drawn (weights; mutation stays the largest share).
WEIGHTS = {
    "mutate": 30,
    "nesting": 15,
    "long_line": 10,
    "number": 15,
    "attribute": 10,
    "quote": 5,
    "unicode": 10,
    "gemm_shape": 5,
}


def generate(
    rng: random.Random, sources: list[tuple[str, str]], max_exp: int = 20
) -> tuple[str, str, str]:
    """Returns (family, description, text) of one case; sizes go up to 2**max_exp."""
    family = rng.choices(FAMILIES, [WEIGHTS[f] for f in FAMILIES])[0]
    if family == "mutate":
        name, what, text = mutate(rng, sources)
        return family, f"{name} {what}", text
    what, text = GENERATORS[family](rng, max_exp)
    return family, what, text


def case_rng(seed: int, index: int) -> random.Random:
    """The generator of case `index`: each case can be replayed alone (`--case`)."""
    return random.Random(f"{seed}:{index}")
