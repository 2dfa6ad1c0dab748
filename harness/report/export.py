"""python -m harness.commands.export --run=RUN --to=DIR: a small, committable copy of a run.

Keeps the report, plots, summaries and the per-variant analysis and IR stage files; leaves out
XLA's raw dumps, the profiler's binaries, the per-pass HLO files, LLVM IR, logs, torch's working
folders, tlparse's pages and any file over 1 MB, then renders the report again in the copy (the
leading page and each variant's page) so its links point only at what was kept.
The destination must be empty, new, or a copy this tool made before that holds only what it
wrote then: export never replaces a run, the results root, a dump or anything else it did not
make, and writes nothing outside the destination (not the results index above it).
"""

from __future__ import annotations

from pathlib import Path

from harness.records.summary import load_summary
from harness.report import write_report
from harness.store import io, ownership
from harness.store.runfolder import DUMP_DIR, INDEX_HTML, PROFILE_DIR, TORCH_DIR, RunFolder

# XLA's raw dumps, the profiler's files, per-pass HLO, LLVM IR, logs, torch's own working
# folders (Inductor's and Triton's caches, TORCH_TRACE logs) and tlparse's pages of those logs:
# the IR ladder keeps the stages the report shows.
LEFT_OUT_DIRS = frozenset(
    {DUMP_DIR, PROFILE_DIR, "30-passes", "70-llvm", "logs", TORCH_DIR, "tlparse"}
)
LEFT_OUT_FILES = frozenset({INDEX_HTML, ".lock", io.MARKER, ownership.FILES_RECORD})
MAX_BYTES = 1_000_000


def kept(path: Path, root: Path) -> bool:
    """True for files a reference copy keeps."""
    rel = path.relative_to(root)
    return (
        not LEFT_OUT_DIRS.intersection(rel.parts[:-1])
        and rel.name not in LEFT_OUT_FILES
        and path.stat().st_size <= MAX_BYTES
    )


def export(run: Path, dest: Path) -> list[Path]:
    """Copies the kept files of `run` into `dest` (io.own_output: claimed for this tool, never
    the run itself, inside it or above it) and renders the copy's report there; returns the
    copies. Every write stays inside `dest`: no results index is written above it."""

    run = Path(run).resolve()
    if not RunFolder(run).summary.exists():
        raise ValueError(f"{run}: not a finished run folder (no summary.json)")
    with io.own_output(Path(dest), "export", inputs=(run,)) as target:
        # A damaged run is refused in one line naming its own file, before anything is copied.
        load_summary(RunFolder(run).summary)
        copied = [
            io.copy_file(path, target / path.relative_to(run))
            for path in sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink())
            if kept(path, run)
        ]
        write_report(target)
    return copied


if __name__ == "__main__":  # a command here once: say where it went
    import harness

    harness.moved("harness.report.export")
