"""One owner check: the harness writes and deletes only what it made. `report --run` never
overwrites a user's report.md, index.html or plots; the results index writes index.html only
where its record says it made it; resume's clean-up leaves a user's files in a variant folder;
a results root that is a run, or lies inside one, is refused. A structural test fails any
delete in harness/ that does not go through io or ownership, apart from a stated allowlist,
and a planted one shows that it can fail."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO

from harness.common import userfiles
from harness.config import ConfigError
from harness.report import write_report
from harness.report.index import write_results_index
from harness.store import io, ownership, runfolder
from harness.study import runs

sys.path.insert(0, str(REPO / "benchmarks"))
from hostile.readers_material import _manifest, _summary

USER = b"a user's own file\n"


def _run(root: Path, manifest: bool = True) -> Path:
    run = root / "results" / "gelu" / "20260101-000000"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(_summary()))
    if manifest:
        (run / "manifest.json").write_text(json.dumps(_manifest()))
    return run


def _plant(run: Path) -> dict[str, bytes]:
    planted = {"report.md": USER, "index.html": USER, "plots/step_time.png": USER}
    for rel, data in planted.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(data)
    return planted


def test_report_never_overwrites_a_users_files_in_a_folder_it_did_not_make(tmp_path: Path) -> None:
    run = _run(tmp_path, manifest=False)  # only a summary.json: not a folder the harness made
    planted = _plant(run)
    with pytest.raises(io.NotOurs, match="the report replaces only files it wrote") as e:
        write_report(run)
    assert "\n" not in str(e.value)
    assert {rel: (run / rel).read_bytes() for rel in planted} == planted
    assert not (run / "report.html").exists()  # refused before anything was written


def test_report_writes_a_new_folder_records_it_and_then_refuses_a_changed_file(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path, manifest=False)
    write_report(run)
    record = ownership.recorded_files(run)
    assert record is not None and {"report.md", "report.html", "index.html"} <= set(record)
    write_report(run)  # its own files, unchanged: rendered again
    (run / "report.md").write_bytes(USER)  # the user edits it
    with pytest.raises(io.NotOurs, match="changed since"):
        write_report(run)
    assert (run / "report.md").read_bytes() == USER


def test_a_run_the_harness_made_before_records_renders_again(tmp_path: Path) -> None:
    run = _run(tmp_path)  # a manifest, no record: the harness's own older run
    (run / "report.md").write_text("# an older render\n")
    write_report(run)
    assert (run / "report.md").read_text() != "# an older render\n"
    assert ownership.recorded_files(run) is not None


def test_the_results_index_never_replaces_a_users_index_html(tmp_path: Path) -> None:
    run = _run(tmp_path)
    root = tmp_path / "results"
    (root / "index.html").write_bytes(USER)
    assert write_results_index(root, own=run) is None
    assert (root / "index.html").read_bytes() == USER
    (root / "index.html").unlink()
    assert write_results_index(root, own=run) == root / "index.html"
    assert write_results_index(root, own=run) == root / "index.html"  # its own: rewritten
    (root / "index.html").write_bytes(USER)
    assert write_results_index(root, own=run) is None


def test_resume_clean_up_deletes_only_what_the_harness_made(tmp_path: Path) -> None:
    variants = tmp_path / "variants"
    vdir = variants / "xla"
    (vdir / "ir").mkdir(parents=True)
    (vdir / "ir" / "00-jaxpr.txt").write_text("x")
    (vdir / "result.json").write_text("{}")
    (vdir / ".result.json.123.tmp").write_text("{")
    (vdir / "MY_NOTES.txt").write_bytes(USER)
    kept = io.remove_tree(variants, vdir, runfolder.made_in_variant)
    assert kept == ("MY_NOTES.txt",)
    assert sorted(p.name for p in vdir.iterdir()) == ["MY_NOTES.txt"]
    (vdir / "MY_NOTES.txt").unlink()
    (vdir / "result.json").write_text("{}")
    assert io.remove_tree(variants, vdir, runfolder.made_in_variant) == ()
    assert not vdir.exists()


@pytest.mark.parametrize("where", ["the_run", "inside_the_run", "inside_an_export"])
def test_a_results_root_that_is_or_lies_in_a_run_is_refused(tmp_path: Path, where: str) -> None:
    run = _run(tmp_path)
    if where == "inside_an_export":
        out = tmp_path / "exported"
        out.mkdir()
        (out / io.MARKER).write_text("{}")
        target = out / "sub"
    else:
        target = run if where == "the_run" else run / "variants" / "nested"
    with pytest.raises(ConfigError, match="not a results folder") as e:
        runs.results_root(str(target))
    assert e.value.key == "results_root" and "\n" not in str(e.value)


# --- every delete goes through io or ownership ------------------------------------------------

# (module, function) that may delete themselves, and why: each removes only what it made.
DELETES_ALLOWED: dict[tuple[str, str], str] = {
    ("harness/store/rewrite.py", "transaction"): "its own hidden folder of kept hard links, "
    "made inside the run for the rewrite",
    ("harness/store/rewrite.py", "_restore"): "a file the refused rewrite made (not there "
    "before it), put back as it was",
    ("harness/program/report.py", "_figure"): "its own figure, stale after NoData",
    ("harness/program/report.py", "write_figures"): "a planted plots link, never followed",
    ("harness/program/report.py", "write_analysis_report"): "a planted link at its own page",
    ("harness/report/plots.py", "_save_one"): "its own plot in a format not drawn this time",
    ("harness/report/markdown.py", "write_variant_pages"): "a planted link at a page it writes",
    ("harness/report/markdown.py", "write_report"): "a planted link at a file it writes",
    ("harness/study/runs.py", "abandon"): "the lock file of the run folder it created",
    (
        "harness/study/session.py",
        "forget_private_folders",
    ): "its private folders of serialized executables, device lock files and float64 references",
    (
        "harness/study/pipeline.py",
        "fresh_variant_dir",
    ): "a planted link at variants/ or a variant's folder",
    ("harness/capture/processes.py", "gather_profiles"): "profile files jax wrote, once moved",
    ("harness/capture/variant.py", "drop_trace_json"): "the trace.json.gz copy jax's profiler "
    "wrote beside each xplane.pb, which nothing reads",
    ("harness/capture/processes.py", "finish_capture"): "its own per-process capture folder",
}
OWNERS = ("harness/store/io.py", "harness/store/ownership.py")


def _deletes(source: str, rel: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    for func in (
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ):
        for node in ast.walk(func):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            delete = name in ("unlink", "rmtree", "rmdir") or (owner == "os" and name == "remove")
            if delete and rel not in OWNERS and (rel, func.name) not in DELETES_ALLOWED:
                found.append(f"{rel}:{node.lineno} {func.name}: .{name}(")
    return sorted(set(found))


def test_every_delete_goes_through_the_owner_check() -> None:
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        found += _deletes(userfiles.read_text(path, userfiles.PYTHON), rel)
    assert found == []


def test_a_planted_delete_is_caught() -> None:
    planted = "import shutil\n\n\ndef tidy(p):\n    shutil.rmtree(p)\n    p.unlink()\n"
    assert _deletes(planted, "harness/report/tidy.py") == [
        "harness/report/tidy.py:5 tidy: .rmtree(",
        "harness/report/tidy.py:6 tidy: .unlink(",
    ]


def test_every_allowed_delete_still_exists() -> None:
    for rel, function in DELETES_ALLOWED:
        tree = ast.parse((REPO / rel).read_text())
        assert function in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("name", ["../../escape", "..", "a/b", ""])
def test_a_summary_naming_a_variant_that_is_a_path_is_one_schema_error(
    tmp_path: Path, name: str
) -> None:
    from harness.records.summary import load_summary
    from harness.store.records import SchemaError

    summary = _summary()
    summary["variants"][name] = summary["variants"].pop("matmul_only")
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SchemaError, match="is not a variant name") as e:
        load_summary(tmp_path / "summary.json")
    assert "\n" not in str(e.value)
