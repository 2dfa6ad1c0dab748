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

`--arm="--config.capture.compiles=2"` (repeatable) adds a study run with those overrides to
each pair, measured against the same variants alone: what a setting buys, in one command.
`--no-warmup` skips the uncounted study: the first pair's variants alone go first, and each
caches its ceilings after its capture. Each run prints its stages as it ends, so a command cut
off by the device's time limit still shows what it measured (on the H200 a scanned encoder's
study took 140 s, its variants alone 37-93 s each).
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
    study = run_study(config, root, overrides)
    manifest = json.loads((study.path / "manifest.json").read_text())
    stages = manifest["stages_s"]
    # As each run ends: a command cut off by its time limit still shows what it measured.
    print(
        f"  ran {' '.join(overrides)}: {study.wall_s:.1f} s, "
        + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()),
        flush=True,
    )
    return float(stages["capture_s"]), study.path


def variant_names(config: str, overrides: list[str]) -> tuple[str, ...]:
    from harness.config.load import load

    return tuple(v.name for v in load(config, overrides).experiment.selected_variants)


def one_pair(
    config: str,
    root: Path,
    overrides: list[str],
    names: tuple[str, ...],
    arms: tuple[str, ...],
    study_first: bool,
) -> dict[str, float]:
    """Runs each arm's study and each variant alone, in the given order (the arms reversed
    when the variants go first); prints and returns each arm's capture over the sum of the
    variants' alone."""

    def alone() -> dict[str, float]:
        return {n: captured(config, root, [*overrides, f"--config.select={n}"])[0] for n in names}

    def studies(order: tuple[str, ...]) -> dict[str, tuple[float, Path]]:
        return {arm: captured(config, root, [*overrides, *arm.split()]) for arm in order}

    if study_first:
        together = studies(arms)
        each = alone()
    else:
        each = alone()
        together = studies(arms[::-1])
    total = sum(each.values())
    print("alone " + ", ".join(f"{n} {s:.1f}" for n, s in each.items()) + f" (sum {total:.1f} s)")
    for arm in arms:
        seconds, run = together[arm]
        print(f"study [{arm or 'as configured'}] capture {seconds:.1f} s: {seconds / total:.1%}")
        held = study_breakdown.main(run)
        if held is not None:
            print(f"compiles and turns held the device {held:.1f} s: {held / total:.1%} of the sum")
    return {arm: together[arm][0] / total for arm in arms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--arm", action="append", default=None, help="a study's own overrides")
    parser.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an uncounted study first (--no-warmup: the first pair's variants alone go first)",
    )
    args, overrides = parser.parse_known_args()
    arms = tuple(args.arm or ("",))
    names = variant_names(args.config, overrides)
    with tempfile.TemporaryDirectory(prefix="capture-overlap-") as tmp:
        root = Path(tmp)
        if args.warmup:
            # Not counted: measures and caches every ceiling the variants need, warms the caches.
            captured(args.config, root, overrides)
        ratios: list[dict[str, float]] = []
        for pair in range(args.pairs):
            print(f"pair {pair + 1}:", flush=True)
            # Without the warm-up the variants alone go first: each measures its own ceilings
            # after its capture, so that the study's capture measures none beside it.
            study_first = args.warmup and pair % 2 == 0
            ratios.append(one_pair(args.config, root, overrides, names, arms, study_first))
    for arm in arms:
        median = statistics.median(r[arm] for r in ratios)
        print(
            f"[{arm or 'as configured'}] median ratio {median:.1%} over {len(ratios)} pairs "
            "(target <= 60%)"
        )


if __name__ == "__main__":
    main()
