"""The run-folder contract (issue 26): one object owns every path, and every file a run writes
is a versioned record read and written through harness.store.records.

- A fresh run's every record file loads, at its kind's version; renaming one key in any of
  them stops the report with one line naming the file and the key, and writes no page.
- Each committed reference (written before the files had versions) and a schema-3 run load
  through the migrations.
- The analysis stage's producers return their files; one writer writes them.
- No module but harness.store.runfolder spells the run folder's file names.
"""

from __future__ import annotations

import contextlib
import io as stdio
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from harness import saved
from harness.records import run_files
from harness.records.summary import SCHEMA_VERSION, load_summary
from harness.report.markdown import write_report
from harness.store.records import SchemaError
from harness.store.runfolder import RunFolder, VariantFolder

REFERENCES = REPO / "results" / "reference"
SCHEMA3_SUMMARY = REPO / "tests" / "data" / "summary-schema3-cpu.json"

# Each record file of a run and its kind; a variant's compile.json is the JAX one here.
VARIANT_FILES = (
    ("fusions", run_files.FUSIONS),
    ("kernels", run_files.KERNELS),
    ("passes", run_files.PASSES),
    ("compiles", run_files.COMPILE),
    ("cost", run_files.COST),
    ("ranking", run_files.RANKING),
)


def _record_files(run: Path, variant: str) -> list[tuple[Path, run_files.FileKind]]:
    folder = RunFolder(run)
    v = folder.variant(variant)
    return [
        (folder.manifest, run_files.MANIFEST),
        (folder.ceilings, run_files.CEILINGS),
        *((getattr(v, name), kind) for name, kind in VARIANT_FILES),
    ]


def test_every_record_file_of_a_fresh_run_is_written_at_its_version(cpu_run: Path) -> None:
    for path, kind in _record_files(cpu_run, "xla"):
        raw = json.loads(path.read_text())
        assert raw["schema_version"] == kind.version, path
        record = run_files.load(kind, path)
        # What the reader makes of the file is what the writer wrote: nothing dropped.
        assert run_files.record_json(record) == raw, path


# One key of each file the report reads, renamed: at the top, or deep inside a nested record.
# (kernels.json is not among them: its totals are summary.json's, and a variant's events are
# events.parquet's, read by harness.records.events_file, whose own tests rename a column.)
RENAMES = {
    "manifest.json": ("status",),
    "ceilings.json": ("peak_bytes_per_s",),
    "fusions.json": ("modules", 0, "clusters", 0, "output_shape"),
    "passes.json": ("passes", 0, "fusion_count"),
    "compile.json": ("first_call", "total_compile_s"),
    "cost.json": ("modules", 0, "flops"),
    "ranking.json": ("modules", 0, "cluster_count"),
}


def _renamed(data_: dict, path: tuple) -> str:
    """Renames the key at `path` in place to `<key>_renamed`; returns its dotted new name."""
    node = data_
    for step in path[:-1]:
        node = node[step]
    node[f"{path[-1]}_renamed"] = node.pop(path[-1])
    dotted = ""
    for step in path:
        dotted += f"[{step}]" if isinstance(step, int) else f".{step}" if dotted else step
    return dotted + "_renamed"


@pytest.fixture(scope="module")
def copied_run(cpu_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's tiny run (its raw dumps and profiles left out: the report
    reads none of them), each test restoring the file it changed."""
    copy = tmp_path_factory.mktemp("renamed") / cpu_run.name
    shutil.copytree(cpu_run, copy, ignore=shutil.ignore_patterns("dump", "profile", "torch"))
    return copy


@pytest.mark.parametrize("file", sorted(RENAMES))
def test_a_renamed_key_in_any_record_file_stops_the_report_in_one_line(
    copied_run: Path, file: str
) -> None:
    path = next(p for p, k in _record_files(copied_run, "xla") if p.name == file)
    text = path.read_text()
    changed = json.loads(text)
    key = _renamed(changed, RENAMES[file])
    path.write_text(json.dumps(changed))
    report = RunFolder(copied_run).report
    report.unlink(missing_ok=True)
    try:
        with pytest.raises(SchemaError) as found:
            write_report(copied_run)
    finally:
        path.write_text(text)
    message = str(found.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}: unknown key"), message
    assert not report.exists()  # no page, so no "–" where the key was


def test_the_report_command_prints_the_renamed_key_in_one_line(copied_run: Path) -> None:
    from absl import flags

    from harness.commands import cli
    from harness.commands import report as entry

    path = RunFolder(copied_run).variant("xla").fusions
    text = path.read_text()
    changed = json.loads(text)
    key = _renamed(changed, RENAMES["fusions.json"])
    path.write_text(json.dumps(changed))
    entry.define_flags()
    flags.FLAGS.unparse_flags()
    err = stdio.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdio.StringIO()):
            code = cli.guarded(entry.main)(flags.FLAGS(["report", f"--run={copied_run}"]))
    finally:
        path.write_text(text)
        flags.FLAGS.unparse_flags()
    lines = err.getvalue().splitlines()
    assert code == cli.USAGE_ERROR
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}: {key}: unknown key"), lines[0]


@pytest.mark.parametrize("name", ["cpu", "h200", "h200x2"])
def test_each_committed_reference_loads_through_the_migrations(name: str) -> None:
    """The references were written before their files had versions: each reads as version 0,
    migrated; the reader of every variant's files is the report's."""
    run = saved.load_run(REFERENCES / name)
    assert run.manifest.schema_version == run_files.MANIFEST.version
    assert run.ceilings is not None and run.ceilings.peaks
    loaded = {
        kind: getattr(v, kind)
        for v in run.variants
        for kind in ("fusions", "passes", "compile", "cost", "ranking", "comm")
        if getattr(v, kind) is not None
    }
    expected = {"fusions", "passes", "compile", "cost", "ranking"} | (
        {"comm"} if name == "h200x2" else set()
    )
    assert set(loaded) == expected
    assert all(r.schema_version == 1 for r in loaded.values())
    assert any(v.kernels for v in run.variants)
    if name == "h200":  # the PyTorch row's compile.json is a record of its own
        torch = [v for v in run.variants if v.framework == "torch" and v.compile is not None]
        assert torch and all(isinstance(v.compile, run_files.TorchCompileFile) for v in torch)


def test_a_schema_3_run_loads_through_the_migrations(tmp_path: Path) -> None:
    """The CPU reference as it was committed at schema 3: its summary migrates to this schema
    and every other file from version 0, and harness.commands.migrate makes its findings."""
    from harness.commands.migrate import add_findings

    copy = tmp_path / "cpu"
    shutil.copytree(REFERENCES / "cpu", copy)
    shutil.copy(SCHEMA3_SUMMARY, RunFolder(copy).summary)
    assert json.loads(SCHEMA3_SUMMARY.read_text())["schema_version"] == 3
    run = saved.load_run(copy)
    assert run.summary.schema_version == SCHEMA_VERSION and run.summary.findings is None
    assert len(run.variants) == len(saved.load_run(REFERENCES / "cpu").variants)
    version, made = add_findings(copy)
    assert version == 3 and made > 0
    assert load_summary(RunFolder(copy).summary).findings is not None


def test_a_file_newer_than_the_harness_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "passes.json"
    path.write_text(json.dumps({"schema_version": 2, "passes": []}))
    with pytest.raises(SchemaError, match=r"passes.json: schema_version: 2 is newer"):
        run_files.load(run_files.PASSES, path)
    path.write_text(json.dumps({"schema_version": -1, "passes": []}))
    with pytest.raises(SchemaError, match="not a version any harness wrote"):
        run_files.load(run_files.PASSES, path)


def test_a_producer_returns_its_files_and_the_one_writer_writes_them(
    cpu_run: Path, tmp_path: Path
) -> None:
    """analyze.sections' producers write nothing; analyze.files.write puts what they return
    in the variant's folder, as the analysis of the fresh run wrote it."""
    from harness.analyze import files, sections
    from harness.records import ladder

    source = RunFolder(cpu_run).variant("xla")
    lad = ladder.read_ladder(source.ir)
    before = set(source.root.iterdir())
    _, made = sections.hlo(source.root, lad)
    assert set(source.root.iterdir()) == before
    target = VariantFolder(tmp_path / "xla")
    files.write(target, made)
    assert sorted(p.name for p in target.root.iterdir()) == ["fusions.json", "passes.json"]
    assert target.fusions.read_text() == source.fusions.read_text()


def test_no_module_but_the_run_folder_spells_a_run_file_name() -> None:
    """The guide of issue 26: the run's file names are spelt in harness/store/runfolder.py alone."""
    spelt = re.compile(r'"(manifest|summary|ceilings|fusions|kernels|ranking|passes)\.json"')
    found = [
        f"{p.relative_to(REPO)}:{i}"
        for p in sorted((REPO / "harness").rglob("*.py"))
        # The program analysis writes its own folder (python -m harness.analyze), not a run's.
        if p.name != "runfolder.py" and p.relative_to(REPO).as_posix() != "harness/program/dump.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if spelt.search(line)
    ]
    assert found == []


def test_the_readme_run_file_tables_are_the_generated_ones() -> None:
    """results/README.md's tables of the run's other files are the records' (regenerate with
    `python -m harness.records.keytables results/README.md`)."""
    from harness.records.keytables import FILES_BEGIN, FILES_END, files_tables

    text = (REPO / "results" / "README.md").read_text()
    start, end = text.index(FILES_BEGIN) + len(FILES_BEGIN), text.index(FILES_END)
    assert text[start:end].strip() == files_tables()
    for kind in run_files.KINDS:
        assert f"{kind.name}" in text[start:end]
