"""The commands the harness prints for a user to paste (harness.records.invocations): the interpreter the
run used as it can be typed, make's form when make started it, and each form passing exactly
the arguments it means to."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from harness.records import invocations, run_files
from harness.records.run_files import Invocation, Manifest, Override


def test_the_interpreter_is_typed_relative_inside_the_folder_and_absolute_outside() -> None:
    here = Path("/home/u/repo")
    assert (
        invocations.typed_interpreter("/home/u/repo/.venv/bin/python", here) == ".venv/bin/python"
    )
    assert invocations.typed_interpreter("/usr/bin/python3", here) == "/usr/bin/python3"
    assert invocations.typed_interpreter("/home/u/repo/python", here) == "./python"
    assert invocations.typed_interpreter("", here) == "python3"


def test_make_is_recognised_by_the_variable_it_exports() -> None:
    venv = "/r/.venv/bin/python"
    made = invocations.invocation_here({"MAKELEVEL": "1"}, venv, Path("/r"))
    assert made == Invocation(python=".venv/bin/python", make=True)
    assert not invocations.invocation_here({}, venv, Path("/r")).make


def test_the_results_root_is_named_unless_it_is_the_default_here(tmp_path: Path) -> None:
    assert invocations.results_root_flag(tmp_path / "results", tmp_path) is None
    assert invocations.results_root_flag(tmp_path / "out", tmp_path) == "out"
    # A folder called `results` elsewhere is not the default: the flag names it.
    elsewhere = tmp_path / "other" / "results"
    assert invocations.results_root_flag(elsewhere, tmp_path / "repo") == str(elsewhere)


def _manifest(make: bool) -> Manifest:
    return Manifest(
        schema_version=run_files.MANIFEST.version,
        experiment="gelu",
        run_id="20260101-000000",
        config_file="gelu.yaml",
        overrides=(
            Override(key="problem.m", value=64, previous=128),
            Override(key="select", value=["xla", "eager"], previous=None),
            Override(key="timing.only", value=True, previous=False),
        ),
        started="x",
        status="interrupted",
        invocation=Invocation(python=".venv/bin/python", make=make),
    )


def test_a_run_started_with_make_gets_make_first_then_its_interpreter() -> None:
    run = Path.cwd() / "results" / "gelu" / "20260101-000000"
    made = invocations.resume_commands(_manifest(True), run, drop=("timing.only",))
    assert made[0].startswith("make experiment CONFIG=gelu.yaml FLAGS=")
    assert made[1] == (
        ".venv/bin/python -m harness --config=gelu.yaml --config.problem.m=64 "
        '\'--config.select=["xla", "eager"]\' --resume=20260101-000000'
    )
    plain = invocations.resume_commands(_manifest(False), run, drop=("timing.only",))
    assert plain == made[1:]
    # A manifest from before the invocation was recorded: the command as it always was.
    old = invocations.resume_commands(Manifest(config_file="c.yaml", run_id="r"), run)
    assert old == ["python -m harness --config=c.yaml --resume=r"]


def test_a_search_is_started_again_without_resume_in_the_form_it_was_started() -> None:
    """A search cannot be resumed: its command is the one that started it, make first."""
    run = Path.cwd() / "results" / "gelu" / "20260101-000000"
    search = dataclasses.replace(_manifest(True), kind="search")
    made, direct = invocations.start_commands(search, run)
    assert made.startswith("make search CONFIG=gelu.yaml FLAGS=")
    assert direct == (
        ".venv/bin/python -m harness --config=gelu.yaml --config.problem.m=64 "
        '\'--config.select=["xla", "eager"]\' --config.timing.only=true'
    )
    assert "--resume" not in made


@pytest.mark.slow
def test_the_make_form_runs_exactly_the_arguments_of_the_direct_form() -> None:
    """`make -n` prints the command the Makefile would run for the printed make form: the same
    arguments as the direct form, however the flags had to be quoted twice over."""
    run = Path.cwd() / "results" / "gelu" / "20260101-000000"
    made, direct = invocations.resume_commands(
        _manifest(True), run, extra=("--config.timing.only=true",)
    )
    dry = subprocess.run(
        ["bash", "-c", made.replace("make ", "make -n ", 1)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    ran = [line for line in dry.stdout.splitlines() if " -m harness " in line]
    assert len(ran) == 1, dry.stdout
    assert shlex.split(ran[0])[1:] == shlex.split(direct)[1:]


def test_make_cannot_pass_a_config_path_its_makefile_would_split() -> None:
    assert invocations.make_command("experiment", ["--config=my runs/c.yaml"]) is None
    assert invocations.make_command("search", ["--config=s.yaml"]) == "make search CONFIG=s.yaml"
