"""The commands the harness prints for a user to run (time the run again, finish an
interrupted run), built so that each pastes and runs as printed.

A bare `python -m harness ...` fails outside the virtual environment (`No module named
'absl'`), so a command names the interpreter the run was started with, as it can be typed
where the run started (`.venv/bin/python`); a run started through `make` gets the make form
first (`make experiment CONFIG=... FLAGS='...'`), the way its user started it. How the run was
started is recorded in its manifest (`run_records.Invocation`), so a command made later, from
the saved run (its report, `make report`), is the same.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.records.run_files import Invocation, Manifest

# A run folder under a results root of this name needs no --results_root (main's default).
DEFAULT_RESULTS_ROOT = "results"


def typed_interpreter(executable: str, cwd: Path) -> str:
    """Returns `executable` as a user can type it in `cwd`: relative when it lies inside
    `cwd` (the repository's `.venv/bin/python`), else absolute. The path is not resolved: a
    virtual environment's python is a link to the base interpreter, which lacks its packages."""
    if not executable:
        return "python3"
    path = Path(executable) if os.path.isabs(executable) else cwd / executable
    try:
        relative = path.relative_to(cwd)
    except ValueError:
        return str(path)
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"


def invocation_here(
    environ: Mapping[str, str] | None = None,
    executable: str | None = None,
    cwd: Path | None = None,
) -> Invocation:
    """Returns how this process was started: its interpreter, and whether `make` ran it (make
    puts MAKELEVEL in the environment of every command it runs)."""
    env = os.environ if environ is None else environ
    where = Path.cwd() if cwd is None else cwd
    python = typed_interpreter(sys.executable if executable is None else executable, where)
    return Invocation(python=python, make="MAKELEVEL" in env)


def flag_value(value: Any) -> str:
    """An override's value as the --config flag takes it (YAML's flow form for lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def results_root_flag(root: Path, cwd: Path) -> str | None:
    """Returns --results_root's value for a run under `root`, typed from `cwd`: None when it is
    the default (`results` in `cwd`), relative when inside `cwd`, else absolute."""
    here = cwd.resolve()
    try:
        relative = root.resolve().relative_to(here)
    except ValueError:
        return str(root.resolve())
    return None if relative == Path(DEFAULT_RESULTS_ROOT) else str(relative)


def resume_args(
    manifest: Manifest, run_path: Path, drop: Sequence[str] = (), extra: Sequence[str] = ()
) -> list[str]:
    """Returns `python -m harness`'s arguments that resume the saved run at `run_path`: its
    config file and overrides as it was started (a resume must give the same, harness.study.runs),
    its results root when not `results` here, `--resume=<id>`, then `extra`. Overrides of the
    keys in `drop` are left out (a re-time gives its own timing.only)."""
    args = start_args(manifest, run_path, drop)
    args.append(f"--resume={manifest.run_id or run_path.name}")
    return [*args, *extra]


def start_args(manifest: Manifest, run_path: Path, drop: Sequence[str] = ()) -> list[str]:
    """Returns `python -m harness`'s arguments that start the saved run at `run_path` anew
    (a search, which cannot be resumed): its config file, its overrides but those of `drop`,
    and its results root when not `results` here."""
    args = [f"--config={manifest.config_file or 'CONFIG'}"]
    for o in manifest.overrides:
        if o.key and o.key not in drop:
            args.append(f"--config.{o.key}={flag_value(o.value)}")
    root = results_root_flag(run_path.parent.parent, Path.cwd())
    if root is not None:
        args.append(f"--results_root={root}")
    return args


def make_command(target: str, args: Sequence[str]) -> str | None:
    """Returns `make TARGET CONFIG=... FLAGS='...'` running `python -m harness` with `args`, or
    None when make cannot pass them: no --config, or a config path the Makefile's unquoted
    `--config=$(CONFIG)` would split."""
    configs = [a.removeprefix("--config=") for a in args if a.startswith("--config=")]
    if len(configs) != 1 or shlex.quote(configs[0]) != configs[0]:
        return None
    rest = [a for a in args if not a.startswith("--config=")]
    made = f"make {shlex.quote(target)} CONFIG={configs[0]}"
    if rest:
        # The Makefile puts $(FLAGS) into a shell command unquoted: each flag quoted inside.
        made += " FLAGS=" + shlex.quote(" ".join(shlex.quote(a) for a in rest))
    return made


def harness_commands(invocation: Invocation | None, target: str, args: Sequence[str]) -> list[str]:
    """Returns the commands that run `python -m harness` with `args`, the form the user
    started the run with first: through make (`target`), then with the interpreter the run
    used. A run recorded before its invocation was (manifest version 1) gets `python`."""
    python = invocation.python if invocation is not None else "python"
    direct = shlex.join([python, "-m", "harness", *args])
    made = make_command(target, args) if invocation is not None and invocation.make else None
    return [made, direct] if made else [direct]


def make_target(manifest: Manifest) -> str:
    """The Makefile's target for a run of this kind: a search's `search`, else `experiment`."""
    return "search" if manifest.kind == "search" else "experiment"


def resume_commands(
    manifest: Manifest, run_path: Path, drop: Sequence[str] = (), extra: Sequence[str] = ()
) -> list[str]:
    """Returns the commands that resume the saved run at `run_path` (see `resume_args`), in
    the forms of `harness_commands`."""
    return harness_commands(
        manifest.invocation, make_target(manifest), resume_args(manifest, run_path, drop, extra)
    )


def start_commands(manifest: Manifest, run_path: Path) -> list[str]:
    """Returns the commands that start the saved run at `run_path` again (see `start_args`),
    in the forms of `harness_commands`."""
    return harness_commands(
        manifest.invocation, make_target(manifest), start_args(manifest, run_path)
    )
