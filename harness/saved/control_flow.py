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


def control_flow_facts(
    cost: CostFile | None,
    kernels: KernelsFile | None,
    events: Sequence[KernelEvent],
    kinds: Mapping[str, str],
) -> ControlFlowFacts:
    """The variant's loops and host syncs, from its cost.json, its kernels.json's totals and its
    events (harness.records.events_file.read); `kinds` maps each cluster to its kind
    (fusions.json)."""
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
    steps = kernels.match.steps if kernels is not None and kernels.match is not None else 0
    if not steps or not events:
        loops = tuple(
            LoopFacts(n, trips[n], len(body[n]), entries=entries.get(n), count_source=sources[n])
            for n in sorted(body)
        )
        return ControlFlowFacts(loops)
    step_s = sum(e.duration_ns for e in events) * 1e-9 / steps
    loops = []
    for name in sorted(body):
        mine = [e for e in events if e.matched and e.cluster in body[name]]
        own = Counter(
            e.cluster
            for e in mine
            if e.kind in ("kernel", "host_thunk") and not _is_copy(e.name, e.kind, e.direction)
        )
        launches = sorted(own.values())
        iterations = launches[len(launches) // 2] / steps if launches else None
        # Compute kernels only: a graph's copies are kernels, elsewhere memcpys.
        kernels_a_step = (
            sum(
                1
                for e in mine
                if e.kind in ("kernel", "host_thunk")
                and not _is_copy(e.name, e.kind, e.direction)
                and not e.name.startswith("set_")
            )
            / steps
        )
        loops.append(
            LoopFacts(
                loop=name,
                trip_count=trips[name],
                body_clusters=len(body[name]),
                iterations_per_step=iterations,
                kernels_per_iteration=kernels_a_step / iterations if iterations else None,
                copy_s_per_step=sum(
                    e.duration_ns for e in mine if _is_copy(e.name, e.kind, e.direction)
                )
                * 1e-9
                / steps,
                body_s_per_step=sum(e.duration_ns for e in mine) * 1e-9 / steps,
                step_s=step_s,
                entries=entries.get(name),
                count_source=sources[name],
            )
        )
    syncs = [
        e
        for e in events
        if e.matched and e.kind == "memcpy" and e.direction == "D2H"
        and kinds.get(e.cluster or "") in CONTROL_KINDS
    ]  # fmt: skip
    found = SyncFacts(len(syncs) / steps, tuple(sorted({e.cluster or "" for e in syncs})))
    return ControlFlowFacts(tuple(loops), found if syncs else None)
