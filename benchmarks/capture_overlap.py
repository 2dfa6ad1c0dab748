"""A study's capture against the sum of its variants' captured alone (issue 44's `program:`
acceptance: the study's capture at most 60% of the sum), measured in one command.

Run on the H200: python3 benchmarks/capture_overlap.py --config=CONFIG [--pairs=2]
    [--config.KEY=VALUE ...]

A first study, not counted, measures the device's ceilings into the results root every run
shares. Each pair then runs the whole study and each variant alone
(`--config.select=NAME`, a study of one), every one a fresh process, and reads each run's
capture stage (manifest.json's `stages_s`). It prints each pair's study capture, the sum of
the variants' alone, their ratio, and the study's breakdown (benchmarks/study_breakdown.py:
the compile slot held, the device idle). The order alternates between pairs (study first,
then alone first) so that a machine warming or cooling over the command favours neither side.
Timing, analysis and report run too; shrink them with overrides (`--config.timing.rounds=2`):
they are not the capture.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import study_breakdown  # noqa: E402  (beside this file)


def study(config: str, root: Path, overrides: list[str]) -> tuple[float, Path]:
    """Runs one study in a fresh process; returns its capture stage's seconds and its folder.
    Every run shares `root`: the device's ceilings, measured by the first and cached there, are
    then no run's capture."""
    cmd = [sys.executable, "-m", "harness", f"--config={config}", f"--results_root={root}"]
    before = set(root.glob("*/2*"))
    proc = subprocess.run(cmd + overrides, cwd=REPO, capture_output=True, text=True, check=False)
    runs = sorted(p for p in set(root.glob("*/2*")) - before if (p / "manifest.json").is_file())
    if proc.returncode != 0 or not runs:
        tail = proc.stderr[-3000:]
        raise SystemExit(f"{' '.join(cmd + overrides)} failed ({proc.returncode}):\n{tail}")
    manifest = json.loads((runs[-1] / "manifest.json").read_text())
    return float(manifest["stages_s"]["capture_s"]), runs[-1]


def variant_names(config: str, overrides: list[str]) -> tuple[str, ...]:
    from harness.config.load import load

    return tuple(v.name for v in load(config, overrides).experiment.selected_variants)


def one_pair(
    config: str, root: Path, overrides: list[str], names: tuple[str, ...], study_first: bool
) -> float:
    """Runs the study and each variant alone, in the given order; prints and returns the
    study's capture over the sum of the variants' alone."""
    each: dict[str, float] = {}
    captured, run = 0.0, root
    for part in ("study", "alone") if study_first else ("alone", "study"):
        if part == "study":
            captured, run = study(config, root, overrides)
            continue
        for n in names:
            each[n] = study(config, root, [*overrides, f"--config.select={n}"])[0]
    total = sum(each.values())
    print(
        f"study capture {captured:.1f} s, alone "
        + ", ".join(f"{n} {s:.1f}" for n, s in each.items())
        + f" (sum {total:.1f} s): {captured / total:.1%}",
        flush=True,
    )
    study_breakdown.main(run)
    return captured / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--pairs", type=int, default=2)
    args, overrides = parser.parse_known_args()
    names = variant_names(args.config, overrides)
    with tempfile.TemporaryDirectory(prefix="capture-overlap-") as tmp:
        root = Path(tmp)
        # Not counted: measures and caches every ceiling the variants need, warms the caches.
        study(args.config, root, overrides)
        ratios = []
        for pair in range(args.pairs):
            print(f"pair {pair + 1}:", flush=True)
            ratios.append(one_pair(args.config, root, overrides, names, pair % 2 == 0))
    print(f"median ratio {statistics.median(ratios):.1%} over {len(ratios)} pairs (target <= 60%)")


if __name__ == "__main__":
    main()
