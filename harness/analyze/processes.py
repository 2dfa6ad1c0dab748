"""The study across processes: every process's kernels, collectives and step time, the
straggler and the spread, and each collective within one process or across processes.

From the files each process of the group wrote (harness.capture.processes) and the summary
the analysis just made:
- **per process:** its steady profile (`<host>-p<rank>.xplane.pb` in the variant's XProf
  session) attributed to the clusters and collectives of the optimized HLO, as process 0's is
  (harness.analyze.sections.matched, harness.match.comm); its time per step from its own
  timing rounds (`processes/timing-p<rank>.json`), which a barrier started together with the
  others' (harness.timing.rounds);
- **the straggler** is the process with the largest median step time, and **the spread** the
  median over paired rounds of the straggler's time over the fastest's, with its bootstrap
  interval (harness.common.stats): the rounds pair up because every process ran them together;
- **collectives** are `cross_process` when a device group spans processes (device ids mapped
  to their owner by each process's `processes/p<rank>.json`), else `within_process`, each
  with its time and exposed time per process;
- **the same program:** whether every process's fingerprint (harness.hlo.fingerprint) is equal.
Writes processes.json; it reads only the run folder, like the rest of the analysis.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.analyze import sections
from harness.common import stats
from harness.config.experiment import Experiment, Variant
from harness.hlo.collectives import find_collectives
from harness.match.comm import CommReport, communication_report
from harness.profile.events import DeviceEvent
from harness.profile.reader import read_events_and_markers
from harness.program import modules as hlo_files
from harness.records import ladder
from harness.records.processes import (
    CROSS,
    FAULTS_FILE,
    PROCESS_DIR,
    PROCESSES_FILE,
    WITHIN,
    CollectiveSplit,
    ProcessCapture,
    ProcessesSummary,
    ProcessFaults,
    ProcessInfo,
    ProcessRow,
    VariantProcesses,
    read,
    timing_file,
)
from harness.records.processes import write as write_record
from harness.records.summary import RunSummary, TimingRecord, VariantSummary
from harness.store.records import SchemaError
from harness.store.runfolder import IR_DIR, TIMING_FILE, RunFolder

_RANK_FILE = re.compile(r"^p(\d{1,4})\.json$")


def _ranked(folder: Path, cls: type) -> dict[int, Any]:
    """Returns the `p<rank>.json` records of `folder` by rank; an unreadable one is left out."""
    out: dict[int, Any] = {}
    if not folder.is_dir() or folder.is_symlink():
        return out
    for path in sorted(folder.iterdir()):
        found = _RANK_FILE.match(path.name)
        if found and path.is_file() and not path.is_symlink():
            try:
                out[int(found.group(1))] = read(cls, path)
            except (OSError, SchemaError):
                continue
    return out


def _timings(workdir: Path, ranks: Sequence[int]) -> dict[int, TimingRecord]:
    out = {}
    for rank in ranks:
        path = workdir / PROCESS_DIR / timing_file(TIMING_FILE, rank)
        try:
            out[rank] = read(TimingRecord, path)
        except (OSError, SchemaError):
            continue
    return out


def owners(infos: Mapping[int, ProcessInfo]) -> dict[int, int]:
    """Returns device id -> the rank of the process that owns it."""
    return {d: rank for rank, info in infos.items() for d in info.local_devices}


def scope_of(groups: Sequence[Sequence[int]], owner: Mapping[int, int]) -> tuple[str, tuple]:
    """Returns (`cross_process` or `within_process`, the process of each group's members):
    cross when any group holds devices of two processes. A device without a known owner is
    -1, which counts as another process (the conservative reading)."""
    process_groups = tuple(tuple(sorted({owner.get(d, -1) for d in g})) for g in groups)
    cross = any(len(g) > 1 for g in process_groups)
    return (CROSS if cross else WITHIN), process_groups


def _per_step(report: CommReport, attr: str) -> dict[int, dict[str, float]]:
    """Returns per profile device: collective -> its `attr` (`collective_s` or
    `exposed_collective_s`) per step, summed over the steps."""
    out: dict[int, dict[str, float]] = {}
    for s in report.device_steps:
        mine = out.setdefault(s.device, {})
        for name, seconds in getattr(s, attr):
            mine[name] = mine.get(name, 0.0) + seconds / max(1, report.steps)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _events_of(vdir: Path, capture: ProcessCapture | None) -> list[DeviceEvent]:
    """Returns the events of a process's steady profile ([] without one)."""
    profile = _steady_profile(capture)
    if profile is None or not (vdir / profile).is_file():
        return []
    try:
        return list(read_events_and_markers(vdir / profile)[0])
    except Exception:  # its own row says why
        return []


def _steady_profile(capture: ProcessCapture | None) -> str | None:
    if capture is None:
        return None
    return next((p for p in capture.profiles if p.startswith("profile/steady/")), None)


def empty_row(rank: int) -> ProcessRow:
    """A process with nothing measured yet."""
    return ProcessRow(
        rank=rank,
        step_s=None,
        step_ci95_s=None,
        profile=None,
        events_per_step=None,
        kernels_per_step=None,
        attributed_fraction=None,
        compute_s=None,
        communication_s=None,
        exposed_s=None,
        cross_process_exposed_s=None,
        within_process_exposed_s=None,
        fingerprint=None,
    )


def first_seen(events: Sequence[DeviceEvent]) -> dict[str, list[int]]:
    """Returns per module name its program ids in the order the window first runs them."""
    out: dict[str, list[int]] = {}
    for e in sorted(events, key=lambda e: e.start_ns):
        if e.hlo_module is not None and e.program_id is not None:
            ids = out.setdefault(e.hlo_module, [])
            if e.program_id not in ids:
                ids.append(e.program_id)
    return out


def as_process_0(events: Sequence[DeviceEvent], reference: Sequence[DeviceEvent]) -> list:
    """Returns another process's eager events with process 0's program ids.

    XLA numbers a process's modules in the order it compiles them, and process 0 compiled
    more (its preflight), so the same primitive module has another id in each process. The
    steps dispatch the same primitives in the same order everywhere, so the n-th program of
    a name first seen in this window is the n-th of that name in process 0's; a name seen
    with a different number of programs keeps its ids (and its events stay unattributed)."""
    mine, theirs = first_seen(events), first_seen(reference)
    mapping = {
        (name, a): b
        for name, ids in mine.items()
        if len(ids) == len(theirs.get(name, ()))
        for a, b in zip(ids, theirs[name], strict=True)
    }
    return [
        dataclasses.replace(e, program_id=mapping.get((e.hlo_module, e.program_id), e.program_id))
        if e.hlo_module is not None
        else e
        for e in events
    ]


def process_row(
    vdir: Path,
    lad: ladder.Ladder | None,
    op_by_op: bool,
    rank: int,
    capture: ProcessCapture | None,
    info: ProcessInfo | None,
    rounds: Sequence[float],
    scopes: Mapping[str, str],
    reference: Sequence[DeviceEvent] = (),
) -> tuple[ProcessRow, CommReport | None, str | None]:
    """Returns one process's row in one variant, its communication report and a note.
    `reference` holds process 0's steady events, whose program ids an eager variant's
    events of another process take (`as_process_0`)."""
    profile = _steady_profile(capture)
    step = stats.median(rounds) if rounds else None
    ci = stats.bootstrap_ci(rounds) if len(rounds) > 1 else None
    base = dataclasses.replace(
        empty_row(rank),
        host=(capture.host if capture else info.host if info else ""),
        step_s=step,
        step_ci95_s=ci,
        profile=profile,
        fingerprint=capture.fingerprint if capture else None,
    )
    if lad is None or profile is None or not (vdir / profile).is_file():
        return base, None, f"process {rank}: no steady-state profile"
    events, _ = read_events_and_markers(vdir / profile)
    if op_by_op and rank != 0 and reference:
        events = as_process_0(events, reference)
    match, clusters = sections.matched(events, lad, op_by_op)
    after = [hlo_files.parsed(p) for p in lad.hlo_files("hlo_after")]
    collectives = {m.name: find_collectives(m) for m in after}
    report = communication_report(events, clusters, collectives)
    # Attribution as process 0's profile section has it: eager primitives by module (their
    # program ids differ between processes), a compiled program's events to its clusters
    # or, for a collective, to the collective (the communication report's count).
    fraction, unmatched = (
        (match.matched_fraction, tuple(a.reason for a in match.unmatched))
        if op_by_op
        else (report.matched_fraction, tuple(report.unmatched))
    )
    steps = max(1, report.steps)
    attributed = fraction * report.events_in_window
    exposed = _per_step(report, "exposed_collective_s")
    devices = list(exposed) or list(report.devices)

    def exposed_in(scope: str) -> float | None:
        if not scopes:
            return None
        per_device = [
            sum(t for n, t in exposed.get(d, {}).items() if scopes.get(n) == scope) for d in devices
        ]
        return _mean(per_device)

    row = dataclasses.replace(
        base,
        events_per_step=report.events_in_window / steps,
        kernels_per_step=attributed / steps,
        attributed_fraction=fraction,
        unattributed=unmatched,
        compute_s=_mean([d.compute_s for d in report.per_device]),
        communication_s=_mean([d.communication_s for d in report.per_device]),
        exposed_s=_mean([d.exposed_s for d in report.per_device]),
        cross_process_exposed_s=exposed_in(CROSS),
        within_process_exposed_s=exposed_in(WITHIN),
    )
    return row, report, None


def collective_splits(
    vs: VariantSummary | None,
    owner: Mapping[int, int],
    reports: Mapping[int, CommReport],
) -> tuple[CollectiveSplit, ...]:
    """Returns each collective of the variant's `comm` section with its scope, and its time
    and exposed time per step in each process (mean over the process's devices)."""
    if vs is None:
        return ()
    out = []
    times = {r: _per_step(rep, "collective_s") for r, rep in reports.items()}
    exposed = {r: _per_step(rep, "exposed_collective_s") for r, rep in reports.items()}
    for c in vs.comm.collectives:
        groups = c.device_groups or c.replica_groups
        scope, process_groups = scope_of(groups, owner)
        time_s: dict[str, float] = {}
        exposed_s: dict[str, float] = {}
        for rank in reports:
            mine = list(times[rank])  # the devices of its profile (a CPU event names its id)
            spent = [times[rank][d].get(c.name, 0.0) for d in mine]
            shown = [exposed[rank].get(d, {}).get(c.name, 0.0) for d in mine]
            if spent:
                time_s[str(rank)] = sum(spent) / len(spent)
                exposed_s[str(rank)] = sum(shown) / len(shown)
        out.append(
            CollectiveSplit(
                name=c.name,
                opcode=c.opcode,
                scope=scope,
                device_groups=tuple(tuple(g) for g in groups),
                process_groups=process_groups,
                sent_bytes=c.sent_bytes,
                time_s=time_s,
                exposed_s=exposed_s,
            )
        )
    return tuple(out)


def spread(
    rows: Sequence[ProcessRow], rounds: Mapping[int, Sequence[float]]
) -> tuple[int | None, int | None, stats.RatioEstimate | None]:
    """Returns (straggler, fastest, straggler/fastest over paired rounds): the processes
    with the largest and smallest median step time. No ratio without two processes timed in
    the same number of rounds."""
    timed = [r for r in rows if r.step_s is not None]
    if not timed:
        return None, None, None
    slow = max(timed, key=lambda r: (r.step_s, -r.rank))
    fast = min(timed, key=lambda r: (r.step_s, r.rank))
    a, b = rounds.get(slow.rank, ()), rounds.get(fast.rank, ())
    if slow.rank == fast.rank or not a or len(a) != len(b):
        return slow.rank, fast.rank, None
    return slow.rank, fast.rank, stats.ratio_estimate(a, b)


def same_program(fingerprints: Mapping[int, str | None], ranks: Sequence[int]) -> bool | None:
    """True when every process compiled a program and all fingerprints are equal; None when
    none compiled one (an eager or failed variant); False otherwise."""
    found = [fingerprints.get(r) for r in ranks]
    if not any(found):
        return None
    return all(found) and len(set(found)) == 1


def _collective_scopes(vs: VariantSummary | None, owner: Mapping[int, int]) -> dict[str, str]:
    """Each collective of the variant by name: whether its groups stay within one process or
    cross processes (`owner`: device -> the process that drives it)."""
    return {
        c.name: scope_of(c.device_groups or c.replica_groups, owner)[0]
        for c in (vs.comm.collectives if vs else ())
    }


def _rounds_by_rank(name: str, timings: Mapping[int, TimingRecord]) -> dict[int, tuple[float, ...]]:
    """Each process's timed rounds of variant `name` (the median step of each), where it
    timed any."""
    return {
        r: tuple(t.variants[name].round_step_s)
        for r, t in timings.items()
        if name in t.variants and t.variants[name].round_step_s
    }


def variant_processes(
    workdir: Path,
    v: Variant,
    vs: VariantSummary | None,
    infos: Mapping[int, ProcessInfo],
    timings: Mapping[int, TimingRecord],
) -> VariantProcesses:
    """Returns one variant across the processes of the group."""
    vdir = RunFolder(workdir).variant(v.name).root
    captures = _ranked(vdir / PROCESS_DIR, ProcessCapture)
    ranks = sorted(set(infos) | set(captures))
    status = vs.identity.status if vs else "failed"
    ir = vdir / IR_DIR
    lad = ladder.read_ladder(ir) if ladder.has_ladder(ir) else None
    owner = owners(infos)
    scopes = _collective_scopes(vs, owner)
    rounds = _rounds_by_rank(v.name, timings)
    rows, reports, notes = [], {}, []
    op_by_op = v.mode_spec.op_by_op
    reference = _events_of(vdir, captures.get(0)) if op_by_op else []
    for rank in ranks:
        try:
            row, report, note = process_row(
                vdir, lad, op_by_op, rank, captures.get(rank), infos.get(rank),
                rounds.get(rank, ()), scopes, reference,
            )  # fmt: skip
        except Exception as e:  # one unreadable profile is a note, never the analysis's end
            row, report = empty_row(rank), None
            note = f"process {rank}: {type(e).__name__}: {e}".splitlines()[0][:300]
        rows.append(row)
        if report is not None:
            reports[rank] = report
        if note and status == "ok":
            notes.append(note)
    slow, fast, ratio = spread(rows, rounds)
    splits = collective_splits(vs, owner, reports)
    fingerprints = {r: c.fingerprint for r, c in captures.items()}
    return VariantProcesses(
        status=status,
        same_program=same_program(fingerprints, ranks) if status == "ok" else None,
        fingerprints={str(r): f for r, f in fingerprints.items() if f},
        processes=tuple(rows),
        straggler=slow,
        fastest=fast,
        spread=ratio.ratio if ratio else None,
        spread_ci95=ratio.ci95 if ratio else None,
        collectives=splits,
        cross_process=sum(s.scope == CROSS for s in splits),
        notes=tuple(notes),
    )


def analyze(workdir: Path, exp: Experiment, summary: RunSummary) -> ProcessesSummary:
    """Returns the study across processes of a saved run."""
    infos = _ranked(workdir / PROCESS_DIR, ProcessInfo)
    timings = _timings(workdir, sorted(infos))
    faults_path = workdir / PROCESS_DIR / FAULTS_FILE
    try:
        faults = read(ProcessFaults, faults_path).faults if faults_path.is_file() else ()
    except (OSError, SchemaError):
        faults = ()
    noise = summary.noise
    return ProcessesSummary(
        count=exp.processes.count,
        devices=exp.processes.devices,
        launcher=exp.processes.launcher,
        hosts={str(r): i.host for r, i in infos.items()},
        device_process={str(d): r for d, r in owners(infos).items()},
        noise_floor=noise.floor if noise else None,
        noise_resolved=noise.resolved if noise else None,
        variants={
            v.name: variant_processes(workdir, v, summary.variants.get(v.name), infos, timings)
            for v in exp.selected_variants
        },
        faults=tuple(faults),
    )


def write(workdir: Path, exp: Experiment, summary: RunSummary) -> ProcessesSummary:
    """Analyzes the run across its processes and writes processes.json; returns it."""
    found = analyze(workdir, exp, summary)
    write_record(workdir / PROCESSES_FILE, found)
    return found
