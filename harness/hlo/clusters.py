"""Device-executed units ("clusters") of an optimized HLO module, and where each
pre-optimization op ended up."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.hlo.parser import MAX_ID, Computation, HloModule, Instruction, parse_metadata
from harness.hlo.shapes import ArrayShape, TupleShape, decimal

NON_EXECUTING = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "bitcast",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "domain",
        "iota-placeholder",
    }
)
# `partition-id` and `replica-id` execute: a thunk on the CPU, a 4-byte memset on the GPU (the
# 2xH200 fixture `n_sharded_replicated_out` has `Memset` with `hlo_op=partition-id.1`), so each
# is a cluster of its own.
DESCEND = frozenset({"call", "while", "conditional", "async-start"})
CONTROL_FLOW = frozenset({"while", "conditional"})
LIBRARY_PREFIXES = (
    "__cublas$",
    "__cudnn$",
    "__onednn$",
    "__onednn_",
    "__xnn",
    "__ynn",
    "__mkl",
    "__xla_cpu_runtime_",
    "__cusolver",
    "cusolver_",
    "xla.gpu.cub",
    "__gpu$xla.gpu.triton",
    "cu_threefry",
)
# Fusion backend kinds that hand the whole fused computation to a vendor library instead of
# XLA's own code generator: YNNPACK/XNNPACK/oneDNN graphs on the CPU, cuDNN graphs on the GPU.
LIBRARY_FUSION_PREFIXES = ("__ynn", "__xnn", "__onednn", "__cudnn$", "__mkl")


@dataclass(frozen=True)
class GemmShape:
    """What one GEMM computes: out[batch, m, n] = lhs[batch, m, k] @ rhs[batch, k, n].

    m, k and n are products of the free, contracted and free dimensions; `batch` the product
    of the batch dimensions (1 when there are none). Dtypes are HLO element types.
    """

    m: int
    k: int
    n: int
    batch: int = 1
    lhs_dtype: str = ""
    rhs_dtype: str = ""
    out_dtype: str = ""

    @property
    def flops(self) -> int:
        """2·batch·m·n·k: one multiply and one add per multiply-accumulate."""
        return 2 * self.batch * self.m * self.n * self.k

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of every field plus `flops`."""
        return {
            "m": self.m,
            "k": self.k,
            "n": self.n,
            "batch": self.batch,
            "lhs_dtype": self.lhs_dtype,
            "rhs_dtype": self.rhs_dtype,
            "out_dtype": self.out_dtype,
            "flops": self.flops,
        }


@dataclass(frozen=True)
class Cluster:
    """One unit XLA executes on the device: a fusion, a library call or a lone op.

    `kind` is the fusion kind (kLoop, kInput, kOutput, kCustom) for code XLA generated,
    "library" for a vendor library call (a cuBLAS/cuDNN/oneDNN custom-call, or a fusion that
    YNNPACK/XNNPACK/oneDNN/cuDNN executes), else the lone instruction's opcode. `target` names
    the library entry (the custom_call_target, or the fusion backend kind such as
    `__ynn_fusion`). `gemm` describes the matrix product when the unit is one GEMM (library
    call, lone dot, or a fusion whose only dot it is), so GEMMs pair like for like across
    platforms.
    """

    name: str
    computation: str
    kind: str
    backend_kind: str
    target: str
    epilogue: str
    member_opcodes: tuple[tuple[str, int], ...]
    source_ops: tuple[str, ...]
    source_locations: tuple[str, ...]
    output_shape: str
    output_bytes: int
    parent: str = ""
    gemm: GemmShape | None = None

    @property
    def is_library(self) -> bool:
        """True for vendor library calls: cuBLAS(Lt)/cuDNN/oneDNN custom-calls and
        YNNPACK/XNNPACK/oneDNN/cuDNN fusions."""
        return self.kind == "library"

    @property
    def is_fusion(self) -> bool:
        """True for fusions XLA generated code for (kLoop, kInput, kOutput, non-library
        kCustom such as Triton); library fusions and lone ops are not fusions."""
        return self.kind.startswith("k")

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of every field (`gemm` is null when the unit is no GEMM)."""
        return {
            "name": self.name,
            "computation": self.computation,
            "kind": self.kind,
            "backend_kind": self.backend_kind,
            "target": self.target,
            "epilogue": self.epilogue,
            "member_opcodes": dict(self.member_opcodes),
            "source_ops": list(self.source_ops),
            "source_locations": list(self.source_locations),
            "output_shape": self.output_shape,
            "output_bytes": self.output_bytes,
            "parent": self.parent,
            "gemm": self.gemm.to_json() if self.gemm is not None else None,
        }


def backend_kind(inst: Instruction) -> str:
    """The fusion backend kind (`__triton_gemm`, `__ynn_fusion`, ...) from backend_config, or ''."""
    return inst.fusion_backend_kind()


def epilogue(inst: Instruction) -> str:
    """The library GEMM epilogue (DEFAULT, BIAS, BIAS_GELU, ...) from backend_config, or ''."""
    gemm = inst.gemm_config()
    return gemm.epilogue if gemm is not None else ""


def is_library_target(target: str) -> bool:
    """True when a custom_call_target names a vendor library kernel (BLAS, DNN, solver)."""
    return target.startswith(LIBRARY_PREFIXES)


def is_library_fusion(kind: str) -> bool:
    """True when a fusion backend kind hands the fusion to a vendor library (`__ynn_fusion`,
    `__xnn_fusion`, `__onednn_fusion`, `__cudnn$fusion`) rather than to XLA's emitters."""
    return kind.startswith(LIBRARY_FUSION_PREFIXES)


def _array(shape: object) -> ArrayShape | None:
    if isinstance(shape, TupleShape):
        shape = shape.elements[0] if shape.elements else None
    return shape if isinstance(shape, ArrayShape) else None


def _operand_array(comp: Computation, operand: str) -> ArrayShape | None:
    name, _, index = operand.partition("#")
    inst = comp.get(name)
    if inst is None:
        return None
    shape = inst.shape
    if index.isdigit() and isinstance(shape, TupleShape):
        i = int(index)
        return _array(shape.elements[i]) if i < len(shape.elements) else None
    return _array(shape)


def _gemm_from_dims(
    lhs: ArrayShape | None,
    rhs: ArrayShape | None,
    out: ArrayShape | None,
    dims: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]],
) -> GemmShape | None:
    """GEMM sizes from operand shapes and (lhs batch, lhs contracting, rhs batch, rhs
    contracting) dimension numbers; None when a shape is unknown or a dimension is out of
    range."""
    if lhs is None or rhs is None:
        return None
    lb, lc, rb, rc = dims
    if any(d >= len(lhs.dims) for d in (*lb, *lc)) or any(d >= len(rhs.dims) for d in (*rb, *rc)):
        return None
    m = math.prod(s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc)
    n = math.prod(s for d, s in enumerate(rhs.dims) if d not in rb and d not in rc)
    return GemmShape(
        m=m,
        k=math.prod(lhs.dims[d] for d in lc),
        n=n,
        batch=math.prod(lhs.dims[d] for d in lb),
        lhs_dtype=lhs.dtype,
        rhs_dtype=rhs.dtype,
        out_dtype=out.dtype if out is not None else "",
    )


def dot_gemm(comp: Computation, inst: Instruction) -> GemmShape | None:
    """The GEMM a `dot` instruction computes (its operands looked up in `comp`), or None."""
    if inst.opcode != "dot" or len(inst.operands) < 2:
        return None
    dims = tuple(
        inst.int_list_attr(k)
        for k in (
            "lhs_batch_dims",
            "lhs_contracting_dims",
            "rhs_batch_dims",
            "rhs_contracting_dims",
        )
    )
    return _gemm_from_dims(
        _operand_array(comp, inst.operands[0]),
        _operand_array(comp, inst.operands[1]),
        _array(inst.shape),
        dims,  # type: ignore[arg-type]
    )


def library_gemm(comp: Computation, inst: Instruction) -> GemmShape | None:
    """The GEMM a library custom-call computes, or None when it is no GEMM.

    cuBLAS/cuBLASLt calls carry `gemm_backend_config.dot_dimension_numbers`; oneDNN matmuls
    carry `onednn_matmul_config` with transpose flags, so m and n come from the output's last
    two dimensions and k from the lhs.
    """
    if inst.opcode != "custom-call" or len(inst.operands) < 2:
        return None
    cfg = inst.backend_config
    lhs = _operand_array(comp, inst.operands[0])
    rhs = _operand_array(comp, inst.operands[1])
    out = _array(inst.shape)
    gemm = inst.gemm_config()
    if gemm is not None:
        dims = (
            gemm.lhs_batch_dims,
            gemm.lhs_contracting_dims,
            gemm.rhs_batch_dims,
            gemm.rhs_contracting_dims,
        )
        return _gemm_from_dims(lhs, rhs, out, dims)
    onednn = cfg.get("onednn_matmul_config")
    if isinstance(onednn, dict) and lhs is not None and out is not None and len(out.dims) >= 2:
        transpose_a = bool(onednn.get("transpose_a", False))
        k = lhs.dims[-2] if transpose_a else lhs.dims[-1]
        return GemmShape(
            m=out.dims[-2],
            k=k,
            n=out.dims[-1],
            batch=math.prod(out.dims[:-2]),
            lhs_dtype=lhs.dtype,
            rhs_dtype=rhs.dtype if rhs is not None else "",
            out_dtype=out.dtype,
        )
    return None


def called_instructions(
    module: HloModule, inst: Instruction, every_call: bool
) -> Iterator[tuple[Computation, Instruction]]:
    """Yields (computation, instruction) for what `inst` calls, each computation once: with
    `every_call` through every called computation (reducers and comparators too), else only
    into nested fusions, whose instructions yielded as such stand for their bodies."""
    stack, seen = list(inst.called_computations), set()
    while stack:
        name = stack.pop()
        comp = module.computations.get(name)
        if comp is None or name in seen:
            continue
        seen.add(name)
        for member in comp.instructions:
            if every_call or member.opcode == "fusion":
                stack.extend(member.called_computations)
            yield comp, member


def _fused_dots(module: HloModule, inst: Instruction) -> list[tuple[Computation, Instruction]]:
    return [(c, m) for c, m in called_instructions(module, inst, False) if m.opcode == "dot"]


def cluster_gemm(module: HloModule, comp: Computation, inst: Instruction) -> GemmShape | None:
    """The GEMM a cluster instruction computes: a library GEMM custom-call, a lone dot, or a
    fusion (YNNPACK, Triton, ...) holding exactly one dot; None otherwise."""
    if inst.opcode == "custom-call":
        return library_gemm(comp, inst)
    if inst.opcode == "dot":
        return dot_gemm(comp, inst)
    if inst.opcode == "fusion":
        dots = _fused_dots(module, inst)
        if len(dots) == 1:
            return dot_gemm(*dots[0])
    return None


def is_small_call(inst: Instruction) -> bool:
    """True for a CPU `call` that XLA compiles into one kernel (`xla_cpu_small_call`): it runs
    as a single thunk named after the call, so what it calls launches nothing of its own."""
    return inst.opcode == "call" and inst.frontend_attributes.get("xla_cpu_small_call") == "true"


def members(module: HloModule, inst: Instruction) -> tuple[Instruction, ...]:
    """The instructions a cluster executes: a fusion's (or a CPU small call's) called
    computations, nested ones and reducers included, without parameters; a lone instruction
    is its own member."""
    if inst.opcode != "fusion" and not is_small_call(inst):
        return (inst,)
    return tuple(m for _, m in called_instructions(module, inst, True) if m.opcode != "parameter")


def _cluster(module: HloModule, comp: Computation, inst: Instruction, parent: str) -> Cluster:
    group = members(module, inst)
    target = inst.custom_call_target
    fusion_kind = backend_kind(inst)
    if inst.opcode == "fusion" and is_library_fusion(fusion_kind):
        # A YNNPACK/XNNPACK/oneDNN/cuDNN fusion runs inside the library, like a custom-call.
        kind, target = "library", fusion_kind
        computation = inst.called_computations[0] if inst.called_computations else comp.name
    elif inst.opcode == "fusion":
        kind = inst.attr("kind") or "kLoop"
        computation = inst.called_computations[0] if inst.called_computations else comp.name
    elif inst.opcode == "custom-call" and is_library_target(target):
        kind, computation = "library", comp.name
    else:
        kind, computation = inst.opcode, comp.name
    counts = Counter(m.opcode for m in group if m.opcode not in ("constant",))
    locations = {str(loc) for m in group if (loc := module.source_location(m)) is not None}
    return Cluster(
        name=inst.name,
        computation=computation,
        kind=kind,
        backend_kind=fusion_kind,
        target=target,
        epilogue=epilogue(inst),
        member_opcodes=tuple(sorted(counts.items())),
        source_ops=tuple(sorted({m.op_name for m in group if m.op_name})),
        source_locations=tuple(sorted(locations)),
        output_shape=inst.shape_text,
        output_bytes=inst.shape.bytes,
        parent=parent,
        gemm=cluster_gemm(module, comp, inst),
    )


def _units(
    module: HloModule, comp: Computation, parent: str
) -> Iterator[Cluster | tuple[Computation, str]]:
    """The clusters of `comp` in text order, with `(computation, caller name)` in the place of
    each computation that a `call`/`while`/`conditional`/`async-start` runs."""
    for inst in comp.instructions:
        if inst.opcode in NON_EXECUTING:
            continue
        if is_small_call(inst):
            yield _cluster(module, comp, inst, parent)
            continue
        if inst.opcode in DESCEND and inst.called_computations:
            if inst.opcode in CONTROL_FLOW:
                # The branch or loop decision itself runs: a thunk on the CPU, a predicate copy
                # to the host on the GPU. Its events carry this instruction's name.
                yield _cluster(module, comp, inst, parent)
            for name in inst.called_computations:
                sub = module.computations.get(name)
                if sub is not None:
                    yield sub, inst.name
            continue
        if inst.opcode.endswith("-done") or inst.opcode.endswith("-update"):
            continue
        yield _cluster(module, comp, inst, parent)


def _walk(
    module: HloModule, comp: Computation, parent: str, out: list[Cluster], seen: set[str]
) -> None:
    """Append the clusters of `comp` and of what it runs to `out`, depth first in text order.

    An explicit stack of generators, not recursion: a chain of computations calling each
    other is as deep as the input makes it. Each computation is walked once (`seen`).
    """
    if comp.name in seen:
        return
    seen.add(comp.name)
    stack = [_units(module, comp, parent)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
        elif isinstance(item, Cluster):
            out.append(item)
        elif item[0].name not in seen:
            sub, caller = item
            seen.add(sub.name)
            stack.append(_units(module, sub, caller))


def find_clusters(module: HloModule) -> tuple[Cluster, ...]:
    """Every device-executed unit of `module` in execution (text) order.

    ENTRY is walked; `call`/`while`/`conditional`/`async-start` descend into the computations
    they run (e.g. a command buffer), whose units get `parent` = the calling instruction.
    `while` and `conditional` are units themselves too, for the decision they execute; a CPU
    small call is one unit, its callees its members.
    Parameters, constants, tuples, get-tuple-element, bitcasts and `*-done` halves are skipped.
    """
    out: list[Cluster] = []
    _walk(module, module.entry, "", out, set())
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The reverse map: which clusters hold an instruction derived from each pre-optimization op.

# Opcodes an optimized instruction may carry when it still computes the same thing as the
# original op (XLA keeps op_name and stack frame on the rewritten instruction).
_MOVES = ("reshape", "bitcast", "transpose", "copy")
REWRITES: dict[str, tuple[str, ...]] = {
    **{m: tuple(o for o in _MOVES if o != m) for m in _MOVES},
    # A dot that became a cuBLAS/oneDNN GEMM custom-call, or the second half of a split-K GEMM.
    "dot": ("custom-call", "reduce"),
    "convolution": ("custom-call",),
    "sort": ("custom-call",),
    "fft": ("custom-call",),
    "triangular-solve": ("custom-call",),
    "cholesky": ("custom-call",),
}
# Pre-optimization ops a neighbour sees through when they have no counterpart of their own.
_BEFORE_THROUGH = frozenset(
    {*_MOVES, "convert", "broadcast", "get-tuple-element", "reduce-precision", "opt-barrier"}
)
# Optimized instructions that only forward a value.
_AFTER_THROUGH = frozenset({"bitcast", "copy", "opt-barrier", "copy-start", "copy-done"})
# Opcodes XLA inserts without metadata (float normalization, layout assignment).
_INSERTED = frozenset({"convert", "reshape", "transpose", "broadcast", "copy"})
# Ops a library call absorbs whatever its epilogue: operand layout and dtype, constants.
# (Reshapes and bitcasts are free: they fold away rather than into the call.)
_LIBRARY_ABSORBS = frozenset({"transpose", "copy", "convert", "constant", "iota"})
_UNDERSCORED = re.compile(r"^(.+?)_(\d+)(?:_\d+)*$")
_MAX_NEIGHBOUR = 256  # neighbour sets larger than this carry little information; skip them


@dataclass(frozen=True)
class ReverseMap:
    """Where each pre-optimization op ended up.

    `mapping`: op key ("name (op_name)", or "name" without metadata) -> the clusters, in
    execution order, that hold an instruction derived from it; () when none does (folded,
    eliminated, or kept only as a bitcast/constant that does not execute on its own).
    `placed_by`: op key -> the evidence: "name" (an instruction's name derives from the op's,
    e.g. `tanh.1` -> `tanh.1.9`), "identity" (same op_name, opcode and source frame),
    "rewrite" (same op_name and frame under a documented rewrite: dot -> GEMM custom-call or
    split-K reduce, reshape/transpose/copy -> bitcast; or under another opcode no op
    explains, an algebraic rewrite such as x/c -> x*(1/c)), "structure" (found along def-use
    edges from placed neighbours: an op without metadata such as a constant, or an op merged
    into a neighbour's instruction of the same opcode and frame), "library" (absorbed into an
    adjacent library call, e.g. bias add and GELU in a cuBLASLt BIAS_GELU epilogue), "inlined" (a
    `call` whose body XLA inlined: the clusters of its body's ops), or "" (unplaced).
    `method`: what identity means for this pair of modules. `notes`: what could not be done
    exactly, with counts.
    """

    mapping: dict[str, tuple[str, ...]]
    placed_by: dict[str, str] = field(default_factory=dict)
    method: str = ""
    notes: tuple[str, ...] = ()

    @property
    def folded_away(self) -> tuple[str, ...]:
        """The ops held by no cluster, sorted."""
        return tuple(sorted(k for k, v in self.mapping.items() if not v))

    def to_json(self) -> dict[str, object]:
        """The fusions.json entries: `reverse_map` (op -> list of clusters), `folded_away`,
        `placed_by`, `method` and `notes`."""
        return {
            "reverse_map": {k: list(v) for k, v in self.mapping.items()},
            "folded_away": list(self.folded_away),
            "placed_by": dict(self.placed_by),
            "method": self.method,
            "notes": list(self.notes),
        }


def _elements(inst: Instruction) -> int:
    shape = _array(inst.shape)
    return shape.elements if shape is not None else -1


_OP_NAME = re.compile(r'\bop_name=("(?:[^"\\]|\\.)*")')
_FRAME = re.compile(r"\bstack_frame_id=(\d+)")


def _meta_fields(inst: Instruction) -> tuple[str, str]:
    """(op_name, stack_frame_id) from the metadata, read without parsing every attribute
    (the reverse map reads them for every instruction of both modules)."""
    text = inst.attr_text
    at = text.find("metadata={")
    if at < 0:
        return "", ""
    name = _OP_NAME.search(text, at)
    frame = _FRAME.search(text, at)
    op_name = ""
    if name is not None:
        quoted = name.group(1)
        op_name = parse_metadata("op_name=" + quoted)["op_name"] if "\\" in quoted else quoted[1:-1]
    return op_name, frame.group(1) if frame is not None else ""


def _before_ops(before: HloModule) -> list[tuple[Computation, Instruction]]:
    """Instructions of ENTRY and of the computations it calls (not reducers or fusions)."""
    out: list[tuple[Computation, Instruction]] = []
    stack, seen = [before.entry], set()
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        for inst in comp.instructions:
            out.append((comp, inst))
            if inst.opcode in DESCEND:
                stack.extend(
                    before.computations[n]
                    for n in inst.called_computations
                    if n in before.computations
                )
    return out


def name_ancestors(name: str) -> Iterator[str]:
    """`name` and the names it may derive from, longest first: XLA clones append `.N`
    (`tanh.1` -> `tanh.1.9`) or `.clone`; GPU renaming writes `constant.7` as `constant_7_1`."""
    yield name
    head = name
    while True:
        stem, dot, tail = head.rpartition(".")
        if not dot or not stem or not (tail.isdigit() or tail.startswith("clone")):
            break
        head = stem
        yield head
    m = _UNDERSCORED.match(name)
    if m is not None:
        yield f"{m.group(1)}.{m.group(2)}"


def _rewrite_ok(op_opcode: str, inst: Instruction) -> bool:
    if inst.opcode not in REWRITES.get(op_opcode, ()):
        return False
    return inst.opcode != "custom-call" or is_library_target(inst.custom_call_target)


def _compatible(op: Instruction, inst: Instruction) -> bool:
    """Whether `inst` may compute what `op` computed: same opcode (and, for constants, the
    same literal) or a documented rewrite."""
    if inst.opcode == op.opcode:
        return op.opcode != "constant" or (inst.literal == op.literal)
    return _rewrite_ok(op.opcode, inst)


def _frame_keys(before: HloModule, after: HloModule) -> tuple[dict[str, object], dict[str, object]]:
    """stack_frame_id -> a key comparable across the two modules: the raw id when both carry
    the same source tables (one compilation), else the resolved file, line and function."""
    same = (
        before.stack_frames == after.stack_frames
        and before.file_locations == after.file_locations
        and before.file_names == after.file_names
    )

    def keys(module: HloModule) -> dict[str, object]:
        if same:
            return {str(i): str(i) for i in module.stack_frames}
        out: dict[str, object] = {}
        for i in module.stack_frames:
            loc = module.resolve_frame(i)
            out[str(i)] = (loc.file, loc.line, loc.function) if loc is not None else None
        return out

    return keys(before), keys(after)


def _call_sites(inst: Instruction) -> list[tuple[str, int, int]]:
    """(called computation, its parameter number, the operand index feeding it) for each
    parameter a call site feeds: fusion/call/async-start operand k feeds parameter k; a
    conditional's operand i+1 feeds branch i's parameter; a while's operand feeds the
    parameter of its body and its condition."""
    op = inst.opcode
    if op in ("fusion", "call", "async-start"):
        return [(c, k, k) for c in inst.called_computations for k in range(len(inst.operands))]
    if op == "conditional":
        return [
            (c, 0, b + 1)
            for b, c in enumerate(inst.called_computations)
            if b + 1 < len(inst.operands)
        ]
    if op == "while" and inst.operands:
        return [(c, 0, 0) for c in inst.called_computations]
    return []


def _returned(inst: Instruction) -> list[str]:
    """The computations whose root is `inst`'s value: a fusion's or call's callee, every
    branch of a conditional, a while's body."""
    if inst.opcode in ("fusion", "call"):
        return list(inst.called_computations[:1])
    if inst.opcode == "conditional":
        return list(inst.called_computations)
    if inst.opcode == "while":
        body = (inst.attr("body") or "").strip().lstrip("%")
        return [body] if body else []
    return []


class _After:
    """Indexes of the optimized module, built once: instructions by id, by (op_name, opcode)
    and by cluster; def-use resolved through fusion boundaries and forwarding instructions."""

    def __init__(
        self, after: HloModule, clusters: tuple[Cluster, ...], frames: dict[str, object]
    ) -> None:
        self.module = after
        self.inst: dict[int, Instruction] = {}
        self.comp: dict[int, Computation] = {}
        self.op_name: dict[int, str] = {}
        self.frame: dict[int, object] = {}
        self.by_key: dict[tuple[str, str], list[int]] = {}
        # (computation, parameter number) -> the call sites' operands that feed it, and the
        # instructions whose value is a computation's root (fusion, call, branch, loop).
        self.sources: dict[tuple[str, int], list[tuple[Computation, str]]] = {}
        self.targets: dict[tuple[int, int], list[tuple[str, int]]] = {}
        self.returns: dict[str, list[Instruction]] = {}
        executing: dict[str, Instruction] = {}
        for comp in after.computations.values():
            for inst in comp.instructions:
                i = id(inst)
                self.inst[i] = inst
                self.comp[i] = comp
                self.op_name[i], raw = _meta_fields(inst)
                self.frame[i] = frames.get(raw) if raw else None
                # A fusion instruction repeats its root's metadata; its members are the
                # instructions derived from pre-optimization ops, not the fusion itself.
                if inst.opcode not in ("parameter", "fusion"):
                    self.by_key.setdefault((self.op_name[i], inst.opcode), []).append(i)
                if inst.opcode not in NON_EXECUTING:
                    executing.setdefault(inst.name, inst)
                for name, param, k in _call_sites(inst):
                    self.sources.setdefault((name, param), []).append((comp, inst.operands[k]))
                    self.targets.setdefault((i, k), []).append((name, param))
                for name in _returned(inst):
                    self.returns.setdefault(name, []).append(inst)
        self.cluster_of: dict[int, list[int]] = {}
        for ci, cluster in enumerate(clusters):
            inst = executing.get(cluster.name)
            if inst is None:
                continue
            for m in members(after, inst):
                held = self.cluster_of.setdefault(id(m), [])
                if not held or held[-1] != ci:
                    held.append(ci)
        self.entry_params = {
            inst.literal: id(inst) for inst in after.entry if inst.opcode == "parameter"
        }
        self._memo: dict[tuple[int, int | None], tuple[int, ...]] = {}
        self._operand_memo: dict[tuple[int, str], tuple[int, ...]] = {}
        self._producers_of: dict[int, frozenset[int]] = {}
        self._consumers_of: dict[int, frozenset[int]] = {}
        self._users: dict[int, list[tuple[int, int]]] | None = None
        self._params: dict[tuple[str, int], int] = {}
        self._root_of: dict[int, list[int]] = {}

    def producers(self, comp: Computation, operand: str, depth: int = 0) -> tuple[int, ...]:
        """The instructions whose value reaches `operand` of an instruction in `comp`: the
        operand itself and, through parameters, fusion roots, tuples and forwarding
        instructions, the instruction that computed it."""
        key = (id(comp), operand)
        hit = self._operand_memo.get(key)
        if hit is not None:
            return hit
        name, _, index = operand.partition("#")
        inst = comp.get(name)
        found = self._through(comp, inst, decimal(index, MAX_ID), depth) if inst is not None else ()
        self._operand_memo[key] = found
        return found

    def _through(
        self, comp: Computation, inst: Instruction, index: int | None, depth: int
    ) -> tuple[int, ...]:
        key = (id(inst), index)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = [id(inst)]
        op = inst.opcode
        if depth < 16:
            if op == "parameter" and (inst.literal or "").strip().isdigit():
                k = int((inst.literal or "").strip())
                for caller_comp, operand in self.sources.get((comp.name, k), ()):
                    out.extend(self.producers(caller_comp, operand, depth + 1))
            elif op in ("fusion", "call", "conditional", "while"):
                for name in _returned(inst):
                    sub = self.module.computations.get(name)
                    root = sub.root if sub is not None else None
                    if sub is not None and root is not None:
                        out.extend(self._through(sub, root, index, depth + 1))
            elif op == "get-tuple-element" and inst.operands:
                raw = (inst.attr("index") or "").strip()
                sub_index = decimal(raw, MAX_ID)
                producer = comp.get(inst.operands[0])
                if producer is not None:
                    out.extend(self._through(comp, producer, sub_index, depth + 1))
            elif op == "tuple" and index is not None and index < len(inst.operands):
                out.extend(self.producers(comp, inst.operands[index], depth + 1))
            elif inst.operands and (
                op in _AFTER_THROUGH or (op in _INSERTED and not self.op_name[id(inst)])
            ):
                out.extend(self.producers(comp, inst.operands[0], depth + 1))
        result = tuple(dict.fromkeys(out))
        self._memo[key] = result
        return result

    def producers_of(self, i: int) -> frozenset[int]:
        """Every instruction whose value reaches any operand of instruction `i`."""
        hit = self._producers_of.get(i)
        if hit is None:
            comp = self.comp[i]
            found: set[int] = set()
            for operand in self.inst[i].operands:
                found.update(self.producers(comp, operand))
            hit = self._producers_of[i] = frozenset(found)
        return hit

    def consumers_of(self, y: int) -> frozenset[int]:
        """The instructions that read instruction `y`'s value (directly, through forwarding
        instructions, or inside a fusion through its parameter): the inverse of `producers`,
        computed on first use per instruction. Tuple indices are not tracked, so this may
        over-approximate, never miss."""
        hit = self._consumers_of.get(y)
        if hit is not None:
            return hit
        if self._users is None:
            self._index_users()
        users = self._users or {}
        out: set[int] = set()
        stack, seen = [y], {y}
        while stack:
            x = stack.pop()
            nxt = list(self._root_of.get(x, ()))
            for u, k in users.get(x, ()):
                out.add(u)
                op = self.inst[u].opcode
                targets = self.targets.get((u, k))
                if targets:
                    nxt.extend(self._params.get(t, 0) for t in targets)
                elif self._forwards(op, u):
                    nxt.append(u)
            for n in nxt:
                if n and n not in seen:
                    seen.add(n)
                    stack.append(n)
        found = frozenset(out)
        self._consumers_of[y] = found
        return found

    def _forwards(self, op: str, i: int) -> bool:
        """Whether an instruction passes its operand's value on unchanged (as `_through`
        sees it)."""
        if op in ("get-tuple-element", "tuple") or op in _AFTER_THROUGH:
            return True
        return op in _INSERTED and not self.op_name[i]

    def _index_users(self) -> None:
        users: dict[int, list[tuple[int, int]]] = {}
        for i, inst in self.inst.items():
            comp = self.comp[i]
            for k, operand in enumerate(inst.operands):
                producer = comp.get(operand)
                if producer is not None:
                    users.setdefault(id(producer), []).append((i, k))
        self._users = users
        for comp in self.module.computations.values():
            for inst in comp.instructions:
                raw = (inst.literal or "").strip()
                if inst.opcode == "parameter" and raw.isdigit():
                    self._params[(comp.name, int(raw))] = id(inst)
            root = comp.root
            if root is not None and comp.name in self.returns:
                self._root_of[id(root)] = [id(c) for c in self.returns[comp.name]]


class _Matcher:
    """The tiers of `reverse_map`, sharing the indexes of both modules."""

    def __init__(self, before: HloModule, after: HloModule, clusters: tuple[Cluster, ...]):
        self.before = before
        self.clusters = clusters
        every = _before_ops(before)
        self.ops = [(c, i) for c, i in every if i.opcode != "parameter"]
        self.by_name: dict[str, Instruction] = {}
        self.users: dict[int, list[Instruction]] = {}
        self.comp_of: dict[int, Computation] = {}
        self.opn: dict[int, str] = {}  # op_name as the optimized module will carry it
        self.raw_opn: dict[int, str] = {}  # op_name as written in the module before
        self.body: dict[str, list[Instruction]] = {}
        raw_frames: dict[int, str] = {}
        prefix: dict[str, str] = {}
        for comp, inst in every:
            raw, raw_frames[id(inst)] = _meta_fields(inst)
            self.raw_opn[id(inst)] = raw
            # XLA's call inliner prefixes an inlined op's op_name with the call's (jax names
            # ops in a called function relative to it) and gives it a new stack frame.
            outer = prefix.get(comp.name, "")
            inlined = bool(outer and raw and not raw.startswith(outer + "/"))
            self.opn[id(inst)] = f"{outer}/{raw}" if inlined else raw
            if inlined:
                raw_frames[id(inst)] = ""
            if inst.opcode == "call":
                for name in inst.called_computations:
                    prefix[name] = self.opn[id(inst)]
            self.body.setdefault(comp.name, []).append(inst)
            self.by_name.setdefault(inst.name, inst)
            self.comp_of[id(inst)] = comp
            for operand in inst.operands:
                producer = comp.get(operand)
                if producer is not None:
                    self.users.setdefault(id(producer), []).append(inst)
        bframes, aframes = _frame_keys(before, after)
        self.a = _After(after, clusters, aframes)
        self.bframe: dict[int, object] = {}
        for _, op in self.ops:
            raw = raw_frames[id(op)]
            self.bframe[id(op)] = bframes.get(raw) if raw else None
        self.cand: dict[int, frozenset[int]] = {}
        self.how: dict[int, str] = {}
        self.library: dict[int, set[int]] = {}
        self.ambiguous: set[int] = set()
        self.groups: list[list[Instruction]] = []

    # -- helpers -------------------------------------------------------------------------

    def operands(self, op: Instruction) -> list[Instruction]:
        comp = self.comp_of[id(op)]
        return [p for o in op.operands if (p := comp.get(o)) is not None]

    def effective(self, op: Instruction, depth: int = 0) -> frozenset[int]:
        """The optimized instructions that hold `op`'s value: its own candidates, the ENTRY
        parameter it is, or, for a data-movement op without counterpart, its operand's."""
        got = self.cand.get(id(op))
        if got:
            return got
        if op.opcode == "parameter" and self.comp_of[id(op)] is self.before.entry:
            i = self.a.entry_params.get(op.literal)
            return frozenset((i,)) if i is not None else frozenset()
        if depth < 4 and op.opcode in _BEFORE_THROUGH:
            out: set[int] = set()
            for p in self.operands(op):
                out |= self.effective(p, depth + 1)
            return frozenset(out)
        return frozenset()

    def from_operands(self, op: Instruction, merged: bool = False) -> set[int] | None:
        """Optimized instructions that read the value of every operand of `op` whose
        counterpart is known (`merged`: or are that counterpart), or None when no operand is
        known."""
        allowed: set[int] | None = None
        for p in self.operands(op):
            eff = self.effective(p)
            if not eff or len(eff) > _MAX_NEIGHBOUR:
                continue
            reach: set[int] = set(eff) if merged else set()
            for y in eff:
                reach |= self.a.consumers_of(y)
            allowed = reach if allowed is None else allowed & reach
        return allowed

    def from_users(self, op: Instruction, merged: bool = False) -> set[int] | None:
        """Optimized instructions whose value some placed user of `op` reads (`merged`: or
        that are such a user's counterpart), or None."""
        allowed: set[int] | None = None
        for user in self.users.get(id(op), ()):
            got = self.cand.get(id(user))
            if not got or len(got) > _MAX_NEIGHBOUR:
                continue
            reach: set[int] = set(got) if merged else set()
            for z in got:
                reach |= self.a.producers_of(z)
            allowed = reach if allowed is None else allowed | reach
        return allowed

    # -- tiers ---------------------------------------------------------------------------

    def name_pairs(self) -> tuple[dict[int, list[int]], int, int]:
        """Before op id -> optimized instructions whose name derives from its name (with a
        compatible opcode and op_name); plus the agreeing and total derived-name pairs."""
        derived: dict[int, list[int]] = {}
        agree = total = 0
        for i, inst in self.a.inst.items():
            if inst.opcode in ("parameter", "fusion"):
                continue
            for anc in name_ancestors(inst.name):
                op = self.by_name.get(anc)
                if op is None or op.opcode == "parameter":
                    continue
                total += 1
                theirs = self.a.op_name[i]
                same_name = not self.opn[id(op)] or not theirs or self.opn[id(op)] == theirs
                if same_name and _compatible(op, inst):
                    agree += 1
                    derived.setdefault(id(op), []).append(i)
                break
        return derived, agree, total

    def place_by_name(self, derived: dict[int, list[int]]) -> set[int]:
        claimed: set[int] = set()
        for _, op in self.ops:
            got = derived.get(id(op))
            if got:
                self.cand[id(op)] = frozenset(got)
                self.how[id(op)] = "name"
                claimed.update(got)
        return claimed

    def place_by_identity(self, claimed: set[int]) -> None:
        groups: dict[tuple[str, str, object], list[Instruction]] = {}
        for _, op in self.ops:
            if self.opn[id(op)]:
                key = (self.opn[id(op)], op.opcode, self.bframe[id(op)])
                groups.setdefault(key, []).append(op)
        for (op_name, opcode, frame), group in groups.items():
            found: list[int] = []
            same = False
            for o in (opcode, *REWRITES.get(opcode, ())):
                for i in self.a.by_key.get((op_name, o), ()):
                    inst = self.a.inst[i]
                    if i in claimed or not _compatible(group[0], inst):
                        continue
                    f = self.a.frame[i]
                    if frame is not None and f is not None and f != frame:
                        continue
                    found.append(i)
                    same = same or o == opcode
            if not found:
                continue
            shared = frozenset(found)
            if len(group) == 1:
                op = group[0]
                # Placed by name: a singleton group also takes identity matches nobody else's
                # name claimed (a clone XLA renamed, e.g. a Triton GEMM's dot).
                self.cand[id(op)] = self.cand.get(id(op), frozenset()) | shared
                self.how.setdefault(id(op), "identity" if same else "rewrite")
                continue
            self.groups.append(group)
            by_size = self._by_size(shared)
            sizes = {_elements(op) for op in group}
            for op in group:
                if id(op) in self.cand:
                    continue
                got = self._prefer_shape(op, shared, by_size, sizes)
                if got:
                    self.cand[id(op)] = got
                    self.how[id(op)] = "identity" if same else "rewrite"
                    self.ambiguous.add(id(op))

    def _by_size(self, found: frozenset[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in found:
            out.setdefault(_elements(self.a.inst[i]), []).append(i)
        return out

    def _prefer_shape(
        self,
        op: Instruction,
        found: frozenset[int],
        by_size: dict[int, list[int]],
        sizes: set[int],
    ) -> frozenset[int]:
        """Among candidates shared by several same-identity ops: those with the op's element
        count (same dtype first; layout normalization changes dims, float normalization
        dtypes). Without one, the candidates whose size no other op of the group has; none
        when every candidate's size belongs to another op (this op was folded away)."""
        size = _elements(op)
        same = by_size.get(size)
        if same:
            dtype = op.shape_text.partition("[")[0]
            exact = [i for i in same if self.a.inst[i].shape_text.partition("[")[0] == dtype]
            return frozenset(exact or same)
        return frozenset(i for n, ids in by_size.items() if n not in sizes for i in ids)

    def disambiguate(self) -> None:
        """Narrow ops that share op_name, opcode and frame with others by def-use: keep the
        candidates that read what the op's operands became, and that feed what its users
        became. Three sweeps: forward, backward, forward."""
        order = [op for _, op in self.ops if id(op) in self.ambiguous]
        for sweep in (order, order[::-1], order):
            for op in sweep:
                current = self.cand[id(op)]
                if len(current) <= 1:
                    continue
                for allowed in (self.from_operands(op), self.from_users(op)):
                    if allowed:
                        narrowed = current & allowed
                        if narrowed:
                            current = frozenset(narrowed)
                self.cand[id(op)] = current

    def place_by_structure(self, named: bool) -> None:
        """Ops with no counterpart by name or identity take the optimized instructions of a
        compatible opcode that feed what their users became or read what their operands
        became. Without `named`, only ops without op_name (constants and broadcasts of
        constants; every op when metadata was stripped); with it, also ops with op_name whose
        instruction lost its metadata, or that merged into a neighbour's instruction of the
        same opcode and frame (transpose(dot) -> dot). Source frames must agree where both
        are known."""
        for sweep in (self.ops[::-1], self.ops, self.ops[::-1]):
            for _, op in sweep:
                if id(op) in self.cand or (self.opn[id(op)] and not named):
                    continue
                found = self._structural(op, self.from_users(op, merged=named))
                if not found:
                    found = self._structural(op, self.from_operands(op, merged=named))
                if found:
                    self.cand[id(op)] = frozenset(found)
                    self.how[id(op)] = "structure"

    def _structural(self, op: Instruction, allowed: set[int] | None) -> list[int]:
        if not allowed:
            return []
        shape = _array(op.shape)
        frame = self.bframe.get(id(op)) if self.opn[id(op)] else None
        out = []
        for i in allowed:
            inst = self.a.inst[i]
            if inst.opcode in ("parameter", "fusion") or not _compatible(op, inst):
                continue
            theirs = self.a.frame[i]
            if frame is not None and theirs is not None and theirs != frame:
                continue
            renamed = self.opn[id(op)] and self.a.op_name[i] not in ("", self.opn[id(op)])
            # Under another op_name only when merged into a neighbour's instruction: same
            # opcode and source frame.
            if renamed and (inst.opcode != op.opcode or frame is None):
                continue
            s = _array(inst.shape)
            resized = shape is not None and s is not None and s.elements != shape.elements
            if resized and inst.opcode == op.opcode:
                continue
            out.append(i)
        return out

    def place_rewritten(self) -> None:
        """Unplaced ops whose op_name and frame survive on an instruction of another opcode
        that no pre-optimization op explains (algebraic rewrites such as x/c -> x*(1/c) or
        x-1 -> x+(-1)): the instructions connected to the op's placed neighbours, or, when
        no neighbour is placed, all of them if the op is the only unplaced one with that
        op_name and frame."""
        explained = {(self.opn[id(op)], op.opcode) for _, op in self.ops if self.opn[id(op)]}
        unplaced = Counter(
            (self.opn[id(op)], self.bframe[id(op)])
            for _, op in self.ops
            if id(op) not in self.cand and self.opn[id(op)]
        )
        for _, op in self.ops:
            if id(op) in self.cand or not self.opn[id(op)]:
                continue
            frame = self.bframe[id(op)]
            pool = [
                i
                for (name, opcode), ids in self._by_op_name().get(self.opn[id(op)], ())
                if (name, opcode) not in explained
                for i in ids
                if frame is None or (f := self.a.frame[i]) is None or f == frame
            ]
            if not pool:
                continue
            sides = [a for a in (self.from_operands(op), self.from_users(op)) if a is not None]
            linked = set().union(*sides) if sides else set()
            found = [i for i in pool if i in linked]
            if not found and not sides and unplaced[(self.opn[id(op)], frame)] == 1:
                found = pool
            if found:
                self.cand[id(op)] = frozenset(found)
                self.how[id(op)] = "rewrite"

    def _by_op_name(self) -> dict[str, list[tuple[tuple[str, str], list[int]]]]:
        cached = getattr(self, "_op_name_index", None)
        if cached is None:
            cached = {}
            for key, ids in self.a.by_key.items():
                if key[0]:
                    cached.setdefault(key[0], []).append((key, ids))
            self._op_name_index = cached
        return cached

    def undecided(self) -> set[int]:
        """Ops that still share a candidate instruction with another op of the same op_name,
        opcode and frame (a duplicated instruction held by several clusters is decided)."""
        out: set[int] = set()
        for group in self.groups:
            claims: Counter[int] = Counter()
            for op in group:
                claims.update(self.cand.get(id(op), ()))
            for op in group:
                if any(claims[i] > 1 for i in self.cand.get(id(op), ())):
                    out.add(id(op))
        return out

    def place_inlined_calls(self) -> None:
        """A `call` the optimizer inlined maps to the clusters of the ops in its body."""
        for _, op in self.ops[::-1]:  # inner calls come later in the walk: place them first
            if op.opcode != "call" or self.clusters_of(op):
                continue
            held: set[int] = set()
            for name in op.called_computations:
                for inner in self.body.get(name, ()):
                    held |= self.clusters_of(inner)
            if held:
                self.library[id(op)] = held
                self.how[id(op)] = "inlined"

    def clusters_of(self, op: Instruction) -> set[int]:
        out: set[int] = set(self.library.get(id(op), ()))
        for i in self.cand.get(id(op), ()):
            out.update(self.a.cluster_of.get(i, ()))
        return out

    def absorb_into_libraries(self) -> None:
        """Unplaced ops join the library calls of their placed operands (else of their
        placed users), in rounds, along def-use edges only. A library call absorbs data
        movement, broadcasts, converts and constants; elementwise ops only into a non-default
        epilogue (BIAS, GELU, ...)."""
        # Ops placed on instructions that do not execute (an ENTRY bitcast) stay there.
        pending = [op for _, op in self.ops if not self.cand.get(id(op))]
        for _ in range(64):
            placed: dict[int, set[int]] = {}
            for op in pending:
                for side in (self.operands(op), self.users.get(id(op), ())):
                    got = {ci for n in side for ci in self.clusters_of(n) if self._absorbs(ci, op)}
                    if got:
                        placed[id(op)] = got
                        break
            if not placed:
                return
            for i, got in placed.items():
                self.library[i] = got
                self.how[i] = "library"
            pending = [op for op in pending if id(op) not in placed]

    def _absorbs(self, ci: int, op: Instruction) -> bool:
        cluster = self.clusters[ci]
        if not cluster.is_library:
            return False
        if cluster.epilogue not in ("", "DEFAULT"):
            return True
        if op.opcode == "broadcast":
            # A broadcast that adds no elements is a bitcast: free, folded, not absorbed.
            src = self.operands(op)
            return bool(src) and _elements(src[0]) < _elements(op)
        return op.opcode in _LIBRARY_ABSORBS


def reverse_map(
    before: HloModule, after: HloModule, clusters: tuple[Cluster, ...] | None = None
) -> ReverseMap:
    """Map each pre-optimization op ("name (op_name)") to the clusters that hold an
    instruction derived from it.

    Tiers, each linear in the size of the two modules:
    1. Name: an optimized instruction whose name derives from the op's (`tanh.1` ->
       `tanh.1.9`, `constant.7` -> `constant_7_1`) with a compatible opcode. Used when the
       optimized module keeps XLA's clone names (the GPU pipeline does; the CPU pipeline
       renumbers fused instructions), or when metadata is missing.
    2. Identity: same op_name, same opcode (or a documented rewrite, see `REWRITES`) and the
       same source frame. Ops that share all three are narrowed by shape and by def-use:
       a candidate must read what the op's operands became and feed what its users became.
    3. Structure: ops without metadata (constants, broadcasts of constants) take the
       compatible instructions that read their operands' or feed their users' values.
    4. Rewrite: an unplaced op whose op_name and frame survive on an instruction of another
       opcode that no pre-optimization op explains, connected to its neighbours.
    5. Library: ops still unplaced join an adjacent library call along def-use edges (a bias
       add and GELU in a cuBLASLt BIAS_GELU epilogue whose metadata names only the dot).
    6. Inlined: a `call` XLA inlined maps to the clusters of its body's ops (whose op_names
       the inliner prefixed with the call's, as the matching expects).
    Ops still unplaced map to () ("folded away"). Parameters are not listed.
    """
    clusters = find_clusters(after) if clusters is None else clusters
    m = _Matcher(before, after, clusters)
    stripped = not any(m.opn[id(op)] for _, op in m.ops)
    after_meta = any(m.a.op_name.values())
    derived, agree, total = m.name_pairs()
    with_meta = sum(1 for i in m.a.cluster_of if m.a.op_name[i])
    trusted = total > 0 and agree >= 0.9 * total and agree >= 0.2 * with_meta
    notes: list[str] = []
    if stripped or not after_meta:
        side = "before" if stripped else "after"
        method = "name+opcode"
        notes.append(
            f"the module {side} optimization carries no op_name metadata: ops are matched by "
            "name and opcode only, then along def-use edges"
        )
    else:
        method = "op_name+opcode+frame" + ("+name" if trusted else "")
    claimed = m.place_by_name(derived) if (trusted or stripped or not after_meta) else set()
    if not stripped and after_meta:
        m.place_by_identity(claimed)
        m.disambiguate()
    m.place_by_structure(named=stripped or not after_meta)
    if not stripped and after_meta:
        m.place_rewritten()
        m.place_by_structure(named=True)
    m.absorb_into_libraries()
    m.place_inlined_calls()

    mapping: dict[str, tuple[str, ...]] = {}
    placed_by: dict[str, str] = {}
    counts: Counter[str] = Counter()
    silent = shared = 0
    undecided = m.undecided()
    for _, op in m.ops:
        held = sorted(m.clusters_of(op))
        key = f"{op.name} ({m.raw_opn[id(op)]})" if m.raw_opn[id(op)] else op.name
        mapping[key] = tuple(clusters[ci].name for ci in held)
        placed_by[key] = m.how.get(id(op), "")
        counts[placed_by[key] or "unplaced"] += 1
        if placed_by[key] and not held:
            silent += 1
        if id(op) in undecided and len(held) > 1:
            shared += 1
    notes.append(
        "placed by "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f" of {len(m.ops)}"
    )
    if silent:
        notes.append(
            f"{silent} ops survive only as instructions that do not execute on their own "
            "(bitcast, constant, tuple, parameter) and map to no cluster"
        )
    if shared:
        notes.append(
            f"{shared} ops share op_name, opcode and source line with others and could not be "
            "told apart by shape or def-use: each maps to every cluster holding one of them"
        )
    return ReverseMap(mapping, placed_by, method, tuple(notes))
