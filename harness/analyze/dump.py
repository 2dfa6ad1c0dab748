"""Any program's XLA dump, analyzed: modules found, clusters, costs, and its profile attributed.

Used by `python -m harness.analyze`. Works on an XLA dump folder (`--xla_dump_to=DIR
--xla_dump_hlo_as_text`) or on a single HLO text file from any program. For each module it
writes `<out>/<module>/fusions.json` (the clusters, with their source ops and file:line, and a
map from each pre-optimization op to the cluster that now holds it) and `cost.json`; with a
profile, every device event is attributed to a cluster in `<out>/kernels.json`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import io
from harness.analyze import modules as hlo_files
from harness.hlo.parser import HloModule
from harness.match.match import MatchReport, kernels_document, match_events
from harness.profile.events import find_xplane, read_device_events

_DUMP_NAME = re.compile(r"^(module_\d{1,9}\.[^.]{1,512}(?:\.[^.]{1,512}){0,8}?)\.([^/]{1,1024})$")
_PASS_FILE = re.compile(r"\.\d{4}\.[^.]{1,256}\.after_")


@dataclass(frozen=True)
class ModuleFiles:
    """The files that describe one module: its optimized HLO and, if dumped, the input HLO."""

    key: str
    after: Path
    before: Path | None


@dataclass(frozen=True)
class ModuleResult:
    """What the analysis learned about one module."""

    key: str
    out_dir: Path
    summary: dict[str, Any]
    module: str = ""


def _is_hlo(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(9) == b"HloModule"
    except OSError:
        return False


def find_modules(dump: Path) -> list[ModuleFiles]:
    """The modules under `dump`: per XLA module the after-optimizations file (falling back to
    before_optimizations), plus any other `HloModule` text file as its own module.

    Raises ValueError naming the path when it does not exist or holds no HLO module.
    """
    if not dump.exists():
        raise ValueError(f"{dump}: no such file or directory")
    if dump.is_file():
        if not _is_hlo(dump):
            raise ValueError(f"{dump}: not an HLO text module (no `HloModule` header)")
        return [ModuleFiles(dump.stem, dump, None)]
    groups: dict[str, dict[str, Path]] = {}
    loose: list[ModuleFiles] = []
    for path in sorted(p for p in dump.iterdir() if p.is_file() and not p.is_symlink()):
        if _PASS_FILE.search(path.name) or not _is_hlo(path):
            continue
        m = _DUMP_NAME.match(path.name)
        rest = m.group(2) if m else ""
        if m and rest.endswith("after_optimizations.txt"):
            groups.setdefault(m.group(1), {})["after"] = path
        elif m and rest == "before_optimizations.txt":
            groups.setdefault(m.group(1), {})["before"] = path
        elif not m:
            loose.append(ModuleFiles(path.stem, path, None))
    found = [
        ModuleFiles(key, files.get("after", files.get("before")), files.get("before"))
        for key, files in sorted(groups.items())
    ]
    found.extend(loose)
    if not found:
        raise ValueError(f"{dump}: no HLO modules found")
    return found


def summarize(after: HloModule, costs: list[Any]) -> dict[str, Any]:
    """The headline of one module: clusters, fusions, library calls, FLOPs and bytes."""
    clusters = hlo_files.clusters_of(after)
    flops = sum(c.flops for c in costs)
    moved = sum(c.bytes for c in costs)
    return {
        "fusion_count": hlo_files.fusion_count(clusters),
        "cluster_count": len(clusters),
        "library_calls": [
            {"target": c.target, "epilogue": c.epilogue} for c in hlo_files.library_calls(clusters)
        ],
        "flops": flops,
        "bytes": moved,
        "arithmetic_intensity": flops / moved if moved else 0.0,
        "transcendentals": sum(c.transcendentals for c in costs),
    }


def analyze_dump(
    dump: Path, out: Path, pattern: re.Pattern[str] | None = None
) -> list[ModuleResult]:
    """Analyses every (matching) module under `dump`, writing one folder per module in `out`."""
    results: list[ModuleResult] = []
    for files in find_modules(dump):
        if pattern is not None and not pattern.search(files.key):
            continue
        after = hlo_files.parsed(files.after)
        before = (
            [hlo_files.parsed(files.before)] if files.before and files.before != files.after else []
        )
        out_dir = out / files.key
        costs = hlo_files.costs_of([after])
        io.write_json(out_dir / "fusions.json", hlo_files.fusions_document([after], before))
        io.write_json(out_dir / "cost.json", hlo_files.cost_document(costs, None))
        io.copy_file(files.after, out_dir / "hlo.txt")
        results.append(ModuleResult(files.key, out_dir, summarize(after, costs), after.name))
    if not results:
        raise ValueError(
            f"{dump}: no module matches --module={pattern.pattern if pattern else ''!r}"
        )
    return results


def attach_profile(
    results: list[ModuleResult], xplane: Path, out: Path, steps: int | None, mode: str
) -> MatchReport:
    """Attributes the profile's device events to the clusters of the analysed modules.

    Clusters are keyed by module name and by (name, XLA module number), which the profile
    calls program_id, so a recompiled module with the same name is told apart.
    """
    clusters: dict[Any, tuple[Any, ...]] = {}
    for r in results:
        found = hlo_files.clusters_of(hlo_files.parsed(r.out_dir / "hlo.txt"))
        clusters.setdefault(r.module, found)
        number = re.match(r"^module_(\d+)\.", r.key)
        if number:
            clusters[(r.module, int(number.group(1)))] = found
    path = find_xplane(xplane) if xplane.is_dir() else xplane
    events = read_device_events(path)
    marked = any(e.step is not None for e in events)
    report = match_events(events, clusters, steps=None if marked else (steps or 1), mode=mode)
    io.write_json(out / "kernels.json", kernels_document(report, profile=str(path)))
    return report


def format_table(results: list[ModuleResult]) -> str:
    """A short text table: module, cluster count, fusions, library calls with epilogues."""
    rows = [f"{'module':48} {'clusters':>8} {'fusions':>7}  library calls"]
    for r in results:
        calls = ", ".join(
            c["target"] + (f" ({c['epilogue']})" if c["epilogue"] else "")
            for c in r.summary["library_calls"]
        )
        rows.append(
            f"{r.key[:48]:48} {r.summary['cluster_count']:>8} {r.summary['fusion_count']:>7}  {calls or '-'}"
        )
    return "\n".join(rows)
