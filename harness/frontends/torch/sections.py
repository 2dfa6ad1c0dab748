"""The summary sections of a PyTorch variant, from what its capture wrote.

Reads the variant folder (harness.frontends.torch.capture's layout): torch.json
(harness.records.torch_facts.TorchFacts: explain(), the compilation metrics, the compile ids
of the first and the new-shape calls), the TORCH_TRACE
log and Inductor's debug folder (harness.frontends.torch.inductor), and torch.profiler's Chrome trace
(harness.frontends.torch.trace), attributed with harness.frontends.torch.match. Returns the records
of fusions.json, kernels.json and events.parquet in the shapes the JAX variants' have, so the
report's cluster tables, timeline and fusion map read them unchanged, and of compile.json in its own
(harness.records.run_files.TorchCompileFile); the stage's writer writes them (harness.analyze.files).
The timing, cost and identity sections are the JAX producers' (harness.analyze.sections).
Never imports torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analyze import files, guarded, sections
from harness.analyze import memory as memory_analysis
from harness.analyze.files import NONE, VariantFiles
from harness.config.experiment import Experiment, Variant
from harness.frontends.torch.env import capture_dirs
from harness.frontends.torch.inductor.captured import (
    InductorArtifacts,
    fingerprint,
    read_captured,
    structure,
    symbolic,
)
from harness.frontends.torch.inductor.clusters import (
    clusters_by_graph,
    fusions_document,
    graph_clusters,
)
from harness.frontends.torch.inductor.trace_log import CompileTimes, compile_times
from harness.frontends.torch.match import eager_clusters, match_torch_events
from harness.frontends.torch.trace import read_torch_trace
from harness.match.match import kernels_document
from harness.records import events_file, ladder, run_files
from harness.records.run_files import Ceilings
from harness.records.summary import (
    CaptureRecord,
    Compile,
    Dynamo,
    Fingerprint,
    Hlo,
    LibraryCall,
    Numerics,
    Profile,
    VariantSummary,
)
from harness.records.torch_facts import Explain, TorchFacts
from harness.store.runfolder import IR_DIR, TORCH_TRACE_FILE, VariantFolder

PROFILE_FILE = TORCH_TRACE_FILE
# compile_times' fields -> the compile section's by_pipeline keys, in pipeline order.
PHASES = (
    ("dynamo_tracing_s", "dynamo_tracing"),
    ("guards_s", "guards"),
    ("aot_s", "aot_autograd"),
    ("inductor_s", "inductor"),
    ("kernel_compile_s", "kernel_compile"),
)


def read_torch_facts(vdir: Path) -> TorchFacts:
    """Returns the variant's torch.json, validated (an empty record when the capture wrote
    none); raises SchemaError naming the file and key of a damaged one."""
    found = run_files.load_if_present(run_files.TORCH_FACTS, VariantFolder(vdir).torch, vdir)
    return found if found is not None else TorchFacts()


def captured(vdir: Path) -> InductorArtifacts:
    dirs = capture_dirs(vdir)
    return read_captured(dirs.debug, dirs.trace)


# --- hlo (what Inductor made of it) -----------------------------------------------------------


# torch.compile modes whose wrapper runs as a CUDA graph (cudagraph trees).
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def hlo(
    vdir: Path, cap: InductorArtifacts, first: Sequence[str], runtime: Sequence[str] = ()
) -> tuple[Hlo, VariantFiles]:
    """Returns what Inductor generated for the first call, with fusions.json's record (one
    module per graph, XLA's shape: clusters, reverse map, folded-away nodes)."""
    graphs = cap.graphs_of(first)
    if not graphs:
        return Hlo(), NONE
    source = str(VariantFolder(vdir).fusions)
    files = VariantFiles(
        fusions=run_files.from_document(run_files.FUSIONS, fusions_document(graphs), source)
    )
    clusters = [c for g in graphs for c in graph_clusters(g)]
    found = fingerprint(graphs, runtime)
    section = Hlo(
        fusion_count=sum(c.kind in ("triton", "cpp") for c in clusters),
        cluster_count=len(clusters),
        library_calls=tuple(
            LibraryCall(c.target or c.name, c.epilogue or None, c.name)
            for c in clusters
            if c.kind == "library"
        ),
        fingerprint=Fingerprint(found.digest, found.graph, found.launches, found.code)
        if found
        else None,
    )
    return section, files


def eager_fusions(vdir: Path, trace_clusters: Sequence[Any]) -> VariantFiles:
    """Returns fusions.json's record for eager: one `eager` module whose clusters are the ATen
    ops that ran (nothing was compiled, so nothing was folded)."""
    document = {
        "modules": [
            {
                "module": "eager",
                "path": None,
                "clusters": [c.to_json() for c in trace_clusters],
                "reverse_map": {c.name: [c.name] for c in trace_clusters},
                "folded_away": [],
                "notes": ["torch eager: one cluster per ATen op the profile saw"],
            }
        ]
    }
    source = str(VariantFolder(vdir).fusions)
    return VariantFiles(fusions=run_files.from_document(run_files.FUSIONS, document, source))


# --- compile ----------------------------------------------------------------------------------


def _times(cap: InductorArtifacts, ids: Sequence[str]) -> CompileTimes | None:
    frames = cap.frames(ids)
    return compile_times(frames) if frames else None


def compile_(
    vdir: Path,
    record: CaptureRecord,
    cap: InductorArtifacts,
    first: Sequence[str],
    again: Sequence[str],
) -> tuple[Compile, VariantFiles]:
    """Returns the compile pauses, the first compile split into torch.compile's phases, and
    the new-shape call, with compile.json's record (both calls' phases, per compile id)."""
    p = record.pauses
    first_times, again_times = _times(cap, first), _times(cap, again)
    frames = {f.compile_id: f.to_json() for f in cap.frames([*first, *again])}
    written = run_files.from_document(
        run_files.TORCH_COMPILE,
        {
            "first_call": first_times.to_json() if first_times else None,
            "recompile": again_times.to_json() if again_times else None,
            "frames": frames,
            "guards": _guards(cap, first),
        },
        str(VariantFolder(vdir).compiles),
    )
    compile_s = p.compile_s if p else None
    if compile_s is None and first_times is not None:
        compile_s = first_times.total_s
    # Torch's record leaves JAX's own pauses (tracing, lowering, XLA) null.
    section = dataclasses.replace(
        sections.paused(record),
        compile_s=compile_s,
        recompile_fusion_changed=_fusion_changed(cap, first, again),
        by_pipeline=_phase_seconds(first_times),
        autotuning_s=first_times.autotune_s if first_times else None,
        notes=(*cap.notes, *_phase_notes(first_times, record)),
    )
    return section, VariantFiles(compile=written)


def _phase_seconds(times: CompileTimes | None) -> dict[str, float]:
    """The first compile's seconds by phase (the compile section's by_pipeline), those known."""
    if times is None:
        return {}
    return {
        key: float(getattr(times, attr)) for attr, key in PHASES if getattr(times, attr) is not None
    }


def _phase_notes(times: CompileTimes | None, record: CaptureRecord) -> tuple[str, ...]:
    """Where the phases came from, or that the first call compiled without any logged."""
    if times is not None:
        where = "chromium events" if times.source == "chromium_events" else "compilation metrics"
        return (
            f"phases from the TORCH_TRACE log's {where}; `aot_autograd` and `inductor` exclude "
            "the phases nested in them",
        )
    if record.pauses is not None and record.pauses.backend_compiles:
        return ("no TORCH_TRACE phases for the first call's compiles",)
    return ()


def _fusion_changed(
    cap: InductorArtifacts, first: Sequence[str], again: Sequence[str]
) -> bool | None:
    """Whether the new-shape call's graphs differ in structure from the first call's (None
    without a new-shape call, or without either's graphs)."""
    if not again:
        return None
    a, b = structure(cap.graphs_of(first)), structure(cap.graphs_of(again))
    return a != b if a and b else None


def _guards(cap: InductorArtifacts, ids: Sequence[str]) -> list[str]:
    """Returns the guard lines Dynamo logged for the compiles `ids` (`TENSOR_MATCH: ...`)."""
    out: list[str] = []
    for f in cap.frames(ids):
        text = f.artifacts.get("dynamo_cpp_guards_str") or ""
        out += [line.rstrip() for line in text.splitlines() if line.strip()]
    return out


# --- dynamo -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Breaks:
    """The first call's graphs and graph breaks, as one source recorded them."""

    source: str | None  # `explain()`, `TORCH_TRACE`, or None: neither recorded them
    graphs: Any  # explain()'s count is whatever the capture saved: checked by the caller
    count: Any
    reasons: tuple[str, ...] = ()
    locations: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _first_breaks(facts: TorchFacts, cap: InductorArtifacts, frames: Sequence[Any]) -> _Breaks:
    """explain()'s graphs and breaks when the capture recorded them, else the TORCH_TRACE
    log's (the frames of the first call's compiles)."""
    explained = facts.explain
    if isinstance(explained, Explain):
        return _Breaks(
            "explain()",
            explained.graph_count,
            explained.graph_break_count,
            explained.break_reasons,
            tuple(x for x in explained.break_locations if x),
        )
    if cap.facts is None:
        return _Breaks(
            None, None, None, notes=("neither explain() nor a TORCH_TRACE log recorded the graphs",)
        )
    emitted = [f for f in frames if f.graph_emitted]
    breaks = [b for f in frames for b in f.graph_breaks if b.graph_emitted]
    return _Breaks(
        "TORCH_TRACE",
        len(emitted),
        len(breaks),
        tuple(b.reason for b in breaks),
        tuple(b.location for b in breaks if b.location),
        (f"explain(): {explained}",) if explained else (),
    )


def _recompile_reasons(
    facts: TorchFacts, again_frames: Sequence[Any], again: Sequence[str]
) -> tuple[str, ...]:
    """Why the new-shape call recompiled: the TORCH_TRACE frames' reasons, else the metrics'."""
    reasons = tuple(dict.fromkeys(f.recompile_reason for f in again_frames if f.recompile_reason))
    return reasons or _metric_reasons(facts, again)


def _guards_of(facts: TorchFacts, frames: Sequence[Any], ids: Sequence[str]) -> int | None:
    """The guards of the compiles `ids`: their frames' count, else the metrics'."""
    return _guard_total(frames) if frames else _metric_guards(facts, ids)


def dynamo(
    facts: TorchFacts, cap: InductorArtifacts, first: Sequence[str], again: Sequence[str]
) -> Dynamo:
    """Returns graphs, breaks, guards and recompiles: explain()'s counts when the capture
    recorded them, else the TORCH_TRACE log's for the first call."""
    frames = cap.frames(first)
    found = _first_breaks(facts, cap, frames)
    again_frames = cap.frames(again)
    timed_again = facts.compile_ids is not None and facts.recompile_s is not None
    return Dynamo(
        options=dict(facts.compile_kwargs or {}),
        explain_source=found.source,
        graph_count=found.graphs if isinstance(found.graphs, int) else None,
        graph_break_count=found.count if isinstance(found.count, int) else None,
        break_reasons=found.reasons,
        break_locations=found.locations,
        compiled_graphs=len(cap.graphs_of(first)) if cap.graphs else None,
        guard_count=_guards_of(facts, frames, first),
        dynamic_shapes=symbolic(cap.graphs_of(first)) if cap.graphs else None,
        recompiles=len(again) if timed_again else None,
        recompile_reasons=_recompile_reasons(facts, again_frames, again),
        recompile_guard_count=_guards_of(facts, again_frames, again) if again else None,
        recompile_dynamic_shapes=symbolic(cap.graphs_of(again)) if again else None,
        notes=found.notes,
    )


def _guard_total(frames: Sequence[Any]) -> int | None:
    counts = [f.guard_count for f in frames if f.guard_count is not None]
    return sum(counts) if counts else None


def _metric_guards(facts: TorchFacts, ids: Sequence[str]) -> int | None:
    values = []
    for m in facts.metrics_of(ids):
        try:
            values.append(int(m.get("guard_count")))
        except (TypeError, ValueError):
            continue
    return sum(values) if values else None


def _metric_reasons(facts: TorchFacts, ids: Sequence[str]) -> tuple[str, ...]:
    found = [
        str(m["recompile_reason"])
        for m in facts.metrics_of(ids)
        if m.get("recompile_reason") not in (None, "None")
    ]
    return tuple(dict.fromkeys(found))


# --- profile ----------------------------------------------------------------------------------


def profile(
    vdir: Path,
    op_by_op: bool,
    cap: InductorArtifacts | None,
    first: Sequence[str],
    steps: int,
    step_s: float | None,
) -> tuple[Profile, list[str], tuple[Any, ...], VariantFiles]:
    """Returns the steady window's timeline, one step's kernel names, (eager) the ATen ops
    that ran as clusters, kernels.json's record (the match's totals) and events.parquet's
    table: every event with its cluster and the CPU op that launched it."""
    folder = VariantFolder(vdir)
    path = folder.profile_window("steady") / PROFILE_FILE
    if not path.is_file():
        return Profile(), [], (), NONE
    trace = read_torch_trace(path, steps=steps)
    eager = op_by_op
    if eager:
        clusters: dict[str, tuple[Any, ...]] = {"eager": eager_clusters(trace)}
        report = match_torch_events(trace, clusters, steps=steps, mode="eager")
    else:
        graphs = cap.graphs_of(first) if cap else ()
        clusters = clusters_by_graph(graphs)
        by_id = cap.facts.graph_by_compile_id if cap and cap.facts else {}
        report = match_torch_events(trace, clusters, steps=steps, graph_by_compile_id=by_id)
    doc = kernels_document(report)
    launcher = {id(r.event): r for r in trace.events}
    for row, a in zip(doc["events"], report.attributions, strict=True):
        source = launcher.get(id(a.event))
        row["cpu_op"] = source.cpu_op if source else None
        row["compile_region"] = source.compile_region if source else None
    totals = {"match": doc["match"], "events_file": folder.events.name}
    written = run_files.from_document(run_files.KERNELS, totals, str(folder.kernels))
    walls = [m.duration_s for m in trace.markers]
    events = [e.event for e in trace.events]
    profile, kernels = sections.profile_of(report, events, walls, clusters, step_s)
    ops = clusters.get("eager", ()) if eager else ()
    table = events_file.from_rows(doc["events"])
    return profile, kernels, ops, VariantFiles(kernels=written, events=(table,))


# --- the variant ------------------------------------------------------------------------------


def analyze_torch(
    vdir: Path,
    v: Variant,
    record: CaptureRecord,
    steps: int,
    step_s: float | None,
    errors: list[str],
    guarded: Any,
) -> dict[str, Any]:
    """Returns the torch variant's sections (hlo, compile, dynamo, profile) and its first step's
    kernel names, each analysis guarded: a failure is an analysis error, never a crash."""
    facts = guarded(errors, "torch.json", lambda: read_torch_facts(vdir), TorchFacts())
    first, again = list(facts.ids("first_call")), list(facts.ids("recompile"))
    eager = v.mode_spec.op_by_op
    cap = None if eager else guarded(errors, "torch artifacts", lambda: captured(vdir), None)
    out: dict[str, Any] = {}
    files = NONE
    if cap is not None:
        # CUDA graphs exist on a GPU only; on the CPU these modes run the same wrapper.
        graphed = v.torch.mode in CUDAGRAPH_MODES and facts.device == "cuda"
        runtime = ("cudagraphs",) if graphed else ()
        out["hlo"], made = guarded(
            errors, "hlo", lambda: hlo(vdir, cap, first, runtime), (Hlo(), NONE)
        )
        files = files.with_(made)
        out["compile"], made = guarded(
            errors, "compile", lambda: compile_(vdir, record, cap, first, again), (None, NONE)
        )
        files = files.with_(made)
        out["dynamo"] = guarded(errors, "dynamo", lambda: dynamo(facts, cap, first, again), None)
    found = guarded(
        errors,
        "profile",
        lambda: profile(vdir, eager, cap, first, steps, step_s),
        (None, [], (), NONE),
    )
    out["profile"], out["kernels"], eager_ops, made = found
    files = files.with_(made)
    if eager and eager_ops:
        files = files.with_(
            guarded(errors, "fusions", lambda: eager_fusions(vdir, eager_ops), NONE)
        )
    if not ladder.has_ladder(VariantFolder(vdir).ir):
        errors.append("no IR ladder (ir/index.json)")
    out["files"] = files
    return out


def analyze_torch_variant(
    vdir: Path,
    exp: Experiment,
    v: Variant,
    record: CaptureRecord,
    timing: Any,
    ceilings: Ceilings | None,
    platform: str,
) -> tuple[VariantSummary, list[str]]:
    """Returns a PyTorch variant's summary (identity, timing, cost and numerics as for JAX, the
    rest from Inductor's artifacts, the TORCH_TRACE log and torch.profiler's trace) and its
    first step's kernel names; writes its analysis files (the producers return them)."""
    errors: list[str] = []
    found = analyze_torch(vdir, v, record, exp.profile.steps, timing.step_s, errors, guarded)
    made: files.VariantFiles = found["files"]
    ir = vdir / IR_DIR
    lad = ladder.read_ladder(ir) if ladder.has_ladder(ir) else None
    cost, costed = (
        guarded(
            errors,
            "cost",
            lambda: sections.cost(vdir, lad, v, record, timing.step_s, ceilings, platform),
            (None, files.NONE),
        )
        if lad is not None
        else (None, files.NONE)
    )
    made = made.with_(costed)
    parts = {k: found.get(k) for k in ("compile", "hlo", "profile")}
    if parts["compile"] is None:
        # The pauses only: a PyTorch variant's compile.json is torch_sections' shape, and a
        # torch capture records no XLA compile profile for this one to read.
        parts["compile"], _ = sections.compile_(vdir, record, None)
    summary = VariantSummary(
        identity=sections.identity(v, record),
        timing=timing,
        **{k: val for k, val in parts.items() if val is not None},
        **({"cost": cost} if cost is not None else {}),
        numerics=record.numerics or Numerics(),
        dynamo=found.get("dynamo"),
        memory=memory_analysis.measured_only(record.memory),
        analysis_errors=tuple(errors),
    )
    files.write(VariantFolder(vdir), made)  # the stage's one writer
    return summary, list(found.get("kernels") or [])
