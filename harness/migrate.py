"""python -m harness.migrate --run=DIR: a saved run's summary.json at this schema, findings made.

Reading an older summary migrates it in memory (harness.summary.MIGRATIONS), but one saved
before schema 6 has no `findings`, and the loader cannot make them: they are the analysis
stage's rules (harness.analyze.rules) over the summary and the run's kept files (fusions.json,
compile.json, the ladder's fusion log and emitted code). This command runs those rules on the
migrated summary and writes summary.json at the current schema. Nothing is captured, timed or
analysed again (it is not reanalyze), so an exported copy such as a committed reference
migrates too; every other key stays as the migration made it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness import cli


def add_findings(workdir: Path) -> tuple[int, int]:
    """Writes `workdir`'s summary.json migrated to this schema with its findings made from
    the summary and the run's files; returns (the schema it had, the findings it has now)."""
    from harness import io, userfiles
    from harness.analyze import rules
    from harness.records import loads
    from harness.runfolder import RunFolder
    from harness.summary import load_summary, summary_json

    path = RunFolder(workdir).summary
    before = loads(userfiles.read_text(path, userfiles.SUMMARY), str(path))
    version = before.get("schema_version", 1) if isinstance(before, dict) else 1
    summary = load_summary(path)  # validated and migrated in memory, or one located error
    found = rules.evaluate(rules.read_facts(workdir, summary))
    io.write_json(path, summary_json(dataclasses.replace(summary, findings=found)))
    made = len(found.timing) + len(found.memory) + len(found.coverage) + len(found.changes)
    return int(version), made


def main(argv: Sequence[str]) -> int:
    from harness import io, terminal
    from harness.runfolder import RunFolder

    cli.no_extra_arguments(argv)
    workdir = cli.run_folder(flags.FLAGS.run, "--run")
    with io.writes_confined_to(workdir), io.run_lock(workdir):
        version, made = add_findings(workdir)
    print(
        f"migrated {terminal.shown(RunFolder(workdir).summary)} from schema {version}: "
        f"{made} findings made from its summary and kept files"
    )
    return 0


def define_flags() -> None:
    cli.define_string("run", "results/gelu/latest", "The run folder to migrate.")


if __name__ == "__main__":
    define_flags()
    cli.start(main)
