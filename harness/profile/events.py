"""Read an XSpace profile into one normalized table of device events.

A row is one thing the device did: a GPU kernel, memset or memcpy on a
`/device:GPU:N` plane, or, on the CPU backend, one XLA thunk that the CPU
client's thunk executor ran on a host thread. Profiles are read only through
`jax.profiler.ProfileData`; nothing here parses protobuf by hand.

Step assignment (our own captures wrap each call in
`jax.profiler.StepTraceAnnotation(name, step_num=i)`; in the XSpace that is a
host event named `name` with stats `_r=1` and `step_num=i`):

1. A GPU event whose `correlation_id` matches a host launch event (the CUPTI
   API event on the launching thread carries the same `correlation_id`) gets
   the step whose marker window contains that host launch. A kernel that runs
   after its step's annotation has closed therefore still counts for the step
   that launched it.
2. Otherwise (CPU thunks, or no host launch event) the step is the marker
   window that contains the event's start; if none does, the latest marker
   that began before the event (device work trails the host); events before
   the first marker get `step=None`.
3. A profile without markers (the H200 fixtures, recorded by a probe) leaves
   every `step` as None: the whole profile is the steady window and the caller
   supplies the step count, or counts executions (below).

Executions (`run_id`): the CPU client writes the execution's `run_id` on every
thunk event. GPU events carry none, but the host event that ran the program
(`CommonPjRtLoadedExecutable::Execute (<module>)`) does, with the module in its
`name` stat; with several devices its per-device children on the
`py_xla_execute` threads name it through their flow stat (`_c` == the parent's
`_p`). A GPU event gets the `run_id` of the innermost such window of its own
module that contains its host launch (`correlation_id`), so the executions of a
program in a profile without step markers can be counted on either backend.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from harness.common import userfiles

try:  # the class jax.profiler.ProfileData re-exports, without importing all of JAX
    from jaxlib._profile_data import ProfileData
except ImportError:  # a jaxlib that keeps it elsewhere
    from jax.profiler import ProfileData

EventKind = Literal["kernel", "memcpy", "memset", "host_thunk"]
Direction = Literal["H2D", "D2H", "D2D", "P2P"]

DEVICE_PLANE_RE = re.compile(r"^/device:(GPU|TPU):\d+$")
HOST_PLANE = "/host:CPU"
STEP_STAT = "step_num"
STEP_MARKER_FLAG = "_r"
RUN_STAT = "run_id"
_FLOW_PARENT, _FLOW_CHILD = "_p", "_c"
_DIRECTION_RE = re.compile(r"Memcpy(H2D|D2H|D2D|P2P)")
_DETAIL_RE = re.compile(r"(\w+):(\S+)")


class ProfileError(ValueError):
    """A profile that cannot be read or holds nothing we can use; names the path."""


@dataclass(frozen=True)
class StepMarker:
    """One `StepTraceAnnotation` window on the host: name, step number, [start, end) in ns."""

    name: str
    step: int
    start_ns: float
    end_ns: float

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) * 1e-9


@dataclass(frozen=True)
class DeviceEvent:
    """One device event of a profile as the reader gives it: a kernel, copy, memset or host
    thunk, before any match.

    The record of a saved event is harness.records.run_files.KernelEvent (an events.parquet
    row): these fields and the match's attribution.
    """

    step: int | None
    name: str
    kind: EventKind
    direction: Direction | None
    bytes: int | None
    hlo_module: str | None
    hlo_op: str | None
    program_id: int | None
    correlation_id: int | None
    device: str
    stream: str
    start_ns: float
    duration_ns: float
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None
    occupancy_pct: float | None = None
    # Which device ran it: the N of `/device:GPU:N`, or on the CPU the thunk's
    # `device_ordinal` stat (all CPU devices share the host plane and its threads).
    device_ordinal: int | None = None
    # The CPU client's `run_id` stat: one id per execution, shared by all its devices.
    run_id: int | None = None

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class KernelDetails:
    """What CUPTI's `kernel_details` stat says about one launch."""

    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    registers: int | None
    occupancy_pct: float | None


def find_xplane(profile_dir: Path | str) -> Path:
    """Return the single `*.xplane.pb` under a `jax.profiler.trace` log dir (or the file itself).

    jax writes `<log_dir>/plugins/profile/<timestamp>/<host>.xplane.pb`; the
    newest one wins when a folder was traced more than once. A study across processes keeps
    one file per process in one session (`<host>-p<rank>.xplane.pb`,
    harness.capture.processes): the single-process analyses read process 0's.
    """
    path = Path(profile_dir)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ProfileError(f"{path}: no such profile file or folder")
    found = sorted(path.rglob("*.xplane.pb"), key=lambda p: (p.stat().st_mtime, str(p)))
    if not found:
        raise ProfileError(f"{path}: no *.xplane.pb under this folder")
    first = [p for p in found if p.name.endswith(f"-p0{XPLANE_SUFFIX}")]
    return (first or found)[-1]


XPLANE_SUFFIX = ".xplane.pb"
# A host's name becomes a folder of the events dataset (`events/host=<name>/`): kept to the
# characters a hostname and a study process's suffix use, so every engine reads it back as is.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def session_xplanes(profile: Path | str) -> dict[str, Path]:
    """Each host's profile of one profiling session, {host: file}, in host order.

    jax.profiler writes `<session>/<host>.xplane.pb` on each host (a study across processes,
    `<host>-p<rank>.xplane.pb`). A file is a session of one host; in a folder the session is
    the folder of the profile `find_xplane` picks, and its hosts every profile beside it.
    Raises ProfileError naming a file whose host name a partition folder cannot hold.
    """
    chosen = find_xplane(profile)
    beside = sorted(p for p in chosen.parent.glob(f"*{XPLANE_SUFFIX}") if p.is_file())
    files = [chosen] if Path(profile).is_file() else beside
    hosts = {}
    for path in files:
        host = path.name[: -len(XPLANE_SUFFIX)] if path.name.endswith(XPLANE_SUFFIX) else path.stem
        if not _HOST_NAME.match(host):
            raise ProfileError(
                f"{path}: host name {host!r} is not a partition name (letters, digits, '.', "
                "'_', '-')"
            )
        hosts[host] = path
    return dict(sorted(hosts.items()))


def profile_bytes(path: Path) -> bytes:
    """A profile file's bytes, through the one reader; ProfileError naming the path."""
    if not path.is_file():
        raise ProfileError(f"{path}: profile file does not exist")
    try:
        return userfiles.read_bytes(path, userfiles.PROFILE)
    except userfiles.Unreadable as err:
        raise ProfileError(str(err)) from None


def load_profile(xplane_path: Path | str) -> ProfileData:
    """Return the parsed XSpace, or raise ProfileError naming the path and what went wrong."""
    path = Path(xplane_path)
    data = profile_bytes(path)
    try:
        return ProfileData.from_serialized_xspace(data)
    except Exception as err:  # the C++ reader raises RuntimeError/JaxRuntimeError
        raise ProfileError(f"{path}: not a readable XSpace profile ({err})") from err


def parse_kernel_details(text: str | None) -> KernelDetails:
    """Return grid, block, registers and occupancy from a `kernel_details` stat.

    The stat reads like `regs:168 static_shared:0 dynamic_shared:213188
    grid:2,66,1 block:384,1,1 occ_pct:18.75`; missing or malformed fields are None.
    """
    fields = dict(_DETAIL_RE.findall(text or ""))
    return KernelDetails(
        grid=_dim3(fields.get("grid")),
        block=_dim3(fields.get("block")),
        registers=to_int(fields.get("regs")),
        occupancy_pct=to_float(fields.get("occ_pct")),
    )


def transfer_bytes(stats: Mapping[str, Any]) -> int | None:
    """Return the byte count of a memcpy (`memcpy_details size:`) or memset (`Memset_details num_bytes:`)."""
    for key, field in (("memcpy_details", "size"), ("Memset_details", "num_bytes")):
        if key in stats:
            return to_int(dict(_DETAIL_RE.findall(str(stats[key]))).get(field))
    return None


def classify(name: str, stream: str) -> tuple[EventKind, Direction | None]:
    """Return (kind, direction) of a device-plane event from its name and its stream's name."""
    match = _DIRECTION_RE.search(name) or (
        _DIRECTION_RE.search(stream) if name.startswith("Memcpy") else None
    )
    if name.startswith("Memcpy") or match:
        return "memcpy", match.group(1) if match else None  # type: ignore[return-value]
    if name.startswith("Memset"):
        return "memset", None
    return "kernel", None


def host_lines(profile: ProfileData) -> Iterator[Any]:
    """The lines (threads) of the profile's host plane, where XLA's host-side events live."""
    for plane in profile.planes:
        if plane.name == HOST_PLANE:
            yield from plane.lines


def read_step_markers(profile: ProfileData) -> tuple[StepMarker, ...]:
    """Return the StepTraceAnnotation windows found on host lines, in time order."""
    markers = []
    for line in host_lines(profile):
        for event in line.events:
            stats = _stats(event)
            if STEP_STAT in stats and STEP_MARKER_FLAG in stats:
                start = float(event.start_ns)
                markers.append(
                    StepMarker(
                        name=event.name,
                        step=int(stats[STEP_STAT]),
                        start_ns=start,
                        end_ns=start + float(event.duration_ns),
                    )
                )
    return tuple(sorted(markers, key=lambda m: m.start_ns))


def assign_step(
    row: DeviceEvent, markers: tuple[StepMarker, ...], launches: Mapping[int, float]
) -> int | None:
    """Return the step a device event belongs to, by the rule in this module's docstring."""
    if not markers:
        return None
    when = row.start_ns
    if row.correlation_id is not None and row.correlation_id in launches:
        when = launches[row.correlation_id]
    for marker in markers:
        if marker.start_ns <= when < marker.end_ns:
            return marker.step
    starts = [m.start_ns for m in markers]
    index = bisect.bisect_right(starts, when) - 1
    return markers[index].step if index >= 0 else None


def events_to_json(events: Iterable[DeviceEvent]) -> list[dict[str, Any]]:
    """Return one plain dict per event, tuples as lists: the event's part of a saved row
    (harness.records.run_files.KernelEvent), to which the match adds its attribution."""
    return [json.loads(json.dumps(asdict(e))) for e in events]


def events_from_json(rows: Iterable[Mapping[str, Any]]) -> tuple[DeviceEvent, ...]:
    """Return events read back from saved rows, each with at least the event's fields
    (inverse of events_to_json)."""
    out = []
    for row in rows:
        fields = dict(row)
        for key in ("grid", "block"):
            if fields.get(key) is not None:
                fields[key] = tuple(fields[key])
        out.append(DeviceEvent(**fields))
    return tuple(out)


def plane_ordinal(plane: str) -> int | None:
    """Returns N of a `/device:GPU:N` (or TPU) plane name, else None."""
    if not DEVICE_PLANE_RE.match(plane):
        return None
    return int(plane.rpartition(":")[2])


def host_launch_times(profile: ProfileData) -> dict[int, float]:
    """Return correlation_id -> start of the host API event that launched it (GPU only)."""
    launches: dict[int, float] = {}
    for line in host_lines(profile):
        for event in line.events:
            cid = to_int(_stats(event).get("correlation_id"))
            if cid is not None:
                start = float(event.start_ns)
                launches[cid] = min(start, launches.get(cid, start))
    return launches


def _stats(event: Any) -> dict[str, Any]:
    return {str(k): v for k, v in event.stats}


def _dim3(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        return None
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def to_int(value: Any) -> int | None:
    """A profile stat as an int, or None when it is missing, a bool or not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def to_float(value: Any) -> float | None:
    """A profile stat as a float, or None when it is missing or not a number."""
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
