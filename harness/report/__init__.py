"""Report stage: renders a saved run folder to report.md, report.html and plots/.

`write_report(workdir)` is the entry point run.py calls at the end of a run; it reads only the
run's files and never imports jax.
"""

from __future__ import annotations

from pathlib import Path


def write_report(workdir: Path, results_root: Path | None = None) -> Path:
    """Writes the run's report files (and a study's results index); returns report.md's path."""
    from harness.report.markdown import (
        write_report as _write,  # imports matplotlib: loaded only when called
    )  # imports matplotlib: loaded only when called

    return _write(workdir, results_root)


__all__ = ["write_report"]
