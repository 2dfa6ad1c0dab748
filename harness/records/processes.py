"""The records of a study across processes (`processes:` in the config), kept apart from
harness.records.summary: what each process of a jax.distributed group captured and timed, the faults
the supervisor recorded, and the analysis over processes (`processes.json`).

Files, all under the run folder, each a record read and written through harness.store.records:
- `processes/p<rank>.json`              ProcessInfo: where the process ran, its devices;
- `variants/<name>/processes/p<rank>.json`  ProcessCapture: its program's fingerprint, its
  blocked step times, the profiles it added to the variant's XProf sessions;
- `processes/timing-p<rank>.json`       a TimingRecord of the process's own rounds (process 0's
  is also the run's `timing.json`);
- `processes/faults.json`               ProcessFaults: each process that died, hung or missed a
  barrier, with the variant it took down (written by the supervisor, or by process 0 with an
  external launcher);
- `processes.json`                      ProcessesSummary, the analysis (harness.analyze.processes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.store import io
from harness.store.records import EMPTY, SchemaError, doc, from_json, to_json

# The names are the run folder's (harness.store.runfolder), kept here for their readers.
from harness.store.runfolder import FAULTS_FILE as FAULTS_FILE
from harness.store.runfolder import PROCESS_DIR as PROCESS_DIR
from harness.store.runfolder import PROCESSES_FILE as PROCESSES_FILE
from harness.store.runfolder import per_process
from harness.store.runfolder import process_file as process_file

timing_file = per_process  # one process's timing record of the run's `file` (timing.json)

PROCESSES_VERSION = 1
CROSS = "cross_process"
WITHIN = "within_process"


@dataclass(frozen=True)
class ProcessInfo:
    """Where one process of the group ran (`processes/p<rank>.json`)."""

    rank: int = doc("jax.process_index()")
    count: int = doc("jax.process_count()")
    host: str = doc("the host's name (platform.node())")
    pid: int = doc("its process id on that host")
    launcher: str = doc("`local` (the harness started it) or `external` (srun, mpirun, ...)")
    coordinator: str = doc("the jax.distributed coordinator it joined")
    local_devices: tuple[int, ...] = doc("the ids of its own devices", ())
    devices: int = doc("the devices of the whole group", 0)


@dataclass(frozen=True)
class ProcessCapture:
    """What one process captured of one variant (`variants/<name>/processes/p<rank>.json`)."""

    rank: int = doc("the process")
    host: str = doc("its host")
    status: str = doc("its capture's status: `ok`, `failed` or `skipped`")
    reason: str | None = doc("why it failed or was skipped")
    fingerprint: str | None = doc(
        "hlo.fingerprint's digest of the program it compiled (optimized HLO and emitted code)"
    )
    hlo_digest: str | None = doc("the fingerprint's HLO part alone")
    latency_blocked_s: tuple[float, ...] = doc("its blocked per-call times in the capture", ())
    profiles: tuple[str, ...] = doc(
        "the profiles it added, relative to the variant folder "
        "(`profile/<window>/plugins/profile/<run_id>/<host>-p<rank>.xplane.pb`)",
        (),
    )


@dataclass(frozen=True)
class ProcessFault:
    """A process that took a variant down: it died, hung or missed a barrier."""

    variant: str | None = doc("the variant it took down (null: outside any variant)")
    process: int | None = doc("the process at fault (null: unknown)")
    processes: int = doc("the size of the group", 1)
    stage: str = doc("`capture` or `timing`", "capture")
    how: str = doc("what happened, as recorded in the variant's failure", "")
    signal: str | None = doc("the signal that ended it, when one did")
    launcher: str = doc("`local`: a new group ran the rest; `external`: the run stopped", "local")


@dataclass(frozen=True)
class ProcessFaults:
    """`processes/faults.json`: every fault of the run, in the order they happened."""

    faults: tuple[ProcessFault, ...] = doc("the faults", ())


@dataclass(frozen=True)
class CollectiveSplit:
    """One collective of a sharded variant, within one process or across processes."""

    name: str = doc("the instruction that runs it")
    opcode: str = doc("`all-reduce`, `all-gather`, ...")
    scope: str = doc(f"`{CROSS}` when a device group spans processes, else `{WITHIN}`")
    device_groups: tuple[tuple[int, ...], ...] = doc("its groups as device ids", ())
    process_groups: tuple[tuple[int, ...], ...] = doc("the processes of each group", ())
    sent_bytes: int = doc("bytes each device sends per call (ring model)", 0)
    time_s: dict[str, float] = doc("per process (its rank): the collective's time per step", EMPTY)
    exposed_s: dict[str, float] = doc(
        "per process: the part of that time no compute on another thread hides", EMPTY
    )


@dataclass(frozen=True)
class ProcessRow:
    """One process in one variant: its step time, what its profile holds, what shows."""

    rank: int = doc("the process")
    host: str = doc("its host", "")
    step_s: float | None = doc("the median over its timing rounds of its time per step")
    step_ci95_s: tuple[float, float] | None = doc("that median's 95% bootstrap interval")
    profile: str | None = doc("its steady-state profile, relative to the variant folder")
    events_per_step: float | None = doc("device events per step in its steady profile")
    kernels_per_step: float | None = doc("those attributed to a cluster or a collective")
    attributed_fraction: float | None = doc("the share of its events attributed")
    unattributed: tuple[str, ...] = doc("why each unattributed event was not", ())
    compute_s: float | None = doc("compute per step, mean over its devices")
    communication_s: float | None = doc("collective time per step, mean over its devices")
    exposed_s: float | None = doc("exposed collective time per step, mean over its devices")
    cross_process_exposed_s: float | None = doc("of which in cross-process collectives")
    within_process_exposed_s: float | None = doc("of which in collectives within the process")
    fingerprint: str | None = doc("its program's fingerprint")


@dataclass(frozen=True)
class VariantProcesses:
    """One variant across the processes of the group."""

    status: str = doc("the variant's status")
    same_program: bool | None = doc(
        "every process compiled the same program (equal fingerprints); null: none compiled one"
    )
    fingerprints: dict[str, str] = doc("per process: its fingerprint", EMPTY)
    processes: tuple[ProcessRow, ...] = doc("one row per process", ())
    straggler: int | None = doc("the slowest process (the largest median step time)")
    fastest: int | None = doc("the fastest process")
    spread: float | None = doc("straggler / fastest over paired rounds (median ratio)")
    spread_ci95: tuple[float, float] | None = doc("that ratio's 95% bootstrap interval")
    collectives: tuple[CollectiveSplit, ...] = doc("its collectives, split by scope", ())
    cross_process: int = doc("how many of its collectives cross processes", 0)
    notes: tuple[str, ...] = doc("what could not be measured, and why", ())


@dataclass(frozen=True)
class ProcessesSummary:
    """`processes.json`: the study across the processes of one jax.distributed group."""

    schema_version: int = doc("the version of this file", PROCESSES_VERSION)
    count: int = doc("processes in the group", 1)
    devices: int = doc("devices of each process", 1)
    launcher: str = doc("`local` or `external`", "local")
    hosts: dict[str, str] = doc("per process: its host", EMPTY)
    device_process: dict[str, int] = doc("per device id: the process that owns it", EMPTY)
    noise_floor: float | None = doc("the run's A/A noise floor (summary.json `noise`)")
    noise_resolved: bool | None = doc("whether the run passed its A/A check")
    variants: dict[str, VariantProcesses] = doc("per variant", EMPTY)
    faults: tuple[ProcessFault, ...] = doc("processes/faults.json's faults", ())


Record = TypeVar("Record")


def read(cls: type[Record], path: Path) -> Record:
    """Returns the record `cls` of a harness-written file; SchemaError names the file and key."""
    found: Record = from_json(cls, io.read_json(path), str(path))
    return found


def load(run_dir: Path) -> ProcessesSummary | None:
    """The run's processes.json; None for a study of one process, or for a file that is not a
    plain, readable record (its rule then concludes nothing, and the report says nothing)."""
    path = run_dir / PROCESSES_FILE
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return read(ProcessesSummary, path)
    except (OSError, SchemaError):
        return None


def write(path: Path, record: object) -> None:
    io.write_json(path, to_json(record))


def add_fault(workdir: Path, fault: ProcessFault) -> None:
    """Appends `fault` to the run's `processes/faults.json` (the supervisor's only writer)."""
    path = workdir / PROCESS_DIR / FAULTS_FILE
    before = read(ProcessFaults, path) if path.is_file() else ProcessFaults()
    write(path, ProcessFaults(faults=(*before.faults, fault)))


if __name__ == "__main__":  # a command here once: say where it went
    import harness

    harness.moved("harness.records.processes")
