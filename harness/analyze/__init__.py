"""Analysis stage: a saved run read into summaries and analysis files.

    analyze_run(workdir, exp)   every variant's sections, the comparisons over the run, and
                                the findings (rules over the summary)
    sections                    one producer per summary section (returning its files' records;
                                fusions, cost and passes read through harness.program.modules)
    files                       the stage's one writer of the per-variant files
    comm                        the communication of a sharded variant (its `comm` section)
    rules                       the conclusions: summary.json's `findings`, one rule each
    ranking                     ranking.json: the clusters ranked (module_analysis, sources)

It reads only files under the run folder and never runs JAX, so it can be redone on a saved
run at any time (`python -m harness.commands.reanalyze --run=...`), e.g. an H200 run on a laptop. Any
other program's dump and profile (`python -m harness.analyze`) is harness.program, whose
ranking of a module's clusters the study's ranking calls too.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import findings as rules
from harness.analyze import (
    between_runs,
    comm,
    files,
    judging,
    processes,
    ranking,
    sections,
    verdicts,
)
from harness.analyze import memory as memory_analysis
from harness.analyze import numerics as numerics_analysis
from harness.common import forked
from harness.config.experiment import Experiment, Variant, framework_baselines
from harness.frontends import registry
from harness.frontends.roles import same_size
from harness.records import ladder, run_files
from harness.records.run_files import Ceilings, Environment
from harness.records.summary import (
    SCHEMA_VERSION,
    CaptureRecord,
    Comparison,
    Divergence,
    Hlo,
    Identity,
    Numerics,
    RunSummary,
    TimingRecord,
    VariantSummary,
    load_capture,
)
from harness.store.records import SchemaError, from_json, to_json
from harness.store.runfolder import IR_DIR, RunFolder, VariantFolder


def guarded(errors: list[str], what: str, fn: Callable[[], Any], default: Any) -> Any:
    """Runs one analysis; a failure is recorded in the variant's entry, never raised."""
    try:
        return fn()
    except Exception as e:
        errors.append(f"{what}: {type(e).__name__}: {e}".splitlines()[0][:300])
        errors.append(traceback.format_exc(limit=3).splitlines()[-1][:300])
        return default


def read_ceilings(workdir: Path) -> Ceilings | None:
    """Returns the run's ceilings.json, or None when it has none (the worker died measuring
    them) or it is unreadable: a run without ceilings is analysed without them."""
    try:
        return run_files.load_if_present(run_files.CEILINGS, RunFolder(workdir).ceilings)
    except SchemaError:
        return None


def capture_of(workdir: Path, v: Variant) -> CaptureRecord:
    """Returns a variant's capture record; a missing or corrupt one reads as a failure."""
    path = RunFolder(workdir).variant(v.name).result
    if not path.is_file():
        return CaptureRecord(
            status="failed", reason="not captured (no result.json)", mode=v.mode, module=None
        )
    try:
        return load_capture(path, within=workdir)
    except SchemaError as e:
        return CaptureRecord(
            status="failed", reason=f"result.json unreadable: {e}"[:500], mode=v.mode, module=None
        )


def analyze_variant(
    workdir: Path,
    exp: Experiment,
    v: Variant,
    timed: TimingRecord | None,
    ceilings: Ceilings | None,
    platform: str,
) -> tuple[VariantSummary, list[str]]:
    """Returns one variant's summary (every section) and its first step's kernel names: its
    frontend's sections (registry.get(framework).analyze) for a variant that ran, the
    capture's own for one that failed, was skipped or was refused as it was expected to be."""
    record = capture_of(workdir, v)
    if record.status == "ok" and record.expected_error is None:
        frontend = registry.get(v.framework)
        return frontend.analyze(workdir, exp, v, record, timed, ceilings, platform)
    return unanalyzed(RunFolder(workdir).variant(v.name).root, v, record, timed), []


def unanalyzed(
    vdir: Path, v: Variant, record: CaptureRecord, timed: TimingRecord | None
) -> VariantSummary:
    """Returns the summary of a variant that left nothing to analyse: what its capture and
    the timing stage (`timed`, timing.json) say; writes the compile.json its profiles give."""
    compiled, made = sections.compile_(vdir, record, None)
    files.write(VariantFolder(vdir), made)
    return VariantSummary(
        identity=sections.identity(v, record),
        timing=sections.timing(v.name, record, timed),
        compile=compiled,
        numerics=record.numerics or Numerics(),
    )


def analyze_xla_variant(
    workdir: Path,
    exp: Experiment,
    v: Variant,
    record: CaptureRecord,
    timed: TimingRecord | None,
    ceilings: Ceilings | None,
    platform: str,
) -> tuple[VariantSummary, list[str]]:
    """Returns a JAX variant's summary from its HLO ladder, XLA's dumps and its profile, and
    writes its analysis files: the producers return them, `files.write` is their one writer."""
    folder = RunFolder(workdir).variant(v.name)
    summary, kernels, made = xla_sections(folder.root, exp, v, record, timed, ceilings, platform)
    files.write(folder, made)
    return summary, kernels


def xla_sections(
    vdir: Path,
    exp: Experiment,
    v: Variant,
    record: CaptureRecord,
    timed: TimingRecord | None,
    ceilings: Ceilings | None,
    platform: str,
) -> tuple[VariantSummary, list[str], files.VariantFiles]:
    """Returns a JAX variant's summary, its first step's kernel names and the records of its
    analysis files, writing nothing."""
    ident = sections.identity(v, record)
    timing = sections.timing(v.name, record, timed)
    numerics = record.numerics or Numerics()
    op_by_op = v.mode_spec.op_by_op  # eager: a module per primitive, no program to rank
    if not ladder.has_ladder(vdir / IR_DIR):
        return unanalyzed(vdir, v, record, timed), [], files.NONE
    errors: list[str] = []
    lad = guarded(errors, "ladder", lambda: ladder.read_ladder(vdir / IR_DIR), None)
    if lad is None:
        return (
            VariantSummary(
                identity=ident, timing=timing, numerics=numerics, analysis_errors=tuple(errors)
            ),
            [],
            files.NONE,
        )
    made = files.NONE
    changed = guarded(errors, "recompile", lambda: sections.recompile_fusion_changed(lad), None)
    hlo, found = guarded(errors, "hlo", lambda: sections.hlo(vdir, lad), (Hlo(), files.NONE))
    made = made.with_(found)
    compile_, found = guarded(
        errors, "compile", lambda: sections.compile_(vdir, record, changed), (None, files.NONE)
    )
    made = made.with_(found)
    profile, kernels, found = guarded(
        errors,
        "profile",
        lambda: sections.profile(vdir, lad, op_by_op, timing.step_s),
        (None, [], files.NONE),
    )
    made = made.with_(found)
    # After the profile: a loop the HLO does not count is counted by the iterations it ran.
    cost, found = guarded(
        errors,
        "cost",
        lambda: sections.cost(
            vdir, lad, v, record, timing.step_s, ceilings, platform, made.kernels
        ),
        (None, files.NONE),
    )
    made = made.with_(found)
    # ranking.json, for the report's table of where the time goes (no summary key).
    made = made.with_(
        guarded(
            errors,
            "ranking",
            lambda: ranking.ranking_file(vdir, lad, op_by_op, ceilings, made.kernels, made.events),
            files.NONE,
        )
    )
    comm_, found = guarded(
        errors,
        "comm",
        lambda: comm.comm(vdir, lad, exp, v, record, timed, ceilings),
        (None, files.NONE),
    )
    made = made.with_(found)
    # memory.json beside the section: the report's buffers and live bytes, no dump needed.
    memory_ = guarded(
        errors,
        "memory",
        lambda: memory_analysis.variant_memory(vdir, lad, op_by_op, record.memory),
        None,
    )
    summary = VariantSummary(
        identity=ident,
        timing=timing,
        **{
            k: val
            for k, val in (
                ("compile", compile_),
                ("hlo", hlo),
                ("cost", cost),
                ("profile", profile),
                ("comm", comm_),
                ("memory", memory_),
            )
            if val is not None
        },
        numerics=numerics,
        analysis_errors=tuple(errors),
    )
    return summary, kernels, made


def partner(summaries: dict[str, VariantSummary], name: str, role: str) -> VariantSummary | None:
    """Returns the variant holding `role` in the same framework and of the same size."""
    me = summaries[name]
    for other in summaries.values():
        if (
            role in other.identity.roles
            and other.identity.framework == me.identity.framework
            and same_size(me.identity.problem, other.identity.problem)
        ):
            return other
    return None


# A variant's role -> the role of the variant of another framework it is timed against (its
# frontend's `timed_against`), most specific first. A Python branch jit refuses to compile,
# so another compiler's split branch (Dynamo's) meets the branch XLA keeps on the device
# (lax.cond). A variant holding
# none of them (options on a compile) meets the baseline.
COUNTERPART_ROLES = (
    ("baseline", "baseline"),
    ("lower_bound", "lower_bound"),
    ("eager", "eager"),
    ("host_callback", "host_callback"),
    ("traced_branch", "device_branch"),
)


def counterpart(summaries: dict[str, VariantSummary], name: str) -> VariantSummary | None:
    """Returns the variant of another framework a variant is also timed against (its twin in
    the framework its frontend's traits name as `timed_against`), of its role's counterpart
    and its size;
    None for a variant of the framework the others are timed against."""
    me = summaries[name]
    against = registry.traits(me.identity.framework).timed_against
    if against is None:
        return None
    role = next((j for t, j in COUNTERPART_ROLES if t in me.identity.roles), "baseline")
    for other in summaries.values():
        if (
            role in other.identity.roles
            and other.identity.framework == against
            and same_size(me.identity.problem, other.identity.problem)
        ):
            return other
    return None


def pending(
    name: str,
    kind: str,
    other: VariantSummary | None,
    summaries: dict[str, VariantSummary],
    timed: TimingRecord | None,
) -> verdicts.Pending | None:
    """Returns this variant's comparison with `other` from paired rounds, its verdict still to
    be decided with the run's others (harness.analyze.verdicts)."""
    if other is None:
        return None
    me = summaries[name]
    against = next(n for n, s in summaries.items() if s is other)
    if against == name:
        return None
    fa, fb = me.hlo.fingerprint, other.hlo.fingerprint
    same = fa is not None and fb is not None and fa.digest == fb.digest
    return verdicts.Pending(name, kind, against, verdicts.estimate(timed, name, against), same)


def _run_platform(env: Environment | None, ceilings: Ceilings | None) -> str:
    """The run's platform: the manifest's environment's, else the ceilings', else ""."""
    return str(
        (env.platform if env is not None else None)
        or (ceilings.platform if ceilings is not None else None)
        or ""
    )


def _pending_comparisons(
    summaries: dict[str, VariantSummary], timed: TimingRecord | None
) -> list[verdicts.Pending]:
    """Each timed variant's comparisons with its baseline, its lower bound and its other
    framework's counterpart, their verdicts still to be decided."""
    return [
        p
        for name, s in summaries.items()
        if s.timing.step_s
        for kind, other in (
            ("vs_baseline", partner(summaries, name, "baseline")),
            ("vs_lower_bound", partner(summaries, name, "lower_bound")),
            ("vs_framework", counterpart(summaries, name)),
        )
        if (p := pending(name, kind, other, summaries, timed)) is not None
    ]


def _first_divergence(
    workdir: Path,
    name: str,
    s: VariantSummary,
    base: str,
    kernels: Mapping[str, Any],
    errors: list[str],
) -> Divergence | None:
    """Where variant `name`'s compile first departs from `base`'s, through both ladders, by
    its framework's own comparison; None for the baseline itself, without both ladders, or
    when the comparison failed (its error added to `errors`)."""
    folder = RunFolder(workdir)
    ir, base_ir = folder.variant(name).ir, folder.variant(base).ir
    diverge = registry.get(s.identity.framework).diverge
    if name == base or not ladder.has_ladder(ir) or not ladder.has_ladder(base_ir):
        return None
    found = guarded(
        errors,
        "divergence",
        lambda: diverge(base_ir, ir, kernels.get(base), kernels.get(name)),
        None,
    )
    if found is None:
        return None
    files = found.files
    return Divergence(
        base,
        found.stage,
        found.detail,
        tuple(str(f.relative_to(workdir)) for f in files) if files else None,
    )


def analyze_run(workdir: Path, exp: Experiment) -> RunSummary:
    """Returns the run's summary: every selected variant's sections, then the comparisons."""
    timed = verdicts.read_timing(workdir)
    ceilings = read_ceilings(workdir)
    folder = RunFolder(workdir)
    manifest = run_files.load_if_present(run_files.MANIFEST, folder.manifest)
    env = manifest.environment if manifest is not None else None
    platform = _run_platform(env, ceilings)
    # Each variant's analysis reads and writes only its own folder: shared with forked
    # children, one per spare CPU.
    variants = list(exp.selected_variants)
    found = forked.fork_map(
        lambda v: analyze_variant(workdir, exp, v, timed, ceilings, platform),
        variants,
        encode=lambda r: [to_json(r[0]), r[1]],
        decode=lambda d: (from_json(VariantSummary, d[0], "an analysis child"), list(d[1])),
    )
    summaries = {v.name: s for v, (s, _) in zip(variants, found, strict=True)}
    kernels = {v.name: k for v, (_, k) in zip(variants, found, strict=True)}
    limits = judging.limits_from(exp.timing)
    gate = judging.gate(timed, limits)
    baselines = framework_baselines(exp)
    found_pending = _pending_comparisons(summaries, timed)
    # Each interval holds how far its ratio moves between runs, where earlier runs on this
    # machine measure it.
    found_pending, spread = between_runs.widen(
        found_pending, summaries, timed, between_runs.earlier_runs(workdir, manifest)
    )
    judged = judging.judge(found_pending, gate, limits)
    out: dict[str, VariantSummary] = {}
    for name, s in summaries.items():
        errors = list(s.analysis_errors)
        # Each variant diverges from its own framework's baseline, through its own ladder.
        base = baselines.get(s.identity.framework, exp.baseline)
        divergence = _first_divergence(workdir, name, s, base, kernels, errors)
        comparison = Comparison(
            first_divergence=divergence,
            vs_baseline=judged.get((name, "vs_baseline")),
            vs_lower_bound=judged.get((name, "vs_lower_bound")),
            vs_framework=judged.get((name, "vs_framework")),
        )
        # Every section as analyzed, with the comparisons over the run added.
        out[name] = dataclasses.replace(s, comparison=comparison, analysis_errors=tuple(errors))
    summary = RunSummary(
        schema_version=SCHEMA_VERSION,
        experiment=exp.experiment,
        run_id=workdir.name,
        platform=platform or None,
        baseline=exp.baseline,
        noise=judging.noise_section(timed, gate, limits, judged, spread),
        variants=out,
    )
    if exp.processes.enabled:  # a study across processes: processes.json, which a rule reads
        processes.write(workdir, exp, summary)
    # Each result against the baseline's, for the numerics rules (harness.analyze.numerics).
    numerics_analysis.write_distances(workdir, summary)
    # The conclusions last: rules over the summary just made (harness.findings).
    facts = rules.read_facts(workdir, summary, exp.memory.min_ratio, exp.memory.min_bytes)
    return dataclasses.replace(summary, findings=rules.evaluate(facts))


__all__ = ["Identity", "analyze_run", "analyze_variant"]
