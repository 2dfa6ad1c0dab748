"""The facts the control-flow rules read (harness.findings.control_flow): each while
loop the cost model found and what the profile says it ran, and the predicates read back to
the host. Pure: `control_flow_facts` takes the variant's records, `harness.saved.read.load_run` reads them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.records.run_files import CostFile, KernelEvent, KernelsFile

CONTROL_KINDS = frozenset({"conditional", "while"})


@dataclass(frozen=True)
class LoopFacts:
    """One while loop of a variant's program, as cost.json and the profile see it."""

    loop: str
    trip_count: int | None  # XLA's `known_trip_count` or the loop pattern's; None unknown
    body_clusters: int
    iterations_per_step: float | None = None  # measured; None without a profile
    kernels_per_iteration: float | None = None
    copy_s_per_step: float = 0.0
    body_s_per_step: float = 0.0
    step_s: float | None = None  # the events' summed time a step
    entries: float | None = None  # times it is entered a call (its parent loop's iterations)
    count_source: str = ""  # how the cost model counted its body (ClusterCostRow.count_source)


@dataclass(frozen=True)
class SyncFacts:
    """Device-to-host copies a step made for a conditional or a while."""

    per_step: float
    owners: tuple[str, ...]


@dataclass(frozen=True)
class ControlFlowFacts:
    loops: tuple[LoopFacts, ...] = ()
    syncs: SyncFacts | None = None


def _is_copy(name: str, kind: str, direction: str | None) -> bool:
    return (kind == "memcpy" and direction == "D2D") or name.startswith("memcpy")


@dataclass(frozen=True)
class _LoopShape:
    """What the cost model counted of one loop: its body's clusters, its trip count, its
    entries a call and how its body was counted."""

    body: frozenset[str]
    trip_count: int | None
    entries: float | None
    count_source: str


def _loop_shapes(cost: CostFile | None) -> dict[str, _LoopShape]:
    body: dict[str, set[str]] = defaultdict(set)
    trips: dict[str, int | None] = {}
    entries: dict[str, float] = {}
    sources: dict[str, str] = {}
    for m in cost.modules if cost is not None else ():
        for c in m.clusters:
            if c.loop:
                body[c.loop].add(c.name)
                trips[c.loop] = c.trip_count
                sources[c.loop] = c.count_source
                if c.entries is not None:
                    entries[c.loop] = max(entries.get(c.loop, 0.0), c.entries)
    return {
        n: _LoopShape(frozenset(body[n]), trips[n], entries.get(n), sources[n])
        for n in sorted(body)
    }


def _is_compute(e: KernelEvent) -> bool:
    """A kernel (or CPU thunk) that computes: not a copy (a graph's copies are kernels,
    elsewhere memcpys)."""
    return e.kind in ("kernel", "host_thunk") and not _is_copy(e.name, e.kind, e.direction)


def _measured_loop(
    name: str, shape: _LoopShape, events: Sequence[KernelEvent], steps: int, step_s: float
) -> LoopFacts:
    """One loop as the profile saw it run: its iterations a step (the median launches of its
    body's clusters), compute kernels an iteration, its copies' and its body's time a step."""
    mine = [e for e in events if e.matched and e.cluster in shape.body]
    launches = sorted(Counter(e.cluster for e in mine if _is_compute(e)).values())
    iterations = launches[len(launches) // 2] / steps if launches else None
    kernels_a_step = sum(1 for e in mine if _is_compute(e) and not e.name.startswith("set_"))
    copies_ns = sum(e.duration_ns for e in mine if _is_copy(e.name, e.kind, e.direction))
    return LoopFacts(
        loop=name,
        trip_count=shape.trip_count,
        body_clusters=len(shape.body),
        iterations_per_step=iterations,
        kernels_per_iteration=kernels_a_step / steps / iterations if iterations else None,
        copy_s_per_step=copies_ns * 1e-9 / steps,
        body_s_per_step=sum(e.duration_ns for e in mine) * 1e-9 / steps,
        step_s=step_s,
        entries=shape.entries,
        count_source=shape.count_source,
    )


def _syncs(events: Sequence[KernelEvent], kinds: Mapping[str, str], steps: int) -> SyncFacts | None:
    """The device-to-host copies a step made for a conditional or a while, if any."""
    syncs = [
        e
        for e in events
        if e.matched and e.kind == "memcpy" and e.direction == "D2H"
        and kinds.get(e.cluster or "") in CONTROL_KINDS
    ]  # fmt: skip
    if not syncs:
        return None
    return SyncFacts(len(syncs) / steps, tuple(sorted({e.cluster or "" for e in syncs})))


def control_flow_facts(
    cost: CostFile | None,
    kernels: KernelsFile | None,
    events: Sequence[KernelEvent],
    kinds: Mapping[str, str],
) -> ControlFlowFacts:
    """The variant's loops and host syncs, from its cost.json, its kernels.json's totals and its
    events (harness.records.events_file.read); `kinds` maps each cluster to its kind
    (fusions.json)."""
    shapes = _loop_shapes(cost)
    steps = kernels.match.steps if kernels is not None and kernels.match is not None else 0
    if not steps or not events:
        return ControlFlowFacts(
            tuple(
                LoopFacts(
                    n, s.trip_count, len(s.body), entries=s.entries, count_source=s.count_source
                )
                for n, s in shapes.items()
            )
        )
    step_s = sum(e.duration_ns for e in events) * 1e-9 / steps
    loops = tuple(_measured_loop(n, s, events, steps, step_s) for n, s in shapes.items())
    return ControlFlowFacts(loops, _syncs(events, kinds, steps))
