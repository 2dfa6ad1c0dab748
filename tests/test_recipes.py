"""CONTRIBUTING's recipes are true: each is followed, step by step, in a scratch copy.

The copy holds harness/, results/README.md and the fast structural tests. Into it go, as
CONTRIBUTING.md says and nowhere else: a new kind of finding, a new file of the run folder, a
new mode and a new built-in frontend. Then one process runs the structural checks on the copy
(the layers, one type per file, the generated key tables) and `recipe_check.py`, which uses
each new thing as the harness would: evaluates the rules and renders the finding, writes the
file through the analysis's writer and reads it back, loads a config with the mode and with
the frontend's modes. A recipe that misses a step fails here, naming the check.

The four recipes share one copy and one process: the checks cost seconds, paid once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env

# The structural checks a recipe's steps must keep green, run on the scratch copy.
CHECKS = (
    "tests/test_layers.py::test_every_module_belongs_to_a_layer",
    "tests/test_layers.py::test_imports_flow_one_way",
    "tests/test_layers.py::test_only_the_registry_reaches_the_builtin_frontends",
    "tests/test_layers.py::test_no_frontend_imports_another_s_capture",
    "tests/test_layers.py::test_the_report_imports_no_rule_no_ir_reader_and_no_profile_reader",
    "tests/test_one_type_per_file.py",
    "tests/test_schema.py::test_the_readme_key_table_is_the_generated_one",
    "tests/test_runfolder.py::test_the_readme_run_file_tables_are_the_generated_ones",
)
TEST_FILES = (
    "conftest.py",
    "fixture_root.py",
    "test_layers.py",
    "test_one_type_per_file.py",
    "test_schema.py",
    "test_runfolder.py",
    "toy_frontend.py",
)
FINDING_SENTENCE = "An example finding, made by the recipe's rule."


def edit(root: Path, rel: str, old: str, new: str) -> None:
    """Replaces the one place `old` stands in `root/rel` with `new` (a recipe's step)."""
    path = root / rel
    text = path.read_text()
    if text.count(old) != 1:
        raise AssertionError(f"{rel}: the step's anchor stands {text.count(old)} times: {old!r}")
    path.write_text(text.replace(old, new))


def add_finding_kind(root: Path) -> None:
    """'Adding a finding', a new kind: the rule, its record and `Findings` field (a schema
    bump with its migration), `KINDS`, and its blocks in the report."""
    edit(
        root,
        "harness/records/findings.py",
        "@dataclass(frozen=True)\nclass Findings:",
        "@dataclass(frozen=True)\nclass ExampleFinding:\n"
        '    """What the recipe\'s example rule concludes (harness.findings.example)."""\n\n'
        '    rule: str = doc("the rule\'s id")\n'
        '    what: str = doc("the finding in one sentence", "")\n\n\n'
        "@dataclass(frozen=True)\nclass Findings:",
    )
    edit(
        root,
        "harness/records/findings.py",
        '    rules: tuple[RuleInfo, ...] = doc("every rule the analysis ran", ())\n',
        '    rules: tuple[RuleInfo, ...] = doc("every rule the analysis ran", ())\n'
        '    example: tuple[ExampleFinding, ...] = doc("the recipe\'s example findings", ())\n',
    )
    (root / "harness/findings/example.py").write_text(
        '"""The recipe\'s example rule."""\n\n'
        "from __future__ import annotations\n\n"
        "from harness.findings.base import Rule\n"
        "from harness.records.findings import ExampleFinding\n"
        "from harness.saved.run import SavedRun\n\n\n"
        "class Always(Rule):\n"
        '    """Says that the example rule ran."""\n\n'
        '    id = "example.always"\n'
        '    kind = "example"\n\n'
        "    def applies(self, run: SavedRun) -> bool:\n"
        "        return True\n\n"
        "    def conclude(self, run: SavedRun) -> tuple[ExampleFinding, ...]:\n"
        f"        return (ExampleFinding(self.id, {FINDING_SENTENCE!r}),)\n"
    )
    edit(
        root, "harness/findings/__init__.py", "    boundaries,\n", "    boundaries,\n    example,\n"
    )
    edit(
        root,
        "harness/findings/__init__.py",
        "    numerics.CompilerEffect(),\n)",
        "    numerics.CompilerEffect(),\n    example.Always(),\n)",
    )
    edit(
        root,
        "harness/findings/__init__.py",
        '    "effects",\n)',
        '    "effects",\n    "example",\n)',
    )
    # The schema bump and its migration ('Adding a record').
    edit(root, "harness/records/summary.py", "SCHEMA_VERSION = 12\n", "SCHEMA_VERSION = 13\n")
    with (root / "harness/records/migrations/additive.py").open("a") as f:
        f.write(
            "\n\ndef migrate_v12(data: dict[str, Any], source: str) -> dict[str, Any]:\n"
            '    """Version 13 only added `findings.example`, which reads as none."""\n'
            "    del source\n"
            '    return {**data, "schema_version": 13}\n'
        )
    edit(
        root,
        "harness/records/migrations/__init__.py",
        "    migrate_v11,\n)",
        "    migrate_v11,\n    migrate_v12,\n)",
    )
    edit(
        root,
        "harness/records/migrations/__init__.py",
        "    11: migrate_v11,\n",
        "    11: migrate_v11,\n    12: migrate_v12,\n",
    )
    # Its blocks in the report: rendered in report/findings.py, placed by sections.py.
    with (root / "harness/report/findings.py").open("a") as f:
        f.write(
            "\n\ndef example_blocks(run: SavedRun) -> list[Block]:\n"
            "    found = run.summary.findings\n"
            "    if found is None or not found.example:\n"
            "        return []\n"
            '    return [Heading(2, "Examples", "examples"), '
            "Bullets(tuple(e.what for e in found.example))]\n"
        )
    edit(
        root,
        "harness/report/sections.py",
        "        *evidence_blocks(run),\n",
        "        *evidence_blocks(run),\n        *example_blocks(run),\n",
    )
    edit(
        root,
        "harness/report/sections.py",
        "    evidence_blocks,\n",
        "    evidence_blocks,\n    example_blocks,\n",
    )


def add_run_file(root: Path) -> None:
    """'Adding a record', a file of the run folder: its name, its record and kind, its
    writer, its reader (the saved run's view) and its heading among the key tables."""
    edit(
        root,
        "harness/store/runfolder.py",
        'ERROR_FILE = "error.txt"',
        'EXAMPLE_FILE = "example.json"\nERROR_FILE = "error.txt"',
    )
    edit(
        root,
        "harness/store/runfolder.py",
        "    distances = _InRoot(DISTANCES_FILE)\n",
        "    example = _InRoot(EXAMPLE_FILE)\n    distances = _InRoot(DISTANCES_FILE)\n",
    )
    edit(
        root,
        "harness/records/run_files.py",
        "@dataclass(frozen=True)\nclass TimelineFile:",
        "@dataclass(frozen=True)\nclass ExampleFile:\n"
        '    """A variant\'s example.json: the recipe\'s example file."""\n\n'
        '    schema_version: int = doc("this file\'s version (harness.records.run_files.EXAMPLE)")\n'
        '    count: int = doc("how many examples", 0)\n\n\n'
        "@dataclass(frozen=True)\nclass TimelineFile:",
    )
    edit(
        root,
        "harness/records/run_files.py",
        "KINDS = (\n",
        "EXAMPLE = _first(runfolder.EXAMPLE_FILE, ExampleFile)\nKINDS = (\n    EXAMPLE,\n",
    )
    edit(
        root,
        "harness/analyze/files.py",
        "    timeline: TimelineFile | None = None\n",
        "    timeline: TimelineFile | None = None\n    example: run_files.ExampleFile | None = None\n",
    )
    edit(
        root,
        "harness/analyze/files.py",
        '        "timeline": folder.timeline,\n',
        '        "timeline": folder.timeline,\n        "example": folder.example,\n',
    )
    edit(
        root,
        "harness/records/keytables.py",
        '    (run_files.TIMELINE, VARIANT, ""),\n',
        '    (run_files.TIMELINE, VARIANT, ""),\n    (run_files.EXAMPLE, VARIANT, ""),\n',
    )
    # Its reader: a field of the saved run's view, filled by its one reader.
    edit(
        root,
        "harness/saved/run.py",
        "    Environment,\n    FusionsFile,\n",
        "    Environment,\n    ExampleFile,\n    FusionsFile,\n",
    )
    edit(
        root,
        "harness/saved/run.py",
        "    timeline: bool = False  # variants/<name>/timeline.perfetto.json.gz was written\n",
        "    timeline: bool = False  # variants/<name>/timeline.perfetto.json.gz was written\n"
        "    example: ExampleFile | None = None\n",
    )
    edit(
        root,
        "harness/saved/read.py",
        "        timeline=vdir.timeline.is_file() and not vdir.timeline.is_symlink(),\n",
        "        timeline=vdir.timeline.is_file() and not vdir.timeline.is_symlink(),\n"
        "        example=run_files.load_if_present(run_files.EXAMPLE, vdir.example),\n",
    )


def add_mode(root: Path) -> None:
    """'Adding a mode': a `Mode` in its frontend's `MODES`."""
    edit(
        root,
        "harness/frontends/jax/__init__.py",
        "MODES = (\n",
        'MODES = (\n    Mode("jit_example", NAME, ("compiled",), "the recipe\'s example", '
        'words="jit (example)", program=True),\n',
    )


def add_frontend(root: Path) -> None:
    """'Adding a frontend', a built-in: its folder (the toy NumPy frontend), its line in
    `BUILTIN`, and its lines of tests/test_layers.py (LAYERS, CAPTURE_OF; it runs no
    framework, so not RUNS_JAX)."""
    folder = root / "harness/frontends/numpy"
    folder.mkdir()
    shutil.copy(root / "tests/toy_frontend.py", folder / "__init__.py")
    edit(
        root,
        "harness/frontends/registry.py",
        'BUILTIN = ("harness.frontends.jax", "harness.frontends.torch")',
        'BUILTIN = ("harness.frontends.jax", "harness.frontends.torch", "harness.frontends.numpy")',
    )
    edit(
        root,
        "tests/test_layers.py",
        '    ("harness.frontends.jax", "harness.frontends.torch"),',
        '    ("harness.frontends.jax", "harness.frontends.torch", "harness.frontends.numpy"),',
    )
    edit(
        root,
        "tests/test_layers.py",
        "CAPTURE_OF = {\n",
        'CAPTURE_OF = {\n    "harness.frontends.numpy": ("harness.frontends.numpy",),\n',
    )


# Uses each new thing as the harness would, in the copy; prints what it saw as JSON.
CHECK_SCRIPT = """
import dataclasses, json, sys
from pathlib import Path

from harness.analyze import files
from harness.config import load
from harness.findings import evaluate, read_facts
from harness.frontends import registry
from harness.records import run_files
from harness.report import doc, sections
from harness import saved
from harness.store.runfolder import RunFolder

run = saved.load_run(Path("run"))  # a committed reference, migrated to the new version
found = evaluate(read_facts(run.path, run.summary))
shown = dataclasses.replace(run, summary=dataclasses.replace(run.summary, findings=found))
page = doc.to_markdown(sections.details_blocks(shown))

folder = RunFolder(Path("run")).variant(run.baseline)
files.write(folder, files.VariantFiles(example=run_files.ExampleFile(0, count=3)))
back = saved.load_run(Path("run")).variant(run.baseline).example  # read back by the run's view

Path("study.yaml").write_text(
    "experiment: recipes\\nbaseline: xla\\nvariants:\\n"
    "  - {name: xla, mode: jit}\\n"
    "  - {name: example, mode: jit_example}\\n"
    "  - {name: numpy_gelu, mode: numpy_gelu}\\n"
)
exp = load("study.yaml").experiment
json.dump(
    {
        "schema_version": run.summary.schema_version,
        "example_findings": [e.what for e in found.example],
        "rule_errors": [r.error for r in found.rules if r.id == "example.always"],
        "page": page,
        "file_count": back.count,
        "frontends": list(registry.names()),
        "variants": {v.name: [v.framework, v.mode_spec.name] for v in exp.variants},
    },
    sys.stdout,
)
"""


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The four recipes followed in one scratch copy; the checks' outcome and what the
    check script saw."""
    root = tmp_path_factory.mktemp("recipes")
    shutil.copytree(
        REPO / "harness", root / "harness", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "tests").mkdir()
    for name in TEST_FILES:
        shutil.copy(REPO / "tests" / name, root / "tests" / name)
    (root / "results").mkdir()
    shutil.copy(REPO / "results" / "README.md", root / "results" / "README.md")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / "results" / "reference" / "cpu", root / "run")
    add_finding_kind(root)
    add_run_file(root)
    add_mode(root)
    add_frontend(root)
    env = {**harness_env(), "PYTHONPATH": str(root), "HARNESS_FRONTENDS": ""}
    python = (sys.executable,)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            (*python, *args), cwd=root, env=env, capture_output=True, text=True, timeout=120
        )

    tables = run("-m", "harness.records.keytables", "results/README.md")
    checks = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *CHECKS)
    used = run("-c", CHECK_SCRIPT)
    return {
        "tables": tables,
        "checks": checks,
        "used": json.loads(used.stdout) if used.returncode == 0 else used.stderr,
    }


def _fast_checks_pass(followed: dict[str, object]) -> None:
    tables, checks = followed["tables"], followed["checks"]
    assert isinstance(tables, subprocess.CompletedProcess) and tables.returncode == 0, tables
    assert isinstance(checks, subprocess.CompletedProcess)
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]


def _used(followed: dict[str, object]) -> dict[str, object]:
    used = followed["used"]
    assert isinstance(used, dict), used
    return used


def test_a_new_finding_kind_is_evaluated_stored_and_rendered(followed: dict[str, object]) -> None:
    _fast_checks_pass(followed)
    used = _used(followed)
    assert used["schema_version"] == 13
    assert used["rule_errors"] == [None]
    assert used["example_findings"] == [FINDING_SENTENCE]
    assert FINDING_SENTENCE in str(used["page"])


def test_a_new_run_file_is_written_by_the_stage_s_writer_and_read_back(
    followed: dict[str, object],
) -> None:
    _fast_checks_pass(followed)
    assert _used(followed)["file_count"] == 3


def test_a_new_mode_is_accepted_by_the_config(followed: dict[str, object]) -> None:
    _fast_checks_pass(followed)
    variants = _used(followed)["variants"]
    assert isinstance(variants, dict)
    assert variants["example"] == ["jax", "jit_example"]


def test_a_new_builtin_frontend_loads_by_name_and_keeps_the_layers(
    followed: dict[str, object],
) -> None:
    _fast_checks_pass(followed)
    used = _used(followed)
    assert used["frontends"] == ["jax", "torch", "numpy"]
    assert used["variants"]["numpy_gelu"] == ["numpy", "numpy_gelu"]  # type: ignore[index]
