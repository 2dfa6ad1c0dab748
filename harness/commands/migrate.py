"""python -m harness.commands.migrate --run=DIR: a saved run's summary.json at this schema, judged again
and its findings made.

Reading an older summary migrates it in memory (harness.records.summary.MIGRATIONS), but the loader
cannot judge it again: the timing verdicts and the noise section are a function of the saved
rounds (timing.json), each comparison's recorded run-to-run spread and the run's timing config
(harness.analyze.judging), and the findings are the analysis stage's rules (harness.findings)
over the summary and the run's kept files (fusions.json, ranking.json, compile.json, the
ladder's fusion log and emitted code). This command does both and writes summary.json at the
current schema. A variant's kernels.json of version 1 (every event as JSON) becomes its
events.parquet and a kernels.json of the match's totals. Nothing is captured, timed or analysed again (it is not reanalyze), so an
exported copy such as a committed reference migrates too; a run without timing.json keeps its
verdicts as they were judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness import findings as rules
from harness.analyze import judging, verdicts
from harness.commands import cli
from harness.common import terminal, userfiles
from harness.records import events_file, losses, run_files
from harness.records.summary import load_summary, summary_json
from harness.store import io
from harness.store.records import loads
from harness.store.runfolder import RunFolder


def add_findings(workdir: Path, allow_loss: bool = False) -> tuple[int, int]:
    """Writes `workdir`'s summary.json migrated to this schema, its verdicts judged again from
    the saved rounds and its findings made from the summary and the run's files; returns (the
    schema it had, the findings it has now). Refuses (UsageError, nothing written) a summary
    that would lose what the old one holds, unless `allow_loss`."""

    folder = RunFolder(workdir)
    path = folder.summary
    before = loads(userfiles.read_text(path, userfiles.SUMMARY), str(path))
    version = before.get("schema_version", 1) if isinstance(before, dict) else 1
    summary = load_summary(path)  # validated and migrated in memory, or one located error
    timed = verdicts.read_timing(workdir, warn=True)
    if timed is not None:
        manifest = run_files.load_if_present(run_files.MANIFEST, folder.manifest)
        limits = judging.limits_of(manifest.saved_config if manifest is not None else None)
        summary = judging.rejudge(summary, timed, limits)
    found = rules.evaluate(rules.read_facts(workdir, summary))
    # Built beside the old summary, which it replaces only when nothing held is lost.
    data = summary_json(dataclasses.replace(summary, findings=found))
    gone = losses.lost(summary_json(load_summary(path)), data)
    if gone and not allow_loss:
        raise cli.UsageError(losses.refusal(f"{workdir}: migrate", gone))
    io.write_json(path, data)
    made = len(found.timing) + len(found.memory) + len(found.coverage) + len(found.changes)
    return int(version), made


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    workdir = cli.run_folder(flags.FLAGS.run, "--run")
    with io.writes_confined_to(workdir), io.run_lock(workdir):
        version, made = add_findings(workdir, flags.FLAGS.allow_loss)
        moved = events_file.migrate_run(RunFolder(workdir))  # after a refusal, nothing moved
    if moved:
        print(f"{len(moved)} variants' events moved from kernels.json into events.parquet")
    print(
        f"migrated {terminal.shown(RunFolder(workdir).summary)} from schema {version}: "
        f"{made} findings made from its summary and kept files"
    )
    return 0


def define_flags() -> None:
    cli.define_rewrite_flags("The run folder to migrate.")


def run() -> None:
    """Defines the flags and runs the command (also `python -m harness.migrate`)."""
    define_flags()
    cli.start(main)


if __name__ == "__main__":
    run()
