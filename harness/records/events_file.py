"""events.parquet: every device event of a steady window, one row each, with its attribution.

The file of every event (a profile of millions of events makes a file of megabytes, where
kernels.json's version 1 held them as JSON, five times the profile). Its columns are the
record's fields (harness.records.run_files.KernelEvent): the event's (harness.profile.table's
columns, a launch shape as `x,y,z`) and the match's (`cluster`, `rule`, `reason`, ...), string
columns dictionary-encoded, zstd-compressed; DuckDB, Polars, Spark or Trino read it as it is.

    write(path, tables)     the one writer: `python -m harness.analyze`, the study's analysis
                            (harness.analyze.files) and migrate write through it, atomically
    from_rows(rows)         the Arrow table of rows given as the record's fields (PyTorch's
                            events, a version-1 kernels.json's)
    read(folder)            the one reader of a variant's events: events.parquet, or in a run
                            written before it (kernels.json version 1) the events kernels.json
                            holds; a typed KernelEvent per row
    read_table(path)        the Arrow table of an events.parquet, through the one file reader
    migrate_run(run)        a run's version-1 kernels.json files, their events moved into
                            events.parquet (`python -m harness.migrate`)

A layout of several files (a folder of parts, one per host) is read by `read_table` alone:
every other reader goes through it.
"""

from __future__ import annotations

import dataclasses
import io as bytes_io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.records import run_files
from harness.records.run_files import KernelEvent
from harness.store import io
from harness.store.records import SchemaError
from harness.store.runfolder import RunFolder, VariantFolder

FIELDS = tuple(f.name for f in dataclasses.fields(KernelEvent))
# A launch shape is a string `x,y,z` in the file (what the event table's Arrow form writes).
_DIM3 = ("grid", "block")
_BOOLS = ("matched", "ambiguous")
# The event table's numeric columns (harness.profile.table reads and writes by these): integers
# (null where missing) and floats. Every other column is a string.
FLOAT_COLUMNS = ("start_ns", "duration_ns", "occupancy_pct")
INT_COLUMNS = (
    "step",
    "bytes",
    "program_id",
    "correlation_id",
    "registers",
    "device_ordinal",
    "run_id",
)
# Columns every row has a value in: a file without one of them is not an events file.
_REQUIRED = ("name", "kind", "device", "stream", "start_ns", "duration_ns", "matched", "rule")


def write(path: Path, tables: Iterable[Any]) -> Path:
    """Writes the Arrow `tables` (slices of one table, in order) as one events.parquet,
    atomically; returns the path. Only one slice's Arrow form is held at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def fill(tmp: Path) -> None:
        writer = None
        try:
            for table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
            # Arrow's allocator keeps the slices' memory for reuse: handed back, tens of MB
            # on a million events.
            pa.default_memory_pool().release_unused()
        if writer is None:  # no slice at all: an empty file of the record's columns
            pq.write_table(from_rows(()), tmp, compression="zstd")

    return io.write_by(path, fill)


def from_rows(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The Arrow table of rows given as KernelEvent's fields (missing ones null), with the
    column types the event table writes: strings dictionary-encoded, integers int64."""
    import pyarrow as pa

    columns: dict[str, Any] = {}
    for name in FIELDS:
        values = [r.get(name) for r in rows]
        if name in _DIM3:
            values = [None if v is None else ",".join(str(x) for x in v) for v in values]
        if name in INT_COLUMNS:
            columns[name] = pa.array(values, pa.int64())
        elif name in FLOAT_COLUMNS:
            columns[name] = pa.array(values, pa.float64())
        elif name in _BOOLS:
            columns[name] = pa.array(values, pa.bool_())
        else:
            columns[name] = pa.array(values, pa.string()).dictionary_encode()
    return pa.table(columns)


def read_table(path: Path) -> Any:
    """The Arrow table of the events.parquet at `path`, or of a folder of parts partitioned by
    host (`events/host=<name>/part-0.parquet`, python -m harness.analyze on a session of
    several hosts: one table, the host's name in a `host` column, as Hive-style readers give
    it), read through the one file reader; raises SchemaError naming the file for one that
    is not Parquet."""
    import pyarrow as pa

    if not path.is_dir():
        return _read_part(path)
    tables = []
    for part in sorted(path.glob("host=*/*.parquet")):
        table = _read_part(part, path)
        host = part.parent.name.partition("=")[2]
        tables.append(table.append_column("host", pa.array([host] * len(table), pa.string())))
    if not tables:
        raise SchemaError(str(path), "", "no host=<name>/*.parquet part in this events folder")
    return pa.concat_tables(tables, promote_options="permissive")


def _read_part(path: Path, within: Path | None = None) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        data = userfiles.read_bytes(path, userfiles.PROFILE, within)
    except userfiles.Unreadable as e:
        raise SchemaError(str(path), "", str(e).removeprefix(f"{path}: ")) from None
    try:
        return pq.read_table(bytes_io.BytesIO(data))
    except (pa.ArrowException, OSError) as e:
        raise SchemaError(str(path), "", f"not a Parquet events file ({e})") from None


def rows_of(table: Any, source: str) -> tuple[KernelEvent, ...]:
    """The rows of an events table as typed records (columns the record lacks are ignored);
    raises SchemaError naming `source` and the column that is missing."""
    present = set(table.column_names)
    for name in _REQUIRED:
        if name not in present:
            raise SchemaError(source, name, "missing: every events file has this column")
    columns = {n: table.column(n).to_pylist() for n in FIELDS if n in present}
    for name in _DIM3:
        if name in columns:
            columns[name] = [_dim3(v) for v in columns[name]]
    names = list(columns)
    return tuple(
        KernelEvent(**dict(zip(names, values, strict=True)))
        for values in zip(*columns.values(), strict=True)
    )


def rows_of_all(tables: Iterable[Any], source: str) -> tuple[KernelEvent, ...]:
    """The rows of Arrow tables in order (events.parquet's slices) as typed records."""
    return tuple(row for table in tables for row in rows_of(table, source))


def _dim3(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    x, y, z = (int(v) for v in text.split(","))
    return (x, y, z)


def read(folder: VariantFolder) -> tuple[KernelEvent, ...]:
    """Every event of a variant's steady window with its attribution: events.parquet's rows,
    or, in a run written before it (kernels.json version 1, the committed references before
    migrate), the events kernels.json holds; () for a variant without a profile. Raises
    SchemaError naming the file and key for one that is wrong, or for a kernels.json that
    names an events file that is not there."""
    if folder.events.is_file():
        return rows_of(read_table(folder.events), str(folder.events))
    kernels = run_files.load_if_present(run_files.KERNELS, folder.kernels)
    if kernels is None:
        return ()
    if kernels.events_file is not None:
        problem = f"names {kernels.events_file}, which is not in {folder.root}"
        raise SchemaError(str(folder.kernels), "events_file", problem)
    return kernels.events


def migrate(folder: VariantFolder) -> bool:
    """Moves the events of a version-1 kernels.json into events.parquet and writes kernels.json
    at its version, totals only; returns whether it did (False: nothing to move)."""
    if folder.events.is_file() or not folder.kernels.is_file():
        return False
    kernels = run_files.load(run_files.KERNELS, folder.kernels)
    if kernels.events_file is not None:
        return False
    rows = [dataclasses.asdict(e) for e in kernels.events]
    write(folder.events, [from_rows(rows)])
    totals = dataclasses.replace(kernels, events=(), events_file=folder.events.name)
    run_files.write(folder.kernels, totals)
    return True


def migrate_run(run: RunFolder) -> tuple[str, ...]:
    """Moves every variant's version-1 events into its events.parquet (`migrate`); returns the
    variants it moved."""
    root = run.variants_dir
    names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return tuple(n for n in names if migrate(run.variant(n)))
