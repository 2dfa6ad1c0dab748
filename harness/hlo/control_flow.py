"""How many times each computation of a module runs in one call: loops by their trip counts.

A while body runs its trip count times a call, its condition once more; a conditional runs
one branch; a called computation runs once a call site, so a callee shared by several call
sites counts at each. The trip count is XLA's own where the optimized HLO has it
(`backend_config={"known_trip_count":{"n":"32"}}`), else read from the loop's shape as
`lax.scan`/`fori_loop` write it before optimization (a counter starting at a constant, compared
`LT` against a constant, stepped by 1), else unknown: the body then counts once, and says so.
A conditional whose branch the caller does not know costs its most expensive branch, marked.

Pure functions over a parsed module; harness.hlo.cost multiplies each cluster by them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.hlo.instruction import Instruction
from harness.hlo.parser import Computation, HloModule
from harness.hlo.shapes import decimal

MAX_TRIP = 1 << 40  # a trip count above it is no loop count the model trusts


@dataclass(frozen=True)
class TripCount:
    """A while loop's trip count and where it comes from (`known_trip_count`, `pattern`,
    `unknown`: then `count` is None)."""

    count: int | None
    source: str


@dataclass(frozen=True)
class Runs:
    """How many times a computation runs a call of its module, and why, in words."""

    times: float
    why: tuple[str, ...] = ()
    loop: str = ""  # the innermost while whose body (or condition) it is
    trip_count: int | None = None  # that loop's, None when unknown


def _constant(comp: Computation, name: str) -> int | None:
    inst = comp.get(name)
    while inst is not None and inst.opcode in ("copy", "convert", "bitcast", "reshape"):
        inst = comp.get(inst.operands[0]) if inst.operands else None
    if inst is None or inst.opcode != "constant":
        return None
    value = decimal((inst.literal or "").strip(), MAX_TRIP)
    return int(value) if value is not None else None


def _tuple_index(inst: Instruction | None) -> int | None:
    if inst is None or inst.opcode != "get-tuple-element":
        return None
    value = decimal((inst.attr("index") or "").strip(), MAX_TRIP)
    return int(value) if value is not None else None


def _callee(module: HloModule, inst: Instruction, key: str, index: int) -> Computation | None:
    """The computation `inst` names by attribute `key` (`body=%b`), else its index-th callee."""
    name = (inst.attr(key) or "").strip().lstrip("%")
    names = inst.called_computations
    return module.computations.get(name) or (
        module.computations.get(names[index]) if len(names) > index else None
    )


def _pattern_trip(module: HloModule, loop: Computation, inst: Instruction) -> int | None:
    """`for i in range(start, stop)` as lax writes it: the condition's root compares tuple
    element k of its parameter `LT` a constant, the body sets element k to itself plus 1, and
    the loop starts element k at a constant."""
    cond, body = _callee(module, inst, "condition", 0), _callee(module, inst, "body", 1)
    root = cond.root if cond is not None else None
    if cond is None or body is None or root is None or root.opcode != "compare":
        return None
    if (root.attr("direction") or "") != "LT" or len(root.operands) != 2:
        return None
    k = _tuple_index(cond.get(root.operands[0]))
    stop = _constant(cond, root.operands[1])
    step_root = body.root
    init = loop.get(inst.operands[0]) if inst.operands else None
    if k is None or stop is None or step_root is None or step_root.opcode != "tuple":
        return None
    if init is None or init.opcode != "tuple" or k >= len(init.operands):
        return None
    start = _constant(loop, init.operands[k])
    step = body.get(step_root.operands[k]) if k < len(step_root.operands) else None
    if start is None or step is None or step.opcode != "add" or len(step.operands) != 2:
        return None
    a, b = (body.get(x) for x in step.operands)
    one = _constant(body, step.operands[1]) if _tuple_index(a) == k else None
    one = (
        one
        if one is not None
        else (_constant(body, step.operands[0]) if _tuple_index(b) == k else None)
    )
    if one != 1:
        return None
    return max(0, stop - start)


def trip_count(module: HloModule, loop: Computation, inst: Instruction) -> TripCount:
    """The trip count of while instruction `inst` (in computation `loop`)."""
    known = inst.backend_config.get("known_trip_count") if inst.attr("backend_config") else None
    if isinstance(known, dict):
        n = decimal(str(known.get("n", "")).strip(), MAX_TRIP)
        if n is not None:
            return TripCount(int(n), "known_trip_count")
    n = _pattern_trip(module, loop, inst)
    return TripCount(n, "pattern") if n is not None else TripCount(None, "unknown")


def _topological(
    root: str, edges: Mapping[str, list[tuple[str, float, tuple[str, int | None] | None]]]
) -> list[str]:
    """The computations reachable from `root`, each after every caller (HLO has no recursion)."""
    order: list[str] = []
    state: dict[str, int] = {}
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        name, done = stack.pop()
        if done:
            state[name] = 2
            order.append(name)
            continue
        if state.get(name):
            continue
        state[name] = 1
        stack.append((name, True))
        stack.extend((sub, False) for sub, _, _ in edges.get(name, ()) if not state.get(sub))
    return order[::-1]


def computation_runs(
    module: HloModule,
    branch_cost: Callable[[str], float] = lambda _: 0.0,
    taken: Mapping[str, int] | None = None,
) -> dict[str, Runs]:
    """Computation name -> how many times it runs a call of `module` (computations that
    run no instructions of their own, such as fusion bodies, are left out).

    `branch_cost(name)` ranks a conditional's branches when `taken` (conditional name ->
    the branch index that ran) does not say which ran."""
    # The call graph once, as edges (caller, callee, runs per caller run, loop it enters):
    # multiplicities then flow down it in topological order, so a callee shared by many
    # sites is walked once, not once per path.
    edges: dict[str, list[tuple[str, float, tuple[str, int | None] | None]]] = defaultdict(list)
    why: dict[str, list[str]] = defaultdict(list)
    seen = {module.entry.name}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        for inst in comp:
            called = inst.called_computations
            out: list[tuple[Computation | None, float, tuple[str, int | None] | None]] = []
            if inst.opcode == "while" and len(called) >= 2:
                trip = trip_count(module, comp, inst)
                n = trip.count if trip.count is not None else 1
                said = (
                    f"{inst.name} runs {n} times ({trip.source})"
                    if trip.count is not None
                    else f"{inst.name}: trip count unknown, counted once"
                )
                loop = (inst.name, trip.count)
                body = _callee(module, inst, "body", 1)
                cond = _callee(module, inst, "condition", 0)
                out = [(body, float(n), loop), (cond, float(n + 1), loop)]
                for sub, _, _ in out:
                    if sub is not None:
                        why[sub.name].append(said)
            elif inst.opcode == "conditional" and called:
                pick = (taken or {}).get(inst.name)
                if pick is None or not 0 <= pick < len(called):
                    costs = [branch_cost(c) for c in called]
                    pick = max(range(len(called)), key=lambda i: (costs[i], -i))
                    note = (
                        f"{inst.name}: the branch that ran is not known; its most expensive "
                        f"branch ({called[pick]}) is counted"
                    )
                else:
                    note = f"{inst.name}: branch {pick} ran"
                for i, c in enumerate(called):
                    why[c].append(note)
                    out.append((module.computations.get(c), 1.0 if i == pick else 0.0, None))
            elif inst.opcode in ("call", "async-start"):
                out = [(module.computations.get(c), 1.0, None) for c in called]
            for sub, factor, loop in out:
                if sub is None:
                    continue
                edges[comp.name].append((sub.name, factor, loop))
                if sub.name not in seen:
                    seen.add(sub.name)
                    stack.append(sub)
    runs: dict[str, float] = defaultdict(float)
    loops: dict[str, tuple[str, int | None]] = {}
    runs[module.entry.name] = 1.0
    for name in _topological(module.entry.name, edges):
        for sub, factor, loop in edges.get(name, ()):
            runs[sub] += runs[name] * factor
            inner = loop or loops.get(name)
            if inner is not None:
                loops.setdefault(sub, inner)
    return {
        name: Runs(t, tuple(dict.fromkeys(why[name])), *loops.get(name, ("", None)))
        for name, t in runs.items()
    }
