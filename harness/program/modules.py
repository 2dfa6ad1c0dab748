"""HLO modules into the analysis files: fusions.json, cost.json and passes.json.

Shared by the analysis of a run's variants and by `python -m harness.analyze` on any dump.
Modules are parsed once per process (`parsed`), however many analyses ask for them.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.hlo.clusters import Cluster, find_clusters
from harness.hlo.control_flow import (
    by_body,
    loop_iterations,
    measured_trips,
    taken_branches,
    unclone,
)
from harness.hlo.cost import ModuleCost, module_cost
from harness.hlo.files import parse_cached
from harness.hlo.parser import HloModule
from harness.hlo.passes import pass_timeline
from harness.hlo.reverse_map import reverse_map
from harness.hlo.xla_compare import compare_with_xla


def parsed(path: Path) -> HloModule:
    """Returns the module in `path`, parsed once however many analyses ask for it."""
    return parse_cached(path)


@functools.lru_cache(maxsize=64)
def _clusters(module: HloModule) -> tuple[Cluster, ...]:
    return find_clusters(module)


def clusters_of(module: HloModule) -> tuple[Cluster, ...]:
    """Returns find_clusters(module), computed once per parsed module."""
    return _clusters(module)


def fusions_document(after: Sequence[HloModule], before: Sequence[HloModule]) -> dict[str, Any]:
    """Returns fusions.json: clusters per module and, where the module before optimization
    is known (paired by name), the reverse map from each of its ops to the clusters."""
    by_name = {m.name: m for m in before}
    modules: list[dict[str, Any]] = []
    for module in after:
        clusters = clusters_of(module)
        entry: dict[str, Any] = {
            "module": module.name,
            "path": module.path,
            "clusters": [c.to_json() for c in clusters],
        }
        pre = by_name.get(module.name)
        if pre is not None:
            entry.update(reverse_map(pre, module, clusters).to_json())
        modules.append(entry)
    return {"modules": modules}


def costs_of(
    after: Sequence[HloModule], launches: Mapping[str, float] | None = None
) -> list[ModuleCost]:
    """Returns our cost model of each module; a loop whose trip count the HLO does not hold
    counts the iterations a step its body's clusters launched (`launches`: cluster -> launches
    a step, kernels.json's `launches_per_cluster`), else is marked unknown; a conditional
    counts the branch whose clusters launched, else its dearest branch, marked."""
    if not launches:
        return [module_cost(m, clusters_of(m)) for m in after]
    out = []
    for m in after:
        mine = launches_of(m, launches)
        taken, measured = taken_branches(m, mine), measured_trips(m, mine)
        out.append(module_cost(m, clusters_of(m), taken=taken, measured=measured))
    return out


@dataclass(frozen=True)
class LoopWords:
    """How a page names what rests on loop counts: a study's summary keys, or the standalone
    analysis's figures. `per` is the measured iterations' unit (`a step`, `a call`)."""

    per: str
    rest: str  # what rests on measured counts
    withheld: str  # what an unknown count does to them
    analytic: str = ""  # said when only the HLO before optimization has an unknown loop


STUDY_WORDS = LoopWords(
    "a step",
    "`flops`, `bytes` and `flops_analytic` rest on them",
    "`flops` and `bytes` are not given",
    "a loop before optimization has no count: `flops_analytic` is not given",
)


def loop_counts_said(
    costs: Sequence[ModuleCost], words: LoopWords, analytic_unknown: bool = False
) -> str | None:
    """The one sentence saying which figures of `costs` rest on counts the HLO does not hold:
    loops counted by the iterations the profile measured (each with its count), branches by
    the executions seen to take them, loops with no count at all; None when none does. Both
    a study (harness.analyze.sections) and `python -m harness.analyze` say it with it."""
    said = []
    measured = {n for c in costs for n in c.loops_counted("measured")}
    unknown = sorted({n for c in costs for n in c.loops_counted("unknown")})
    if measured:
        # The loops measured themselves (no trip count of their own), by their body's runs
        # (the median cluster's: its condition runs once more an entry).
        runs: dict[str, list[float]] = {}
        for m in costs:
            for c in m.clusters:
                if c.count_source == "measured" and c.trip_count is None and c.executions:
                    runs.setdefault(c.loop, []).append(c.executions)
        each = ", ".join(
            f"{n} {statistics.median_low(sorted(r)):g}" for n, r in sorted(runs.items())
        )
        branches = any(
            ": its branches ran " in n for m in costs for c in m.clusters for n in c.notes
        )
        what = [
            f"loops counted by the iterations the profile measured {words.per} ({each})"
        ] * bool(runs) + ["conditionals' branches by the executions the profile saw take each"] * (
            branches
        )
        said.append(f"{' and '.join(what)}: {words.rest}")
    if unknown:
        said.append(
            f"no trip count for {', '.join(unknown)} (not in the HLO, not measured): "
            f"{words.withheld}"
        )
    if analytic_unknown and not unknown and words.analytic:
        said.append(words.analytic)
    return "; ".join(said) or None


def launches_of(module: HloModule, launches: Mapping[str, float]) -> dict[str, float]:
    """The launches a step of `module`'s clusters: kernels.json keys them `<module>:<cluster>`
    (a bare cluster name is taken as this module's)."""
    prefix = f"{module.name}:"
    return {
        (k[len(prefix) :] if k.startswith(prefix) else k): n
        for k, n in launches.items()
        if k.startswith(prefix) or ":" not in k
    }


def costs_before(
    before: Sequence[HloModule], after: Sequence[HloModule], launches: Mapping[str, float] | None
) -> list[ModuleCost]:
    """Returns our cost model of each module before optimization, its loops counted as their
    namesakes after optimization ran (XLA's trip count, else the profile's measure; a loop by
    its body computation, whose name XLA keeps but for `.clone` suffixes, its copies' runs
    summed), and its conditionals by the branch their namesakes ran."""
    counted: dict[str, float] = {}
    taken: dict[str, int] = {}
    for m in after:
        mine = launches_of(m, launches or {})
        counted.update(loop_iterations(m, measured_trips(m, mine)))
        taken.update({unclone(k): i for k, i in taken_branches(m, mine).items()})
    return [
        module_cost(m, clusters_of(m), taken=taken, measured=by_body(m, counted)) for m in before
    ]


def gemm_flops(module: HloModule, cost: ModuleCost) -> float:
    """The FLOPs a call of `module`'s dots and convolutions (what a GEMM ceiling bounds), by
    `cost` (its cost model, loops counted as it counted them)."""
    gemm = {c.name for c in clusters_of(module) if c.gemm is not None or c.kind == "convolution"}
    return sum(c.flops * c.executions for c in cost.clusters if c.name in gemm)


def cost_document(costs: Sequence[ModuleCost], xla: dict[str, float] | None) -> dict[str, Any]:
    """Returns cost.json: per module and cluster, and XLA's figures with the disagreements."""
    doc: dict[str, Any] = {"modules": [c.to_json() for c in costs]}
    if xla is not None:
        total = ModuleCost("all", tuple(cc for c in costs for cc in c.clusters))
        doc["xla"] = xla
        doc["xla_disagreements"] = compare_with_xla(total, xla)
    return doc


def passes_document(pass_files: Sequence[Path]) -> dict[str, Any]:
    """Returns passes.json: the module after each pass that changed it."""
    return {"passes": [e.to_json() for e in pass_timeline(sorted(pass_files))]}


def library_calls(clusters: Sequence[Cluster]) -> list[Cluster]:
    return [c for c in clusters if c.is_library]


def fusion_count(clusters: Sequence[Cluster]) -> int:
    """Fusions XLA generated code for (library fusions such as YNNPACK GEMMs are not)."""
    return sum(1 for c in clusters if c.is_fusion)
