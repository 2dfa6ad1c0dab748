"""What tests/test_hostile.py and tests/test_hostile_faults.py assert of every case, and how
they run the entry points (in-process or as real commands). The world each case runs in, a
finished run beside a folder nobody may touch, is conftest's `world` fixture."""

from __future__ import annotations

import contextlib
import io as stdio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO, World, harness_env, snapshot, under

CONFIGS = REPO / "configs"
MINIMAL = "experiment: t\nproblem: {m: 8, k: 4, n: 4}\nvariants:\n  - {name: xla, mode: jit}\n"


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def run_outputs(world: World, experiment: str) -> tuple[Path, ...]:
    """What a run of `experiment` may write under the results root: its own folder, the
    results index, the host's ceiling cache; and the config file the test wrote."""
    r = world.results
    return (r / experiment, r / "index.html", r / ".cache", world.root / "c.yaml")


def one_line(result: Result, code: int, *words: str) -> str:
    """Asserts the exit status, a single stderr line without traceback, and the words in it."""
    assert result.code == code, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def untouched(world: World, before: dict[str, str], *outputs: Path) -> None:
    """Asserts nothing outside `outputs` changed, and the finished run is intact."""
    after = snapshot(world.root, outputs)
    expected = {k: v for k, v in before.items() if not under(world.root / k, outputs)}
    assert after == expected


# --- running the entry points ------------------------------------------------------------------


def in_process(module: str, *args: str) -> Result:
    """Runs an entry point's main() in this process, as its command line would."""
    from absl import flags

    from harness.commands import cli

    entry = __import__(module, fromlist=["main"])
    if hasattr(entry, "define_flags"):
        entry.define_flags()
    flags.FLAGS.unparse_flags()
    out, err = stdio.StringIO(), stdio.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            argv = flags.FLAGS(["prog", *args], known_only=module == "harness.commands.study")
        except flags.Error as e:
            print(f"error: {e}", file=sys.stderr)
            return Result(2, out.getvalue(), err.getvalue())
        code = cli.guarded(entry.main)(argv)
    return Result(code, out.getvalue(), err.getvalue())


def harness_main(world: World, *args: str) -> Result:
    return in_process("harness.commands.study", f"--results_root={world.results}", *args)


def command(*argv: str, timeout: float = 300, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=env or harness_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def config(world: World, text: str, name: str = "c.yaml") -> Path:
    path = world.root / name
    path.write_text(text)
    return path
