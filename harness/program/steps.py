"""Per-step figures of a marked profile for the analyze report: each step's wall time beside
its device time, and each cluster's median time over the steps.

A mean over steps lets one stalled event (a step that waited on the host, a clock that dropped)
top a ranking; the median step does not. So, when every event of the window carries its step
(StepTraceAnnotation markers):
- a cluster's time is the median over the steps of its summed self time in each step (a step in
  which it did not run counts 0);
- an Outlier is noted where one step's time of a cluster is over OUTLIER_FACTOR x that median;
- shares are of the median step's summed event time;
- each step's coverage is its attributed events' summed self time over all its events'.

Pure functions over (Attribution, self time ns) pairs and the host's step markers.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.match.match import Attribution
from harness.profile.events import StepMarker
from harness.program.event_facts import ModuleFacts, StepSeries, StepTotal, steps_from_pairs
from harness.records.program import Outlier, StepRow

OUTLIER_FACTOR = 3.0
TOP_OUTLIERS = 10

Pairs = Sequence[tuple[Attribution, float]]


def per_step(pairs: Pairs) -> bool:
    """True when every event carries a step: the per-step figures apply."""
    return bool(pairs) and all(a.event.step is not None for a, _ in pairs)


def step_rows(pairs: Pairs, markers: Sequence[StepMarker]) -> tuple[StepRow, ...]:
    """Each step of the window, in step order."""
    return rows_of(steps_from_pairs(pairs), markers)


def rows_of(totals: Mapping[int, StepTotal], markers: Sequence[StepMarker]) -> tuple[StepRow, ...]:
    """Each step's row from its totals (harness.program.event_facts) and the host's markers."""
    spans: dict[int, tuple[float, float]] = {}
    for m in markers:
        lo, hi = spans.get(m.step, (m.start_ns, m.end_ns))
        spans[m.step] = (min(lo, m.start_ns), max(hi, m.end_ns))
    rows = []
    for step in sorted(totals):
        total = totals[step]
        device = total.device_s
        span = spans.get(step)
        wall = (span[1] - span[0]) * 1e-9 if span else None
        rows.append(
            StepRow(
                step=step,
                wall_s=wall,
                device_s=device,
                event_s=total.event_ns * 1e-9,
                attributed_s=total.attributed_ns * 1e-9,
                idle_fraction=max(0.0, 1.0 - device / wall) if wall else None,
                coverage=total.attributed_ns / total.event_ns if total.event_ns else 0.0,
            )
        )
    return tuple(rows)


def median_event_s(rows: Sequence[StepRow]) -> float:
    """The median step's summed event time (s): the shares' denominator."""
    return statistics.median(r.event_s for r in rows) if rows else 0.0


def median_ns(by_step: Mapping[int, float], steps: Sequence[int]) -> float:
    """The median over `steps` of one cluster's time, 0 for a step it did not run in."""
    if not steps:
        return 0.0
    if isinstance(by_step, StepSeries):
        return float(np.median(by_step.over(steps)))
    return statistics.median(by_step.get(s, 0.0) for s in steps)


def outliers(
    by_cluster: Mapping[str, Mapping[int, float]], steps: Sequence[int]
) -> tuple[Outlier, ...]:
    """Steps in which a cluster took over OUTLIER_FACTOR x its median, largest first."""
    found = []
    for cluster, by_step in by_cluster.items():
        median = median_ns(by_step, steps)
        if isinstance(by_step, StepSeries):  # only the outliers become objects
            over = np.flatnonzero(by_step.ns > OUTLIER_FACTOR * median)
            items = zip(by_step.steps[over].tolist(), by_step.ns[over].tolist(), strict=True)
        else:
            items = iter(by_step.items())
        for step, ns in items:
            if ns > OUTLIER_FACTOR * median:
                found.append(Outlier(cluster, step, ns * 1e-9, median * 1e-9))
    found.sort(key=lambda o: (-o.time_s, o.cluster, o.step))
    return tuple(found[:TOP_OUTLIERS])


@dataclass(frozen=True)
class StepMedians:
    """One module's median step: each cluster's median time (ns), the module's own median
    step time (ns), and the steps over which a cluster took over 3x its median."""

    clusters: Mapping[str, float]
    module_ns: float
    outliers: tuple[Outlier, ...]


def medians_of(facts: ModuleFacts, steps: Sequence[int]) -> StepMedians:
    """The median step of one module from its facts (harness.program.event_facts)."""
    by_cluster = facts.cluster_step_ns
    return StepMedians(
        clusters={c: median_ns(by, steps) for c, by in by_cluster.items()},
        module_ns=median_ns(facts.own_step_ns, steps),
        outliers=outliers(by_cluster, steps),
    )
