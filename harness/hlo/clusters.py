"""Device-executed units ("clusters") of an optimized HLO module.

Where each pre-optimization op ended up is harness.hlo.reverse_map.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from harness.hlo.instruction import Instruction
from harness.hlo.operands import operand_shape
from harness.hlo.parser import Computation, HloModule
from harness.hlo.shapes import ArrayShape, TupleShape

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


def array_shape(shape: object) -> ArrayShape | None:
    """The array of a value's shape: itself, or a tuple's first element; None otherwise."""
    if isinstance(shape, TupleShape):
        shape = shape.elements[0] if shape.elements else None
    return shape if isinstance(shape, ArrayShape) else None


def _operand_array(comp: Computation, operand: str) -> ArrayShape | None:
    return array_shape(operand_shape(comp, operand))


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
        array_shape(inst.shape),
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
    out = array_shape(inst.shape)
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
