"""How many times each computation of a module runs in one call: loops by their trip counts.

A while body runs its trip count times a call, its condition once more; a conditional runs
one branch; a called computation runs once a call site, so a callee shared by several call
sites counts at each. The trip count is XLA's own where the optimized HLO has it
(`backend_config={"known_trip_count":{"n":"32"}}`), else read from the loop's shape as
`lax.scan`/`fori_loop` write it before optimization (a counter starting at a constant, compared
`LT` against a constant, stepped by 1), else the iterations the profile measured (`measured`:
a loop's body runs a call, over all its entries, as `measured_trips` reads them from launches),
else unknown: the body then counts once per entry, and `Runs.unknown` says the total is no
count at all. Nested loops multiply: a loop's trip count is per entry, its body's runs the
product down the nest. A conditional counts the branch that ran (`taken`: the profile saw one
branch's clusters launch, or its predicate is a constant), or each branch by the executions
that took it where the profile saw several; else its most expensive branch, marked.

Pure functions over a parsed module; harness.hlo.cost multiplies each cluster by them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

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


Loop = tuple[str, int | None, str]  # (while name, trip count per entry, its source)


class Edge(NamedTuple):
    """A call: the callee runs `factor` times a run of its caller, plus `fixed` a call (a
    measured loop's iterations, whatever its parent's runs); `loop` is the while it enters."""

    callee: str
    factor: float
    loop: Loop | None
    fixed: float


@dataclass(frozen=True)
class Runs:
    """How many times a computation runs a call of its module, and why, in words."""

    times: float
    why: tuple[str, ...] = ()
    loop: str = ""  # the innermost while whose body (or condition) it is
    trip_count: int | None = None  # that loop's per entry, None when unknown or measured
    measured: bool = False  # a loop or branch around it counts by the profile's measure
    unknown: bool = False  # a loop around it has no trip count: `times` is no count
    entries: float | None = None  # times that loop is entered a call (its parent's runs)
    source: str = ""  # its innermost loop's trip count source

    @property
    def count_source(self) -> str:
        """How its runs were counted: `unknown` (a loop around it has no count), `measured`
        (a loop around it, or a branch, counts by the profile), else its loop's
        (`known_trip_count`, `pattern`), or empty outside loops."""
        if self.unknown or self.measured:
            return "unknown" if self.unknown else "measured"
        return self.source


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
    counted = _counter_below_stop(cond)
    if counted is None or body is None:
        return None
    k, stop = counted
    start = _counter_start(loop, inst, k)
    if start is None or not _adds_one(body, k):
        return None
    return max(0, stop - start)


def _counter_below_stop(cond: Computation | None) -> tuple[int, int] | None:
    """(k, stop) where the condition's root compares tuple element k of its parameter `LT`
    the constant stop; None for any other condition."""
    root = cond.root if cond is not None else None
    if cond is None or root is None or root.opcode != "compare":
        return None
    if (root.attr("direction") or "") != "LT" or len(root.operands) != 2:
        return None
    k = _tuple_index(cond.get(root.operands[0]))
    stop = _constant(cond, root.operands[1])
    if k is None or stop is None:
        return None
    return k, stop


def _counter_start(loop: Computation, inst: Instruction, k: int) -> int | None:
    """The constant the while `inst` starts tuple element k at; None when it is no constant."""
    init = loop.get(inst.operands[0]) if inst.operands else None
    if init is None or init.opcode != "tuple" or k >= len(init.operands):
        return None
    return _constant(loop, init.operands[k])


def _adds_one(body: Computation, k: int) -> bool:
    """Whether the body's root tuple sets element k to itself plus the constant 1."""
    step_root = body.root
    if step_root is None or step_root.opcode != "tuple" or k >= len(step_root.operands):
        return False
    step = body.get(step_root.operands[k])
    if step is None or step.opcode != "add" or len(step.operands) != 2:
        return False
    a, b = (body.get(x) for x in step.operands)
    one = _constant(body, step.operands[1]) if _tuple_index(a) == k else None
    one = (
        one
        if one is not None
        else (_constant(body, step.operands[0]) if _tuple_index(b) == k else None)
    )
    return one == 1


def _constant_branch(comp: Computation, inst: Instruction, branches: int) -> int | None:
    """The branch a conditional runs when its selector is a constant: a pred picks branch 0
    when true (its true_computation), an index picks itself, out of range the last."""
    selector = comp.get(inst.operands[0]) if inst.operands else None
    while selector is not None and selector.opcode in ("copy", "convert", "bitcast", "reshape"):
        selector = comp.get(selector.operands[0]) if selector.operands else None
    if selector is None or selector.opcode != "constant":
        return None
    literal = (selector.literal or "").strip().lower()
    if literal in ("true", "false"):
        return 0 if literal == "true" else 1
    value = decimal(literal, MAX_TRIP)
    if value is None:
        return None
    return int(value) if 0 <= value < branches else branches - 1


def trip_count(module: HloModule, loop: Computation, inst: Instruction) -> TripCount:
    """The trip count of while instruction `inst` (in computation `loop`)."""
    known = inst.backend_config.get("known_trip_count") if inst.attr("backend_config") else None
    if isinstance(known, dict):
        n = decimal(str(known.get("n", "")).strip(), MAX_TRIP)
        if n is not None:
            return TripCount(int(n), "known_trip_count")
    n = _pattern_trip(module, loop, inst)
    return TripCount(n, "pattern") if n is not None else TripCount(None, "unknown")


Taken = int | tuple[float, ...]  # the branch that ran, or each branch's runs a call
# A measured conditional's branches enter no loop: this marks their edges as measured.
MEASURED: Loop = ("", None, "measured")


def _add(
    comp: Computation,
    out: list[tuple[Computation | None, float, Loop | None, float]],
    edges: dict[str, list[Edge]],
    seen: set[str],
    stack: list[Computation],
) -> None:
    """Adds `comp`'s calls `out` to the call graph, and each new callee to the walk."""
    for sub, factor, loop, fixed in out:
        if sub is None:
            continue
        edges[comp.name].append(Edge(sub.name, factor, loop, fixed))
        if sub.name not in seen:
            seen.add(sub.name)
            stack.append(sub)


def _topological(root: str, edges: Mapping[str, list[Edge]]) -> list[str]:
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
        stack.extend((e.callee, False) for e in edges.get(name, ()) if not state.get(e.callee))
    return order[::-1]


Out = list[tuple[Computation | None, float, Loop | None, float]]


def _while_edges(
    module: HloModule,
    comp: Computation,
    inst: Instruction,
    measured: Mapping[str, float],
    why: dict[str, list[str]],
) -> Out:
    """A while loop's body and condition, each with its runs per run of the loop's caller
    (or a call's, when the profile measured them), and why."""
    trip = trip_count(module, comp, inst)
    total = measured.get(inst.name) if trip.count is None else None
    if trip.count is not None:
        said = f"{inst.name} runs {trip.count} times ({trip.source})"
    elif total is not None:
        said = f"{inst.name} runs {total:g} times a call (measured by the profile)"
    else:
        said = f"{inst.name}: trip count unknown (not in the HLO, not measured)"
    state = "measured" if total is not None else trip.source
    loop = (inst.name, trip.count, state)
    n = float(trip.count) if trip.count is not None else 1.0
    body = _callee(module, inst, "body", 1)
    cond = _callee(module, inst, "condition", 0)
    out: Out
    if total is not None:  # a call's runs, whatever the parent's: one more per entry
        out = [(body, 0.0, loop, total), (cond, 1.0, loop, total)]
    else:
        out = [(body, n, loop, 0.0), (cond, n + 1, loop, 0.0)]
    for sub, _, _, _ in out:
        if sub is not None:
            why[sub.name].append(said)
    return out


def _conditional_edges(
    module: HloModule,
    comp: Computation,
    inst: Instruction,
    branch_cost: Callable[[str], float],
    taken: Mapping[str, Taken],
    why: dict[str, list[str]],
) -> Out:
    """A conditional's branches: each measured branch's runs a call, else the branch that
    ran (said, a constant predicate, or the most expensive one) once per run, and why."""
    called = inst.called_computations
    out: Out = []
    said_runs = taken.get(inst.name)
    if isinstance(said_runs, tuple) and len(said_runs) == len(called):
        note = (
            f"{inst.name}: its branches ran "
            + ", ".join(f"{n:g}" for n in said_runs)
            + " times a call (measured by the profile)"
        )
        for c, n in zip(called, said_runs, strict=True):
            why[c].append(note)
            out.append((module.computations.get(c), 0.0, MEASURED, n))
        return out
    pick = said_runs if isinstance(said_runs, int) else None
    constant = _constant_branch(comp, inst, len(called))
    if constant is not None and (pick is None or not 0 <= pick < len(called)):
        pick = constant
        note = f"{inst.name}: its predicate is a constant; branch {pick} runs"
    elif pick is None or not 0 <= pick < len(called):
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
        out.append((module.computations.get(c), 1.0 if i == pick else 0.0, None, 0.0))
    return out


def _call_graph(
    module: HloModule,
    branch_cost: Callable[[str], float],
    taken: Mapping[str, Taken],
    measured: Mapping[str, float],
) -> tuple[dict[str, list[Edge]], dict[str, list[str]]]:
    """The call graph once, as edges (caller, callee, runs per caller run, loop it enters),
    and why each computation runs as it does: multiplicities then flow down it in
    topological order, so a callee shared by many sites is walked once, not once per path."""
    edges: dict[str, list[Edge]] = defaultdict(list)
    why: dict[str, list[str]] = defaultdict(list)
    seen = {module.entry.name}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        for inst in comp:
            called = inst.called_computations
            out: Out = []
            if inst.opcode == "while" and len(called) >= 2:
                out = _while_edges(module, comp, inst, measured, why)
            elif inst.opcode == "conditional" and called:
                out = _conditional_edges(module, comp, inst, branch_cost, taken, why)
            elif inst.opcode in ("call", "async-start"):
                out = [(module.computations.get(c), 1.0, None, 0.0) for c in called]
            _add(comp, out, edges, seen, stack)
    return edges, why


def computation_runs(
    module: HloModule,
    branch_cost: Callable[[str], float] = lambda _: 0.0,
    taken: Mapping[str, Taken] | None = None,
    measured: Mapping[str, float] | None = None,
) -> dict[str, Runs]:
    """Computation name -> how many times it runs a call of `module` (computations that
    run no instructions of their own, such as fusion bodies, are left out).

    `branch_cost(name)` ranks a conditional's branches when `taken` (conditional name ->
    the branch index that ran, or each branch's runs a call where several ran: counted per
    execution) does not say which ran. `measured` (while name -> its body's runs
    a call, over all entries) counts a loop whose trip count the HLO does not hold."""
    edges, why = _call_graph(module, branch_cost, taken or {}, measured or {})
    runs: dict[str, float] = defaultdict(float)
    loops: dict[str, Loop] = {}
    entries: dict[str, float] = {}
    flags: dict[str, set[str]] = defaultdict(set)
    runs[module.entry.name] = 1.0
    for name in _topological(module.entry.name, edges):
        for sub, factor, loop, fixed in edges.get(name, ()):
            runs[sub] += runs[name] * factor + fixed
            flags[sub] |= flags[name] | ({loop[2]} if loop is not None else set())
            loop = None if loop is MEASURED else loop
            inner = loop or loops.get(name)
            if inner is not None:
                loops.setdefault(sub, inner)
            if loop is not None:
                entries[sub] = entries.get(sub, 0.0) + runs[name]
            elif name in entries:
                entries.setdefault(sub, entries[name])
    return {
        name: Runs(
            t,
            tuple(dict.fromkeys(why[name])),
            *loops.get(name, ("", None, ""))[:2],
            measured="measured" in flags[name],
            unknown="unknown" in flags[name],
            entries=entries.get(name),
            source=loops.get(name, ("", None, ""))[2],
        )
        for name, t in runs.items()
    }


def measured_trips(module: HloModule, launches: Mapping[str, float]) -> dict[str, float]:
    """While name -> its body's runs a call, read from `launches` (cluster name -> launches a
    step, one step a call) for each loop whose trip count the HLO does not hold: the median
    launches of the clusters of its body computation itself (not of a loop or branch inside
    it). A loop none of whose body's clusters launched is left out."""
    owner = {
        inst.name: comp.name for comp in module.computations.values() for inst in comp.instructions
    }
    out: dict[str, float] = {}
    for comp, inst in module.instructions():
        if inst.opcode != "while" or trip_count(module, comp, inst).count is not None:
            continue
        body = _callee(module, inst, "body", 1)
        if body is None:
            continue
        seen = sorted(n for c, n in launches.items() if owner.get(c) == body.name and n > 0)
        if seen:
            out[inst.name] = seen[len(seen) // 2]
    return out


_CLONE = re.compile(r"(\.clone(\.\d+)?)+$")
_WIDE = re.compile(r"^(wide\.)+")


def unclone(name: str) -> str:
    """A computation's or instruction's name without what XLA's passes add when they copy it
    (`.clone[.N]` suffixes) or widen a loop's state (`wide.` prefixes):
    `wide.wide.region_16.48` -> `region_16.48`, `region_10.20.clone.1.clone` -> `region_10.20`."""
    return _CLONE.sub("", _WIDE.sub("", name))


def loop_iterations(module: HloModule, measured: Mapping[str, float]) -> dict[str, float]:
    """Body computation (without its clone suffixes) -> its runs a call, summed over the loops
    that run a copy of it, for each loop counted (by the HLO, or `measured`): what the same
    program before optimization, whose loops' bodies bear those names, is counted by."""
    runs = computation_runs(module, measured=measured)
    out: dict[str, float] = defaultdict(float)
    for _, inst in module.instructions():
        body = _callee(module, inst, "body", 1) if inst.opcode == "while" else None
        run = runs.get(body.name) if body is not None else None
        if body is not None and run is not None and not run.unknown:
            out[unclone(body.name)] += run.times
    return dict(out)


def by_body(module: HloModule, iterations: Mapping[str, float]) -> dict[str, float]:
    """While name -> its body's runs a call, from `iterations` keyed by body computation (as
    `loop_iterations` gives them for another form of the program)."""
    out: dict[str, float] = {}
    for _, inst in module.instructions():
        body = _callee(module, inst, "body", 1) if inst.opcode == "while" else None
        if body is not None and unclone(body.name) in iterations:
            out[inst.name] = iterations[unclone(body.name)]
    return out


def taken_branches(module: HloModule, launches: Mapping[str, float]) -> dict[str, Taken]:
    """Conditional name -> the branch that ran, read from `launches` (cluster name -> launches
    a step): the one branch whose own clusters launched, or, where several did (executions
    took different branches), each branch's runs a call (the median launches of its own
    clusters). A conditional none of whose branches launched is left out (its cost then
    falls back to its dearest branch, marked)."""
    owner = {
        inst.name: comp.name for comp in module.computations.values() for inst in comp.instructions
    }
    ran: dict[str, list[float]] = defaultdict(list)
    for cluster, n in launches.items():
        if n > 0 and cluster in owner:
            ran[owner[cluster]].append(n)
    out: dict[str, Taken] = {}
    for _, inst in module.instructions():
        if inst.opcode != "conditional":
            continue
        branches = inst.called_computations
        seen = [i for i, c in enumerate(branches) if ran.get(c)]
        if len(seen) == 1:
            out[inst.name] = seen[0]
        elif len(seen) > 1:  # each execution ran one: each branch counts the runs it made
            out[inst.name] = tuple(
                float(sorted(ran[c])[len(ran[c]) // 2]) if ran.get(c) else 0.0 for c in branches
            )
    return out
