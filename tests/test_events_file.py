"""events.parquet and the run folder's size: a run written before events.parquet (the committed
references, kernels.json version 1) reads its events through the one reader, and migrate
moves them into events.parquet without changing one; each file of a folder has one kind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from harness.records import events_file, run_files
from harness.store import io
from harness.store.records import SchemaError
from harness.store.runfolder import SIZE_KINDS, RunFolder, VariantFolder, size_kind, sizes_by_kind

REFERENCES = REPO / "results" / "reference"


def test_an_old_runs_events_read_the_same_before_and_after_migrate(tmp_path: Path) -> None:
    """The H200 reference: JAX's and PyTorch's events (with their CPU ops), eager's too."""
    run = RunFolder(tmp_path / "h200")
    shutil.copytree(REFERENCES / "h200", run.root)
    variants = sorted(p.name for p in run.variants_dir.iterdir())
    old = {}
    for v in variants:
        folder = run.variant(v)
        if not folder.kernels.is_file():
            assert events_file.read(folder) == ()  # no profile: no events, no error
            continue
        if json.loads(folder.kernels.read_text()).get("schema_version", 0) >= 2:
            continue  # a reference already migrated
        raw = json.loads(folder.kernels.read_text())["events"]
        old[v] = events_file.read(folder)
        assert len(old[v]) == len(raw) and [e.name for e in old[v]] == [r["name"] for r in raw]
    with io.writes_confined_to(run.root):
        moved = events_file.migrate_run(run)
        again = events_file.migrate_run(run)
    assert set(moved) == set(old) and again == ()
    for v, events in old.items():
        folder = run.variant(v)
        kernels = run_files.load(run_files.KERNELS, folder.kernels)
        assert kernels.events == () and kernels.events_file == folder.events.name
        assert events_file.read(folder) == events  # every field of every event, torch's too


def test_a_kernels_json_naming_a_missing_events_file_is_an_error_naming_it(tmp_path) -> None:
    folder = VariantFolder(tmp_path / "xla")
    shutil.copytree(REFERENCES / "cpu" / "variants" / "xla", folder.root)
    with io.writes_confined_to(tmp_path):
        assert events_file.migrate(folder)
    folder.events.unlink()
    with pytest.raises(SchemaError, match=r"kernels\.json.*events_file.*events\.parquet"):
        events_file.read(folder)
    folder.events.write_bytes(b"not parquet")
    with pytest.raises(SchemaError, match=r"events\.parquet.*not a Parquet events file"):
        events_file.read(folder)


@pytest.mark.parametrize("column", ["duration_ns", "cluster_renamed_away"])
def test_an_events_file_missing_a_column_is_an_error_naming_it(tmp_path, column: str) -> None:
    """A required column renamed is one line naming the file and the column; a column the
    record does not know is ignored (a newer writer's), never an error."""
    import pyarrow.parquet as pq

    folder = VariantFolder(tmp_path / "xla")
    shutil.copytree(REFERENCES / "cpu" / "variants" / "xla", folder.root)
    with io.writes_confined_to(tmp_path):
        assert events_file.migrate(folder)
    table = events_file.read_table(folder.events)
    before = events_file.read(folder)
    if column in table.column_names:
        table = table.rename_columns(
            [f"{n}_renamed" if n == column else n for n in table.column_names]
        )
    else:
        table = table.append_column(column, table.column("name"))
    pq.write_table(table, folder.events)
    if column == "duration_ns":
        with pytest.raises(SchemaError) as found:
            events_file.read(folder)
        assert "\n" not in str(found.value) and "events.parquet: duration_ns: missing" in str(
            found.value
        )
    else:
        assert events_file.read(folder) == before


def test_the_migrate_command_moves_the_events_of_a_committed_reference(tmp_path: Path) -> None:
    run = tmp_path / "cpu"
    shutil.copytree(REFERENCES / "cpu", run)
    before = {v.name: events_file.read(VariantFolder(v)) for v in (run / "variants").iterdir()}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.migrate", f"--run={run}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    profiled = [v for v in (run / "variants").iterdir() if VariantFolder(v).events.is_file()]
    assert f"{len(profiled)} variants' events moved" in proc.stdout
    after = {v.name: events_file.read(VariantFolder(v)) for v in (run / "variants").iterdir()}
    assert after == before and any(after.values())
    assert all(VariantFolder(v).events.is_file() for v in profiled)


def test_every_file_of_a_run_folder_has_one_kind_and_the_kinds_sum_to_the_folder(
    tmp_path: Path,
) -> None:
    run = tmp_path / "h200"
    shutil.copytree(REFERENCES / "h200", run)
    planted = {
        "variants/xla/dump/module_0001.jit_f.before_optimizations.txt": "dumps",
        "variants/xla/profile/steady/plugins/profile/x/vm.xplane.pb": "profiles",
        "variants/xla/events.parquet": "events",
        "variants/xla/timeline.perfetto.json.gz": "timeline",
        "logs/worker-1.log": "logs",
        "variants/xla/tlparse/index.html": "reports",
    }
    for rel, kind in planted.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(b"x" * 1000)
        assert size_kind(rel) == kind
    # A link into the dump (the IR ladder's) counts once.
    (run / "variants/xla/ir/20-linked.txt").hardlink_to(
        run / "variants/xla/dump/module_0001.jit_f.before_optimizations.txt"
    )
    sizes = sizes_by_kind(run)
    assert tuple(sizes) == SIZE_KINDS
    files = {p for p in run.rglob("*") if p.is_file() and p.name != "manifest.json"}
    distinct = {p.stat().st_ino: p.stat().st_size for p in files}
    assert sum(sizes.values()) == sum(distinct.values())
    assert sizes["dumps"] == 1000 and sizes["logs"] == 1000 and sizes["timeline"] == 1000
