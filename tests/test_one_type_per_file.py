"""One type per file of the run folder: every dataclass that names a run file is listed here,
and a file read into two records fails.

A dataclass names a run file when the first paragraph of its docstring does (the file names
are harness.store.runfolder's). Each is either the file's record (a `FileKind`'s of
harness/records/run_files.py, or one of RECORDS: the files read whole into a record of their
own) or a part or reader of one (PARTS, each with what it is). A new dataclass that names a
file must be placed in one or the other, and a second record of one file fails.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from conftest import REPO

from harness.records import run_files
from harness.store import runfolder

# The files read whole into a record of their own, outside run_files.KINDS.
RECORDS = {
    "summary.json": "RunSummary",
    "result.json": "CaptureRecord",
    "timing.json": "TimingRecord",
    "search.json": "SearchRecord",
    "processes.json": "ProcessesSummary",
    "faults.json": "ProcessFaults",
    "memory.json": "MemoryFile",
    "outputs.npz": "AccuracyFile",  # its kept values, beside numerics.json's errors
}
# A file whose record is one per frontend: a variant's compile.json is its frontend's.
PER_FRONTEND = {"compile.json": {"CompileFile", "TorchCompileFile"}}
# Dataclasses that name a file without being its record: what each is.
PARTS = {
    ("ReportOptions", "report.md"): "the config's report options",
    ("ReportOptions", "report.html"): "the config's report options",
    ("LoopFacts", "cost.json"): "a rule's facts from several files",
    ("ClusterFact", "fusions.json"): "a rule's facts of one cluster",
    ("ClusterTime", "ranking.json"): "a rule's facts of one cluster",
    ("CompileBreakdown", "compile.json"): "one module's part of it",
    ("MeasuredMemory", "result.json"): "its `memory` section",
    ("Result", "numerics.json"): "the AccuracyFile read back with its kept values",
    ("Result", "outputs.npz"): "the AccuracyFile read back with its kept values",
    ("TimingsFile", "timing.json"): "timings.json's record, which says it is not timing.json",
    ("Timing", "timing.json"): "summary.json's timing section, made from it",
    ("Dynamo", "torch.json"): "summary.json's Dynamo section, made from it",
    ("Diff", "report.md"): "a report block",
    ("Diff", "report.html"): "a report block",
    ("SummaryPart", "summary.json"): "the part of it the results index reads",
}


def run_file_names() -> frozenset[str]:
    """Every file name of a run folder (runfolder's constants)."""
    return frozenset(
        {
            v
            for k, v in vars(runfolder).items()
            if k.endswith(("_FILE", "_HTML")) and isinstance(v, str) and "." in v
        }
    )


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def named_files(source: str, files: frozenset[str]) -> dict[str, set[str]]:
    """The dataclasses of one module's source (its top level, where records are), each with
    the run files the first paragraph of its docstring names."""
    if "dataclass" not in source:
        return {}
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(files))) + r")(?![\w-])")
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and _is_dataclass(node):
            first = (ast.get_docstring(node) or "").split("\n\n")[0]
            if names := set(pattern.findall(first)):
                found[node.name] = names
    return found


@functools.cache
def harness_named() -> dict[str, dict[str, set[str]]]:
    """named_files of every harness module, read once per session."""
    files = run_file_names()
    return {
        str(p.relative_to(REPO)): named_files(p.read_text(), files)
        for p in sorted((REPO / "harness").rglob("*.py"))
    }


def records_by_file(
    named: dict[str, dict[str, set[str]]],
) -> tuple[dict[str, set[str]], list[str]]:
    """Returns each run file's records (FileKinds, RECORDS and every dataclass naming it that
    is not a part), and the dataclasses not placed anywhere."""
    records: dict[str, set[str]] = {}
    for kind in run_files.KINDS:
        records.setdefault(kind.name, set()).add(kind.record.__name__)
    for file, record in RECORDS.items():
        records.setdefault(file, set()).add(record)
    unplaced = []
    for module, classes in sorted(named.items()):
        for cls, names in sorted(classes.items()):
            for file in sorted(names):
                key = (cls, file)
                if key in PARTS:
                    continue
                if cls in records.get(file, set()):
                    continue
                records.setdefault(file, set()).add(cls)
                unplaced.append(f"{module}: {cls} names {file}")
    return records, unplaced


def two_records(records: dict[str, set[str]]) -> dict[str, set[str]]:
    return {f: r for f, r in records.items() if len(r) > 1 and r != PER_FRONTEND.get(f)}


def test_every_run_file_has_one_record() -> None:
    records, unplaced = records_by_file(harness_named())
    assert two_records(records) == {}
    assert unplaced == [], "a record of its file (RECORDS) or a part of one (PARTS)?"


def test_every_part_is_still_there() -> None:
    """A part renamed or gone leaves its PARTS entry stale: remove it."""
    named = {
        (cls, f)
        for classes in harness_named().values()
        for cls, names in classes.items()
        for f in names
    }
    assert set(PARTS) <= named


def test_the_program_analysis_reads_the_runs_own_records() -> None:
    """The program analysis once read ceilings.json with a parser of its own (CeilingRates)
    and called its profile rows kernels.json's (DeviceEvent): each file has its one record,
    and analysis.json is a versioned kind of its own (issue 62, items 1 and 3)."""
    records, _ = records_by_file(harness_named())
    assert records["ceilings.json"] == {"Ceilings"}
    assert records["kernels.json"] == {"KernelsFile"}
    assert records["analysis.json"] == {"AnalysisFile"}
    assert run_files.ANALYSIS in run_files.KINDS


def test_a_second_record_of_one_file_fails() -> None:
    """A planted dataclass that says it is ceilings.json's is a second record of it."""
    planted = (
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\n"
        "class Roofs:\n"
        '    """The ceilings as ceilings.json holds them."""\n'
        "    flops: float\n"
    )
    records, unplaced = records_by_file(
        {**harness_named(), "planted.py": named_files(planted, run_file_names())}
    )
    assert two_records(records) == {"ceilings.json": {"Ceilings", "Roofs"}}
    assert unplaced == ["planted.py: Roofs names ceilings.json"]


def test_the_file_names_are_runfolder_s() -> None:
    """The run files the capture, the worker and the run's closing line name are
    runfolder's constants, never spelled where they are written."""
    spelled = {
        name: [
            str(p.relative_to(REPO))
            for p in sorted((REPO / "harness").rglob("*.py"))
            if p.name != "runfolder.py" and f'"{name}"' in p.read_text()
        ]
        for name in (
            runfolder.CALLBACK_OUTPUT_FILE,
            runfolder.EXPECTED_ERROR_FILE,
            runfolder.ERROR_FILE,
            runfolder.RECOMPILE_FILE,
        )
    }
    assert spelled == {name: [] for name in spelled}
    assert Path(runfolder.__file__).name == "runfolder.py"
