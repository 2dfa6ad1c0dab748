"""Reading a profile into the event table (harness.profile.table): the stored XSpace walked once.

The device planes' events, and on the host plane the step markers, the launches (correlation
ids), the executions' windows and, on the CPU backend, the thunks; then steps and runs are
assigned by array operations (the rules are harness.profile.events' docstring). A device
plane's lines are read in chunks of events (harness.profile.xspace), by forked children where
this process may fork (harness.common.forked): each returns its chunk's columns and the
distinct static parts of its events, merged here in order, so the table is the one a single
pass makes.
"""

from __future__ import annotations

import base64
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from harness.common import forked
from harness.profile import xspace
from harness.profile.events import (
    DEVICE_PLANE_RE,
    HOST_PLANE,
    RUN_STAT,
    STEP_MARKER_FLAG,
    STEP_STAT,
    DeviceEvent,
    ProfileError,
    StepMarker,
    classify,
    parse_kernel_details,
    plane_ordinal,
    profile_bytes,
    to_int,
    transfer_bytes,
)
from harness.profile.table import (
    FLOAT_COLUMNS,
    INT_COLUMNS,
    NULL,
    STRING_COLUMNS,
    EventTable,
    Interned,
)


class _Columns:
    """Rows appended column by column while the XSpace is walked, into typed buffers (eight
    bytes a value, not a Python object each)."""

    def __init__(self) -> None:
        self.ints = {n: array("q") for n in INT_COLUMNS}
        self.floats = {n: array("d") for n in FLOAT_COLUMNS}
        self.codes = {n: array("i") for n in STRING_COLUMNS}
        self.interned = {n: Interned() for n in STRING_COLUMNS}

    def table(self) -> EventTable:
        return EventTable(
            {n: np.frombuffer(v, dtype=np.int64) for n, v in self.ints.items()},
            {n: np.frombuffer(v, dtype=np.float64) for n, v in self.floats.items()},
            {n: np.frombuffer(v, dtype=np.int32) for n, v in self.codes.items()},
            {n: tuple(i.values) for n, i in self.interned.items()},
        )


def _none_int(value: Any) -> int:
    found = to_int(value)
    return NULL if found is None else found


_HOST_STATS = frozenset(
    {
        STEP_STAT,
        STEP_MARKER_FLAG,
        "correlation_id",
        RUN_STAT,
        "_p",
        "_c",
        "name",
        "hlo_op",
        "hlo_module",
        "program_id",
        "device_ordinal",
    }
)


def _stat_reader(plane: Any, wanted: frozenset[str]) -> tuple[dict[int, str], dict[int, str]]:
    """The plane's stat ids we read (id -> name) and every stat metadata's name (for refs)."""
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    return {k: n for k, n in names.items() if n in wanted}, names


def _stats(event: Any, ids: Mapping[int, str], refs: Mapping[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stat in event.stats:
        name = ids.get(stat.metadata_id)
        if name is None:
            continue
        which = stat.WhichOneof("value")
        if which is None:
            continue
        out[name] = refs.get(stat.ref_value, "") if which == "ref_value" else getattr(stat, which)
    return out


@dataclass
class _Host:
    """What the host plane says: markers, launches (correlation id -> earliest start), the
    executions' windows (run, module, start, end) and the CPU thunks' rows."""

    markers: list[StepMarker] = field(default_factory=list)
    launches: dict[int, float] = field(default_factory=dict)
    roots: list[tuple[int | None, int | None, str | None, float, float]] = field(
        default_factory=list
    )
    others: list[tuple[int | None, str | None, float, float]] = field(default_factory=list)


def read_device_events(
    xplane_path: Path | str, steps: int | None = None
) -> tuple[DeviceEvent, ...]:
    """Every device event of a profile as normalized rows, in time order."""
    return read_events_and_markers(xplane_path, steps)[0]


def read_events_and_markers(
    xplane_path: Path | str, steps: int | None = None
) -> tuple[tuple[DeviceEvent, ...], tuple[StepMarker, ...]]:
    """A profile's device events (as DeviceEvents, in time order) and its step markers.

    `steps`, when given, is the caller's expected number of marked steps: a profile whose
    markers disagree raises ProfileError, since per-step numbers from it would be wrong.
    """
    table, markers = read_table(xplane_path, steps)
    return table.events(), markers


def read_table(
    path: Path | str, steps: int | None = None
) -> tuple[EventTable, tuple[StepMarker, ...]]:
    """A profile's device events (in time order, steps and runs assigned) and step markers.

    The device planes' events, or on a profile without device planes the CPU client's thunk
    events; raises ProfileError naming the path for a file that is not a profile.
    """
    path = Path(path)
    columns = _Columns()
    device_rows = _DeviceRows()
    host = _Host()
    try:
        gpu = _walk(profile_bytes(path), columns, device_rows, host)
    except (UnicodeDecodeError, TypeError, ValueError, OverflowError, IndexError) as err:
        raise ProfileError(f"{path}: profile content is malformed ({err})") from err
    except DecodeError as err:  # bytes that are no XSpace
        raise ProfileError(f"{path}: not a readable XSpace profile ({err})") from err
    # The profile's bytes are gone by now (only _walk held them): the table is built without
    # them. A GPU table is made in its final order; the CPU's few thunks are sorted at the end.
    table = _device_table(device_rows, columns) if gpu else columns.table()
    markers = tuple(sorted(host.markers, key=lambda m: m.start_ns))
    marked = sorted({m.step for m in markers})
    if steps is not None and marked and len(marked) != steps:
        raise ProfileError(
            f"{path}: expected {steps} marked steps, the profile has {len(marked)} ({marked})"
        )
    table = _with_runs(table, host)
    table = _with_steps(table, markers, host.launches)
    return (table if gpu else _sorted(table)), markers


def _walk(data: bytes, columns: _Columns, device_rows: _DeviceRows, host: _Host) -> bool:
    """Reads the device planes' rows and the host plane from a profile's bytes; True when a
    device plane holds events (else the host's CPU thunks are the rows)."""
    planes = xspace.planes(data)
    for plane in planes:
        if DEVICE_PLANE_RE.match(plane.name):
            _device_rows(plane, columns, device_rows)
    gpu = bool(device_rows.size)
    for plane in planes:
        if plane.name == HOST_PLANE:
            _host_plane(plane, host, None if gpu else columns)
    return gpu


_MODULE, _OP, _PROGRAM, _CORRELATION, _DETAILS, _COPY, _MEMSET = range(7)
_DEVICE_ROLES = {
    "hlo_module": _MODULE,
    "hlo_op": _OP,
    "program_id": _PROGRAM,
    "correlation_id": _CORRELATION,
    "kernel_details": _DETAILS,
    "memcpy_details": _COPY,
    "Memset_details": _MEMSET,
}


class _DeviceRows:
    """A device plane's rows: per event only its varying parts (the program and correlation
    ids, start and duration) and the number of its static part, everything its name and
    string stats decide (kind, module, op, launch shape, bytes), made once per distinct one."""

    def __init__(self) -> None:
        self.static: dict[tuple[Any, ...], int] = {}
        self.statics: list[tuple[int, ...]] = []  # codes and values, in STATIC order
        self.occupancy: list[float] = []
        # Each chunk's column pieces, in reading order: the static numbers (`which`), program
        # and correlation ids, starts and durations.
        self.pieces: dict[str, list[np.ndarray]] = {n: [] for n in _PIECES}
        self.size = 0

    def add(self, numbers: np.ndarray, chunk: _Chunk) -> None:
        for name, piece in zip(
            _PIECES,
            (numbers, chunk.program, chunk.correlation, chunk.start, chunk.duration),
            strict=True,
        ):
            self.pieces[name].append(piece)
        self.size += len(numbers)

    def joined(self, name: str, dtype: Any) -> np.ndarray:
        """One column's pieces joined, and let go: a long profile's chunks are freed column by
        column while the table is made, never held beside all of it."""
        pieces = self.pieces.pop(name)
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)


_PIECES = ("which", "program", "correlation", "start", "duration")


_STATIC = ("name", "kind", "direction", "hlo_module", "hlo_op", "device", "stream", "grid", "block")
_STATIC_INTS = ("bytes", "registers", "device_ordinal")


@dataclass(frozen=True)
class _Chunk:
    """One chunk of a device line: each event's varying parts, and its static part as the
    index of a key (event metadata id, module, op, details, copy/memset details) in `keys`."""

    keys: list[tuple[Any, ...]]
    which: np.ndarray
    program: np.ndarray
    correlation: np.ndarray
    start: np.ndarray
    duration: np.ndarray


def _chunk_rows(
    line: xspace.Line, run: int, role_of: Mapping[int, int], refs: Mapping[int, str]
) -> _Chunk:
    keys: dict[tuple[Any, ...], int] = {}
    which, program, correlation = array("q"), array("q"), array("q")
    starts, durations = array("d"), array("d")
    base_ps = line.timestamp_ns * 1000
    for event in line.chunk(run):
        strings: list[Any] = [None, None, None, None]  # module, op, details, copy/memset
        pid = cid = NULL
        for stat in event.stats:
            role = role_of.get(stat.metadata_id)
            if role is None:
                continue
            if role == _CORRELATION:
                cid = stat.uint64_value or stat.int64_value
            elif role == _PROGRAM:
                pid = stat.int64_value or stat.uint64_value
            else:
                ref = stat.ref_value
                value = refs.get(ref, "") if ref else stat.str_value
                strings[role if role < _DETAILS else (2 if role == _DETAILS else 3)] = value
        key = (event.metadata_id, *strings)
        number = keys.get(key)
        if number is None:
            number = keys[key] = len(keys)
        which.append(number)
        program.append(pid)
        correlation.append(cid)
        starts.append((base_ps + event.offset_ps) / 1000.0)
        durations.append(event.duration_ps / 1000.0)
    return _Chunk(
        list(keys),
        np.frombuffer(which, dtype=np.int64),
        np.frombuffer(program, dtype=np.int64),
        np.frombuffer(correlation, dtype=np.int64),
        np.frombuffer(starts, dtype=np.float64),
        np.frombuffer(durations, dtype=np.float64),
    )


def _encode(chunk: _Chunk) -> Any:
    arrays = (chunk.which, chunk.program, chunk.correlation, chunk.start, chunk.duration)
    return [chunk.keys, *(base64.b64encode(a.tobytes()).decode() for a in arrays)]


def _decode(data: Any) -> _Chunk:
    keys, *arrays = data
    types = (np.int64, np.int64, np.int64, np.float64, np.float64)
    decoded = [
        np.frombuffer(base64.b64decode(a), dtype=t) for a, t in zip(arrays, types, strict=True)
    ]
    return _Chunk([tuple(k) for k in keys], *decoded)


def _device_rows(plane: Any, out: _Columns, rows: _DeviceRows) -> None:
    """Reads a device plane's events, its lines' chunks spread over forked children."""
    role_of = {
        k: _DEVICE_ROLES[v.name] for k, v in plane.stat_metadata.items() if v.name in _DEVICE_ROLES
    }
    refs = {k: v.name for k, v in plane.stat_metadata.items()}
    names = {k: v.name for k, v in plane.event_metadata.items()}
    ordinal = plane_ordinal(plane.name)
    intern = out.interned
    device = intern["device"](plane.name)
    lines = list(plane.lines)
    tasks = [(i, run) for i, line in enumerate(lines) for run in range(line.chunks)]
    chunks = forked.fork_map(
        lambda task: _chunk_rows(lines[task[0]], task[1], role_of, refs), tasks, _encode, _decode
    )
    for (i, _), chunk in zip(tasks, chunks, strict=True):
        line = lines[i]
        stream = intern["stream"](line.name)
        numbers = np.empty(len(chunk.keys), dtype=np.int32)
        for k, key in enumerate(chunk.keys):
            full = (key[0], stream, *key[1:])
            number = rows.static.get(full)
            if number is None:
                number = rows.static[full] = len(rows.statics)
                rows.statics.append(
                    _static_part(
                        names.get(key[0], ""),
                        line.name,
                        stream,
                        device,
                        ordinal,
                        list(key[1:]),
                        intern,
                        rows,
                    )
                )
            numbers[k] = number
        rows.add(numbers[chunk.which] if len(chunk.which) else numbers[:0], chunk)


def _static_part(
    name: str,
    line: str,
    stream: int,
    device: int,
    ordinal: int | None,
    strings: list[Any],
    intern: Mapping[str, Interned],
    rows: _DeviceRows,
) -> tuple[int, ...]:
    kind, direction = classify(name, line)
    if kind == "kernel":
        d = parse_kernel_details(None if strings[2] is None else str(strings[2]))
        grid, block, registers, occupancy = d.grid, d.block, d.registers, d.occupancy_pct
        moved = None
    else:
        grid = block = registers = occupancy = None
        details = "memcpy_details" if kind == "memcpy" else "Memset_details"
        moved = None if strings[3] is None else transfer_bytes({details: strings[3]})
    rows.occupancy.append(np.nan if occupancy is None else occupancy)
    return (
        intern["name"](name),
        intern["kind"](kind),
        intern["direction"](direction),
        intern["hlo_module"](_text(strings[0])),
        intern["hlo_op"](_text(strings[1])),
        device,
        stream,
        intern["grid"](grid),
        intern["block"](block),
        NULL if moved is None else moved,
        NULL if registers is None else registers,
        NULL if ordinal is None else ordinal,
    )


def _device_table(rows: _DeviceRows, out: _Columns) -> EventTable:
    """The device planes' rows as a table in (start, device, stream) order (`_sorted`'s): the
    static parts spread by their numbers, each column made once, already in that order."""
    strings = {k: tuple(i.values) for k, i in out.interned.items()}
    statics = np.array(rows.statics, dtype=np.int64).reshape(-1, len(_STATIC) + len(_STATIC_INTS))
    which = rows.joined("which", np.int32)
    start = rows.joined("start", np.float64)
    device, stream = (statics[:, _STATIC.index(n)] for n in ("device", "stream"))
    order = np.lexsort(
        (
            _rank(strings["stream"])[stream][which],
            _rank(strings["device"])[device][which],
            start,
        )
    )
    which, start = which[order], start[order]
    codes = {n: statics[:, k].astype(np.int32)[which] for k, n in enumerate(_STATIC)}
    ints = {n: statics[:, len(_STATIC) + k][which] for k, n in enumerate(_STATIC_INTS)}
    n = len(which)
    ints["program_id"] = rows.joined("program", np.int64)[order]
    ints["correlation_id"] = rows.joined("correlation", np.int64)[order]
    ints["step"] = np.full(n, NULL, dtype=np.int64)
    ints["run_id"] = np.full(n, NULL, dtype=np.int64)
    floats = {
        "start_ns": start,
        "duration_ns": rows.joined("duration", np.float64)[order],
        "occupancy_pct": np.array(rows.occupancy, dtype=np.float64)[which],
    }
    return EventTable(ints, floats, codes, strings)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _host_plane(plane: Any, host: _Host, thunks: _Columns | None) -> None:
    """Reads the host plane's markers, launches and windows, and (`thunks`) the CPU thunks."""
    ids, refs = _stat_reader(plane, _HOST_STATS)
    names = {k: v.name for k, v in plane.event_metadata.items()}
    for line in plane.lines:
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            stats = _stats(event, ids, refs)
            if not stats:
                continue
            start = (base_ps + event.offset_ps) / 1000.0
            end = start + event.duration_ps / 1000.0
            if STEP_STAT in stats and STEP_MARKER_FLAG in stats:
                host.markers.append(
                    StepMarker(names.get(event.metadata_id, ""), int(stats[STEP_STAT]), start, end)
                )
            cid = to_int(stats.get("correlation_id"))
            if cid is not None:
                host.launches[cid] = min(start, host.launches.get(cid, start))
            if "hlo_op" in stats:
                name = names.get(event.metadata_id, "")
                if thunks is not None and not name.startswith("end: "):
                    _thunk_row(thunks, name, line.name, stats, start, event.duration_ps / 1000.0)
                continue
            if RUN_STAT in stats:
                host.roots.append(
                    (
                        to_int(stats[RUN_STAT]),
                        to_int(stats.get("_p")),
                        _text(stats.get("name")),
                        start,
                        end,
                    )
                )
            elif "_c" in stats:
                host.others.append((to_int(stats.get("_c")), _text(stats.get("name")), start, end))


def _thunk_row(
    out: _Columns, name: str, stream: str, stats: Mapping[str, Any], start: float, duration: float
) -> None:
    intern = out.interned
    for column, value in (
        ("name", name),
        ("kind", "host_thunk"),
        ("direction", None),
        ("hlo_module", _text(stats.get("hlo_module"))),
        ("hlo_op", _text(stats.get("hlo_op"))),
        ("device", HOST_PLANE),
        ("stream", stream),
        ("grid", None),
        ("block", None),
    ):
        out.codes[column].append(intern[column](value))
    for column, value in (
        ("step", None),
        ("bytes", None),
        ("program_id", stats.get("program_id")),
        ("correlation_id", None),
        ("registers", None),
        ("device_ordinal", stats.get("device_ordinal")),
        ("run_id", stats.get(RUN_STAT)),
    ):
        out.ints[column].append(_none_int(value))
    out.floats["start_ns"].append(start)
    out.floats["duration_ns"].append(duration)
    out.floats["occupancy_pct"].append(np.nan)


def _launch_times(table: EventTable, launches: Mapping[int, float]) -> np.ndarray:
    """Each row's host launch time (ns), NaN where its correlation id launched nothing."""
    out = np.full(len(table), np.nan)
    if not launches:
        return out
    cids = np.fromiter(launches.keys(), dtype=np.int64, count=len(launches))
    times = np.fromiter(launches.values(), dtype=np.float64, count=len(launches))
    order = np.argsort(cids)
    cids, times = cids[order], times[order]
    mine = table.ints["correlation_id"]
    at = np.clip(np.searchsorted(cids, mine), 0, len(cids) - 1)
    hit = (mine != NULL) & (cids[at] == mine)
    out[hit] = times[at[hit]]
    return out


_SCAN_BACK = 64  # windows overlap only by nesting (a root around its devices' children)


def _windows(host: _Host) -> dict[str | None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each module's execution windows (and those naming none) as (starts, ends, runs), in
    (start, -end) order: a root's run, or through its flow the root's run for a device's
    child, found through the flow stat `_c` == the root's `_p`)."""
    run_of_flow = {p: r for r, p, _, _, _ in host.roots if p is not None and r is not None}
    rows = [(r, m, s, e) for r, _, m, s, e in host.roots if r is not None]
    rows += [
        (run_of_flow[c], m, s, e)
        for c, m, s, e in host.others
        if c is not None and c in run_of_flow
    ]
    grouped: dict[str | None, list[tuple[float, float, int]]] = {}
    for run, module, start, end in rows:
        grouped.setdefault(module, []).append((start, end, run))
    out = {}
    for module, ws in grouped.items():
        ws.sort(key=lambda w: (w[0], -w[1]))
        out[module] = (
            np.array([w[0] for w in ws]),
            np.array([w[1] for w in ws]),
            np.array([w[2] for w in ws], dtype=np.int64),
        )
    return out


def _innermost(starts: np.ndarray, ends: np.ndarray, when: np.ndarray) -> np.ndarray:
    """For each time, the index of the latest-starting window (among the _SCAN_BACK before
    it) that contains it, -1 for none."""
    index = np.searchsorted(starts, when, side="right") - 1
    found = np.full(len(when), -1, dtype=np.int64)
    for back in range(_SCAN_BACK):
        at = index - back
        open_ = (found < 0) & (at >= 0)
        if not open_.any():
            break
        safe = np.where(open_, at, 0)
        hit = open_ & (when < ends[safe])
        found[hit] = at[hit]
    return found


def _with_runs(table: EventTable, host: _Host) -> EventTable:
    """Gives each row without a run id the run of the innermost execution window of its own
    module (or of a window naming none) that contains its host launch."""
    windows = _windows(host)
    if not windows:
        return table
    when = _launch_times(table, host.launches)
    runs = table.ints["run_id"].copy()
    open_ = (runs == NULL) & ~np.isnan(when)
    best_start = np.full(len(table), -np.inf)
    best_run = np.full(len(table), NULL, dtype=np.int64)
    modules = table.strings["hlo_module"]
    # A window of the row's own module first: one naming none replaces it only if it began later.
    for module, (starts, ends, ids) in sorted(windows.items(), key=lambda kv: kv[0] is None):
        rows = open_.copy()
        if module is not None:
            rows &= table.codes["hlo_module"] == (
                modules.index(module) if module in modules else -1
            )
        where = np.flatnonzero(rows)
        if not len(where):
            continue
        hit = _innermost(starts, ends, when[where])
        keep = hit >= 0
        where, hit = where[keep], hit[keep]
        better = starts[hit] > best_start[where]
        best_start[where[better]] = starts[hit[better]]
        best_run[where[better]] = ids[hit[better]]
    runs = np.where(open_ & (best_run != NULL), best_run, runs)
    return _replaced(table, run_id=runs)


def _with_steps(
    table: EventTable, markers: Sequence[StepMarker], launches: Mapping[int, float]
) -> EventTable:
    """Gives each row its step: the marker window holding its host launch (else its start),
    else the latest marker begun before it (device work trails the host)."""
    if not markers:
        return table
    when = _launch_times(table, launches)
    when = np.where(np.isnan(when), table.floats["start_ns"], when)
    starts = np.array([m.start_ns for m in markers])
    ends = np.array([m.end_ns for m in markers])
    numbers = np.array([m.step for m in markers], dtype=np.int64)
    index = np.searchsorted(starts, when, side="right") - 1
    steps = np.where(index >= 0, numbers[np.maximum(index, 0)], NULL)
    if len(markers) > 1 and (starts[1:] < np.maximum.accumulate(ends)[:-1]).any():
        # Overlapping markers: the first (in start order) that holds the time wins.
        for i in np.flatnonzero(index >= 0):
            for m in markers:
                if m.start_ns <= when[i] < m.end_ns:
                    steps[i] = m.step
                    break
    return _replaced(table, step=steps)


def _replaced(table: EventTable, **ints: np.ndarray) -> EventTable:
    return EventTable({**table.ints, **ints}, table.floats, table.codes, table.strings)


def _sorted(table: EventTable) -> EventTable:
    """The rows in (start, device, stream) order, ties kept in reading order."""

    def rank(column: str) -> np.ndarray:
        return _rank(table.strings[column])[table.codes[column]]

    order = np.lexsort((rank("stream"), rank("device"), table.floats["start_ns"]))
    if (order == np.arange(len(order))).all():
        return table  # read in order already (one stream, say): no copy of every column
    return table.take(order)


def _rank(values: Sequence[Any]) -> np.ndarray:
    """Each code's rank among a string column's values in sorted order (None first)."""
    order = sorted(range(len(values)), key=lambda c: (values[c] is not None, values[c] or ""))
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(len(values))
    return ranks
