"""What each process of a group leaves in the run folder after capturing a variant.

Process 0 captures into the variant's own folder, as a single process does: its dump, IR
ladder and result.json are the variant's. Every other process captures into a scratch folder
of its own (outside the run; its dump is read only for its fingerprint), then:
- its profiles join process 0's in one XProf session per window,
  `profile/<window>/plugins/profile/<run_id>/<host>-p<rank>.xplane.pb`: jax names a file
  after the host only, so two processes on one host would otherwise write the same name;
- its `variants/<name>/processes/p<rank>.json` records the fingerprint of the program it
  compiled (harness.hlo.fingerprint), its blocked step times and its profiles.
Process 0 does the same for its own profiles and record. With an external launcher the run
folder must be on a filesystem every process sees.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from harness.hlo import fingerprint
from harness.records import ladder
from harness.records.processes import (
    PROCESS_DIR,
    ProcessCapture,
    ProcessInfo,
    process_file,
    timing_file,
    write,
)
from harness.records.summary import CaptureRecord, TimingRecord
from harness.store import io

WINDOWS = ("first_call", "steady", "recompile")
XPLANE = ".xplane.pb"


def capture_folder(vdir: Path, rank: int) -> Path:
    """Returns where process `rank` captures the variant of folder `vdir`: the folder itself
    for process 0, else a new scratch folder of its own."""
    if rank == 0:
        return vdir
    return Path(tempfile.mkdtemp(prefix=f"harness-p{rank}-{vdir.name[:40]}-"))


def session_name(host_file: str, rank: int) -> str:
    """Returns a profile file's name in the gathered session: `<host>-p<rank>` + its suffix
    (`myhost.xplane.pb` becomes `myhost-p1.xplane.pb`)."""
    host, dot, suffix = host_file.partition(".")
    return f"{host}-p{rank}{dot}{suffix}"


def gather_profiles(source: Path, target: Path, run_id: str, rank: int) -> tuple[str, ...]:
    """Moves the profile files jax wrote under `source/profile/<window>/plugins/profile/<ts>/`
    into `target/profile/<window>/plugins/profile/<run_id>/` under per-process names; returns
    their paths relative to `target`. The emptied `<ts>` folders are removed."""
    moved: list[str] = []
    for window in WINDOWS:
        sessions = source / "profile" / window / "plugins" / "profile"
        if not sessions.is_dir():
            continue
        into = target / "profile" / window / "plugins" / "profile" / run_id
        for folder in sorted(p for p in sessions.iterdir() if p.is_dir() and p.name != run_id):
            for f in sorted(folder.iterdir()):
                if f.is_file() and not f.is_symlink():
                    dest = into / session_name(f.name, rank)
                    io.copy_file(f, dest)
                    f.unlink()
                    if dest.name.endswith(XPLANE):
                        moved.append(str(dest.relative_to(target)))
            if source == target:
                shutil.rmtree(folder, ignore_errors=True)
    return tuple(moved)


def _fingerprint(vdir: Path) -> tuple[str | None, str | None]:
    """Returns (digest, HLO part) of the program captured in `vdir`, or Nones without one."""

    if not ladder.has_ladder(vdir / "ir"):
        return None, None
    try:
        found = fingerprint.fingerprint_dir(vdir / "ir")
    except Exception:  # an unreadable ladder is a missing fingerprint, never the variant's fault
        return None, None
    return (found.digest, found.hlo) if found is not None else (None, None)


def finish_capture(
    workdir: Path, name: str, captured: Path, record: CaptureRecord, member: Any
) -> ProcessCapture:
    """After process `member.rank` captured variant `name` into `captured`: gathers its
    profiles into the variant's sessions, writes its record, removes a scratch folder."""
    vdir = workdir / "variants" / name
    digest, hlo = _fingerprint(captured)
    profiles = gather_profiles(captured, vdir, workdir.name, member.rank)
    mine = ProcessCapture(
        rank=member.rank,
        host=member.host,
        status=record.status,
        reason=record.reason,
        fingerprint=digest,
        hlo_digest=hlo,
        latency_blocked_s=tuple(record.latency_blocked_s or ()),
        profiles=profiles,
    )
    write(vdir / PROCESS_DIR / process_file(member.rank), mine)
    if captured != vdir:
        shutil.rmtree(captured, ignore_errors=True)
    return mine


def write_info(workdir: Path, member: Any) -> None:
    """Writes `processes/p<rank>.json`: where this process runs, its devices."""
    info = ProcessInfo(
        rank=member.rank,
        count=member.count,
        host=member.host,
        pid=os.getpid(),
        launcher=member.launcher,
        coordinator=member.coordinator,
        local_devices=tuple(member.local_devices),
        devices=member.devices,
    )
    write(workdir / PROCESS_DIR / process_file(member.rank), info)


def write_timing(workdir: Path, file: str, record: TimingRecord, rank: int) -> None:
    """Writes this process's own timing rounds beside the run's timing.json."""
    write(workdir / PROCESS_DIR / timing_file(file, rank), record)
