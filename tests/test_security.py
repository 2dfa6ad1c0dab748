"""Security: configs are plain data, results stay under the results root, no shell strings."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import REPO, run_harness

from harness.config import ConfigError, load
from harness.store import io
from harness.study.pipeline import fresh_variant_dir

HARNESS = REPO / "harness"
SOURCES = sorted(HARNESS.rglob("*.py"))
MINIMAL = "experiment: t\nproblem: {m: 8, k: 4, n: 4}\nvariants:\n  - {name: xla, mode: jit}\n"


def grep(pattern: str) -> list[str]:
    found = []
    for path in SOURCES:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(pattern, code):
                found.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    return found


# --- YAML is data, never code --------------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
        "!!python/name:os.system",
        "!!python/object:argparse.Namespace {{a: 1}}",
    ],
)
@pytest.mark.study
def test_python_tags_are_config_errors_and_never_run(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(MINIMAL + "description: " + tag.format(marker=marker) + "\n")
    with pytest.raises(ConfigError, match="YAML tag not allowed at line 5"):
        load(str(cfg))
    assert not marker.exists()


def test_only_safe_yaml_and_no_eval_or_exec_in_the_harness() -> None:
    assert grep(r"yaml\.(load|unsafe_load|full_load|load_all|unsafe_load_all)\(") == []
    assert grep(r"yaml\.(Unsafe|Full)?Loader\b") == []
    assert grep(r"(?<![\w.])(eval|exec|compile)\(") == []
    assert grep(r"\b(pickle|marshal|shelve)\b") == []


# --- no shell strings ------------------------------------------------------------------------


def test_no_shell_strings() -> None:
    assert grep(r"shell\s*=\s*True") == []
    assert grep(r"os\.(system|popen|exec\w*|spawn\w*)\(") == []


def test_every_subprocess_call_takes_an_argument_list() -> None:
    calls = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "subprocess"
            ):
                calls.append((path.name, node))
    assert calls, "expected the harness's git and XLA-option subprocesses"
    for name, node in calls:
        assert node.args and isinstance(node.args[0], ast.List), (name, node.lineno)
        assert not any(k.arg == "shell" for k in node.keywords), (name, node.lineno)


# --- results stay under the results root ------------------------------------------------------


@pytest.mark.parametrize("parts", [("..",), ("a", "..", ".."), ("/etc",), ("a/../../b",)])
def test_confined_refuses_paths_that_escape(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="escapes"):
        io.confined(tmp_path / "results", *parts)


def test_confined_resolves_symlinks_before_deciding(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="escapes"):
        io.confined(root, "out", "x")


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        (MINIMAL, "--config.experiment=../escape"),
        (MINIMAL, "--config.experiment=/tmp/escape"),
        (MINIMAL.replace("name: xla", "name: ../xla"), "--config.baseline=../xla"),
    ],
    ids=["experiment_dotdot", "experiment_absolute", "variant_dotdot"],
)
@pytest.mark.study
def test_names_from_config_cannot_leave_the_results_root(
    tmp_path: Path, text: str, flag: str
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    proc = run_harness(f"--config={cfg}", flag, results_root=tmp_path / "results")
    assert proc.returncode == 2 and "is not a safe name" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


@pytest.mark.study
def test_an_experiment_folder_linked_outside_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    results = tmp_path / "results"
    results.mkdir()
    (results / "t").symlink_to(outside)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(MINIMAL)
    proc = run_harness(f"--config={cfg}", results_root=results)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: flag --results_root={results}: experiment: ")
    assert "escapes" in proc.stderr and not any(outside.iterdir())


@pytest.mark.study
def test_resume_of_a_run_linked_outside_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "manifest.json").write_text(json.dumps({"config": {}}))
    results = tmp_path / "results"
    (results / "t").mkdir(parents=True)
    (results / "t" / "20240101-000000").symlink_to(outside)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(MINIMAL)
    proc = run_harness(f"--config={cfg}", "--resume=20240101-000000", results_root=results)
    assert proc.returncode == 2 and "escapes" in proc.stderr
    assert proc.stderr.startswith("error: flag --resume=20240101-000000: resume: ")
    assert sorted(p.name for p in outside.iterdir()) == ["manifest.json"]


def test_a_variant_folder_linked_outside_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    run = tmp_path / "results" / "t" / "run"
    (run / "variants").mkdir(parents=True)
    (run / "variants" / "xla").symlink_to(outside)
    fresh = fresh_variant_dir(run, "xla")
    assert fresh == (run / "variants" / "xla").resolve() and fresh.is_dir()
    assert not (run / "variants" / "xla").is_symlink() and not any(fresh.iterdir())
    assert (outside / "keep.txt").read_text() == "mine"


def test_remove_tree_refuses_links_and_paths_outside_its_root(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "other")
    with pytest.raises(ValueError, match="not a folder"):
        io.remove_tree(tmp_path / "root", tmp_path / "root" / "link", lambda _: True)
    with pytest.raises(ValueError):
        io.remove_tree(tmp_path / "root", tmp_path / "other", lambda _: True)
    assert (tmp_path / "other").is_dir()
