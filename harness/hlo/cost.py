"""Our own FLOP / transcendental / byte counts per cluster, read from optimized HLO.

Conventions (kept close to XLA's HloCostAnalysis so the numbers can be compared):
- dot: 2 x output elements x contracted size; cuBLAS/oneDNN GEMM custom-calls are counted
  the same way from `gemm_backend_config.dot_dimension_numbers` (XLA's GPU cost analysis
  leaves them out).
- elementwise arithmetic, compare and select: 1 flop per output element (as XLA does);
  exp/log/tanh/erf/logistic/rsqrt/sqrt/power/sin/cos/...: 1 transcendental per element.
- data movement (broadcast, reshape, transpose, convert, copy, slice, concatenate, ...): 0.
- reduce: input elements x flops of its reducer.
- convolution: 2 x output elements x kernel elements / kernel output features.
- library epilogues: BIAS adds m*n flops; GELU adds 8 flops + 1 transcendental per output
  element (the tanh form); RELU adds 1 flop per element.
- bytes: the cluster's boundary traffic, i.e. operand sizes read plus output sizes written.
  Tuple outputs count each element, except the s8/u8 workspace buffer cuBLAS calls return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.hlo.clusters import Cluster, find_clusters
from harness.hlo.parser import Computation, HloModule, Instruction
from harness.hlo.shapes import ArrayShape, Shape, TupleShape, leaves

TRANSCENDENTAL = frozenset(
    {
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "logistic",
        "tanh",
        "erf",
        "rsqrt",
        "sqrt",
        "cbrt",
        "power",
        "sine",
        "cosine",
        "tan",
        "atan2",
    }
)
ELEMENTWISE_FLOP = frozenset(
    {
        "add",
        "subtract",
        "multiply",
        "divide",
        "remainder",
        "maximum",
        "minimum",
        "negate",
        "abs",
        "sign",
        "floor",
        "ceil",
        "round-nearest-afz",
        "round-nearest-even",
        "compare",
        "select",
        "clamp",
        "and",
        "or",
        "xor",
        "not",
        "shift-left",
        "shift-right-logical",
        "shift-right-arithmetic",
        "is-finite",
        "real",
        "imag",
    }
)
EPILOGUE_COST: dict[str, tuple[int, int]] = {
    "BIAS": (1, 0),
    "RELU": (1, 0),
    "GELU": (8, 1),
    "GELU_AUX": (8, 1),
    "SILU": (2, 1),
}


@dataclass(frozen=True)
class ClusterCost:
    """Work and traffic of one cluster."""

    name: str
    flops: float
    transcendentals: float
    bytes: float
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "flops": self.flops,
            "transcendentals": self.transcendentals,
            "bytes": self.bytes,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class ModuleCost:
    """Per-cluster costs and their sums for one module."""

    module: str
    clusters: tuple[ClusterCost, ...]

    @property
    def flops(self) -> float:
        """Total flops over clusters."""
        return sum(c.flops for c in self.clusters)

    @property
    def transcendentals(self) -> float:
        """Total transcendental evaluations over clusters."""
        return sum(c.transcendentals for c in self.clusters)

    @property
    def bytes(self) -> float:
        """Total boundary bytes over clusters."""
        return sum(c.bytes for c in self.clusters)

    @property
    def arithmetic_intensity(self) -> float:
        """flops per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict with totals and per-cluster entries."""
        return {
            "module": self.module,
            "flops": self.flops,
            "transcendentals": self.transcendentals,
            "bytes": self.bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "clusters": [c.to_json() for c in self.clusters],
        }


def _elements(shape: Shape) -> int:
    return sum(s.elements for s in leaves(shape))


def _dims(raw: str | None) -> tuple[int, ...]:
    if not raw:
        return ()
    return tuple(int(p) for p in raw.strip("{}").split(",") if p.strip().isdigit())


def _operand_shape(comp: Computation, operand: str) -> Shape | None:
    name, _, index = operand.partition("#")
    inst = comp.get(name)
    if inst is None:
        return None
    shape = inst.shape
    if index.isdigit() and isinstance(shape, TupleShape):
        i = int(index)
        return shape.elements[i] if i < len(shape.elements) else None
    return shape


def _contracted(lhs: Shape | None, dims: tuple[int, ...]) -> int:
    if not isinstance(lhs, ArrayShape):
        return 0
    return math.prod(lhs.dims[d] for d in dims if d < len(lhs.dims))


def instruction_cost(
    module: HloModule, comp: Computation, inst: Instruction
) -> tuple[float, float, tuple[str, ...]]:
    """(flops, transcendentals, notes) of one instruction, following the module conventions."""
    op = inst.opcode
    out = _elements(inst.shape)
    if op in ELEMENTWISE_FLOP:
        return float(out), 0.0, ()
    if op in TRANSCENDENTAL:
        return 0.0, float(out), ()
    if op == "dot":
        lhs = _operand_shape(comp, inst.operands[0]) if inst.operands else None
        k = _contracted(lhs, _dims(inst.attr("lhs_contracting_dims")))
        return 2.0 * out * k, 0.0, ()
    if op == "reduce":
        n_inputs = max(1, len(inst.operands) // 2)
        inputs = sum(
            _elements(s) for o in inst.operands[:n_inputs] if (s := _operand_shape(comp, o))
        )
        reducer = sum(
            1
            for name in inst.called_computations
            for m in module.computations.get(name, ())
            if m.opcode in ELEMENTWISE_FLOP
        )
        return float(inputs * max(1, reducer)), 0.0, ()
    if op == "convolution":
        kernel = _operand_shape(comp, inst.operands[1]) if len(inst.operands) > 1 else None
        labels = inst.attr("dim_labels", "") or ""
        try:
            kernel_labels = labels.split("_")[1].split("->")[0]
            o_dim = kernel_labels.index("o")
        except (IndexError, ValueError):
            return 0.0, 0.0, (f"{inst.name}: convolution without dim_labels not counted",)
        if (
            not isinstance(kernel, ArrayShape)
            or o_dim >= len(kernel.dims)
            or not kernel.dims[o_dim]
        ):
            return 0.0, 0.0, (f"{inst.name}: convolution kernel shape unknown",)
        return 2.0 * out * kernel.elements / kernel.dims[o_dim], 0.0, ()
    if op == "custom-call":
        return _library_cost(comp, inst)
    return 0.0, 0.0, ()


def _library_cost(comp: Computation, inst: Instruction) -> tuple[float, float, tuple[str, ...]]:
    gemm = inst.backend_config.get("gemm_backend_config")
    if not isinstance(gemm, dict):
        target = inst.custom_call_target
        return 0.0, 0.0, (f"{inst.name}: custom-call {target} not costed",)
    dnums = gemm.get("dot_dimension_numbers", {})
    contracting = tuple(int(d) for d in dnums.get("lhs_contracting_dimensions", []))
    lhs = _operand_shape(comp, inst.operands[0]) if inst.operands else None
    result = leaves(inst.shape)[0]
    flops = 2.0 * result.elements * _contracted(lhs, contracting)
    trans = 0.0
    notes = [f"{inst.name}: GEMM 2*{result.elements}*{_contracted(lhs, contracting)}"]
    epi = str(gemm.get("epilogue", "DEFAULT"))
    for part in epi.split("_") if epi != "DEFAULT" else ():
        key = "GELU" if part.startswith("GELU") else part
        f, t = EPILOGUE_COST.get(key, (0, 0))
        flops += f * result.elements
        trans += t * result.elements
    if epi != "DEFAULT":
        notes.append(f"{inst.name}: epilogue {epi} counted")
    return flops, trans, tuple(notes)


def _boundary_bytes(comp: Computation, inst: Instruction, is_library: bool) -> tuple[int, str]:
    read = 0
    seen: set[str] = set()
    for operand in inst.operands:
        if operand in seen:
            continue
        seen.add(operand)
        shape = _operand_shape(comp, operand)
        if shape is not None:
            read += shape.bytes
    outs = leaves(inst.shape)
    note = ""
    if is_library and isinstance(inst.shape, TupleShape) and len(outs) > 1:
        kept = [s for s in outs[1:] if s.dtype not in ("s8", "u8")]
        if len(kept) < len(outs) - 1:
            note = f"{inst.name}: s8 workspace output excluded from bytes"
        outs = (outs[0], *kept)
    return read + sum(s.bytes for s in outs), note


def _fusion_cost(module: HloModule, inst: Instruction) -> tuple[float, float, tuple[str, ...]]:
    flops = trans = 0.0
    notes: list[str] = []
    stack, seen = list(inst.called_computations), set()
    while stack:
        name = stack.pop()
        comp = module.computations.get(name)
        if comp is None or name in seen:
            continue
        seen.add(name)
        for member in comp.instructions:
            if member.opcode == "fusion":
                stack.extend(member.called_computations)
                continue
            f, t, n = instruction_cost(module, comp, member)
            flops, trans = flops + f, trans + t
            notes.extend(n)
    return flops, trans, tuple(notes)


def cluster_cost(
    module: HloModule, cluster: Cluster, where: Computation | None = None
) -> ClusterCost:
    """Flops, transcendentals and boundary bytes of one cluster (`where`: its enclosing
    computation, looked up when not given)."""
    comp = where or next(
        (c for c in module.computations.values() if c.get(cluster.name) is not None), module.entry
    )
    inst = comp.get(cluster.name)
    if inst is None:
        return ClusterCost(cluster.name, 0.0, 0.0, 0.0, (f"{cluster.name}: not found",))
    if inst.opcode == "fusion":
        flops, trans, notes = _fusion_cost(module, inst)
    else:
        flops, trans, notes = instruction_cost(module, comp, inst)
    moved, note = _boundary_bytes(comp, inst, cluster.is_library)
    return ClusterCost(cluster.name, flops, trans, float(moved), (*notes, note) if note else notes)


def module_cost(module: HloModule, clusters: tuple[Cluster, ...] | None = None) -> ModuleCost:
    """Per-cluster costs of `module` and their totals."""
    clusters = find_clusters(module) if clusters is None else clusters
    where = {
        inst.name: comp
        for comp in module.computations.values()
        for inst in comp.instructions
        if inst.opcode not in ("parameter",)
    }
    return ModuleCost(
        module.name, tuple(cluster_cost(module, c, where.get(c.name)) for c in clusters)
    )


def _xla_value(xla: dict, key: str) -> float | None:
    value = xla.get(key)
    return float(value) if isinstance(value, int | float) else None


def compare_with_xla(
    ours: ModuleCost, xla_cost_analysis: dict | list | None, tolerance: float = 1.5
) -> list[str]:
    """Sentences flagging where XLA's `cost_analysis()` disagrees with our counts.

    Flags unknown values (XLA's -1), totals that differ by more than `tolerance`x, and
    library GEMM flops XLA leaves out. An empty list means the two agree.
    """
    xla = xla_cost_analysis
    if isinstance(xla, list):
        xla = xla[0] if xla else {}
    if not isinstance(xla, dict) or not xla:
        return ["XLA cost analysis unavailable"]
    flags: list[str] = []
    pairs = (
        ("flops", ours.flops),
        ("transcendentals", ours.transcendentals),
        ("bytes accessed", ours.bytes),
    )
    for key, mine in pairs:
        theirs = _xla_value(xla, key)
        if theirs is None:
            continue
        if theirs < 0:
            flags.append(f"XLA reports {key}={theirs:g} (unknown); ours counts {mine:.3g}")
            continue
        low, high = sorted((mine, theirs))
        if high > 0 and (low == 0 or high / low > tolerance):
            ratio = mine / theirs if theirs else float("inf")
            flags.append(f"{key}: ours {mine:.3g} vs XLA {theirs:.3g} (ours/XLA = {ratio:.3g})")
    gemm_flops = sum(c.flops for c in ours.clusters if any("GEMM" in n for n in c.notes))
    theirs = _xla_value(xla, "flops")
    if gemm_flops and theirs is not None and 0 <= theirs < gemm_flops:
        flags.append(
            f"XLA flops {theirs:.3g} leave out library GEMM work ({gemm_flops:.3g} flops in ours)"
        )
    return flags
