"""Where each pre-optimization op of an HLO module ended up: the clusters of the optimized
module (harness.hlo.clusters) that hold an instruction derived from it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.hlo.after_index import AfterIndex, before_ops, elements, frame_keys, meta_fields
from harness.hlo.clusters import (
    Cluster,
    array_shape,
    find_clusters,
    is_library_target,
)
from harness.hlo.instruction import Instruction
from harness.hlo.parser import Computation, HloModule

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


class _Matcher:
    """The tiers of `reverse_map`, sharing the indexes of both modules."""

    def __init__(self, before: HloModule, after: HloModule, clusters: tuple[Cluster, ...]):
        self.before = before
        self.clusters = clusters
        every = before_ops(before)
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
            raw, raw_frames[id(inst)] = meta_fields(inst)
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
        bframes, aframes = frame_keys(before, after)
        self.a = AfterIndex(after, clusters, aframes)
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
            sizes = {elements(op) for op in group}
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
            out.setdefault(elements(self.a.inst[i]), []).append(i)
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
        size = elements(op)
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
        shape = array_shape(op.shape)
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
            s = array_shape(inst.shape)
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
            pool = self._rewrite_pool(op, explained)
            if not pool:
                continue
            alone = unplaced[(self.opn[id(op)], self.bframe[id(op)])] == 1
            found = self._linked_or_alone(op, pool, alone)
            if found:
                self.cand[id(op)] = frozenset(found)
                self.how[id(op)] = "rewrite"

    def _rewrite_pool(self, op: Instruction, explained: set[tuple[str, str]]) -> list[int]:
        """The optimized instructions under `op`'s op_name whose opcode no pre-optimization
        op of that op_name explains, in `op`'s source frame where both frames are known."""
        frame = self.bframe[id(op)]
        return [
            i
            for (name, opcode), ids in self._by_op_name().get(self.opn[id(op)], ())
            if (name, opcode) not in explained
            for i in ids
            if frame is None or (f := self.a.frame[i]) is None or f == frame
        ]

    def _linked_or_alone(self, op: Instruction, pool: list[int], alone: bool) -> list[int]:
        """Of `pool`, those connected to `op`'s placed neighbours; when no neighbour is
        placed, the whole pool if `op` is `alone` (the only unplaced op of its op_name and
        frame)."""
        sides = [a for a in (self.from_operands(op), self.from_users(op)) if a is not None]
        linked = set().union(*sides) if sides else set()
        found = [i for i in pool if i in linked]
        if not found and not sides and alone:
            return pool
        return found

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
            return bool(src) and elements(src[0]) < elements(op)
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
    method, notes = _place_every_tier(m)
    mapping, placed_by, counts, silent, shared = _mapping_of(m, clusters)
    notes.extend(_placement_notes(counts, len(m.ops), silent, shared))
    return ReverseMap(mapping, placed_by, method, tuple(notes))


def _place_every_tier(m: _Matcher) -> tuple[str, list[str]]:
    """Run the tiers of `reverse_map` on `m` in order; return what identity means for this
    pair of modules (`ReverseMap.method`) and the note on metadata, if any is missing."""
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
    return method, notes


def _mapping_of(
    m: _Matcher, clusters: tuple[Cluster, ...]
) -> tuple[dict[str, tuple[str, ...]], dict[str, str], Counter[str], int, int]:
    """Each op's clusters and evidence once every tier ran, with the count of ops per
    evidence, of ops placed only on instructions that do not execute (`silent`), and of ops
    left sharing their clusters with look-alikes (`shared`)."""
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
    return mapping, placed_by, counts, silent, shared


def _placement_notes(counts: Counter[str], ops: int, silent: int, shared: int) -> list[str]:
    """The notes on how many ops each tier placed and on what could not be placed exactly."""
    notes = ["placed by " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" of {ops}"]
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
    return notes
