"""The `comm` section of a sharded variant: its collectives, the time they take, and scaling.

From the saved files of one variant (the IR ladder, the raw XLA dump, the steady profile) and
the run's ceilings and timing rounds:
- every collective of the optimized HLO with its groups (as partitions and as devices), bytes
  per device under the ring model, source op, and the pass that inserted it
  (harness.hlo.collectives);
- per device and step the compute, communication, exposed communication and idle time, and
  each collective's measured time and achieved bandwidth (harness.match.comm), against the
  link bandwidth measured in this run (ceilings.json `link_bytes_per_s`);
- speedup and efficiency against the one-device variant of the same problem, from the paired
  timing rounds (harness.common.stats).
Returns the summary's `Comm` section and comm.json's record (every figure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.analyze.files import NONE, VariantFiles
from harness.common import stats
from harness.config.experiment import Experiment, Variant
from harness.hlo.collectives import (
    Collective,
    ModuleState,
    Origin,
    collective_origins,
    find_collectives,
    stages_from_dump,
)
from harness.hlo.passes import pass_file_info
from harness.match.comm import (
    CommReport,
    collective_events,
    communication_report,
    compare_with_link,
)
from harness.match.waits import DeviceWait, Waits, collective_waits
from harness.profile.events import DeviceEvent, find_xplane
from harness.profile.reader import read_events_and_markers
from harness.program import modules as hlo_files
from harness.records import ladder, run_files
from harness.records.comm import CollectiveSummary, Comm, DeviceComm, Scaling
from harness.records.run_files import Ceilings
from harness.records.summary import CaptureRecord, MeshRecord, TimingRecord
from harness.store.runfolder import VariantFolder


def dump_stages(vdir: Path, module: str | None) -> tuple[ModuleState, ...]:
    """Returns the module states of the variant's first compile from its raw XLA dump.

    The raw names keep what the ladder's drop (`before_<next pass>`), which says which pass a
    pipeline's start state belongs to. Returns () when the dump is not kept (an exported run).
    """
    dump = VariantFolder(vdir).dump
    if not dump.is_dir() or dump.is_symlink():
        return ()
    found = [m for m in ladder.dump_modules(dump.iterdir()) if module is None or m.name == module]
    if not found:
        return ()
    return stages_from_dump([path for _, path in found[0].files])


def ladder_stages(lad: ladder.Ladder) -> tuple[ModuleState, ...]:
    """Returns the module states the IR ladder keeps, in compile order: before optimization,
    each pass that changed the module, the partitioned module when no pass dumps exist, after
    optimization. A pipeline's start state is credited to the pipeline."""
    stages: list[ModuleState] = []
    for stage in ("hlo_before", "passes", "spmd", "hlo_after"):
        if stage == "spmd" and lad.files("passes"):
            continue  # the partitioner's dump is one of the passes
        for path in lad.hlo_files(stage):
            info = pass_file_info(path)
            if info is not None:
                _, pipeline, name = info
                label, credited = (
                    f"{pipeline}/{name}",
                    pipeline if name == "pipeline-start" else name,
                )
            else:
                label = {
                    "hlo_before": "before_optimizations",
                    "spmd": "after_spmd_partitioner",
                    "hlo_after": "after_optimizations",
                }[stage]
                credited = ""
            stages.append(ModuleState(len(stages), label, credited, str(path)))
    return tuple(stages)


def reference_for(exp: Experiment, v: Variant) -> Variant | None:
    """Returns the one-device variant a sharded variant scales against: the same problem and
    mode, unsharded; one with the `one_device` role first, then the baseline, then one
    without XLA options."""
    same = [
        u
        for u in exp.selected_variants
        if not u.sharding.enabled and u.problem == v.problem and u.mode == v.mode
    ]
    for pick in (
        lambda u: "one_device" in u.roles,
        lambda u: u.name == exp.baseline,
        lambda u: not u.xla_options,
    ):
        found = next((u for u in same if pick(u)), None)
        if found is not None:
            return found
    return None


def scaling(
    exp: Experiment, v: Variant, devices: int, timed: TimingRecord | None
) -> tuple[Scaling | None, str | None]:
    """Returns the speedup and efficiency against the one-device variant, or a note why not.

    Speedup is the median over paired timing rounds of (one-device step / this step), its
    interval the bootstrap over those rounds; efficiency divides both by the devices.
    """
    ref = reference_for(exp, v)
    if ref is None:
        return None, "no one-device variant of the same problem and mode to scale against"
    a = timed.variants.get(ref.name) if timed else None
    b = timed.variants.get(v.name) if timed else None
    if not a or not b or not a.round_step_s or len(a.round_step_s) != len(b.round_step_s):
        unmeasured = Scaling(ref.name, devices, None, None, None, None)
        return unmeasured, f"no paired timing rounds of {v.name} and {ref.name}"
    est = stats.ratio_estimate(a.round_step_s, b.round_step_s)
    lo, hi = est.ci95
    measured = Scaling(
        against=ref.name,
        devices=devices,
        speedup=est.ratio,
        speedup_ci95=(lo, hi),
        efficiency=est.ratio / devices,
        efficiency_ci95=(lo / devices, hi / devices),
    )
    return measured, None


def _summaries(
    collectives: Sequence[Collective],
    origins: dict[str, Origin],
    mesh: MeshRecord,
    report: CommReport | None,
    link_Bps: float | None,
) -> tuple[CollectiveSummary, ...]:
    timings = {t.name: t for t in report.collectives} if report else {}
    links = (
        {r.collective: r for r in compare_with_link(report.collectives, link_Bps)}
        if report and link_Bps
        else {}
    )
    out = []
    for c in collectives:
        o, t, link = origins.get(c.name), timings.get(c.name), links.get(c.name)
        try:
            device_groups = c.device_groups(mesh.device_assignment)
        except ValueError:
            device_groups = ()
        out.append(
            CollectiveSummary(
                name=c.name,
                opcode=c.opcode,
                replica_groups=c.replica_groups,
                device_groups=device_groups,
                participants=c.participants,
                dtype=c.dtype,
                in_shape=c.in_shape,
                out_shape=c.out_shape,
                payload_bytes=c.payload_bytes,
                sent_bytes=c.sent_bytes,
                received_bytes=c.received_bytes,
                model=c.model,
                made_by=o.made_by if o else "unknown",
                pass_name=o.pass_name if o else "",
                op_name=c.op_name,
                source=c.source,
                time_per_step_s=t.time_s if t else None,
                events_per_step=t.events_per_step if t else None,
                achieved_bytes_per_s=t.achieved_bandwidth_Bps if t else None,
                link_expected_s=link.expected_s if link else None,
                link_efficiency=link.efficiency if link else None,
            )
        )
    return tuple(out)


def _rel(path: str, vdir: Path) -> str:
    """Returns a path relative to the variant folder when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(vdir.resolve()))
    except ValueError:
        return path


def _origin_json(origin: Origin | None, vdir: Path) -> dict[str, str] | None:
    if origin is None:
        return None
    return {**origin.to_json(), "path": _rel(origin.path, vdir)}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _waits(
    events: Sequence[DeviceEvent],
    clusters: dict,
    collectives: dict,
    every: Sequence[Collective],
    mesh: MeshRecord,
    report: CommReport,
) -> Waits:
    """Returns each device's waits at the collectives of the steady window."""
    steps, attributed = collective_events(events, clusters, collectives)
    groups = {}
    for c in every:
        try:
            groups[c.name] = c.device_groups(mesh.device_assignment)
        except ValueError:
            groups[c.name] = c.replica_groups
    spans = {(s.device, s.step): s.span_s for s in report.device_steps}
    return collective_waits(attributed, steps, groups, spans)


def _wait_fields(w: DeviceWait | None) -> dict[str, float | int | None]:
    if w is None:
        return {}
    return {
        "waited_s": w.waited_s,
        "wait_share": w.wait_share,
        "lag_s": w.lag_s,
        "last_arrivals": w.last_arrivals,
    }


def _profiled(
    vdir: Path,
    clusters: Mapping[str, Any],
    collectives: Mapping[str, Any],
    every: Sequence[Collective],
    mesh: MeshRecord,
) -> tuple[CommReport | None, Waits | None, list[str]]:
    """The steady-state profile's communication report and waits (None without one), and
    the notes they left."""
    steady = VariantFolder(vdir).profile_window("steady")
    if not steady.is_dir() or steady.is_symlink():
        return None, None, ["no steady-state profile: no time per device or collective"]
    events, _ = read_events_and_markers(find_xplane(steady))
    report = communication_report(events, clusters, collectives)
    notes = list(report.notes)
    waits = _waits(events, clusters, collectives, every, mesh, report)
    if waits.unpaired:
        notes.append(
            f"{waits.unpaired} collective events not paired across their group's devices "
            "(unequal counts in a step): left out of the waits"
        )
    return report, waits, notes


def _per_device(report: CommReport | None, waits: Waits | None) -> tuple[DeviceComm, ...]:
    """Each device's time a step, with its waits at collectives (none without a profile)."""
    if not report:
        return ()
    waited = {w.device: w for w in waits.per_device} if waits else {}
    return tuple(
        DeviceComm(
            device=d.device,
            events_per_step=d.events_per_step,
            compute_s=d.compute_s,
            communication_s=d.communication_s,
            overlapped_s=d.overlapped_s,
            exposed_s=d.exposed_s,
            idle_s=d.idle_s,
            busy_s=d.busy_s,
            **_wait_fields(waited.get(d.device)),
        )
        for d in report.per_device
    )


def _comm_document(
    vdir: Path,
    every: Sequence[Collective],
    summaries: Sequence[CollectiveSummary],
    origins: Mapping[str, Origin],
    stages: Sequence[ModuleState],
    report: CommReport | None,
    link_Bps: float | None,
) -> dict[str, Any]:
    """comm.json's document: every collective with its origin and groups, the stages that
    were compared, the profile's report and each collective against the link model."""
    return {
        "collectives": [
            c.to_json()
            | {
                "origin": _origin_json(origins.get(c.name), vdir),
                "device_groups": [list(g) for g in s.device_groups],
            }
            for c, s in zip(every, summaries, strict=True)
        ],
        "stages": [
            {
                "index": s.index,
                "label": s.label,
                "pass": s.pass_name,
                "path": _rel(s.path, vdir),
            }
            for s in stages
        ],
        "profile": report.to_json() if report else None,
        "link": [r.to_json() for r in compare_with_link(report.collectives, link_Bps)]
        if report and link_Bps
        else [],
    }


def _link_rate(ceilings: Ceilings | None) -> float | None:
    """The measured link bandwidth in bytes/s; None when unmeasured or not positive (no link
    model to compare the collectives with)."""
    link_Bps = ceilings.link_bytes_per_s if ceilings is not None else None
    return link_Bps if link_Bps is not None and link_Bps > 0 else None


def _profiled_fields(report: CommReport | None, waits: Waits | None) -> dict[str, Any]:
    """The fields of `Comm` the profile gives: per-device step times and their means, the
    overlap of communication with compute, the straggler and how much of the profile's
    collectives matched. Each is None (per_device empty) without a profile."""
    per_device = _per_device(report, waits)
    communication = _mean([d.communication_s for d in per_device])
    overlapped = _mean([d.overlapped_s for d in per_device])
    shares = [d.wait_share for d in per_device if d.wait_share is not None]
    return {
        "compute_per_step_s": _mean([d.compute_s for d in per_device]),
        "communication_per_step_s": communication,
        "exposed_per_step_s": _mean([d.exposed_s for d in per_device]),
        "idle_per_step_s": _mean([d.idle_s for d in per_device]),
        "per_device": per_device,
        "overlapped_per_step_s": overlapped,
        "overlap_fraction": overlapped / communication
        if overlapped is not None and communication
        else None,
        "straggler": waits.straggler if waits else None,
        "straggler_lag_s": waits.straggler_lag_s if waits else None,
        "max_wait_share": max(shares) if shares else None,
        "matched_fraction": report.matched_fraction if report else None,
        "collective_events": report.collective_like_events if report else None,
        "collective_matched_fraction": report.collective_matched_fraction if report else None,
    }


def comm(
    vdir: Path,
    lad: ladder.Ladder,
    exp: Experiment,
    v: Variant,
    record: CaptureRecord,
    timed: TimingRecord | None,
    ceilings: Ceilings | None,
) -> tuple[Comm, VariantFiles]:
    """Returns the variant's `comm` section (empty for an unsharded one) and comm.json's record."""
    mesh = record.mesh
    if mesh is None:
        return Comm(), NONE
    after = [hlo_files.parsed(p) for p in lad.hlo_files("hlo_after")]
    collectives = {m.name: find_collectives(m) for m in after}
    clusters = {m.name: hlo_files.clusters_of(m) for m in after}
    every = [c for cs in collectives.values() for c in cs]
    stages = dump_stages(vdir, record.module) or ladder_stages(lad)
    origins = {o.collective: o for o in collective_origins(every, stages)}
    report, waits, notes = _profiled(vdir, clusters, collectives, every, mesh)
    link_Bps = _link_rate(ceilings)
    found_scaling, why = scaling(exp, v, mesh.devices, timed)
    if why:
        notes.append(why)
    summaries = _summaries(every, origins, mesh, report, link_Bps)
    section = Comm(
        devices=mesh.devices,
        mesh=mesh.mesh,
        axes=mesh.axes,
        specs={**mesh.specs, "output_sharding": mesh.output_sharding},
        shard_map=mesh.shard_map,
        device_assignment=mesh.device_assignment,
        collectives=summaries,
        sent_bytes_per_call=sum(c.sent_bytes for c in every),
        **_profiled_fields(report, waits),
        link_bytes_per_s=link_Bps,
        link_source=ceilings.link_source if ceilings is not None else None,
        scaling=found_scaling,
        notes=tuple(notes),
    )
    document = _comm_document(vdir, every, summaries, origins, stages, report, link_Bps)
    source = str(VariantFolder(vdir).comm)
    return section, VariantFiles(comm=run_files.from_document(run_files.COMM, document, source))
