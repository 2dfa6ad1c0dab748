"""Analyze stage: turns each saved variant folder into summary entries.

Reads only files under the run folder, so it runs again on a saved run (`make report` does not
need it, but `python -m harness.analysis RUN` re-derives every analysis file without JAX
compiling anything). For each measured variant it writes:

    fusions.json   clusters and the reverse map (harness.hlo)
    cost.json      our FLOPs/bytes next to XLA's cost_analysis
    passes.json    the pass timeline
    kernels.json   every device event of the steady window, attributed to a cluster
    compile.json   XLA compile time by pipeline and pass, first call and recompile

and adds their headline numbers to the variant's summary entry.
"""

from __future__ import annotations

import functools
import statistics
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import io
from harness.config.schema import Experiment
from harness.hlo import analysis as hlo_analysis
from harness.hlo.clusters import Cluster, find_clusters
from harness.hlo.diverge import first_divergence
from harness.hlo.parser import HloModule, parse_file
from harness.match.match import MatchReport, kernels_document, match_events
from harness.profile.compile import compile_breakdown
from harness.profile.events import (
    find_xplane,
    read_events_and_markers,
)

REQUIRED = (
    "status", "reason", "mode",
    "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
    "first_call_s", "compile_s", "recompile_s",
    "flops_analytic", "flops_xla", "bytes_xla",
    "max_abs_err", "numerics_ok",
)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _parsed(path: Path, mtime_ns: int) -> HloModule:
    del mtime_ns  # part of the cache key: a rewritten file is parsed again
    return parse_file(path)


def parsed(path: Path) -> HloModule:
    """Returns the module in `path`, parsed once however many analyses ask for it."""
    return _parsed(path, path.stat().st_mtime_ns)


def _xla_cost(record: dict[str, Any]) -> dict[str, float] | None:
    pairs = {
        "flops": "flops_xla",
        "bytes accessed": "bytes_xla",
        "transcendentals": "transcendentals_xla",
    }
    cost = {k: record[v] for k, v in pairs.items() if record.get(v) is not None}
    return cost or None


def _module_clusters(ir: Path, eager: bool) -> dict[Any, tuple[Cluster, ...]]:
    """Returns clusters keyed as the matcher expects: module name, or (name, program id) in eager."""
    after = ir / ("40-hlo-after-optimizations" if eager else "40-hlo-after-optimizations.txt")
    if not after.exists():
        return {}
    if not eager:
        module = parsed(after)
        return {module.name: find_clusters(module)}
    out: dict[Any, tuple[Cluster, ...]] = {}
    for path in sorted(after.iterdir()):
        module = parsed(path)
        clusters = find_clusters(module)
        # Eager file names start with XLA's module number, which the profile calls program_id.
        program_id = int(path.name.split("-", 1)[0])
        out[(module.name, program_id)] = clusters
        out.setdefault(module.name, clusters)
    return out


def structure(clusters: tuple[Cluster, ...]) -> Counter[tuple[Any, ...]]:
    """Returns the clusters' shape-free structure, for telling whether two modules fuse alike."""
    return Counter(
        (
            c.kind,
            c.backend_kind,
            c.target,
            c.epilogue,
            tuple(sorted(dict(c.member_opcodes).items())),
        )
        for c in clusters
    )


def recompile_fusion_changed(ir: Path) -> bool | None:
    """Returns whether the new-shape module's fusion structure differs from the first one's."""
    first, again = (
        ir / "40-hlo-after-optimizations.txt",
        ir / "41-hlo-after-optimizations-recompile.txt",
    )
    if not (first.exists() and again.exists()):
        return None
    return structure(find_clusters(parsed(first))) != structure(find_clusters(parsed(again)))


def profile_keys(
    vdir: Path, record: dict[str, Any], eager: bool
) -> tuple[dict[str, Any], list[str]]:
    """Matches the steady profile's device events to clusters; writes kernels.json."""
    steady = vdir / "profile" / "steady"
    if not steady.exists():
        return {}, []
    xplane = find_xplane(steady)
    events, markers = read_events_and_markers(xplane)
    # The host gap compares like with like: each profiled step's wall time (its step marker)
    # against the device time of the same step, since profiling itself slows the host.
    walls = [m.duration_s for m in markers if m.name == "step"]
    clusters = _module_clusters(vdir / "ir", eager)
    report: MatchReport = match_events(events, clusters, mode="eager" if eager else "jit")
    io.write_json(vdir / "kernels.json", kernels_document(report))
    gaps = [w - d for w, d in zip(walls, report.device_time_by_step_s, strict=False)]
    keys = {
        "kernels_per_step": report.kernels_per_step,
        "device_ops_per_step": report.device_ops_per_step,
        "transfers_per_step": [
            {"direction": t.direction, "count": t.count_per_step, "bytes": t.bytes_per_step}
            for t in report.transfers_per_step
        ],
        "device_time_per_step_s": report.device_time_per_step_s,
        "host_gap_per_step_s": statistics.median(gaps) if gaps else None,
        "profiled_step_time_s": statistics.median(walls) if walls else None,
        "matched_fraction": report.matched_fraction,
        "unmatched_events": len(report.unmatched),
        "launches_per_cluster": dict(report.launches_per_cluster),
    }
    first_step = min((e.step for e in events if e.step is not None), default=None)
    kernels = [
        e.name for e in events if e.step == first_step and e.kind in ("kernel", "host_thunk")
    ]
    keys["step_sequence"] = step_sequence(report, first_step)
    # Clusters the profile never saw: an untaken branch, or work the profiler cannot see
    # (kernels inside CUDA-graph conditional nodes are not traced).
    launched = {a.cluster for a in report.attributions if a.matched}
    keys["unlaunched_clusters"] = (
        sorted(c.name for cs in clusters.values() for c in cs if c.name not in launched)
        if report.attributions
        else []
    )
    return keys, kernels


def step_sequence(report: MatchReport, step: int | None) -> list[str]:
    """Returns one step's device events in launch order, each as the cluster it ran for.

    Transfers are written with their direction, so a host callback's split of the program
    shows as e.g. `cublas-lt-matmul.1, input_reduce_fusion, D2H(...), loop_multiply_fusion`.
    """
    out = []
    for a in sorted(report.attributions, key=lambda a: a.event.start_ns):
        if a.event.step != step:
            continue
        what = a.cluster or a.event.name
        if a.event.kind == "memcpy":
            what = f"{a.event.direction or 'memcpy'}({what})"
        elif a.event.kind == "memset":
            what = f"memset({what})"
        out.append(what)
    return out


def compile_keys(vdir: Path, module: str | None) -> dict[str, Any]:
    """Breaks the first call's and the recompile's XLA time down by pass; writes compile.json."""
    out: dict[str, Any] = {}
    for window in ("first_call", "recompile"):
        folder = vdir / "profile" / window
        if folder.exists():
            out[window] = compile_breakdown(find_xplane(folder), module).to_json()
    if not out:
        return {}
    io.write_json(vdir / "compile.json", out)
    first = out.get("first_call", {})
    return {
        "xla_compile_top_passes": first.get("top_passes", [])[:10],
        "compile_by_pipeline": {p["name"]: p["total_s"] for p in first.get("pipelines", [])},
        "autotuning_s": first.get("autotuning_s"),
    }


def peak_keys(workdir: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Returns achieved FLOP/s against the device peak in ceilings.json, with its source.

    The peak was measured for one dtype (bf16 dense on the H200, float32 on a CPU); a variant
    of another dtype is still compared with it, and `peak_dtype` says which peak that was.
    """
    path = workdir / "ceilings.json"
    if not path.exists():
        return {}
    ceilings = io.read_json(path)
    peak = ceilings.get("peak_flops_per_s")
    flops = record.get("flops") or record.get("flops_analytic")
    median = record.get("step_time_median_s")
    achieved = flops / median if flops and median else None
    return {
        "achieved_flops_per_s": achieved,
        "peak_flops_per_s": peak,
        "peak_dtype": ceilings.get("dtype"),
        "peak_source": ceilings.get("source"),
        "fraction_of_peak": achieved / peak if achieved and peak else None,
    }


def _guarded(errors: list[str], what: str, fn: Callable[[], Any], default: Any) -> Any:
    """Runs one analysis; a failure is recorded in the variant's entry, never raised."""
    try:
        return fn()
    except Exception as e:
        errors.append(f"{what}: {type(e).__name__}: {e}".splitlines()[0][:300])
        errors.append(traceback.format_exc(limit=3).splitlines()[-1])
        return default


def analyze_variant(
    workdir: Path, name: str, record: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Returns the analysis keys of one variant and its first-step kernel names."""
    vdir = workdir / "variants" / name
    ir = vdir / "ir"
    if record.get("status") != "ok" or not (ir / "index.json").exists():
        return {}, []
    eager = record.get("mode") == "eager"
    errors: list[str] = []
    keys: dict[str, Any] = {}
    hlo = _guarded(errors, "hlo", lambda: hlo_analysis.analyze_ir(ir, vdir, _xla_cost(record)), {})
    keys.update(hlo)
    passes = io.read_json(vdir / "passes.json")["passes"] if (vdir / "passes.json").exists() else []
    keys["fusion_changing_passes"] = [
        {
            "index": p["index"],
            "pipeline": p["pipeline"],
            "pass": p["pass"],
            "sentence": p["explanation"],
        }
        for p in passes
        if p.get("changed_fusions")
    ]
    keys["recompile_fusion_changed"] = _guarded(
        errors, "recompile", lambda: recompile_fusion_changed(ir), None
    )
    matched, kernels = _guarded(
        errors, "profile", lambda: profile_keys(vdir, record, eager), ({}, [])
    )
    keys.update(matched)
    keys.update(_guarded(errors, "compile", lambda: compile_keys(vdir, record.get("module")), {}))
    keys.update(peak_keys(workdir, {**record, **keys}))
    keys["analysis_errors"] = errors
    return keys, kernels


def analyze_run(
    workdir: Path, exp: Experiment, records: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Returns the summary entry of every variant, in config order, with every required key."""
    out: dict[str, dict[str, Any]] = {}
    kernels: dict[str, list[str]] = {}
    for v in exp.selected_variants:
        if v.name not in records:
            continue
        entry = {key: None for key in REQUIRED}
        entry.update(records[v.name])
        keys, kernels[v.name] = analyze_variant(workdir, v.name, entry)
        entry.update(keys)
        out[v.name] = entry
    base_ir = workdir / "variants" / exp.baseline / "ir"
    for name, entry in out.items():
        ir = workdir / "variants" / name / "ir"
        if (
            name == exp.baseline
            or not (ir / "index.json").exists()
            or not (base_ir / "index.json").exists()
        ):
            entry["first_divergence"] = None
            continue
        errors: list[str] = entry.setdefault("analysis_errors", [])
        found = _guarded(
            errors,
            "divergence",
            lambda ir=ir, name=name: first_divergence(
                base_ir, ir, kernels.get(exp.baseline), kernels.get(name)
            ),
            None,
        )
        entry["first_divergence"] = (
            {"stage": found.stage, "detail": found.detail} if found else None
        )
    return out


def reanalyze(workdir: Path) -> dict[str, Any]:
    """Re-derives every analysis file and summary.json of a saved run from its captured files."""
    from harness.config.schema import build_experiment
    from harness.run import finalize

    manifest = io.read_json(workdir / "manifest.json")
    exp = build_experiment(manifest["config"], str(workdir / "manifest.json"))
    records = {}
    for v in exp.selected_variants:
        saved = workdir / "variants" / v.name / "result.json"
        if saved.exists():
            records[v.name] = io.read_json(saved)
        elif v.name in (old := io.read_json(workdir / "summary.json")["variants"]):
            records[v.name] = {
                k: old[v.name].get(k) for k in ("status", "reason", "mode", "description")
            }
    return finalize(workdir, exp, records)
