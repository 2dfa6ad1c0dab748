"""Where do two PyTorch variants' ladders first differ? Dynamo's FX graph -> the AOT forward
graph -> the post-grad graph -> Inductor's IR before and after fusion -> the generated
wrapper's launches -> the kernels that ran, each compared after normalising names away.

The torch counterpart of `harness.hlo.diverge.first_divergence`, in the same words: the
first stage both ladders hold and whose normalised content differs, with one sentence saying
how (graph counts, op counts, then the first differing node). A stage holding several graphs
(a function split by graph breaks) holds them under `# ===== graph ...` headers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness.common import userfiles
from harness.frontends.torch.inductor.artifacts import (
    FxGraph,
    normalize_shape,
    parse_fx_graph,
    parse_output_code,
)
from harness.hlo.diverge import FirstDifference, describe_counts
from harness.records import ladder

TORCH_STAGES = (
    "fx_graph",
    "aot_forward",
    "post_grad",
    "inductor_pre_fusion",
    "inductor_post_fusion",
    "output_code",
)
FX_STAGES = ("fx_graph", "aot_forward", "post_grad")
_HEADER = re.compile(r"^# ===== graph .* =====$", re.MULTILINE)
_SCHEDULER_NODE = re.compile(r"^op\w*: (\w+)\((\w+)\)", re.MULTILINE)
_KERNEL_INDEX = re.compile(r"_\d+$")
_IDENT = re.compile(r"(?<!\.)\b[A-Za-z_]\w*\b")


def split_graphs(text: str) -> list[str]:
    """Returns the graphs of a stage file: the parts between `# ===== graph` headers."""
    parts = _HEADER.split(text)
    return [p for p in parts if p.strip()] or [text]


def _labels(graph: FxGraph) -> list[tuple[str, str, str]]:
    """Returns (op, shape, inputs) per computing node: values numbered in order (inputs
    first), names replaced by those numbers in the inputs and by `_` in the op (`_ @ _`,
    `_.float`, `aten.mm.default`); the aliases Dynamo writes for its inputs (`l_x_ = L_x_`)
    left out, so two graphs computing the same thing read the same whatever their names."""
    position = {n.name: f"%{i}" for i, n in enumerate(graph.inputs)}
    names = {n.name for n in (*graph.inputs, *graph.nodes)}
    values = len(position)
    out = []
    for n in graph.nodes:
        if n.target in position:  # `l_x_ = L_x_`: a new name for a value, no computation
            position[n.name] = position[n.target]
            continue
        op = _IDENT.sub(lambda m: "_" if m.group(0) in names else m.group(0), n.target)
        args = ", ".join(position.get(a, a) for a in n.args)
        out.append((op, normalize_shape(n.shape), args))
        position[n.name] = f"%{values}"
        values += 1
    return out


def fx_signature(graph: FxGraph) -> list[str]:
    """Returns one line per node, `op shape <- inputs`, node names replaced by positions, so
    two graphs computing the same thing read the same whatever their names."""
    head = [f"input {normalize_shape(n.shape)}" for n in graph.inputs]
    return head + [f"{op} {shape} <- {args}" for op, shape, args in _labels(graph)]


def _op_counts(graphs: Sequence[FxGraph]) -> Counter[str]:
    return Counter(op for g in graphs for op, _, _ in _labels(g))


def _compare_fx(stage: str, a: str, b: str) -> str:
    ga = [parse_fx_graph(t, stage) for t in split_graphs(a)]
    gb = [parse_fx_graph(t, stage) for t in split_graphs(b)]
    sa = [line for g in ga for line in fx_signature(g)]
    sb = [line for g in gb for line in fx_signature(g)]
    if sa == sb and len(ga) == len(gb):
        return ""
    counts = describe_counts(stage, _op_counts(ga), _op_counts(gb))
    if len(ga) != len(gb):
        return f"{stage} differs: {len(ga)} graph(s) vs {len(gb)}" + (
            f"; {counts.split(' differs', 1)[-1].strip()}" if counts else ""
        )
    if counts:
        return counts
    for i, (x, y) in enumerate(zip(sa, sb, strict=False)):
        if x != y:
            return f"{stage} differs at node {i}: {x[:80]!r} vs {y[:80]!r}"
    return f"{stage} differs in length ({len(sa)} vs {len(sb)} nodes)"


def _compare_ir(stage: str, a: str, b: str) -> str:
    ca = Counter(f"{k}({v})" for k, v in _SCHEDULER_NODE.findall(a))
    cb = Counter(f"{k}({v})" for k, v in _SCHEDULER_NODE.findall(b))
    counts = describe_counts(stage, ca, cb)
    if counts:
        return counts
    na, nb = _normalized_ir(a), _normalized_ir(b)
    if na == nb:
        return ""
    for i, (x, y) in enumerate(zip(na, nb, strict=False)):
        if x != y:
            return f"{stage} differs at line {i + 1}: {x[:80]!r} vs {y[:80]!r}"
    return f"{stage} differs in length ({len(na)} vs {len(nb)} lines)"


def _normalized_ir(text: str) -> list[str]:
    return [
        " ".join(line.split())
        for line in text.splitlines()
        if line.strip() and not _HEADER.match(line)
    ]


def launches(text: str) -> list[str]:
    """Returns the wrapper's launch sequence over every graph of an output_code stage, kernel
    numbers removed (`cpp_fused_add_gelu_0` -> `cpp_fused_add_gelu`)."""
    out = []
    for part in split_graphs(text):
        code = parse_output_code(part)
        out += [_KERNEL_INDEX.sub("", c.target) for c in code.calls]
    return out


def _compare_code(a: str, b: str) -> str:
    la, lb = launches(a), launches(b)
    if la == lb:
        return ""
    counts = describe_counts("output_code launches", Counter(la), Counter(lb))
    return counts or f"output_code launches differ in order: {la} vs {lb}"


def torch_first_divergence(
    ir_a: Path,
    ir_b: Path,
    kernels_a: Sequence[str] | None = None,
    kernels_b: Sequence[str] | None = None,
) -> FirstDifference:
    """The first stage where torch ladders `ir_a` and `ir_b` differ, with one sentence how.

    Stages present in only one ladder are skipped (eager has only its traced graph); the
    profiled kernels, when both are given, are compared last.
    """
    la, lb = ladder.read_ladder(Path(ir_a)), ladder.read_ladder(Path(ir_b))
    for stage in (s for s in TORCH_STAGES if la.has(s) and lb.has(s)):
        ta = userfiles.read_text(la.files(stage)[0], userfiles.IR_TEXT, errors="replace")
        tb = userfiles.read_text(lb.files(stage)[0], userfiles.IR_TEXT, errors="replace")
        if stage in FX_STAGES:
            detail = _compare_fx(stage, ta, tb)
        elif stage == "output_code":
            detail = _compare_code(ta, tb)
        else:
            detail = _compare_ir(stage, ta, tb)
        if detail:
            return FirstDifference(stage, detail)
    if kernels_a is not None and kernels_b is not None:
        ka = [_KERNEL_INDEX.sub("", k) for k in kernels_a]
        kb = [_KERNEL_INDEX.sub("", k) for k in kernels_b]
        if ka != kb:
            detail = describe_counts("kernels", Counter(ka), Counter(kb))
            return FirstDifference("kernels", detail or "kernels differ in order")
    return FirstDifference("none", "no difference in any compared stage")
