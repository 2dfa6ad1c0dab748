"""Where a study's time went, from its own records: the stages (manifest.json), each variant's
probes and its turn on the device (result.json's `probe_s`), and what the timing stage spent
making variants ready against its rounds (timing.json).

Run: python benchmarks/study_breakdown.py RUN_FOLDER
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def main(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    stages = manifest.get("stages_s") or {}
    print("stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()))
    print(f"workers: {manifest.get('workers')}")
    turns = []
    for result in sorted((run / "variants").glob("*/result.json")):
        record = json.loads(result.read_text())
        probes = record.get("probe_s") or {}
        shown = {
            k.removesuffix("_s"): round(v, 2)
            for k, v in probes.items()
            if k.endswith("_s") and isinstance(v, float)
        }
        wall = record.get("wall_s")
        wall_text = f"{wall:6.2f} s" if isinstance(wall, float) else "not measured"
        print(f"  {result.parent.name:24s} wall {wall_text}  {shown}")
        if probes.get("turn_began") is not None:
            turns.append((probes["turn_began"], probes["turn_ended"], result.parent.name))
    turns.sort()
    if turns:
        busy = sum(end - begin for begin, end, _ in turns)
        span = turns[-1][1] - turns[0][0]
        overlaps = sum(1 for a, b in itertools.pairwise(turns) if b[0] < a[1])
        print(
            f"device turns: {busy:.1f} s of {span:.1f} s from the first to the last "
            f"({busy / span:.0%} busy); {overlaps} overlapping"
        )
    timing = run / "timing.json"
    if timing.is_file():
        t = json.loads(timing.read_text())
        prepared = {
            n: v["prepare_s"] for n, v in t["variants"].items() if v.get("prepare_s") is not None
        }
        print(
            f"timing: rounds {t['rounds']} in {t['wall_s']:.1f} s (warm-up and calibration in it); "
            f"prepared {len(prepared)} variants in {sum(prepared.values()):.1f} s "
            + json.dumps({k: round(v, 2) for k, v in prepared.items()})
        )
        if t.get("excluded"):
            print(f"timing excluded: {t['excluded']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
