"""A profile's device events as one columnar table: NumPy columns, strings kept once.

A row is what `harness.profile.events.DeviceEvent` holds (the rules of step and run
assignment are that module's docstring); the table keeps each column as one array and each
string column as codes into a tuple of its distinct values (code 0 is None), so a profile of
millions of events costs tens of bytes an event, not a Python object each. Rows become
`DeviceEvent`s only where a caller asks for them (`event`, `events`).

`read_table` walks the stored XSpace once (harness.profile.xspace): the device planes' events,
and on the host plane the step markers, the launches (correlation ids), the executions'
windows and, on the CPU backend, the thunks. Assigning steps and runs are array operations.
`to_arrow` and `from_arrow` give the Parquet form (events.parquet).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.common import userfiles
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
    to_int,
    transfer_bytes,
)

NULL = np.iinfo(np.int64).min  # a missing integer in an int64 column
# Columns of integers (NULL when missing), floats (NaN when missing) and string codes.
INT_COLUMNS = (
    "step",
    "bytes",
    "program_id",
    "correlation_id",
    "registers",
    "device_ordinal",
    "run_id",
)
FLOAT_COLUMNS = ("start_ns", "duration_ns", "occupancy_pct")
STRING_COLUMNS = (
    "name",
    "kind",
    "direction",
    "hlo_module",
    "hlo_op",
    "device",
    "stream",
    "grid",
    "block",
)
_DIM3 = ("grid", "block")  # string columns whose values are `x,y,z` launch shapes


@dataclass(frozen=True, eq=False)
class EventTable:
    """Device events as columns: `ints`, `floats` and `codes` (into `strings`) by name."""

    ints: Mapping[str, np.ndarray]
    floats: Mapping[str, np.ndarray]
    codes: Mapping[str, np.ndarray]
    strings: Mapping[str, tuple[Any, ...]]
    _events: dict[int, DeviceEvent] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.floats["start_ns"])

    def text(self, column: str) -> np.ndarray:
        """A string column as an object array of its values (None where missing)."""
        values = np.empty(len(self.strings[column]), dtype=object)
        values[:] = self.strings[column]
        return values[self.codes[column]]

    def code_of(self, column: str, value: Any) -> int:
        """The code of `value` in a string column, -1 when the column never holds it."""
        try:
            return self.strings[column].index(value)
        except ValueError:
            return -1

    def take(self, rows: np.ndarray) -> EventTable:
        """The table of the given rows (indices or a mask), in that order."""
        return EventTable(
            {k: v[rows] for k, v in self.ints.items()},
            {k: v[rows] for k, v in self.floats.items()},
            {k: v[rows] for k, v in self.codes.items()},
            self.strings,
        )

    def subset(self, mask: np.ndarray) -> EventTable:
        """The rows a boolean mask selects, in order: this table itself when it selects all
        (a long profile's columns are not copied for nothing)."""
        return self if bool(mask.all()) else self.take(np.flatnonzero(mask))

    def event(self, i: int) -> DeviceEvent:
        """Row `i` as a DeviceEvent (made once per row and kept)."""
        found = self._events.get(i)
        if found is None:
            found = self._events[i] = self._make(int(i))
        return found

    def events(self, rows: Iterable[int] | None = None) -> tuple[DeviceEvent, ...]:
        """The given rows (every row by default) as DeviceEvents, not kept."""
        indices = range(len(self)) if rows is None else rows
        return tuple(self._make(int(i)) for i in indices)

    def _make(self, i: int) -> DeviceEvent:
        def get_int(name: str) -> int | None:
            value = int(self.ints[name][i])
            return None if value == NULL else value

        def get_str(name: str) -> Any:
            return self.strings[name][self.codes[name][i]]

        occupancy = float(self.floats["occupancy_pct"][i])
        return DeviceEvent(
            step=get_int("step"),
            name=get_str("name"),
            kind=get_str("kind"),
            direction=get_str("direction"),
            bytes=get_int("bytes"),
            hlo_module=get_str("hlo_module"),
            hlo_op=get_str("hlo_op"),
            program_id=get_int("program_id"),
            correlation_id=get_int("correlation_id"),
            device=get_str("device"),
            stream=get_str("stream"),
            start_ns=float(self.floats["start_ns"][i]),
            duration_ns=float(self.floats["duration_ns"][i]),
            grid=get_str("grid"),
            block=get_str("block"),
            registers=get_int("registers"),
            occupancy_pct=None if np.isnan(occupancy) else occupancy,
            device_ordinal=get_int("device_ordinal"),
            run_id=get_int("run_id"),
        )

    @property
    def end_ns(self) -> np.ndarray:
        return self.floats["start_ns"] + self.floats["duration_ns"]

    def is_kind(self, *kinds: str) -> np.ndarray:
        """A mask of the rows of any of these kinds."""
        wanted = [self.code_of("kind", k) for k in kinds]
        return np.isin(self.codes["kind"], [c for c in wanted if c >= 0])

    def to_arrow(self, extra: Mapping[str, Any] | None = None) -> Any:
        """The table as a pyarrow Table: string columns dictionary-encoded, NULLs as nulls;
        `extra` adds columns (the attribution's) given as arrays or (codes, values) pairs."""
        import pyarrow as pa

        arrays: dict[str, Any] = {}
        for name in STRING_COLUMNS:
            arrays[name] = _dictionary(self.codes[name], self.strings[name])
        for name, values in self.ints.items():
            arrays[name] = pa.array(values, mask=values == NULL)
        for name, values in self.floats.items():
            arrays[name] = pa.array(values, from_pandas=name == "occupancy_pct")
        for name, value in (extra or {}).items():
            arrays[name] = _dictionary(*value) if isinstance(value, tuple) else pa.array(value)
        return pa.table(arrays)


def _dictionary(codes: np.ndarray, values: Sequence[Any]) -> Any:
    """Codes into `values` (code 0 is None) as an Arrow dictionary array with nulls."""
    import pyarrow as pa

    shown = [",".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in values[1:]]
    indices = pa.array(codes.astype(np.int32) - 1, mask=codes == 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(shown, type=pa.string()))


def from_arrow(table: Any) -> EventTable:
    """An EventTable from its Arrow form (`EventTable.to_arrow`), extra columns ignored."""
    ints = {n: _ints(table.column(n)) for n in INT_COLUMNS}
    floats = {n: table.column(n).to_numpy().astype(np.float64) for n in FLOAT_COLUMNS}
    codes: dict[str, np.ndarray] = {}
    strings: dict[str, tuple[Any, ...]] = {}
    for name in STRING_COLUMNS:
        codes[name], strings[name] = decode_column(table.column(name), name in _DIM3)
    return EventTable(ints, floats, codes, strings)


def decode_column(column: Any, dim3: bool = False) -> tuple[np.ndarray, tuple[Any, ...]]:
    """A dictionary-encoded Arrow column as (codes, values) with code 0 for null."""
    import pyarrow as pa

    combined = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(combined.type):
        combined = combined.dictionary_encode()
    indices = combined.indices.to_numpy(zero_copy_only=False)
    nulls = combined.indices.is_null().to_numpy(zero_copy_only=False)
    codes = np.where(nulls, 0, np.nan_to_num(indices, nan=-1).astype(np.int64) + 1)
    values = [None] + [_dim3(v) if dim3 else v for v in combined.dictionary.to_pylist()]
    return codes.astype(np.int32), tuple(values)


def _dim3(text: str | None) -> tuple[int, ...] | None:
    return None if text is None else tuple(int(x) for x in text.split(","))


def _ints(column: Any) -> np.ndarray:
    values = column.to_numpy(zero_copy_only=False)
    if values.dtype == object or values.dtype.kind == "f":
        mask = column.is_null().to_numpy(zero_copy_only=False)
        out = np.where(mask, 0, values).astype(np.int64)
        out[mask] = NULL
        return out
    return values.astype(np.int64)


class _Interned:
    """Codes of one string column: code 0 is None, each distinct value gets the next code."""

    def __init__(self) -> None:
        self.code: dict[Any, int] = {None: 0}
        self.values: list[Any] = [None]

    def __call__(self, value: Any) -> int:
        code = self.code.get(value)
        if code is None:
            code = self.code[value] = len(self.values)
            self.values.append(value)
        return code


class _Columns:
    """Rows appended column by column while the XSpace is walked, into typed buffers (eight
    bytes a value, not a Python object each)."""

    def __init__(self) -> None:
        self.ints = {n: array("q") for n in INT_COLUMNS}
        self.floats = {n: array("d") for n in FLOAT_COLUMNS}
        self.codes = {n: array("i") for n in STRING_COLUMNS}
        self.interned = {n: _Interned() for n in STRING_COLUMNS}

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
    if not path.is_file():
        raise ProfileError(f"{path}: profile file does not exist")
    try:
        data = userfiles.read_bytes(path, userfiles.PROFILE)
    except userfiles.Unreadable as err:
        raise ProfileError(str(err)) from None
    columns = _Columns()
    device_rows = _DeviceRows()
    host = _Host()
    try:
        planes = xspace.planes(data)
        for plane in planes:
            if DEVICE_PLANE_RE.match(plane.name):
                _device_rows(plane, columns, device_rows)
        gpu = bool(device_rows.start)
        for plane in planes:
            if plane.name == HOST_PLANE:
                _host_plane(plane, host, None if gpu else columns)
    except (UnicodeDecodeError, TypeError, ValueError, OverflowError, IndexError) as err:
        raise ProfileError(f"{path}: profile content is malformed ({err})") from err
    except Exception as err:  # protobuf's DecodeError: bytes that are no XSpace
        raise ProfileError(f"{path}: not a readable XSpace profile ({err})") from err
    del data, planes
    table = _device_table(device_rows, columns) if gpu else columns.table()
    markers = tuple(sorted(host.markers, key=lambda m: m.start_ns))
    marked = sorted({m.step for m in markers})
    if steps is not None and marked and len(marked) != steps:
        raise ProfileError(
            f"{path}: expected {steps} marked steps, the profile has {len(marked)} ({marked})"
        )
    table = _with_runs(table, host)
    table = _with_steps(table, markers, host.launches)
    return _sorted(table), markers


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
        self.which = array("q")
        self.program = array("q")
        self.correlation = array("q")
        self.start = array("d")
        self.duration = array("d")


_STATIC = ("name", "kind", "direction", "hlo_module", "hlo_op", "device", "stream", "grid", "block")
_STATIC_INTS = ("bytes", "registers", "device_ordinal")


def _device_rows(plane: Any, out: _Columns, rows: _DeviceRows) -> None:
    role_of = {
        k: _DEVICE_ROLES[v.name] for k, v in plane.stat_metadata.items() if v.name in _DEVICE_ROLES
    }
    refs = {k: v.name for k, v in plane.stat_metadata.items()}
    names = {k: v.name for k, v in plane.event_metadata.items()}
    ordinal = plane_ordinal(plane.name)
    intern = out.interned
    device = intern["device"](plane.name)
    which, program, correlation = rows.which, rows.program, rows.correlation
    starts, durations = rows.start, rows.duration
    static = rows.static
    for line in plane.lines:
        stream = intern["stream"](line.name)
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
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
            key = (event.metadata_id, stream, *strings)
            number = static.get(key)
            if number is None:
                number = static[key] = len(rows.statics)
                rows.statics.append(
                    _static_part(
                        names.get(event.metadata_id, ""),
                        line.name,
                        stream,
                        device,
                        ordinal,
                        strings,
                        intern,
                        rows,
                    )
                )
            which.append(number)
            program.append(pid)
            correlation.append(cid)
            starts.append((base_ps + event.offset_ps) / 1000.0)
            durations.append(event.duration_ps / 1000.0)


def _static_part(
    name: str,
    line: str,
    stream: int,
    device: int,
    ordinal: int | None,
    strings: list[Any],
    intern: Mapping[str, _Interned],
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
    """The device planes' rows as a table: static parts spread by their numbers."""
    which = np.frombuffer(rows.which, dtype=np.int64)
    statics = np.array(rows.statics, dtype=np.int64).reshape(-1, len(_STATIC) + len(_STATIC_INTS))
    codes = {n: statics[:, k].astype(np.int32)[which] for k, n in enumerate(_STATIC)}
    ints = {n: statics[:, len(_STATIC) + k][which] for k, n in enumerate(_STATIC_INTS)}
    n = len(which)
    ints["program_id"] = np.frombuffer(rows.program, dtype=np.int64)
    ints["correlation_id"] = np.frombuffer(rows.correlation, dtype=np.int64)
    ints["step"] = np.full(n, NULL, dtype=np.int64)
    ints["run_id"] = np.full(n, NULL, dtype=np.int64)
    floats = {
        "start_ns": np.frombuffer(rows.start, dtype=np.float64),
        "duration_ns": np.frombuffer(rows.duration, dtype=np.float64),
        "occupancy_pct": np.array(rows.occupancy, dtype=np.float64)[which],
    }
    return EventTable(ints, floats, codes, {k: tuple(i.values) for k, i in out.interned.items()})


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
        values = table.strings[column]
        order = sorted(range(len(values)), key=lambda c: (values[c] is not None, values[c] or ""))
        ranks = np.empty(len(values), dtype=np.int64)
        ranks[order] = np.arange(len(values))
        return ranks[table.codes[column]]

    order = np.lexsort((rank("stream"), rank("device"), table.floats["start_ns"]))
    return table.take(order)


def self_ns(table: EventTable) -> np.ndarray:
    """Each row's duration minus the time of the rows nested inside it on its device and
    stream (ns), as harness.analyze.module_analysis.self_times; rows that only overlap are not
    nested. Streams where nothing overlaps (GPU streams, as a rule) cost one array pass."""
    out = table.floats["duration_ns"].copy()
    if not len(out):
        return out
    starts, ends = table.floats["start_ns"], table.end_ns
    order = np.lexsort((-out, starts, table.codes["stream"], table.codes["device"]))
    lane = table.codes["device"][order].astype(np.int64) << 32 | table.codes["stream"][order]
    new_lane = np.r_[True, lane[1:] != lane[:-1]]
    # An overlap is a start before the latest end of the lane's earlier rows.
    lane_id = np.cumsum(new_lane) - 1
    overlapping = np.unique(lane_id[starts[order] < _lane_reach(ends[order], new_lane)])
    for lid in overlapping:
        rows = order[lane_id == lid]
        stack: list[int] = []
        for i in rows:
            while stack and ends[stack[-1]] <= starts[i]:
                stack.pop()
            if stack and ends[i] <= ends[stack[-1]]:
                out[stack[-1]] -= table.floats["duration_ns"][i]
            stack.append(int(i))
    return np.maximum(out, 0.0)


def _lane_reach(ends: np.ndarray, new_lane: np.ndarray) -> np.ndarray:
    """For each row, the latest end among the rows before it in its lane (-inf for a first)."""
    out = np.empty(len(ends))
    bounds = np.r_[np.flatnonzero(new_lane), len(ends)]
    for lo, hi in itertools.pairwise(bounds):
        out[lo] = -np.inf
        if hi - lo > 1:
            out[lo + 1 : hi] = np.maximum.accumulate(ends[lo : hi - 1])
    return out
