"""A profile's device events as one columnar table: NumPy columns, strings kept once.

A row is what `harness.profile.events.DeviceEvent` holds (the rules of step and run
assignment are that module's docstring); the table keeps each column as one array and each
string column as codes into a tuple of its distinct values (code 0 is None), so a profile of
millions of events costs tens of bytes an event, not a Python object each. Rows become
`DeviceEvent`s only where a caller asks for them (`event`, `events`).

harness.profile.reader makes one from a profile; `to_arrow` and `from_arrow` give its Parquet
form (events.parquet); `self_ns` is each row's self time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.profile.events import (
    DeviceEvent,
)
from harness.records.events_file import FLOAT_COLUMNS, INT_COLUMNS

NULL = np.iinfo(np.int64).min  # a missing integer in an int64 column
# Columns of integers (NULL when missing) and floats (NaN when missing), as events.parquet
# has them, and of string codes.
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

    def __len__(self) -> int:
        return len(self.floats["start_ns"])

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

    def events(self, rows: Iterable[int] | None = None) -> tuple[DeviceEvent, ...]:
        """The given rows (every row by default) as DeviceEvents."""
        indices = range(len(self)) if rows is None else rows
        return tuple(self.event(int(i)) for i in indices)

    def programs(self) -> tuple[list[tuple[str, int | None] | None], np.ndarray]:
        """The distinct (module, program id) pairs of the rows (None: outside any program),
        sorted, and each row's index into them."""
        modules, pids = self.codes["hlo_module"], self.ints["program_id"]
        first, inverse = groups_of(modules, pids)
        keys = [
            None
            if modules[i] == 0
            else (self.strings["hlo_module"][modules[i]], None if pids[i] == NULL else int(pids[i]))
            for i in first.tolist()
        ]
        return keys, inverse

    def event(self, i: int) -> DeviceEvent:
        """Row `i` as a DeviceEvent."""

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


class Interned:
    """Codes of one string column being built: code 0 is None, each distinct value gets the next code."""

    def __init__(self) -> None:
        self.code: dict[Any, int] = {None: 0}
        self.values: list[Any] = [None]

    def __call__(self, value: Any) -> int:
        code = self.code.get(value)
        if code is None:
            code = self.code[value] = len(self.values)
            self.values.append(value)
        return code


def groups_of(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct combination, each row's combination number), numbered in
    the combinations' sorted order. Each column is factorized alone and the factors joined in
    one integer, so a million rows cost a few one-dimensional passes: codes and other small
    non-negative integers through an array indexed by value, anything else through a sort."""
    n = len(columns[0])
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    joined = np.zeros(n, dtype=np.int64)
    span = 1
    for column in columns:
        factor, count = _factorized(column)
        if span * count >= 1 << 62:  # too many combinations for one integer
            joined, span = _factorized(joined)
        joined = joined * count + factor
        span *= count
    if span <= max(n, _DENSE):
        return _first_and_number(joined, span)
    _, first, inverse = np.unique(joined, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


# Values (or combinations) up to this many, or up to the number of rows, are numbered through
# an array indexed by value rather than a sort.
_DENSE = 1 << 16


def _factorized(column: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the column's distinct values, and how many there are."""
    if column.dtype.kind in "iu":
        lo, hi = int(column.min()), int(column.max())
        if lo >= 0 and hi < max(len(column), _DENSE):
            present = np.zeros(hi + 1, dtype=bool)
            present[column] = True
            return (np.cumsum(present) - 1)[column], int(present.sum())
    values, factor = np.unique(column, return_inverse=True)
    return factor.reshape(-1).astype(np.int64), len(values)


def _first_and_number(joined: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """groups_of's answer for combinations below `span`, without sorting the rows."""
    first = np.full(span, len(joined), dtype=np.int64)
    np.minimum.at(first, joined, np.arange(len(joined)))
    present = first < len(joined)
    return first[present], (np.cumsum(present) - 1)[joined]


def members_of(group: np.ndarray, groups: int) -> list[np.ndarray]:
    """The positions of each group's members, in order."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(groups + 1))
    return [order[bounds[g] : bounds[g + 1]] for g in range(groups)]


def union_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """The length of the union of [start, end) intervals (ns)."""
    if not len(starts):
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    begin = s[new]
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]
    return float((reach[last] - begin).sum())


def self_ns(table: EventTable) -> np.ndarray:
    """Each row's duration minus the time of the rows nested inside it on its device and
    stream (ns), as harness.program.module_analysis.self_times; rows that only overlap are not
    nested. Streams where nothing overlaps (GPU streams, as a rule) cost one array pass."""
    out = table.floats["duration_ns"].copy()
    if not len(out):
        return out
    starts, ends = table.floats["start_ns"], table.end_ns
    order = np.lexsort((-out, starts, table.codes["stream"], table.codes["device"]))
    lane = table.codes["device"][order].astype(np.int64) << 32 | table.codes["stream"][order]
    new_lane = np.r_[True, lane[1:] != lane[:-1]]
    # An overlap is a start before the latest end of the lane's earlier rows; a row that
    # overlaps none of them begins a new run of overlapping rows, and nesting stays within a
    # run: only runs of two rows or more are walked.
    new_run = new_lane | (starts[order] >= _lane_reach(ends[order], new_lane))
    run_id = np.cumsum(new_run) - 1
    sizes = np.bincount(run_id)
    walked = np.flatnonzero(sizes[run_id] > 1)
    bounds = np.flatnonzero(np.r_[True, run_id[walked][1:] != run_id[walked][:-1], True])
    for lo, hi in itertools.pairwise(bounds.tolist()):
        rows = order[walked[lo:hi]]
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
