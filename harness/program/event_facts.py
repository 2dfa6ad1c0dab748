"""What a program's analysis reads of its attributed events, computed once, two ways.

The analysis (harness.program.module_analysis, harness.program.steps) needs sums and counts
over a window's events: each cluster's self time, launches and kernel names, each (kernel,
cluster)'s launches, time and launch shape, each step's busy, event and attributed time. A
study's few profiled steps give them from (Attribution, self time) pairs (`*_from_pairs`); a
profile of millions of events gives the same figures from the event table by array reductions
(`*_from_table`), without an object per event. tests/test_table_match.py checks that the two
agree on every fixture profile.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.match.match import Attribution, union_busy_ns
from harness.match.table_match import AttributedTable
from harness.profile.table import NULL, groups_of, members_of, union_ns

_LAUNCHES = ("kernel", "host_thunk")


@dataclass(frozen=True)
class KernelGroup:
    """One kernel of one cluster: its launches, summed self time (ns), and the launch shape
    most of its launches had (the first seen among equals)."""

    name: str
    cluster: str
    count: int
    ns: float
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    registers: int | None
    occupancy_pct: float | None


class StepSeries(Mapping[int, float]):
    """One cluster's time (ns) in each step it ran in, as two arrays in step order: a long
    profile's clusters times steps (a million entries) cost 16 bytes an entry, not a dict's
    hundred; its median and outliers over the steps are array operations."""

    def __init__(self, steps: np.ndarray, ns: np.ndarray) -> None:
        self.steps, self.ns = steps, ns

    def __getitem__(self, step: int) -> float:
        at = int(np.searchsorted(self.steps, step))
        if at < len(self.steps) and self.steps[at] == step:
            return float(self.ns[at])
        raise KeyError(step)

    def __iter__(self) -> Iterator[int]:
        return iter(self.steps.tolist())

    def __len__(self) -> int:
        return len(self.steps)

    def over(self, steps: Sequence[int]) -> np.ndarray:
        """The time in each of `steps`, 0 where the cluster did not run."""
        wanted = np.asarray(steps, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.steps, wanted), max(0, len(self.steps) - 1))
        hit = (self.steps[at] == wanted) if len(self.steps) else np.zeros(len(wanted), bool)
        return np.where(hit, self.ns[at] if len(self.steps) else 0.0, 0.0)


@dataclass(frozen=True)
class ModuleFacts:
    """A module's window events, summed: self times in ns; clusters are those its events were
    attributed to in this module; `executions` is None when an event has no run id."""

    cluster_ns: Mapping[str, float]
    cluster_launches: Mapping[str, tuple[int, int]]  # launches, distinct kernel names
    own_ns: float
    events: int
    kernels: int
    executions: int | None
    kernel_groups: tuple[KernelGroup, ...]
    cluster_step_ns: Mapping[str, Mapping[int, float]]
    own_step_ns: Mapping[int, float]


@dataclass(frozen=True)
class StepTotal:
    """One step of the window: device busy time (s), summed and attributed self time (ns)."""

    device_s: float
    event_ns: float
    attributed_ns: float


def _most_common(values: Iterable[Any]) -> Any:
    found = [v for v in values if v is not None]
    return Counter(found).most_common(1)[0][0] if found else None


def facts_from_pairs(pairs: Sequence[tuple[Attribution, float]], module: str) -> ModuleFacts:
    """A module's facts from its window events and their self times."""
    cluster_ns: dict[str, float] = defaultdict(float)
    kernels: dict[str, list[str]] = defaultdict(list)
    groups: dict[tuple[str, str], list[tuple[Attribution, float]]] = defaultdict(list)
    cluster_step: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    own_step: dict[int, float] = defaultdict(float)
    for a, t in pairs:
        e = a.event
        launch = e.kind in _LAUNCHES
        if a.matched and a.cluster is not None and a.module == module:
            cluster_ns[a.cluster] += t
            if launch:
                kernels[a.cluster].append(e.name)
            if e.step is not None:
                cluster_step[a.cluster][e.step] += t
        if launch:
            groups[(e.name, a.cluster or "")].append((a, t))
        if e.step is not None:
            own_step[e.step] += t
    runs = {a.event.run_id for a, _ in pairs}
    return ModuleFacts(
        cluster_ns=dict(cluster_ns),
        cluster_launches={c: (len(names), len(set(names))) for c, names in kernels.items()},
        own_ns=sum(t for _, t in pairs),
        events=len(pairs),
        kernels=sum(a.event.kind in _LAUNCHES for a, _ in pairs),
        executions=len(runs) if pairs and None not in runs else None,
        kernel_groups=tuple(
            KernelGroup(
                name,
                cluster,
                len(members),
                sum(t for _, t in members),
                _most_common(a.event.grid for a, _ in members),
                _most_common(a.event.block for a, _ in members),
                _most_common(a.event.registers for a, _ in members),
                _most_common(a.event.occupancy_pct for a, _ in members),
            )
            for (name, cluster), members in groups.items()
        ),
        cluster_step_ns={c: dict(by) for c, by in cluster_step.items()},
        own_step_ns=dict(own_step),
    )


def steps_from_pairs(pairs: Sequence[tuple[Attribution, float]]) -> dict[int, StepTotal]:
    """Each step's totals, from the window's events and their self times."""
    events: dict[int, list[Attribution]] = defaultdict(list)
    summed: dict[int, float] = defaultdict(float)
    attributed: dict[int, float] = defaultdict(float)
    for a, t in pairs:
        if a.event.step is None:
            continue
        events[a.event.step].append(a)
        summed[a.event.step] += t
        if a.matched:
            attributed[a.event.step] += t
    return {
        step: StepTotal(
            union_busy_ns([a.event for a in events[step]]) * 1e-9, summed[step], attributed[step]
        )
        for step in sorted(events)
    }


def facts_from_table(
    attributed: AttributedTable, self_ns: np.ndarray, rows: np.ndarray, module: str
) -> ModuleFacts:
    """A module's facts from the rows (indices into the attributed table) of its program."""
    w = attributed.table
    every = len(rows) == len(w)  # one program's rows are often all of them: views, not copies

    def pick(column: np.ndarray) -> np.ndarray:
        return column if every else column[rows]

    kinds = [w.code_of("kind", k) for k in _LAUNCHES]
    launch = np.isin(pick(w.codes["kind"]), [k for k in kinds if k >= 0])
    t = pick(self_ns)
    step = pick(w.ints["step"])
    has_step = step != NULL
    cluster_codes = pick(attributed.codes["cluster"])
    module_code = (
        attributed.strings["module"].index(module) if module in attributed.strings["module"] else -1
    )
    own = (
        pick(attributed.matched)
        & (cluster_codes != 0)
        & (pick(attributed.codes["module"]) == module_code)
    )
    clusters = attributed.strings["cluster"]
    cluster_ns: dict[str, float] = {}
    cluster_launches: dict[str, tuple[int, int]] = {}
    cluster_step: dict[str, Mapping[int, float]] = {}
    if own.any():
        codes = cluster_codes[own]
        first, inverse = groups_of(codes)
        sums = np.bincount(inverse, weights=t[own])
        for g, rep in enumerate(first):
            cluster_ns[clusters[codes[rep]]] = float(sums[g])
        mine = own & launch
        if mine.any():
            codes = cluster_codes[mine]
            first, inverse = groups_of(codes, pick(w.codes["name"])[mine])
            counts = np.bincount(inverse)
            launches: Counter[str] = Counter()
            names: Counter[str] = Counter()
            for g, rep in enumerate(first):
                launches[clusters[codes[rep]]] += int(counts[g])
                names[clusters[codes[rep]]] += 1
            cluster_launches = {c: (launches[c], names[c]) for c in launches}
        stepped = own & has_step
        if stepped.any():
            codes, numbers = cluster_codes[stepped], step[stepped]
            first, inverse = groups_of(codes, numbers)
            sums = np.bincount(inverse, weights=t[stepped])
            # Groups come in (cluster, step) order: each cluster's steps are one run of them.
            by = codes[first]
            bounds = np.flatnonzero(np.r_[True, by[1:] != by[:-1], True])
            for lo, hi in itertools.pairwise(bounds.tolist()):
                cluster_step[clusters[by[lo]]] = StepSeries(numbers[first[lo:hi]], sums[lo:hi])
    own_step: dict[int, float] = {}
    if has_step.any():
        numbers = step[has_step]
        first, inverse = groups_of(numbers)
        sums = np.bincount(inverse, weights=t[has_step])
        own_step = {int(numbers[rep]): float(sums[g]) for g, rep in enumerate(first)}
    runs = pick(w.ints["run_id"])
    return ModuleFacts(
        cluster_ns=cluster_ns,
        cluster_launches=cluster_launches,
        own_ns=float(t.sum()),
        events=len(rows),
        kernels=int(launch.sum()),
        executions=int(np.unique(runs).size) if len(rows) and (runs != NULL).all() else None,
        kernel_groups=_kernel_groups(attributed, t, rows[launch], launch),
        cluster_step_ns=cluster_step,
        own_step_ns=own_step,
    )


def _kernel_groups(
    attributed: AttributedTable, t: np.ndarray, rows: np.ndarray, launch: np.ndarray
) -> tuple[KernelGroup, ...]:
    w = attributed.table
    if not len(rows):
        return ()
    times = t[launch]
    names, clusters = w.codes["name"][rows], attributed.codes["cluster"][rows]
    first, inverse = groups_of(names, clusters)
    sums = np.bincount(inverse, weights=times)
    out = []
    for g, members in enumerate(members_of(inverse, len(first))):
        at = rows[members]
        out.append(
            KernelGroup(
                w.strings["name"][names[first[g]]],
                attributed.strings["cluster"][clusters[first[g]]] or "",
                len(members),
                float(sums[g]),
                w.strings["grid"][_common_code(w.codes["grid"][at])],
                w.strings["block"][_common_code(w.codes["block"][at])],
                _common_value(w.ints["registers"][at], NULL),
                _common_value(w.floats["occupancy_pct"][at], None),
            )
        )
    # In the order the pairs' builder meets them: by each group's first event.
    order = sorted(range(len(out)), key=lambda g: first[g])
    return tuple(out[g] for g in order)


def _common_code(codes: np.ndarray) -> int:
    """The most common non-null code (0 is null), the first seen among equals."""
    known = codes[codes != 0]
    return _first_of_most(known) if len(known) else 0


def _common_value(values: np.ndarray, null: Any) -> Any:
    known = values[~np.isnan(values)] if null is None else values[values != null]
    if not len(known):
        return None
    found = _first_of_most(known)
    return float(found) if null is None else int(found)


def _first_of_most(values: np.ndarray) -> Any:
    unique, first, counts = np.unique(values, return_index=True, return_counts=True)
    best = max(range(len(unique)), key=lambda i: (counts[i], -first[i]))
    return unique[best]


def steps_from_table(attributed: AttributedTable, self_ns: np.ndarray) -> dict[int, StepTotal]:
    """Each step's totals from the attributed table (rows without a step left out)."""
    w = attributed.table
    step = w.ints["step"]
    rows = np.flatnonzero(step != NULL)
    out: dict[int, StepTotal] = {}
    if not len(rows):
        return out
    numbers = step[rows]
    first, inverse = groups_of(numbers)
    starts, ends = w.floats["start_ns"][rows], w.end_ns[rows]
    t = self_ns[rows]
    matched = attributed.matched[rows]
    for g, members in enumerate(members_of(inverse, len(first))):
        out[int(numbers[first[g]])] = StepTotal(
            union_ns(starts[members], ends[members]) * 1e-9,
            float(t[members].sum()),
            float(t[members][matched[members]].sum()),
        )
    return dict(sorted(out.items()))
