"""What the reverse map (harness.hlo.reverse_map) reads of the two modules: metadata read
fast, the ops of the module before optimization, source frames comparable across the pair,
and the optimized module's index (`AfterIndex`: instructions by id, by op_name and by
cluster, def-use resolved through fusion boundaries and forwarding instructions)."""

from __future__ import annotations

import re

from harness.hlo.clusters import DESCEND, NON_EXECUTING, Cluster, array_shape, members
from harness.hlo.instruction import MAX_ID, Instruction, parse_metadata
from harness.hlo.parser import Computation, HloModule
from harness.hlo.shapes import decimal

# Optimized instructions that only forward a value.
_AFTER_THROUGH = frozenset({"bitcast", "copy", "opt-barrier", "copy-start", "copy-done"})
# Opcodes XLA inserts without metadata (float normalization, layout assignment).
_INSERTED = frozenset({"convert", "reshape", "transpose", "broadcast", "copy"})


def elements(inst: Instruction) -> int:
    """The element count of an instruction's (first) array, or -1 when it has none."""
    shape = array_shape(inst.shape)
    return shape.elements if shape is not None else -1


_OP_NAME = re.compile(r'\bop_name=("(?:[^"\\]|\\.)*")')
_FRAME = re.compile(r"\bstack_frame_id=(\d+)")


def meta_fields(inst: Instruction) -> tuple[str, str]:
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


def before_ops(before: HloModule) -> list[tuple[Computation, Instruction]]:
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


def frame_keys(before: HloModule, after: HloModule) -> tuple[dict[str, object], dict[str, object]]:
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


class AfterIndex:
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
                self.op_name[i], raw = meta_fields(inst)
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
        if depth < 16:
            out.extend(self._one_step_back(comp, inst, index, depth + 1))
        result = tuple(dict.fromkeys(out))
        self._memo[key] = result
        return result

    def _one_step_back(
        self, comp: Computation, inst: Instruction, index: int | None, deeper: int
    ) -> list[int]:
        """The producers of `inst`'s value (its tuple element `index`) one step back, found
        at depth `deeper`: a parameter's callers' operands, a call's returned roots, a
        tuple element's producer, a forwarding instruction's operand; none for an
        instruction that computes its value."""
        op = inst.opcode
        if op == "parameter" and (inst.literal or "").strip().isdigit():
            k = int((inst.literal or "").strip())
            return [
                i
                for caller_comp, operand in self.sources.get((comp.name, k), ())
                for i in self.producers(caller_comp, operand, deeper)
            ]
        if op in ("fusion", "call", "conditional", "while"):
            return self._returned_roots(inst, index, deeper)
        if op == "get-tuple-element" and inst.operands:
            raw = (inst.attr("index") or "").strip()
            sub_index = decimal(raw, MAX_ID)
            producer = comp.get(inst.operands[0])
            if producer is None:
                return []
            return list(self._through(comp, producer, sub_index, deeper))
        if op == "tuple" and index is not None and index < len(inst.operands):
            return list(self.producers(comp, inst.operands[index], deeper))
        if inst.operands and (
            op in _AFTER_THROUGH or (op in _INSERTED and not self.op_name[id(inst)])
        ):
            return list(self.producers(comp, inst.operands[0], deeper))
        return []

    def _returned_roots(self, inst: Instruction, index: int | None, deeper: int) -> list[int]:
        """What the roots of the computations `inst` calls and returns from hold."""
        out: list[int] = []
        for name in _returned(inst):
            sub = self.module.computations.get(name)
            root = sub.root if sub is not None else None
            if sub is not None and root is not None:
                out.extend(self._through(sub, root, index, deeper))
        return out

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
