"""python -m harness.report --run=results/gelu/latest: re-render a saved run's report.

Reads only the run folder; jax is never imported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.report.markdown import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__)
    parser.add_argument("--run", default="results/gelu/latest", help="a run folder")
    args = parser.parse_args(argv)
    run = Path(args.run)
    if not (run / "summary.json").is_file():
        print(f"--run={run}: no summary.json there, not a finished run folder", file=sys.stderr)
        return 2
    path = write_report(run)
    print(f"report: {path}")
    print(f"html:   {path.with_suffix('.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
