"""python -m harness.reanalyze --run=DIR: redo the analysis of a saved run without running JAX.

Useful after the analyzers improve, or on a run captured on another machine (an H200 run
analyzed on a laptop).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from absl import app, flags

_RUN = flags.DEFINE_string("run", "results/gelu/latest", "The run folder to analyze again.")


def main(argv: Sequence[str]) -> int:
    del argv
    from harness.analysis import reanalyze

    run = Path(_RUN.value)
    if not (run / "manifest.json").exists():
        print(f"error: {run}: not a run folder (no manifest.json)", file=sys.stderr)
        return 2
    summary = reanalyze(run.resolve())
    print(f"analyzed {len(summary['variants'])} variants: {run / 'summary.json'}")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
