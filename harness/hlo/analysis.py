"""Write fusions.json / passes.json / cost.json for one IR ladder or one module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import io
from harness.hlo.clusters import Cluster, find_clusters, reverse_map
from harness.hlo.cost import ModuleCost, compare_with_xla, module_cost
from harness.hlo.diverge import read_index
from harness.hlo.parser import HloModule, parse_file
from harness.hlo.passes import pass_timeline


def hlo_files(path: Path) -> list[Path]:
    """The HLO module files at `path`: the file itself, or a directory's `HloModule` files."""
    if path.is_dir():
        return sorted(
            p for p in path.iterdir() if p.is_file() and p.read_bytes()[:9] == b"HloModule"
        )
    return [path]


def fusions_report(
    after: list[HloModule], before: list[HloModule]
) -> tuple[dict[str, Any], list[Cluster]]:
    """The fusions.json payload (clusters per module, reverse map, folded ops) and all clusters.

    Before/after modules are paired by module name; unpaired ones get no reverse map.
    """
    by_name = {m.name: m for m in before}
    modules: list[dict[str, Any]] = []
    every: list[Cluster] = []
    for module in after:
        clusters = find_clusters(module)
        every.extend(clusters)
        entry: dict[str, Any] = {
            "module": module.name,
            "path": module.path,
            "clusters": [c.to_json() for c in clusters],
        }
        pre = by_name.get(module.name)
        if pre is not None:
            rmap = reverse_map(pre, module, clusters)
            entry["reverse_map"] = rmap
            entry["folded_away"] = sorted(k for k, v in rmap.items() if not v)
        modules.append(entry)
    return {"modules": modules}, every


def summary(clusters: list[Cluster], costs: list[ModuleCost]) -> dict[str, Any]:
    """The summary keys every analysis returns (fusion count, library calls, totals)."""
    flops = sum(c.flops for c in costs)
    moved = sum(c.bytes for c in costs)
    return {
        "fusion_count": sum(1 for c in clusters if c.kind.startswith("k")),
        "cluster_count": len(clusters),
        "library_calls": [
            {"target": c.target, "epilogue": c.epilogue} for c in clusters if c.is_library
        ],
        "flops": flops,
        "bytes": moved,
        "arithmetic_intensity": flops / moved if moved else 0.0,
        "transcendentals": sum(c.transcendentals for c in costs),
    }


def analyze_modules(
    after: list[HloModule],
    before: list[HloModule],
    out_dir: Path,
    xla_cost: dict | None = None,
) -> dict[str, Any]:
    """Write fusions.json and cost.json for already-parsed modules; returns the summary."""
    fusions, clusters = fusions_report(after, before)
    costs = [module_cost(m) for m in after]
    cost_doc: dict[str, Any] = {"modules": [c.to_json() for c in costs]}
    if xla_cost is not None:
        total = ModuleCost("all", tuple(cc for c in costs for cc in c.clusters))
        cost_doc["xla"] = xla_cost
        cost_doc["xla_disagreements"] = compare_with_xla(total, xla_cost)
    io.write_json(out_dir / "fusions.json", fusions)
    io.write_json(out_dir / "cost.json", cost_doc)
    return summary(clusters, costs)


def analyze_ir(ir_dir: Path, out_dir: Path, xla_cost: dict | None = None) -> dict[str, Any]:
    """Analyse a harness IR ladder: writes fusions.json, passes.json and cost.json.

    hlo_after (and hlo_before) may be single files or, for eager mode, directories with one
    module per primitive; results are aggregated across modules. Returns the summary dict
    (fusion_count, library_calls, flops, bytes, arithmetic_intensity, transcendentals).
    """
    stages = read_index(Path(ir_dir))
    if "hlo_after" not in stages:
        raise ValueError(f"{ir_dir}: index.json has no existing hlo_after stage")
    after = [parse_file(p) for p in hlo_files(stages["hlo_after"])]
    before = (
        [parse_file(p) for p in hlo_files(stages["hlo_before"])] if "hlo_before" in stages else []
    )
    result = analyze_modules(after, before, Path(out_dir), xla_cost)
    passes = stages.get("passes")
    timeline = pass_timeline(sorted(passes.iterdir())) if passes and passes.is_dir() else ()
    io.write_json(Path(out_dir) / "passes.json", {"passes": [e.to_json() for e in timeline]})
    return result
