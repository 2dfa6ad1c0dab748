"""python -m harness.report.export --run=RUN --to=DIR: a small, committable copy of a run.

Keeps the report, plots, summaries and the per-variant analysis and IR stage files; leaves out
XLA's raw dumps, the profiler's binaries, the per-pass HLO files, LLVM IR and any file over
1 MB, then renders the report again in the copy so its links point only at what was kept.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from absl import app, flags

from harness import io

_RUN = flags.DEFINE_string("run", None, "The run folder to copy.")
_TO = flags.DEFINE_string("to", None, "The folder to create, e.g. results/reference/h200.")

LEFT_OUT_DIRS = frozenset({"dump", "profile", "30-passes", "70-llvm"})
LEFT_OUT_FILES = frozenset({"metrics.jsonl", "index.html"})
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
    """Copies the kept files of `run` into `dest` (replacing it); returns the copied paths."""
    if not (run / "summary.json").exists():
        raise ValueError(f"{run}: not a finished run folder (no summary.json)")
    if dest.exists():
        shutil.rmtree(dest)
    copied = []
    for path in sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink()):
        if kept(path, run):
            copied.append(io.copy_file(path, dest / path.relative_to(run)))
    return copied


def main(argv: Sequence[str]) -> int:
    del argv
    from harness.report import write_report

    if not _RUN.value or not _TO.value:
        print("error: --run and --to are required", file=sys.stderr)
        return 2
    try:
        copied = export(Path(_RUN.value).resolve(), Path(_TO.value))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_report(Path(_TO.value))
    size = sum(p.stat().st_size for p in Path(_TO.value).rglob("*") if p.is_file())
    print(f"{len(copied)} files, {size / 1e6:.1f} MB in {_TO.value}")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
