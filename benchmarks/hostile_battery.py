"""The hostile battery: every attack in benchmarks/hostile/cases_*.py, each judged by what it must
never do (a traceback, a file changed outside its output folder, a file lost, a hang).

Run: python benchmarks/hostile_battery.py [--only=SUBSTRING] [--fast] [--json=FILE] [--keep]

It first makes one small study run (two variants, a short timing budget) that cases copy as
their "existing run", then runs each case in a fresh sandbox folder of its own, and prints one
row per case: its kind, name, exit code, seconds, and why it does not hold. It exits 1 when any
case does not hold. `--fast` runs only the cases that need no study of their own (the sample
the test suite runs too).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostile.case import REPO, Case, Sandbox, failures, run_attack
from hostile.cases_round4 import TEMPLATE_OVERRIDES

TEMPLATE_FLAGS = ("--config=configs/gelu.yaml", *TEMPLATE_OVERRIDES)


def all_cases() -> list[Case]:
    """Every case of every cases_*.py module, in module then list order; names are unique."""
    cases: list[Case] = []
    for path in sorted((Path(__file__).parent / "hostile").glob("cases_*.py")):
        module = importlib.import_module(f"hostile.{path.stem}")
        cases += module.CASES
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SystemExit(f"hostile battery: duplicate case names {sorted(dupes)}")
    return cases


def make_template(where: Path) -> Path:
    """Runs one small study into `where` and returns its run folder."""
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *TEMPLATE_FLAGS, f"--results_root={where}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    runs = sorted(p for p in (where / "gelu").iterdir() if p.is_dir() and not p.is_symlink())
    if proc.returncode != 0 or not runs:
        raise SystemExit(f"hostile battery: the template study failed:\n{proc.stderr[-2000:]}")
    return runs[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--fast", action="store_true", help="only the cases marked fast")
    parser.add_argument("--json", default="", help="write every case's outcome here")
    parser.add_argument("--keep", action="store_true", help="keep the sandboxes")
    args = parser.parse_args()

    cases = [c for c in all_cases() if args.only in c.name and (c.fast or not args.fast)]
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    template = None if args.fast else make_template(work / "template")
    rows = []
    held = 0
    for i, case in enumerate(cases):
        root = work / f"case{i:04d}"
        root.mkdir()
        sandbox = Sandbox(root=root, template_run=template)
        try:
            attack = case.setup(sandbox)
        except Exception as e:  # a case whose set-up fails is the battery's bug, not the tool's
            rows.append({"name": case.name, "kind": case.kind, "setup_error": repr(e)})
            print(f"SETUP  {case.kind:16} {case.name}: {e!r}", flush=True)
            continue
        outcome = run_attack(attack, sandbox)
        why = failures(outcome, attack, sandbox)
        held += not why
        rows.append(
            {
                "name": case.name,
                "kind": case.kind,
                "command": list(attack.argv),
                "rc": outcome.rc,
                "seconds": round(outcome.seconds, 2),
                "traceback": outcome.traceback,
                "changed_outside": list(outcome.changed_outside),
                "lost": list(outcome.lost),
                "held": not why,
                "why": why,
            }
        )
        status = "held" if not why else "BROKE"
        print(
            f"{status:6} {case.kind:16} {case.name} rc={outcome.rc} {outcome.seconds:.1f}s"
            + (f": {'; '.join(why)}" if why else ""),
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{held} of {len(cases)} cases held")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if held == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
