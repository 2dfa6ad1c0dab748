"""Our own FLOP / transcendental / byte counts per cluster, read from optimized HLO.

Conventions (kept close to XLA's HloCostAnalysis so the numbers can be compared; where ours
differ, the difference is named here):
- dot: 2 x output elements x contracted size; cuBLAS/oneDNN GEMM custom-calls are counted
  the same way from their dimension numbers (XLA's GPU cost analysis leaves them out).
- elementwise arithmetic, compare and select: 1 flop per output element (as XLA does);
  exp/log/tanh/erf/logistic/rsqrt/sqrt/power/sin/cos/...: 1 transcendental per element.
- data movement (broadcast, reshape, transpose, copy, slice, gather, concatenate, pad, ...)
  and convert: 0 flops. (XLA counts a convert as 1 flop per element; we do not.)
- reduce: (input - output elements) x the reducer's cost, as XLA: n-1 combines for n values.
- reduce-window: output elements x (window size - 1) x the reducer's cost, as XLA.
- select-and-scatter: source elements x ((window size - 1) x select cost + scatter cost).
- scatter: update elements x the update computation's cost, as XLA.
- sort: for each sorted row of n elements, n x ceil(log2 n) comparisons x the comparator's
  cost. (XLA charges elements x ceil(log2 elements) of the whole operand, as if it were one
  row; both agree for one-dimensional sorts.)
- convolution: 2 x batch/batch_groups x output features x input features/feature_groups x
  the (output, kernel) position pairs that read the input rather than padding, per spatial
  dimension, as XLA; every dim_labels form, strides, padding and dilations.
- fft, triangular-solve, cholesky, rng, all-reduce, map: XLA's formulas.
- cuDNN fused attention (`__cudnn$fmha*`, forward and backward): its GEMM work from the
  operand shapes and backend config, by the model in harness.hlo.library_cost.
- library epilogues: BIAS adds m*n flops; GELU adds 8 flops + 1 transcendental per output
  element (the tanh form); RELU adds 1 flop per element.
- bytes: the cluster's boundary traffic, i.e. operand bytes read plus output bytes written.
  A while, conditional or call moves none itself: the clusters it runs are counted, each run
  (as XLA's HloCostAnalysis does).
  Tuple outputs count each element, except the s8/u8 workspace buffer cuBLAS calls return.
  Slice, dynamic-slice and gather read only what they produce (plus indices), alone or
  inside a fusion: a fusion operand whose every use inside is such a read is charged those
  reads, not its whole size. A dynamic-update-slice writes in place: its buffer operand is
  not read and only the update is written. (XLA charges a fused gather's whole operand.)
- control flow: a cluster counts as many times as its computation runs a call (its `executions`,
  harness.hlo.control_flow): a while body times its trip count (XLA's `known_trip_count`, else
  the loop's counter pattern, else the iterations the profile measured, else unknown: once
  per entry, marked `unknown`, no count), a conditional's branch that ran where known,
  else its most expensive branch (noted), a shared callee at each call site. Per-cluster
  figures are per run; the module's totals are per call.
- an opcode we do not know, or a custom-call that is neither a GEMM nor modelled, costs
  nothing and is listed in `uncosted` (opcode, count), never silently dropped.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from harness.hlo.clusters import Cluster, called_instructions, find_clusters, library_gemm
from harness.hlo.control_flow import Taken, computation_runs
from harness.hlo.instruction import MAX_ID, Instruction
from harness.hlo.library_cost import attention_cost, is_attention
from harness.hlo.operands import (
    contracted,
    elements,
    first_array,
    operand_array,
    operand_elements,
    operand_shape,
    unbounded,
)
from harness.hlo.parser import Computation, HloModule
from harness.hlo.shapes import ArrayShape, TupleShape, decimal, leaves

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
        "complex",
        "popcnt",
        "clz",
        "reduce-precision",
        "stochastic-convert",
    }
)
_CONTROL = frozenset({"while", "conditional", "call"})
# Opcodes that do no arithmetic by our conventions (data movement, control, communication
# without reduction), or whose work is counted elsewhere (a while's body is walked).
ZERO_FLOP = frozenset(
    {
        "parameter",
        "constant",
        "iota",
        "broadcast",
        "reshape",
        "dynamic-reshape",
        "bitcast",
        "bitcast-convert",
        "transpose",
        "copy",
        "copy-start",
        "copy-done",
        "convert",
        "slice",
        "dynamic-slice",
        "dynamic-update-slice",
        "gather",
        "concatenate",
        "pad",
        "reverse",
        "tuple",
        "get-tuple-element",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "domain",
        "partition-id",
        "replica-id",
        "get-dimension-size",
        "set-dimension-size",
        "while",
        "conditional",
        "call",
        "async-start",
        "async-update",
        "async-done",
        "send",
        "send-done",
        "recv",
        "recv-done",
        "infeed",
        "outfeed",
        "all-gather",
        "all-gather-start",
        "all-gather-done",
        "all-to-all",
        "ragged-all-to-all",
        "collective-broadcast",
        "collective-permute",
        "collective-permute-start",
        "collective-permute-done",
        "reduce-scatter",
        "all-reduce-done",
        "rng-get-and-update-state",
        "rng-bit-generator-state",
    }
)
EPILOGUE_COST: dict[str, tuple[int, int]] = {
    "BIAS": (1, 0),
    "RELU": (1, 0),
    "GELU": (8, 1),
    "GELU_AUX": (8, 1),
    "SILU": (2, 1),
}
_SLICE_READS = frozenset({"slice", "dynamic-slice", "gather"})


@dataclass(frozen=True)
class OpCost:
    """Work of one instruction: flops, transcendentals, notes, and the opcode when it could
    not be costed ("" when it was)."""

    flops: float = 0.0
    transcendentals: float = 0.0
    notes: tuple[str, ...] = ()
    uncosted: str = ""


@dataclass(frozen=True)
class ClusterCost:
    """Work and traffic of one cluster. `library_flops` is the part done by library GEMM
    custom-calls (which XLA's GPU cost analysis leaves out); `uncosted` counts the member
    instructions that cost nothing because we do not know them."""

    name: str
    flops: float
    transcendentals: float
    bytes: float
    notes: tuple[str, ...] = ()
    library_flops: float = 0.0
    uncosted: tuple[tuple[str, int], ...] = ()
    executions: float = 1.0  # runs a call of its module: the trip counts of loops around it
    loop: str = ""  # the innermost while loop whose body holds it
    trip_count: int | None = None  # that loop's trip count per entry (None: unknown or measured)
    count_source: str = ""  # harness.hlo.control_flow.Runs.count_source
    entries: float | None = None  # times that loop is entered a call

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "executions": self.executions,
            "loop": self.loop,
            "trip_count": self.trip_count,
            "count_source": self.count_source,
            "entries": self.entries,
            "flops": self.flops,
            "transcendentals": self.transcendentals,
            "bytes": self.bytes,
            "library_flops": self.library_flops,
            "uncosted": dict(self.uncosted),
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
        return sum(c.flops * c.executions for c in self.clusters)

    @property
    def transcendentals(self) -> float:
        """Total transcendental evaluations over clusters."""
        return sum(c.transcendentals * c.executions for c in self.clusters)

    @property
    def bytes(self) -> float:
        """Total boundary bytes over clusters."""
        return sum(c.bytes * c.executions for c in self.clusters)

    @property
    def library_flops(self) -> float:
        """Flops of library GEMM custom-calls."""
        return sum(c.library_flops * c.executions for c in self.clusters)

    @property
    def uncosted(self) -> tuple[tuple[str, int], ...]:
        """(opcode, count) of instructions we could not cost, most frequent first; a
        custom-call is listed as `custom-call:<target>`."""
        total: Counter[str] = Counter()
        for c in self.clusters:
            total.update(dict(c.uncosted))
        return tuple(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))

    def loops_counted(self, source: str) -> tuple[str, ...]:
        """The loops whose clusters' runs rest on `source` (`measured`, `unknown`); a cluster
        that never runs (in a branch not taken) rests on nothing."""
        return tuple(
            sorted({c.loop for c in self.clusters if c.count_source == source and c.executions})
        )

    @property
    def arithmetic_intensity(self) -> float:
        """flops per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict with totals, `uncosted` ({opcode: count}) and per-cluster entries."""
        return {
            "module": self.module,
            "flops": self.flops,
            "transcendentals": self.transcendentals,
            "bytes": self.bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "library_flops": self.library_flops,
            "uncosted": dict(self.uncosted),
            "clusters": [c.to_json() for c in self.clusters],
        }


def _computation_cost(
    module: HloModule, name: str | None, memo: dict[str, tuple[float, float]]
) -> tuple[float, float]:
    """(flops, transcendentals) of one application of a computation (a reducer, comparator
    or update function); (0, 0) when it is unknown."""
    if not name:
        return 0.0, 0.0
    name = name.strip().lstrip("%")
    if name in memo:
        return memo[name]
    memo[name] = (0.0, 0.0)  # a computation calling itself costs nothing more
    comp = module.computations.get(name)
    flops = trans = 0.0
    if comp is not None:
        for inst in comp.instructions:
            c = instruction_cost(module, comp, inst, memo)
            flops, trans = flops + c.flops, trans + c.transcendentals
    memo[name] = (flops, trans)
    return flops, trans


def _window(inst: Instruction) -> list[dict[str, tuple[int, ...]]]:
    """Per spatial dimension: size, stride, pad (lo, hi), lhs_dilate, rhs_dilate."""
    raw = (inst.attr("window") or "").strip().strip("{}")
    fields: dict[str, list[str]] = {}
    for part in raw.split():
        key, _, value = part.partition("=")
        fields[key] = value.split("x")
    n = len(fields.get("size", ()))
    out = []
    for i in range(n):

        def get(key: str, default: int, i: int = i) -> int:
            values = fields.get(key)
            return int(values[i]) if values and i < len(values) else default

        pad = fields.get("pad")
        lo, _, hi = (pad[i] if pad and i < len(pad) else "0_0").partition("_")
        out.append(
            {
                "size": (get("size", 1),),
                "stride": (get("stride", 1),),
                "pad": (int(lo or 0), int(hi or 0)),
                "lhs_dilate": (get("lhs_dilate", 1),),
                "rhs_dilate": (get("rhs_dilate", 1),),
            }
        )
    return out


def _window_elements(inst: Instruction) -> int:
    return math.prod(w["size"][0] for w in _window(inst)) if _window(inst) else 1


def _valid_positions(
    input_size: int, kernel: int, output: int, w: dict[str, tuple[int, ...]]
) -> int:
    """(output, kernel) index pairs of one spatial dimension that read a real input element
    (not padding, not a hole of lhs dilation)."""
    stride, pad_lo = max(1, w["stride"][0]), w["pad"][0]
    base, dil = max(1, w["lhs_dilate"][0]), w["rhs_dilate"][0]
    total = 0
    for k in range(kernel):
        offset = k * dil - pad_lo  # the (dilated) input index read is o * stride + offset
        if base == 1:
            lo = max(0, -(offset // stride))  # ceil(-offset / stride), at least 0
            hi = min(output - 1, (input_size - 1 - offset) // stride)
            total += max(0, hi - lo + 1)
            continue
        for o in range(output):
            u = o * stride + offset
            if u >= 0 and u % base == 0 and u // base < input_size:
                total += 1
    return total


def _convolution_flops(comp: Computation, inst: Instruction) -> tuple[float, str]:
    """XLA's convolution count, or (0, why) when the operands or dim_labels are unreadable."""
    lhs = first_array(operand_shape(comp, inst.operands[0])) if inst.operands else None
    rhs = first_array(operand_shape(comp, inst.operands[1])) if len(inst.operands) > 1 else None
    out = first_array(inst.shape)
    labels = (inst.attr("dim_labels") or "").strip()
    try:
        lhs_l, rest = labels.split("_", 1)
        rhs_l, out_l = rest.split("->")
    except ValueError:
        return 0.0, f"{inst.name}: convolution without readable dim_labels ({labels!r})"
    if lhs is None or rhs is None or out is None:
        return 0.0, f"{inst.name}: convolution operand shapes unknown"
    if not (len(lhs_l) == len(lhs.dims) and len(rhs_l) == len(rhs.dims) == len(out_l)):
        return 0.0, f"{inst.name}: dim_labels {labels} do not match the shapes"
    window = _window(inst)
    spatial = sorted(c for c in lhs_l if c.isdigit())
    positions = 1
    for i, label in enumerate(spatial):
        w = window[i] if i < len(window) else _window_default()
        positions *= _valid_positions(
            lhs.dims[lhs_l.index(label)],
            rhs.dims[rhs_l.index(label)],
            out.dims[out_l.index(label)],
            w,
        )
    groups = int(inst.attr("feature_group_count") or 1)
    batch_groups = int(inst.attr("batch_group_count") or 1)
    fma = (
        (lhs.dims[lhs_l.index("f")] // groups)
        * out.dims[out_l.index("f")]
        * (lhs.dims[lhs_l.index("b")] // batch_groups)
        * positions
    )
    return 2.0 * fma, ""


def _window_default() -> dict[str, tuple[int, ...]]:
    return {"size": (1,), "stride": (1,), "pad": (0, 0), "lhs_dilate": (1,), "rhs_dilate": (1,)}


def instruction_cost(
    module: HloModule,
    comp: Computation,
    inst: Instruction,
    memo: dict[str, tuple[float, float]] | None = None,
) -> OpCost:
    """Flops, transcendentals and notes of one instruction, following the module
    conventions; an instruction we cannot cost says so in `uncosted`."""
    memo = {} if memo is None else memo
    op = inst.opcode
    if op in ZERO_FLOP:
        return OpCost()
    if unbounded(inst.shape) or any(unbounded(operand_shape(comp, o)) for o in inst.operands):
        # `?` parses as -1: a product over it is 0 or negative, never the work done.
        return OpCost(uncosted=f"{op} (unbounded dimension)")
    out = elements(inst.shape)
    if op in ELEMENTWISE_FLOP:
        return OpCost(float(out))
    if op in TRANSCENDENTAL or op in RANDOM:
        return OpCost(0.0, float(out))
    if op in APPLIED:
        return _applied_cost(module, comp, inst, memo)
    costed = _COST_OF.get(op)
    return costed(module, comp, inst, memo) if costed is not None else OpCost(uncosted=op)


# Ops that apply a computation per element (harness.hlo.cost._applied_cost), and the random
# number generators (one transcendental an element, as XLA's cost analysis counts them).
APPLIED = frozenset(("reduce", "reduce-window", "scatter", "map", "all-reduce", "all-reduce-start"))
RANDOM = frozenset(("rng", "rng-bit-generator"))
Memo = dict[str, tuple[float, float]]


def _dot_cost(module: HloModule, comp: Computation, inst: Instruction, memo: Memo) -> OpCost:
    lhs = operand_shape(comp, inst.operands[0]) if inst.operands else None
    k = contracted(lhs, inst.int_list_attr("lhs_contracting_dims"))
    return OpCost(2.0 * elements(inst.shape) * k)


def _select_and_scatter_cost(
    module: HloModule, comp: Computation, inst: Instruction, memo: Memo
) -> OpCost:
    source = operand_elements(comp, inst, 1)
    sel = _computation_cost(module, inst.attr("select"), memo)
    sca = _computation_cost(module, inst.attr("scatter"), memo)
    window = _window_elements(inst)
    return OpCost(
        source * ((window - 1) * sel[0] + sca[0]), source * ((window - 1) * sel[1] + sca[1])
    )


def _convolution_cost(
    module: HloModule, comp: Computation, inst: Instruction, memo: Memo
) -> OpCost:
    flops, why = _convolution_flops(comp, inst)
    return OpCost(flops, notes=(why,) if why else (), uncosted="convolution" if why else "")


def _fft_cost(module: HloModule, comp: Computation, inst: Instruction, memo: Memo) -> OpCost:
    operand = operand_array(comp, inst, 0)
    log_factors = math.prod(max(0, n.bit_length() - 1) for n in inst.int_list_attr("fft_length"))
    return OpCost(2.0 * 4 * log_factors * (operand.elements if operand else 0))


def _triangular_solve_cost(
    module: HloModule, comp: Computation, inst: Instruction, memo: Memo
) -> OpCost:
    a = operand_array(comp, inst, 0)
    return OpCost(2.0 * (a.dims[-1] if a and a.dims else 0) * operand_elements(comp, inst, 1))


def _cholesky_cost(module: HloModule, comp: Computation, inst: Instruction, memo: Memo) -> OpCost:
    a = operand_array(comp, inst, 0)
    return OpCost(float((a.dims[-1] * a.elements) // 3) if a and a.dims else 0.0)


def _applied_cost(
    module: HloModule, comp: Computation, inst: Instruction, memo: dict[str, tuple[float, float]]
) -> OpCost:
    """Ops that apply a computation per element: reduce, reduce-window, scatter, map and
    all-reduce, with XLA's application counts."""
    op = inst.opcode
    sub = _computation_cost(module, inst.attr("to_apply"), memo)
    out = first_array(inst.shape)
    out_elements = out.elements if out is not None else 0
    first_input = elements(operand_shape(comp, inst.operands[0])) if inst.operands else 0
    if op == "reduce":
        count = max(0, first_input - out_elements)
    elif op == "reduce-window":
        count = out_elements * max(0, _window_elements(inst) - 1)
    elif op == "scatter":
        n = max(1, (len(inst.operands) - 1) // 2)
        updates = inst.operands[n + 1] if len(inst.operands) > n + 1 else None
        count = elements(operand_shape(comp, updates)) if updates else 0
    elif op == "map":
        count = out_elements
    else:  # all-reduce: XLA assumes two replicas, one combine per element
        return OpCost(float(elements(inst.shape)))
    return OpCost(count * sub[0], count * sub[1])


def _sort_cost(
    module: HloModule, comp: Computation, inst: Instruction, memo: dict[str, tuple[float, float]]
) -> OpCost:
    keys = first_array(operand_shape(comp, inst.operands[0])) if inst.operands else None
    if keys is None or not keys.dims:
        return OpCost()
    dims = inst.int_list_attr("dimensions") or (len(keys.dims) - 1,)
    n = keys.dims[dims[0]] if dims[0] < len(keys.dims) else 1
    rows = keys.elements // n if n else 0
    comparator = _computation_cost(module, inst.attr("to_apply"), memo)
    per = max(1.0, comparator[0])
    return OpCost(rows * n * math.ceil(math.log2(n)) * per if n > 1 else 0.0)


def _library_cost(comp: Computation, inst: Instruction) -> OpCost:
    gemm = library_gemm(comp, inst)
    target = inst.custom_call_target
    if gemm is None and is_attention(target):
        operands = [first_array(operand_shape(comp, o)) for o in inst.operands[:3]]
        found = attention_cost(inst.name, target, inst.backend_config, operands)
        if found is not None and found.costed:
            return OpCost(found.flops, found.transcendentals, found.notes)
        if found is not None:
            return OpCost(notes=found.notes, uncosted=f"custom-call:{target}")
    if gemm is None:
        return OpCost(
            notes=(f"{inst.name}: custom-call {target} not costed",),
            uncosted=f"custom-call:{target}",
        )
    result = gemm.batch * gemm.m * gemm.n
    flops = float(gemm.flops)
    trans = 0.0
    notes = [f"{inst.name}: GEMM 2*{result}*{gemm.k}"]
    config = inst.gemm_config()
    epi = config.epilogue if config is not None else "DEFAULT"
    for part in epi.split("_") if epi != "DEFAULT" else ():
        key = "GELU" if part.startswith("GELU") else part
        f, t = EPILOGUE_COST.get(key, (0, 0))
        flops += f * result
        trans += t * result
    if epi != "DEFAULT":
        notes.append(f"{inst.name}: epilogue {epi} counted")
    return OpCost(flops, trans, tuple(notes))


def _fusion_cost(
    module: HloModule, inst: Instruction, memo: dict[str, tuple[float, float]]
) -> OpCost:
    flops = trans = 0.0
    notes: list[str] = []
    uncosted: list[str] = []
    for comp, member in called_instructions(module, inst, every_call=False):
        if member.opcode == "fusion":
            continue  # its body is walked in its place
        c = instruction_cost(module, comp, member, memo)
        flops, trans = flops + c.flops, trans + c.transcendentals
        notes.extend(c.notes)
        if c.uncosted:
            uncosted.append(c.uncosted)
    return OpCost(flops, trans, tuple(notes), ",".join(uncosted))


def _param_read_bytes(param: Instruction, users: list[Instruction], full: int) -> int:
    """Bytes a fusion reads through one parameter: what its slice/dynamic-slice/gather users
    produce when those are its only uses (a dynamic-update-slice buffer, written in place,
    reads nothing), else the whole operand."""
    read = 0
    for user in users:
        names = user.operand_names
        only_first = bool(names) and names[0] == param.name and param.name not in names[1:]
        if user.opcode in _SLICE_READS and only_first:
            produced = first_array(user.shape)
            read += produced.bytes if produced is not None else 0
        elif not (user.opcode == "dynamic-update-slice" and only_first):
            return full
    return min(read, full)


def _fusion_output_bytes(module: HloModule, inst: Instruction) -> list[tuple[ArrayShape, int]]:
    """(shape, bytes written) per output leaf; a dynamic-update-slice root writes its update."""
    sub = module.computations.get(inst.called_computations[0]) if inst.called_computations else None
    root = sub.root if sub is not None else None
    outs = list(leaves(inst.shape))
    roots: list[Instruction | None] = [root] * len(outs)
    if root is not None and root.opcode == "tuple" and len(root.operands) == len(outs):
        roots = [sub.get(o) for o in root.operands]
    written = []
    for shape, r in zip(outs, roots, strict=True):
        if r is not None and r.opcode == "dynamic-update-slice" and len(r.operands) > 1:
            update = first_array(operand_shape(sub, r.operands[1]))
            written.append((shape, update.bytes if update else shape.bytes))
        else:
            written.append((shape, shape.bytes))
    return written


def _slice_bytes(comp: Computation, inst: Instruction) -> int:
    """A slice read or an in-place update: what is produced (or the update) read and written
    once each, plus the indices."""
    update = inst.opcode == "dynamic-update-slice"
    first_index = 2 if update else 1
    indices = sum(
        s.bytes
        for o in inst.operands[first_index:]
        if (s := first_array(operand_shape(comp, o))) is not None
    )
    moved = operand_array(comp, inst, 1) if update else first_array(inst.shape)
    return 2 * (moved.bytes if moved is not None else 0) + indices


def _fusion_parameters(
    sub: Computation | None,
) -> tuple[dict[int, Instruction], dict[str, list[Instruction]]]:
    """A fused computation's parameters by number, and each instruction's users by name."""
    params: dict[int, Instruction] = {}
    users: dict[str, list[Instruction]] = {}
    for p in sub.instructions if sub is not None else ():
        number = decimal((p.literal or "").strip(), MAX_ID)
        if p.opcode == "parameter" and number is not None:
            params[number] = p
        for name in dict.fromkeys(p.operand_names):
            users.setdefault(name, []).append(p)
    return params, users


def _read_bytes(comp: Computation, inst: Instruction, sub: Computation | None) -> int:
    """Bytes read from the distinct operands: in a fusion, what each parameter's users read of
    it (harness.hlo.cost._param_read_bytes)."""
    params, users = _fusion_parameters(sub)
    read = 0
    seen: set[str] = set()
    for k, operand in enumerate(inst.operands):  # k: the parameter number of its first use
        shape = operand_shape(comp, operand)
        if operand in seen or shape is None:
            continue
        seen.add(operand)
        param = params.get(k)
        read += (
            shape.bytes
            if param is None
            else _param_read_bytes(param, users.get(param.name, []), shape.bytes)
        )
    return read


def _written_bytes(inst: Instruction, is_library: bool) -> tuple[int, str]:
    """Bytes an unfused instruction writes: a library call's s8 workspace outputs left out."""
    outs = leaves(inst.shape)
    note = ""
    if is_library and isinstance(inst.shape, TupleShape) and len(outs) > 1:
        kept = [s for s in outs[1:] if s.dtype not in ("s8", "u8")]
        if len(kept) < len(outs) - 1:
            note = f"{inst.name}: s8 workspace output excluded from bytes"
        outs = (outs[0], *kept)
    return sum(s.bytes for s in outs), note


def _boundary_bytes(
    module: HloModule, comp: Computation, inst: Instruction, is_library: bool
) -> tuple[int, str]:
    """Bytes read from operands plus bytes written, by the conventions in the module doc."""
    op = inst.opcode
    if op in _CONTROL:  # its callees' clusters move the bytes, each time it runs them
        return 0, ""
    if op in _SLICE_READS or op == "dynamic-update-slice":
        return _slice_bytes(comp, inst), ""
    sub = (
        module.computations.get(inst.called_computations[0])
        if op == "fusion" and inst.called_computations
        else None
    )
    read = _read_bytes(comp, inst, sub)
    if sub is not None:
        return read + sum(b for _, b in _fusion_output_bytes(module, inst)), ""
    written, note = _written_bytes(inst, is_library)
    return read + written, note


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
    cost = instruction_cost(module, comp, inst)
    moved, note = _boundary_bytes(module, comp, inst, cluster.is_library)
    library = cost.flops if inst.opcode == "custom-call" and not cost.uncosted else 0.0
    missing = Counter(u for u in cost.uncosted.split(",") if u)
    return ClusterCost(
        cluster.name,
        cost.flops,
        cost.transcendentals,
        float(moved),
        (*cost.notes, note) if note else cost.notes,
        library,
        tuple(sorted(missing.items())),
    )


def module_cost(
    module: HloModule,
    clusters: tuple[Cluster, ...] | None = None,
    taken: Mapping[str, Taken] | None = None,
    measured: Mapping[str, float] | None = None,
) -> ModuleCost:
    """Per-cluster costs of `module` (each for one run) and their totals for one call: each
    cluster counted as many times as its computation runs (harness.hlo.control_flow: loops by
    their trip counts, else the iterations `measured` a call, a conditional's branch that ran
    per `taken`, else its most expensive)."""
    clusters = find_clusters(module) if clusters is None else clusters
    where = {
        inst.name: comp
        for comp in module.computations.values()
        for inst in comp.instructions
        if inst.opcode not in ("parameter",)
    }
    once = [cluster_cost(module, c, where.get(c.name)) for c in clusters]
    by_comp: dict[str, float] = defaultdict(float)
    for c, cost in zip(clusters, once, strict=True):
        comp = where.get(c.name)
        if comp is not None:
            by_comp[comp.name] += cost.flops
    runs = computation_runs(module, lambda name: by_comp.get(name, 0.0), taken, measured)
    out = []
    for c, cost in zip(clusters, once, strict=True):
        comp = where.get(c.name)
        run = runs.get(comp.name) if comp is not None else None
        if run is None or (run.times == 1.0 and not run.why):
            out.append(cost)
            continue
        out.append(
            replace(
                cost,
                executions=run.times,
                notes=(*cost.notes, *run.why),
                loop=run.loop,
                trip_count=run.trip_count,
                count_source=run.count_source,
                entries=run.entries,
            )
        )
    return ModuleCost(module.name, tuple(out))


# Opcode -> its cost, for the ops whose cost is neither per element nor a computation applied
# per element (instruction_cost).
_COST_OF = {
    "dot": _dot_cost,
    "select-and-scatter": _select_and_scatter_cost,
    "sort": _sort_cost,
    "convolution": _convolution_cost,
    "fft": _fft_cost,
    "triangular-solve": _triangular_solve_cost,
    "cholesky": _cholesky_cost,
    "custom-call": lambda module, comp, inst, memo: _library_cost(comp, inst),
    "fusion": lambda module, comp, inst, memo: _fusion_cost(module, inst, memo),
}
