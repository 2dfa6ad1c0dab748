"""python -m harness.commands.export --run=RUN --to=DIR: a run copied without its bulky files (a
reference run to commit), its report rendered again there."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness.commands import cli
from harness.common import terminal
from harness.report.export import export


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    run, to = flags.FLAGS.run, flags.FLAGS.to
    if not run or not to:
        raise cli.UsageError("--run and --to are required")
    copied = export(cli.run_folder(run, "--run"), Path(to))
    size = sum(p.stat().st_size for p in Path(to).rglob("*") if p.is_file())
    print(f"{len(copied)} files, {size / 1e6:.1f} MB in {terminal.shown(to)}")
    return 0


def define_flags() -> None:
    cli.define_string("run", None, "The run folder to copy.")
    cli.define_string("to", None, "The folder to create, e.g. results/reference/h200.")


if __name__ == "__main__":
    define_flags()
    cli.start(main)
