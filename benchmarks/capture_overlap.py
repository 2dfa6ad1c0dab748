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
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import study_breakdown
from busy_machine import run_study


def captured(config: str, root: Path, overrides: list[str]) -> tuple[float, Path]:
    """Runs one study in a fresh process; returns its capture stage's seconds and its folder.
    Every run shares `root`: the device's ceilings, measured by the first and cached there, are
    then no run's capture."""
    run = run_study(config, root, overrides).path
    manifest = json.loads((run / "manifest.json").read_text())
    return float(manifest["stages_s"]["capture_s"]), run


def variant_names(config: str, overrides: list[str]) -> tuple[str, ...]:
    from harness.config.load import load

    return tuple(v.name for v in load(config, overrides).experiment.selected_variants)


def one_pair(
    config: str, root: Path, overrides: list[str], names: tuple[str, ...], study_first: bool
) -> float:
    """Runs the study and each variant alone, in the given order; prints and returns the
    study's capture over the sum of the variants' alone."""

    def alone() -> dict[str, float]:
        return {n: captured(config, root, [*overrides, f"--config.select={n}"])[0] for n in names}

    if study_first:
        together, run = captured(config, root, overrides)
        each = alone()
    else:
        each = alone()
        together, run = captured(config, root, overrides)
    total = sum(each.values())
    print(
        f"study capture {together:.1f} s, alone "
        + ", ".join(f"{n} {s:.1f}" for n, s in each.items())
        + f" (sum {total:.1f} s): {together / total:.1%}",
        flush=True,
    )
    study_breakdown.main(run)
    return together / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--pairs", type=int, default=2)
    args, overrides = parser.parse_known_args()
    names = variant_names(args.config, overrides)
    with tempfile.TemporaryDirectory(prefix="capture-overlap-") as tmp:
        root = Path(tmp)
        # Not counted: measures and caches every ceiling the variants need, warms the caches.
        captured(args.config, root, overrides)
        ratios = []
        for pair in range(args.pairs):
            print(f"pair {pair + 1}:", flush=True)
            ratios.append(one_pair(args.config, root, overrides, names, pair % 2 == 0))
    print(f"median ratio {statistics.median(ratios):.1%} over {len(ratios)} pairs (target <= 60%)")


if __name__ == "__main__":
    main()
