"""A newcomer's first hour in one go: clone, the README's commands, and every command the
harness printed for the user to run, pasted as printed.

Run: python benchmarks/newcomer.py [--source=REPO] [--install] [--full] [--keep]
     [--timeout_s=300] [--config.KEY=VALUE ...]

1. `git clone` of `--source` (default: this repository) into a temporary folder, with a
   `shared` link beside the clone to the source's `../shared` (the fixtures, STYLE.md), as CI
   lays it out.
2. The environment. By default the installed one is reused: the clone's `.venv` links to the
   source's `.venv` (or, where the source has none, to the virtual environment running this
   script), and the clone's pyproject.toml is dated before that environment's `.installed`,
   so make's `$(VENV)/.installed` rule finds it up to date (`make -q` checks that before any
   step) and nothing is written into the shared environment. `--install` instead leaves the
   clone without a `.venv`, so the first `make` runs the Makefile's own bootstrap (venv, pip
   install) as on a new user's machine.
3. In the clone, the README's commands in their `make` forms, with the tiny overrides of
   tests/conftest.py's `TINY` in `FLAGS` (`--full` leaves them out; trailing `--config.*`
   arguments are added to them): `make experiment CONFIG=gelu.yaml` twice, `make report`,
   `make compare A=... B=...` of the two runs (no OUT: its folder is named by the two run
   ids), `make search CONFIG=search_cpu.yaml`, a `program:` study of a user's function
   (`make experiment CONFIG=two_input.yaml`) and a Flax TrainState train step as a user writes
   it (`make experiment CONFIG=flax_cnn.yaml`: BatchNorm statistics, dropout with a typed
   key, Adam's state), all at tiny sizes; every variant of the Flax study must be ok.
4. Every command those printed for the user to run ("time it again later:", its "or:"
   alternatives, "finish it with:" and its ", or:" forms) is run as printed, through bash, in
   the clone, with a time limit.

It prints a table of each command, its exit code and its seconds, and exits 1 when any failed
(2 when the set-up did). tests/test_newcomer.py runs it with the reused environment.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "gelu.yaml"
# What a command the harness prints for the user to run is introduced by.
AGAIN = re.compile(r"^time it again later: (?P<cmd>.+)$")
OR = re.compile(r"^\s+or: (?P<cmd>.+)$")
FINISH = re.compile(r"finish it with: (?P<cmds>.+)$")
# The environment a user's shell would not have: a test's PYTHONPATH (the source, not the
# clone), an outer make's (its jobserver, and MAKELEVEL, which a run records as make's).
DROPPED_ENV = ("PYTHONPATH", "XLA_FLAGS", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "VIRTUAL_ENV")


class SetupError(Exception):
    """The clone or its environment could not be made: no command ran."""


@dataclass(frozen=True)
class Step:
    """One command run in the clone: what was typed, its exit code, its seconds, its output."""

    command: str
    pasted: bool  # printed by the harness for the user, rather than the README's
    exit_code: int
    seconds: float
    output: str


def tiny_overrides(conftest: Path) -> tuple[str, ...]:
    """Returns tests/conftest.py's TINY, read from its source (no pytest import)."""
    for node in ast.parse(conftest.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TINY" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise SetupError(f"{conftest}: no TINY overrides")


def printed_commands(output: str) -> list[str]:
    """Returns the commands the harness printed for the user to run, in order."""
    found: list[str] = []
    for line in output.splitlines():
        for pattern in (AGAIN, OR):
            m = pattern.match(line)
            if m:
                found.append(m["cmd"].strip())
        m = FINISH.search(line)
        if m:
            found.extend(c.strip() for c in m["cmds"].split(", or: "))
    return found


def user_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in DROPPED_ENV:
        env.pop(name, None)
    return env


def run_step(command: str, cwd: Path, timeout_s: float, pasted: bool) -> Step:
    """Runs `command` as a user's shell would, in `cwd`; a time-out is exit code 124."""
    print(f"$ {command}", flush=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        code, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        code = 124
        output = f"{e.stdout or ''}{e.stderr or ''}\n(timed out after {timeout_s:.0f} s)"
    seconds = time.monotonic() - start
    if code != 0:
        print(output[-3000:], flush=True)
    return Step(command, pasted, code, seconds, str(output))


def installed_venv(source: Path) -> Path:
    """The environment to reuse: the source's `.venv`, else the one running this script."""
    if (source / ".venv" / "bin" / "python").exists():
        return (source / ".venv").resolve()
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix).resolve()
    raise SetupError(f"no installed environment: {source}/.venv is absent (try --install)")


def reuse_venv(clone: Path, venv: Path) -> None:
    """Links the clone's `.venv` to `venv` and dates the clone's pyproject.toml before the
    environment's `.installed`, so make skips its bootstrap without a write to `venv`."""
    installed = venv / ".installed"
    if not installed.exists():
        raise SetupError(f"{installed} is absent: make would install into {venv} (try --install)")
    (clone / ".venv").symlink_to(venv)
    before = installed.stat().st_mtime - 60
    os.utime(clone / "pyproject.toml", (before, before))
    up_to_date = subprocess.run(
        ["make", "-q", ".venv/.installed"], cwd=clone, env=user_env(), capture_output=True
    )
    if up_to_date.returncode != 0:
        raise SetupError("make would rebuild the reused environment (.venv/.installed)")


def clone_repo(source: Path, into: Path) -> Path:
    """Clones `source` to `into`/<its name>, with `into`/shared linked to its `../shared`."""
    clone = into / source.name
    proc = subprocess.run(
        ["git", "clone", "-q", str(source), str(clone)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SetupError(f"git clone {source}: {proc.stderr.strip()}")
    shared = (source.parent / "shared").resolve()
    if shared.exists():
        (into / "shared").symlink_to(shared)
    return clone


def flags_arg(flags: Sequence[str]) -> str:
    """`FLAGS='...'` as a user types it (each flag quoted inside), or nothing."""
    if not flags:
        return ""
    return " FLAGS=" + shlex.quote(" ".join(shlex.quote(f) for f in flags))


def latest_run(clone: Path) -> str:
    return "results/gelu/" + (clone / "results" / "gelu" / "latest").resolve().name


# The search at a size and budget a test can afford: two candidates, a one-second timing.
SEARCH_FLAGS = (
    "--config.problem.m=64",
    "--config.problem.k=64",
    "--config.problem.n=64",
    "--config.search.max_candidates=2",
    "--config.search.budget_s=30",
    "--config.timing.budget_s=1",
    "--config.timing.max_budget_s=1",
)
# The program study's inputs shrunk (its labels stay in range).
PROGRAM_FLAGS = (
    "--config.program.inputs=[{shape: [64, 32], dtype: float32}, "
    "{shape: [64], dtype: int32, low: 0, high: 64}]",
    "--config.select=eager,xla",
)
# The Flax train step's batch shrunk (its labels stay uint8 in range).
FLAX_FLAGS = (
    "--config.program.inputs=[{image: {shape: [8, 8, 8, 3], dtype: float32}, "
    "label: {shape: [8], dtype: uint8, low: 0, high: 10}}]",
)


def failed_variants(output: str) -> list[str]:
    """Returns the variants a study's output named as failed (its `failed variants:` line)."""
    for line in output.splitlines():
        if line.startswith("failed variants: "):
            return [v.strip() for v in line.split(":", 1)[1].split("(")[0].split(",")]
    return []


def first_hour(
    clone: Path, flags: Sequence[str], timeout_s: float, with_flax: bool = True
) -> list[Step]:
    """The README's commands in the clone (the Flax study where `with_flax`), then every
    command they printed, as printed."""
    steps: list[Step] = []
    runs: list[str] = []
    experiment = f"make experiment CONFIG={CONFIG}{flags_arg(flags)}"
    for _ in range(2):
        steps.append(run_step(experiment, clone, timeout_s, pasted=False))
        if steps[-1].exit_code == 0:
            runs.append(latest_run(clone))
    steps.append(run_step("make report", clone, timeout_s, pasted=False))
    if len(runs) == 2:
        compare = f"make compare A={runs[0]} B={runs[1]}"
        steps.append(run_step(compare, clone, timeout_s, pasted=False))
    # The README's search and a `program:` study of a user's own function, at tiny sizes.
    search = f"make search CONFIG=search_cpu.yaml{flags_arg(SEARCH_FLAGS)}"
    steps.append(run_step(search, clone, timeout_s, pasted=False))
    # A program study has no `problem`: the expression's tiny sizes are left out of its flags.
    own = tuple(f for f in flags if not f.startswith("--config.problem."))
    program = f"make experiment CONFIG=two_input.yaml{flags_arg((*own, *PROGRAM_FLAGS))}"
    steps.append(run_step(program, clone, timeout_s, pasted=False))
    if with_flax:
        flax = f"make experiment CONFIG=flax_cnn.yaml{flags_arg((*own, *FLAX_FLAGS))}"
        steps.append(run_step(flax, clone, timeout_s, pasted=False))
        failed = failed_variants(steps[-1].output)
        if failed and steps[-1].exit_code == 0:  # every variant of it must be ok
            steps[-1] = dataclasses.replace(steps[-1], exit_code=1)
            print(f"flax_cnn: failed variants {', '.join(failed)}", flush=True)
    printed = [c for s in list(steps) for c in printed_commands(s.output)]
    for command in dict.fromkeys(printed):  # each once, in the order printed
        steps.append(run_step(command, clone, timeout_s, pasted=True))
    return steps


def shortened(command: str, width: int) -> str:
    """`command` in `width` characters: its start and its end, where a run id and a re-time's
    own flags are, with the middle (the tiny overrides) elided."""
    if len(command) <= width:
        return command
    head = (width - 1) // 2
    return command[:head] + "…" + command[-(width - 1 - head) :]


def table(steps: Sequence[Step], width: int = 120) -> str:
    """Each command, its exit code and its seconds, one line each."""
    rows = [("command", "exit", "seconds")]
    for s in steps:
        shown = shortened(("(pasted) " if s.pasted else "") + s.command, width)
        rows.append((shown, str(s.exit_code), f"{s.seconds:.1f}"))
    left = max(len(r[0]) for r in rows)
    return "\n".join(f"{c:<{left}}  {code:>4}  {sec:>7}" for c, code, sec in rows)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the repository to clone")
    parser.add_argument("--install", action="store_true", help="a clean install through make")
    parser.add_argument("--full", action="store_true", help="the studies without TINY")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--timeout_s", type=float, default=300, help="each command's limit")
    parser.add_argument(
        "--no_flax", action="store_true", help="leave out the Flax study (the suite has its own)"
    )
    args, extra = parser.parse_known_args(argv)
    bad = [a for a in extra if not a.startswith("--config.")]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)}")
    source = args.source.resolve()
    folder = Path(tempfile.mkdtemp(prefix="newcomer-"))
    try:
        try:
            clone = clone_repo(source, folder)
            if not args.install:
                reuse_venv(clone, installed_venv(source))
            flags = [*(() if args.full else tiny_overrides(clone / "tests" / "conftest.py"))]
        except SetupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"clone: {clone}", flush=True)
        steps = first_hour(clone, [*flags, *extra], args.timeout_s, not args.no_flax)
        print(table(steps))
        failed = [s for s in steps if s.exit_code != 0]
        pasted = sum(s.pasted for s in steps)
        print(f"{len(steps)} commands ({pasted} pasted as printed), {len(failed)} failed")
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
