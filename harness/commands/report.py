"""python -m harness.report --run=results/gelu/latest: re-render a saved run's report.

Reads only the run folder; jax is never imported.
"""

from __future__ import annotations

from collections.abc import Sequence

from absl import flags

from harness.commands import cli
from harness.common import terminal
from harness.records.summary import load_summary
from harness.store import io
from harness.store.runfolder import SEARCH_FILE, SUMMARY_FILE, RunFolder


def main(argv: Sequence[str]) -> int:
    from harness.report.markdown import write_report  # imports matplotlib: loaded only when called

    cli.no_extra_arguments(argv)
    real = cli.run_folder(flags.FLAGS.run, "--run", need=(SUMMARY_FILE, SEARCH_FILE))
    with io.writes_confined_to(real):
        path = write_report(real)
    print(f"report: {terminal.shown(path)}")
    print(f"html:   {terminal.shown(path.with_suffix('.html'))}")
    summary = RunFolder(real).summary
    if summary.is_file() and load_summary(summary).findings is None:
        print(
            "note: this summary was saved before findings were recorded (schema 6); "
            f"`python -m harness.commands.migrate --run={terminal.shown(real)}` makes them"
        )
    return 0


def define_flags() -> None:
    cli.define_string("run", "results/gelu/latest", "A run folder.")


def run() -> None:
    define_flags()
    cli.start(main)


if __name__ == "__main__":
    run()
