"""Structural fingerprints of HLO modules and a timeline of per-pass dumps."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.hlo.clusters import backend_kind, epilogue
from harness.hlo.files import parse_cached
from harness.hlo.instruction import Instruction
from harness.hlo.parser import Computation, HloModule

IGNORED_ATTRS = frozenset(
    {
        "metadata",
        "backend_config",
        "frontend_attributes",
        "calls",
        "to_apply",
        "condition",
        "body",
        "branch_computations",
        "control-predecessors",
        "statistics",
        "origin",
        "custom_call_target",
        "kind",
    }
)
XLA_PASS_FILE = re.compile(
    r"^module_\d+\.(?P<module>.+)\.(?P<index>\d{4})\.(?P<pipeline>[^.]+)"
    r"\.after_(?P<pass>.+?)(?:\.before_(?P<next>.+))?\.txt$"
)
# The harness ladder's `30-passes/NNNN.<pipeline>.<pass>.txt` (XLA's names hold no dots).
HARNESS_PASS_FILE = re.compile(r"^(?P<index>\d{4})\.(?P<pipeline>[^.]+)\.(?P<pass>[^.]+)\.txt$")


def _callees(module: HloModule, comp: Computation) -> Iterator[Computation]:
    """The computations `comp`'s instructions call, in text order (repeats included)."""
    for inst in comp.instructions:
        for name in inst.called_computations:
            sub = module.computations.get(name)
            if sub is not None:
                yield sub


def _computation_order(module: HloModule) -> list[Computation]:
    """Computations reachable from ENTRY in depth-first pre-order, each once.

    An explicit stack of generators rather than recursion, so a call chain as deep as the
    input makes it cannot exhaust the Python stack.
    """
    order = [module.entry]
    seen = {module.entry.name}
    stack = [_callees(module, module.entry)]
    while stack:
        comp = next(stack[-1], None)
        if comp is None:
            stack.pop()
        elif comp.name not in seen:
            seen.add(comp.name)
            order.append(comp)
            stack.append(_callees(module, comp))
    return order


def _canonical_instruction(
    inst: Instruction, index: dict[str, int], comp_index: dict[str, int]
) -> str:
    ops = []
    for operand in inst.operands:
        name, _, tup = operand.partition("#")
        ops.append(f"{index.get(name, -1)}{'#' + tup if tup else ''}")
    attrs = sorted((k, v) for k, v in inst.attrs.items() if k not in IGNORED_ATTRS)
    called = [str(comp_index.get(c, -1)) for c in inst.called_computations]
    extra = (inst.attr("kind") or "", inst.custom_call_target, backend_kind(inst), epilogue(inst))
    root = "R" if inst.is_root else ""
    return f"{root}{inst.opcode}|{inst.shape_text}|{','.join(ops)}|{attrs}|{called}|{extra}|{inst.literal or ''}"


def structural_fingerprint(module: HloModule) -> str:
    """A sha256 over the graph structure reachable from ENTRY.

    Covers opcodes, shapes (with layouts), operand topology, structural attributes
    (dimensions, slices, contracting dims, ...), fusion kinds, custom-call targets, backend
    kinds and epilogues; ignores instruction/computation names, ids and metadata, so a pure
    rename or a metadata-only pass keeps the fingerprint.
    """
    order = _computation_order(module)
    comp_index = {c.name: i for i, c in enumerate(order)}
    digest = hashlib.sha256()
    for comp in order:
        index = {inst.name: i for i, inst in enumerate(comp.instructions)}
        digest.update(f"C{comp_index[comp.name]}{'E' if comp.is_entry else ''}\n".encode())
        for inst in comp.instructions:
            digest.update(_canonical_instruction(inst, index, comp_index).encode())
            digest.update(b"\n")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class PassEntry:
    """The module state after one pass that changed it."""

    index: int
    pipeline: str
    pass_name: str
    path: str
    instruction_count: int
    fusion_count: int
    fingerprint: str
    changed_fusions: bool
    explanation: str = ""

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "index": self.index,
            "pipeline": self.pipeline,
            "pass": self.pass_name,
            "path": self.path,
            "instruction_count": self.instruction_count,
            "fusion_count": self.fusion_count,
            "fingerprint": self.fingerprint,
            "changed_fusions": self.changed_fusions,
            "explanation": self.explanation,
        }


def pass_file_info(path: Path) -> tuple[int, str, str] | None:
    """(index, pipeline, pass) from an XLA per-pass dump name or a harness ladder name.

    Returns None for other names.
    """
    m = XLA_PASS_FILE.match(path.name)
    if m is not None:
        return int(m["index"]), m["pipeline"], m["pass"]
    h = HARNESS_PASS_FILE.match(path.name)
    if h is not None:
        return int(h["index"]), h["pipeline"], h["pass"]
    return None


def _fusion_units(module: HloModule) -> dict[str, tuple[str, ...]]:
    """Name -> structural signature of every fusion and custom-call reachable from ENTRY."""
    out: dict[str, tuple[str, ...]] = {}
    for comp in _computation_order(module):
        for inst in comp.instructions:
            if inst.opcode == "fusion":
                ops = _member_ops(module, inst)
                out[inst.name] = (
                    "fusion",
                    inst.attr("kind") or "",
                    backend_kind(inst),
                    str(sorted(Counter(ops).items())),
                )
            elif inst.opcode == "custom-call":
                out[inst.name] = ("custom-call", inst.custom_call_target, epilogue(inst))
    return out


def _member_ops(module: HloModule, inst: Instruction) -> list[str]:
    ops: list[str] = []
    for name in inst.called_computations:
        comp = module.computations.get(name)
        if comp is not None:
            ops.extend(m.opcode for m in comp.instructions if m.opcode != "parameter")
    return ops


def _created_unit(
    name: str,
    unit: tuple[str, ...],
    prev: tuple[str, ...] | None,
    dots_fell: bool,
    after: HloModule,
) -> str:
    """What a pass did to make unit `name` (a fusion or library call of `after`, `prev` its
    state before the pass): a library call's new epilogue, a dot turned into a library call
    (`dots_fell`: the module lost dots), an added call, or a fusion made of its member ops."""
    if unit[0] == "custom-call":
        epi = f" (epilogue {unit[2]})" if unit[2] else ""
        if prev and prev[0] == "custom-call" and prev[1] == unit[1]:
            return f"changed {name} epilogue {prev[2] or 'none'} -> {unit[2]}"
        if dots_fell:
            return f"turned dot into {unit[1]}{epi}"
        return f"added custom-call {unit[1]}{epi}"
    inst = next(i for c in after.computations.values() if (i := c.get(name)) is not None)
    n_ops = len(_member_ops(after, inst))
    label = unit[2] or unit[1]
    return f"created {name} ({label}) from {n_ops} ops"


def explain_fusion_change(pass_name: str, before: HloModule, after: HloModule) -> str:
    """One sentence on how fusions/library calls differ between two module states ('' if not)."""
    old, new = _fusion_units(before), _fusion_units(after)
    if Counter(old.values()) == Counter(new.values()):
        return ""
    created = [n for n in new if n not in old or old[n] != new[n]]
    removed = [n for n in old if n not in new]
    old_dots = sum(1 for _, i in before.instructions() if i.opcode == "dot")
    new_dots = sum(1 for _, i in after.instructions() if i.opcode == "dot")
    dots_fell = new_dots < old_dots
    parts = [_created_unit(name, new[name], old.get(name), dots_fell, after) for name in created]
    if removed:
        parts.append(f"removed {len(removed)} unit{'s' if len(removed) > 1 else ''}")
    if len(parts) > 4:
        parts = [*parts[:3], f"and {len(parts) - 3} more changes"]
    return f"{pass_name} " + ", ".join(parts)


def pass_timeline(pass_files: Sequence[Path]) -> tuple[PassEntry, ...]:
    """One entry per recognised pass dump, in pass-index order.

    Files whose names are not per-pass dumps are ignored; unparsable files raise ParseError.
    `changed_fusions` compares fusion/custom-call structure with the previous entry.
    """
    infos = sorted(
        (info, Path(p)) for p in pass_files if (info := pass_file_info(Path(p))) is not None
    )
    out: list[PassEntry] = []
    prev: HloModule | None = None
    for (index, pipeline, pass_name), path in infos:
        module = parse_cached(path)
        fusions = sum(1 for _, i in module.instructions() if i.opcode == "fusion")
        explanation = explain_fusion_change(pass_name, prev, module) if prev is not None else ""
        out.append(
            PassEntry(
                index=index,
                pipeline=pipeline,
                pass_name=pass_name,
                path=str(path),
                instruction_count=module.instruction_count(),
                fusion_count=fusions,
                fingerprint=structural_fingerprint(module),
                changed_fusions=bool(explanation),
                explanation=explanation,
            )
        )
        prev = module
    return tuple(out)
