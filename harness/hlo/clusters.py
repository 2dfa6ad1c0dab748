"""Device-executed units ("clusters") of an optimized HLO module, and where each
pre-optimization op ended up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from harness.hlo.parser import Computation, HloModule, Instruction

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
        "partition-id",
        "replica-id",
        "iota-placeholder",
    }
)
DESCEND = frozenset({"call", "while", "conditional", "async-start"})
CONTROL_FLOW = frozenset({"while", "conditional"})
LIBRARY_PREFIXES = (
    "__cublas$",
    "__cudnn$",
    "__onednn$",
    "__xnnpack",
    "__ynn",
    "__mkl",
    "__cusolver",
    "cusolver_",
    "xla.gpu.cub",
    "__gpu$xla.gpu.triton",
    "cu_threefry",
)


@dataclass(frozen=True)
class Cluster:
    """One unit XLA executes on the device: a fusion, a library call or a lone op."""

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

    @property
    def is_library(self) -> bool:
        """True for library custom-calls such as cuBLAS(Lt) or oneDNN GEMMs."""
        return self.kind == "library"

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of every field."""
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
        }


def backend_kind(inst: Instruction) -> str:
    """The fusion backend kind (`__triton_gemm`, `__ynn_fusion`, ...) from backend_config, or ''."""
    cfg = inst.backend_config
    for key in ("fusion_backend_config", "fusion_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("kind"), str):
            return sub["kind"]
    return ""


def epilogue(inst: Instruction) -> str:
    """The library GEMM epilogue (DEFAULT, BIAS, BIAS_GELU, ...) from backend_config, or ''."""
    gemm = inst.backend_config.get("gemm_backend_config")
    if isinstance(gemm, dict) and isinstance(gemm.get("epilogue"), str):
        return gemm["epilogue"]
    return ""


def is_library_target(target: str) -> bool:
    """True when a custom_call_target names a vendor library kernel (BLAS, DNN, solver)."""
    return target.startswith(LIBRARY_PREFIXES)


def members(module: HloModule, inst: Instruction) -> tuple[Instruction, ...]:
    """The instructions a cluster executes: a fusion's called computations (nested fusions
    and reducers included), without parameters; a lone instruction is its own member."""
    if inst.opcode != "fusion":
        return (inst,)
    out: list[Instruction] = []
    seen: set[str] = set()
    stack = list(inst.called_computations)
    while stack:
        name = stack.pop()
        comp = module.computations.get(name)
        if comp is None or name in seen:
            continue
        seen.add(name)
        for member in comp.instructions:
            if member.opcode != "parameter":
                out.append(member)
            stack.extend(member.called_computations)
    return tuple(out)


def _cluster(module: HloModule, comp: Computation, inst: Instruction, parent: str) -> Cluster:
    group = members(module, inst)
    target = inst.custom_call_target
    if inst.opcode == "fusion":
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
        backend_kind=backend_kind(inst),
        target=target,
        epilogue=epilogue(inst),
        member_opcodes=tuple(sorted(counts.items())),
        source_ops=tuple(sorted({m.op_name for m in group if m.op_name})),
        source_locations=tuple(sorted(locations)),
        output_shape=inst.shape_text,
        output_bytes=inst.shape.bytes,
        parent=parent,
    )


def _units(
    module: HloModule, comp: Computation, parent: str
) -> Iterator[Cluster | tuple[Computation, str]]:
    """The clusters of `comp` in text order, with `(computation, caller name)` in the place of
    each computation that a `call`/`while`/`conditional`/`async-start` runs."""
    for inst in comp.instructions:
        if inst.opcode in NON_EXECUTING:
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
    `while` and `conditional` are units themselves too, for the decision they execute.
    Parameters, constants, tuples, get-tuple-element, bitcasts and `*-done` halves are skipped.
    """
    out: list[Cluster] = []
    _walk(module, module.entry, "", out, set())
    return tuple(out)


def _op_key(inst: Instruction) -> str:
    return f"{inst.name} ({inst.op_name})" if inst.op_name else inst.name


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


def reverse_map(
    before: HloModule, after: HloModule, clusters: tuple[Cluster, ...] | None = None
) -> dict[str, list[str]]:
    """Map each pre-optimization op ("name (op_name)") to the clusters now holding it.

    The rule, applied in tiers:
    1. Name match: a cluster member whose name is the op's name or derives from it
       (`tanh.1` -> `tanh.1.9`) and carries the same op_name holds the op.
    2. op_name match: otherwise, clusters with a member of the same op_name that no tier-1
       match already claimed hold it (a cuBLAS call keeps only the dot's op_name, so the dot
       maps there; split-K GEMMs map to both halves).
    3. Data flow: ops still unplaced take, in synchronous rounds until nothing changes, the
       clusters of their placed operands (producer side first), else those of their placed
       users. This is what sends a bias add and every GELU op to a cuBLASLt BIAS_GELU call
       whose metadata names only the dot.
    Ops that are still unplaced map to [] ("folded away": constant-folded or dead).
    Parameters are not listed.
    """
    clusters = find_clusters(after) if clusters is None else clusters
    held: dict[str, tuple[Cluster, tuple[Instruction, ...]]] = {}
    for c in clusters:
        inst = _find_instruction(after, c)
        if inst is not None:
            held[c.name] = (c, members(after, inst))
    ops = [(comp, inst) for comp, inst in _before_ops(before) if inst.opcode != "parameter"]

    placed: dict[str, set[str]] = {}
    claimed: set[tuple[str, str]] = set()
    for _, inst in ops:
        prefix = inst.name + "."
        for cname, (_, group) in held.items():
            for m in group:
                if m.op_name == inst.op_name and (m.name == inst.name or m.name.startswith(prefix)):
                    placed.setdefault(_op_key(inst), set()).add(cname)
                    claimed.add((cname, m.name))
    for _, inst in ops:
        key = _op_key(inst)
        if key in placed or not inst.op_name:
            continue
        hits = {
            cname
            for cname, (_, group) in held.items()
            for m in group
            if m.op_name == inst.op_name and (cname, m.name) not in claimed
        }
        if hits:
            placed[key] = hits

    by_name = {(comp.name, inst.name): inst for comp, inst in ops}
    users: dict[tuple[str, str], list[Instruction]] = {}
    for comp, inst in ops:
        for operand in inst.operand_names:
            users.setdefault((comp.name, operand), []).append(inst)
    comp_of = {id(inst): comp.name for comp, inst in ops}
    changed = True
    while changed:
        changed = False
        snapshot = {k: set(v) for k, v in placed.items()}
        for comp, inst in ops:
            key = _op_key(inst)
            if key in snapshot:
                continue
            found: set[str] = set()
            for operand in inst.operand_names:
                producer = by_name.get((comp.name, operand))
                if producer is not None:
                    found |= snapshot.get(_op_key(producer), set())
            if not found:
                for user in users.get((comp_of[id(inst)], inst.name), []):
                    found |= snapshot.get(_op_key(user), set())
            if found:
                placed[key] = found
                changed = True
    order = {c.name: i for i, c in enumerate(clusters)}
    return {
        _op_key(inst): sorted(placed.get(_op_key(inst), set()), key=lambda n: order.get(n, 0))
        for _, inst in ops
    }


def _find_instruction(module: HloModule, cluster: Cluster) -> Instruction | None:
    for comp in module.computations.values():
        inst = comp.get(cluster.name)
        if inst is not None and inst.opcode not in NON_EXECUTING:
            return inst
    return None
