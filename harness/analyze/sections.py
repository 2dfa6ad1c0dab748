"""The producers of summary.json's sections: one function per section, each from saved files.

Every function reads what the capture and timing stages wrote for one variant and returns its
own section of harness.records.summary, with the records of the analysis files it derives (fusions.json,
cost.json, passes.json, kernels.json, compile.json): it writes none of them, the stage's one
writer does (harness.analyze.files). No key is produced twice.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.analyze.files import NONE, VariantFiles
from harness.common import stats
from harness.common.precision import precision as gemm_precision
from harness.config.experiment import Variant
from harness.hlo.cost import ModuleCost
from harness.hlo.fingerprint import fingerprint
from harness.hlo.thunks import CommandBuffer, read_command_buffers
from harness.match.match import MatchReport, Mode, match_events
from harness.match.table_match import arrow_slices, match_table
from harness.profile.compile import CompileBreakdown, compile_breakdown
from harness.profile.events import find_xplane
from harness.profile.reader import read_table
from harness.program import modules as hlo_files
from harness.program import roof as roofs
from harness.records import ladder, run_files
from harness.records.run_files import Ceilings, KernelsFile, Peak
from harness.records.summary import (
    CaptureRecord,
    Compile,
    CompilePass,
    Cost,
    Fingerprint,
    Hlo,
    Identity,
    LibraryCall,
    PassChange,
    Profile,
    Timing,
    TimingRecord,
    Transfer,
    XlaCost,
)
from harness.store.records import to_json
from harness.store.runfolder import VariantFolder

# A fraction of peak is reported only for a variant whose FLOPs are mostly its GEMM's.
GEMM_DOMINATED = 0.8


def identity(v: Variant, record: CaptureRecord) -> Identity:
    """Returns what the variant is (config) and what became of it (capture record)."""
    return Identity(
        status=record.status,
        reason=record.reason,
        mode=v.mode,
        framework=v.framework,
        description=v.description,
        roles=v.resolved_roles,
        problem={} if v.program.enabled else to_json(v.problem),
        program=record.program,
        xla_options=dict(v.xla_options),
        module=record.module,
        wall_s=record.wall_s,
        expected_error=record.expected_error,
        failure=record.failure,
        callback_lines=record.callback_lines,
        eager_modules=record.eager_modules,
        probe_failures=record.probe_failures,
    )


def timing(name: str, record: CaptureRecord, timed: TimingRecord | None) -> Timing:
    """Returns the variant's time per step from the timing stage and its blocked latency."""
    latency = list(record.latency_blocked_s)
    blocked = (
        {
            "latency_blocked_median_s": stats.median(latency),
            "latency_blocked_p10_s": stats.percentile(latency, 10),
            "latency_blocked_p90_s": stats.percentile(latency, 90),
        }
        if latency
        else {}
    )
    entry = timed.variants.get(name) if timed else None
    if entry is None or not entry.round_step_s:
        return Timing(**blocked)
    rounds = list(entry.round_step_s)
    return Timing(
        step_s=stats.median(rounds),
        step_ci95_s=stats.bootstrap_ci(rounds),
        rounds=len(rounds),
        calls_per_batch=entry.calls_per_batch,
        round_step_s=tuple(rounds),
        interleaved=True,
        **blocked,
    )


def paused(record: CaptureRecord) -> Compile:
    """The compile section's figures the capture measured, any frontend's: the first call's
    pauses and the new-shape call's (null where it measured none); the analysis adds its own."""
    p, r = record.pauses, record.recompile
    return Compile(
        first_call_s=p.first_call_s if p else None,
        compile_s=p.compile_s if p else None,
        trace_s=p.trace_s if p else None,
        lower_s=p.lower_s if p else None,
        xla_compile_s=p.xla_compile_s if p else None,
        first_execute_s=p.first_execute_s if p else None,
        backend_compiles=p.backend_compiles if p else None,
        fresh_process=p.fresh_process if p else None,
        compile_slots=p.compile_slots if p else None,
        recompile_s=r.seconds if r else None,
        recompile_explanation=r.explanation if r else None,
        recompile_backend_compiles=r.backend_compiles if r else None,
        recompile_xla_compile_s=r.xla_compile_s if r else None,
    )


def compile_(
    vdir: Path, record: CaptureRecord, fusion_changed: bool | None
) -> tuple[Compile, VariantFiles]:
    """Returns the compile pauses and, from the first-call profile, XLA's time by pass, with
    compile.json's record (the first call's and the recompile's breakdowns)."""
    folder = VariantFolder(vdir)
    breakdown = _compile_breakdowns(folder, record.module)
    files = (
        VariantFiles(
            compile=run_files.from_document(
                run_files.COMPILE,
                {k: b.to_json() for k, b in breakdown.items()},
                str(folder.compiles),
            )
        )
        if breakdown
        else NONE
    )
    section = dataclasses.replace(
        paused(record),
        autotune_choices=record.autotune_choices,
        recompile_fusion_changed=fusion_changed,
        **_pass_fields(breakdown.get("first_call")),
    )
    return section, files


def _compile_breakdowns(folder: VariantFolder, module: str | None) -> dict[str, CompileBreakdown]:
    """XLA's compile breakdown of each profiled window (`first_call`, `recompile`) of the
    variant that has a real profile folder."""
    breakdown: dict[str, CompileBreakdown] = {}
    for window in ("first_call", "recompile"):
        profiled = folder.profile_window(window)
        if profiled.is_dir() and not profiled.is_symlink():
            breakdown[window] = compile_breakdown(find_xplane(profiled), module)
    return breakdown


def _pass_fields(first: CompileBreakdown | None) -> dict[str, Any]:
    """The fields of `Compile` the first call's profile gives: XLA's time by pass and by
    pipeline, autotuning, and the breakdown's notes."""
    return {
        "top_passes": tuple(
            CompilePass(t.name, t.pipeline, t.count, t.total_s, t.self_s)
            for t in (first.top_passes(10) if first else ())
        ),
        "by_pipeline": {t.name: t.total_s for t in first.pipelines} if first else {},
        "autotuning_s": first.autotuning_s if first else None,
        "notes": first.notes if first else (),
    }


def recompile_fusion_changed(lad: ladder.Ladder) -> bool | None:
    """Returns whether the new-shape module's fusion structure differs from the first one's."""
    first, again = lad.hlo_files("hlo_after"), lad.hlo_files("hlo_after_recompile")
    if len(first) != 1 or len(again) != 1:
        return None
    return _structure(hlo_files.parsed(first[0])) != _structure(hlo_files.parsed(again[0]))


def _structure(module: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (c.kind, c.backend_kind, c.target, c.epilogue, c.member_opcodes)
        for c in hlo_files.clusters_of(module)
    )


def hlo(vdir: Path, lad: ladder.Ladder) -> tuple[Hlo, VariantFiles]:
    """Returns what XLA made of the program, with fusions.json's and passes.json's records."""
    after = [hlo_files.parsed(p) for p in lad.hlo_files("hlo_after")]
    before = [hlo_files.parsed(p) for p in lad.hlo_files("hlo_before")]
    if not after:
        return Hlo(), NONE
    folder = VariantFolder(vdir)
    passes = hlo_files.passes_document(lad.files("passes"))
    files = VariantFiles(
        fusions=run_files.from_document(
            run_files.FUSIONS, hlo_files.fusions_document(after, before), str(folder.fusions)
        ),
        passes=run_files.from_document(run_files.PASSES, passes, str(folder.passes)),
    )
    clusters = [c for m in after for c in hlo_files.clusters_of(m)]
    found = fingerprint(lad)
    section = Hlo(
        fusion_count=hlo_files.fusion_count(clusters),
        cluster_count=len(clusters),
        library_calls=tuple(
            LibraryCall(c.target, c.epilogue or None, c.name)
            for c in hlo_files.library_calls(clusters)
        ),
        fusion_changing_passes=tuple(
            PassChange(p["index"], p["pipeline"], p["pass"], p["explanation"])
            for p in passes["passes"]
            if p.get("changed_fusions")
        ),
        fingerprint=Fingerprint(found.digest, found.hlo, found.thunks, found.code)
        if found
        else None,
    )
    return section, files


def _xla_figures(x: XlaCost | None) -> dict[str, float] | None:
    """XLA's own cost analysis under cost.json's names, the figures it gave (None: none ran)."""
    if x is None:
        return None
    named = (
        ("flops", x.flops),
        ("bytes accessed", x.bytes),
        ("transcendentals", x.transcendentals),
    )
    return {k: val for k, val in named if val is not None}


def _analytic_flops(
    lad: ladder.Ladder,
    record: CaptureRecord,
    after: Sequence[Any],
    launches: Mapping[str, float] | None,
) -> tuple[float | None, float | None, bool]:
    """The variant's analytic FLOPs, its GEMM's FLOPs, and whether a loop of unknown count
    left them unknown (None). The GELU study's analytic FLOPs are its GEMM's; a program's are
    the whole program's, counted from its one `hlo_before` module."""
    program = record.program
    analytic = record.flops_analytic
    gemm = program.gemm_flops if program is not None else analytic
    before = lad.hlo_files("hlo_before")
    if record.flops_analytic_source != "hlo_before" or len(before) != 1:
        return analytic, gemm, False
    # Counted again here, with the loops' counts the capture could not know.
    module = hlo_files.parsed(before[0])
    (pre,) = hlo_files.costs_before([module], after, launches)
    if pre.loops_counted("unknown"):
        return None, None, True
    return pre.flops, hlo_files.gemm_flops(module, pre), False


def _fraction_of_peak(
    achieved: float | None,
    peak_flops: float | None,
    precision: str,
    gemm: float | None,
    flops: float | None,
) -> tuple[float | None, str | None]:
    """The achieved FLOP/s over the ceiling of its precision, or None and why it is withheld
    (no ceiling, a GEMM ceiling that does not bound a program mostly not GEMM, or a fraction
    over one, which is noise in the ceiling or the step time)."""
    if achieved is None:
        return None, None
    if not peak_flops:
        return None, f"no {precision} ceiling was measured in this run"
    if gemm is not None and flops and gemm < GEMM_DOMINATED * flops:
        return None, (
            f"the GEMM is only {gemm / flops:.0%} of this variant's FLOPs, so a GEMM "
            "ceiling does not bound it"
        )
    fraction = achieved / peak_flops
    if fraction > 1.0:
        return None, (
            f"achieved {achieved:.3g} FLOP/s exceeds the {precision} ceiling "
            f"{peak_flops:.3g} measured in this run: the ceiling or the step time is off by "
            "noise, so no fraction is given"
        )
    return fraction, None


def _cost_file(
    vdir: Path, costs: Sequence[Any], x: XlaCost | None
) -> tuple[VariantFiles, tuple[str, ...]]:
    """cost.json's record (none without costs) and where XLA's own analysis disagrees with
    ours or is unavailable."""
    files = NONE
    disagreements: tuple[str, ...] = ()
    if costs:
        written = run_files.from_document(
            run_files.COST,
            hlo_files.cost_document(costs, _xla_figures(x) or None),
            str(VariantFolder(vdir).cost),
        )
        files = VariantFiles(cost=written)
        disagreements = written.xla_disagreements
    if x is not None and x.error:
        disagreements += (f"XLA's cost analysis is unavailable: {x.error}",)
    return files, disagreements


def _gemm_ceiling(
    v: Variant, record: CaptureRecord, platform: str, ceilings: Ceilings | None
) -> tuple[str, Peak | None]:
    """The precision of the variant's GEMM and the run's ceiling of it (None: not measured).
    The GELU study's analytic FLOPs are its GEMM's; a program's are the whole program's, of
    which the dots and convolutions (`gemm`) are what a GEMM ceiling bounds."""
    program = record.program
    x_dtype, w_dtype = (
        program.gemm_dtypes() if program is not None else (v.problem.dtype, v.problem.weight_dtype)
    )
    precision = gemm_precision(platform, x_dtype, w_dtype)
    return precision, ceilings.peaks.get(precision) if ceilings is not None else None


def _counted_totals(
    costs: Sequence[ModuleCost],
) -> tuple[float | None, float | None, float | None]:
    """Our cost model's FLOPs, bytes and transcendentals summed over the modules; None each
    without modules, or where a loop's trip count is unknown (a total would undercount)."""
    unknown = sorted({n for c in costs for n in c.loops_counted("unknown")})
    if not costs or unknown:
        return None, None, None
    return (
        sum(c.flops for c in costs),
        sum(c.bytes for c in costs),
        sum(c.transcendentals for c in costs),
    )


def _xla_fields(x: XlaCost | None) -> dict[str, Any]:
    """The fields of `Cost` XLA's own cost analysis gives (each None without one)."""
    return {
        "flops_xla": x.flops if x else None,
        "bytes_xla": x.bytes if x else None,
        "transcendentals_xla": x.transcendentals if x else None,
    }


def cost(
    vdir: Path,
    lad: ladder.Ladder,
    v: Variant,
    record: CaptureRecord,
    step_s: float | None,
    ceilings: Ceilings | None,
    platform: str,
    kernels: KernelsFile | None = None,
) -> tuple[Cost, VariantFiles]:
    """Returns work and traffic (ours and XLA's) against this variant's ceiling, with cost.json's
    record. A loop whose trip count the HLO does not hold counts the iterations `kernels` (the
    variant's kernels.json record) measured a step; with none, its figures are not given."""
    after = [hlo_files.parsed(p) for p in lad.hlo_files("hlo_after")]
    launches = kernels.match.launches_per_cluster if kernels and kernels.match else None
    costs = hlo_files.costs_of(after, launches)
    x = record.xla_cost
    files, disagreements = _cost_file(vdir, costs, x)
    flops, moved, transcendentals = _counted_totals(costs)
    analytic, gemm, analytic_unknown = _analytic_flops(lad, record, after, launches)
    work = flops or analytic
    achieved, achieved_bytes = roofs.rates(work or None, moved or None, 1.0, step_s)
    precision, peak = _gemm_ceiling(v, record, platform, ceilings)
    peak_flops = peak.flops_per_s if peak is not None else None
    fraction, withheld = _fraction_of_peak(achieved, peak_flops, precision, gemm, flops)
    section = Cost(
        flops_analytic=analytic,
        flops_analytic_source=record.flops_analytic_source
        or ("formula" if analytic is not None else None),
        flops=flops,
        bytes=moved,
        transcendentals=transcendentals,
        arithmetic_intensity=(flops / moved) if flops and moved else None,
        **_xla_fields(x),
        disagreements=disagreements,
        loop_counts=hlo_files.loop_counts_said(costs, hlo_files.STUDY_WORDS, analytic_unknown),
        achieved_flops_per_s=achieved,
        achieved_bytes_per_s=achieved_bytes,
        peak_flops_per_s=peak_flops,
        peak_precision=precision,
        peak_source=peak.source if peak is not None else None,
        fraction_of_peak=fraction,
        fraction_withheld=withheld,
    )
    return section, files


def _module_clusters(lad: ladder.Ladder, eager: bool) -> dict[Any, tuple[Any, ...]]:
    """Returns clusters keyed as the matcher expects: module name, or (name, program id) in eager."""
    out: dict[Any, tuple[Any, ...]] = {}
    for path in lad.hlo_files("hlo_after"):
        module = hlo_files.parsed(path)
        clusters = hlo_files.clusters_of(module)
        if eager:
            # Eager file names start with XLA's module number, which the profile calls program_id.
            out[(module.name, int(path.name.split("-", 1)[0]))] = clusters
        out.setdefault(module.name, clusters)
    return out


def _command_buffers(
    lad: ladder.Ladder, clusters: Mapping[Any, tuple[Any, ...]]
) -> dict[Any, tuple[CommandBuffer, ...]]:
    """The compiled module's command buffers from the ladder's thunk files, keyed as its
    clusters; none without them (the CPU, an eager variant, an older run)."""
    sequence, metadata = lad.path("thunks_after_passes"), lad.path("thunk_metadata")
    names = [k for k in clusters if isinstance(k, str)]
    if sequence is None or len(names) != 1:
        return {}
    return {names[0]: read_command_buffers(sequence, metadata)}


def profile(
    vdir: Path, lad: ladder.Ladder, op_by_op: bool, step_s: float | None
) -> tuple[Profile, list[str], VariantFiles]:
    """Returns the steady window's device timeline and one step's kernel names, with
    kernels.json's record (the match's totals) and events.parquet's table (every event with
    the cluster it is attributed to), matched over the profile's event table."""
    folder = VariantFolder(vdir)
    steady = folder.profile_window("steady")
    if not steady.is_dir() or steady.is_symlink():
        return Profile(), [], NONE
    table, markers = read_table(find_xplane(steady))
    # The host gap compares like with like: each profiled step's wall time (its marker)
    # against the device time of the same step, since profiling itself slows the host.
    walls = [m.duration_s for m in markers if m.name == "step"]
    clusters, buffers, mode = match_inputs(lad, op_by_op)
    report = match_table(table, clusters, mode=mode, command_buffers=buffers)
    totals = {"match": report.to_json(events=False), "events_file": folder.events.name}
    kernels = run_files.from_document(run_files.KERNELS, totals, str(folder.kernels))
    section, names = profile_of(report, table.events(), walls, clusters, step_s)
    return section, names, VariantFiles(kernels=kernels, events=tuple(arrow_slices(report)))


def matched(
    events: Sequence[Any], lad: ladder.Ladder, op_by_op: bool
) -> tuple[MatchReport, dict[Any, tuple[Any, ...]]]:
    """Returns the attribution of a steady window's `events` to the clusters of the variant's
    ladder, and those clusters (each process of a group is matched alike: analyze.processes)."""
    clusters, buffers, mode = match_inputs(lad, op_by_op)
    return match_events(events, clusters, mode=mode, command_buffers=buffers), clusters


def match_inputs(
    lad: ladder.Ladder, op_by_op: bool
) -> tuple[dict[Any, tuple[Any, ...]], dict[Any, tuple[CommandBuffer, ...]], Mode]:
    """The clusters a variant's events are matched to, its command buffers and the match's mode:
    op by op, each primitive is its own module, matched by module, not by cluster."""
    clusters = _module_clusters(lad, op_by_op)
    buffers = {} if op_by_op else _command_buffers(lad, clusters)
    return clusters, buffers, "eager" if op_by_op else "jit"


def profile_of(
    report: MatchReport,
    events: Sequence[Any],
    walls: Sequence[float],
    clusters: Mapping[Any, tuple[Any, ...]],
    step_s: float | None,
) -> tuple[Profile, list[str]]:
    """Returns the Profile section and the first step's kernel names, from a match of the
    steady window's `events` (each step's wall time in `walls`) against `clusters`."""
    gaps = [w - d for w, d in zip(walls, report.device_time_by_step_s, strict=False)]
    first_step = min((e.step for e in events if e.step is not None), default=None)
    kernels = [
        e.name for e in events if e.step == first_step and e.kind in ("kernel", "host_thunk")
    ]
    launched = {a.cluster for a in report.attributions if a.matched}
    return (
        Profile(
            kernels_per_step=report.kernels_per_step,
            device_ops_per_step=report.device_ops_per_step,
            transfers_per_step=tuple(
                Transfer(t.direction, t.count_per_step, t.bytes_per_step)
                for t in report.transfers_per_step
            ),
            device_time_per_step_s=report.device_time_per_step_s,
            profiled_step_time_s=statistics.median(walls) if walls else None,
            host_gap_per_step_s=statistics.median(gaps) if gaps else None,
            matched_fraction=report.matched_fraction,
            unmatched_events=len(report.unmatched),
            gaps=report.gaps,
            launches_per_cluster=dict(report.launches_per_cluster),
            step_sequence=tuple(step_sequence(report, first_step)),
            unlaunched_clusters=tuple(
                sorted(c.name for cs in clusters.values() for c in cs if c.name not in launched)
            )
            if report.attributions
            else (),
            device_vs_step=report.device_time_per_step_s / step_s - 1.0
            if step_s and report.device_time_per_step_s
            else None,
        ),
        kernels,
    )


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
