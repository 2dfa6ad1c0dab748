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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.common.intervals import merge


def main(run: Path) -> float | None:
    """Prints where the run's time went; returns the seconds its compile phases and turns
    held the device (their union; None where no compile phase was recorded): with one compile
    slot, no scheduling of the same compiles captures the study sooner."""
    manifest = json.loads((run / "manifest.json").read_text())
    stages = manifest.get("stages_s") or {}
    print("stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()))
    print(f"workers: {manifest.get('workers')}")
    turns = []
    records = results(run)
    for name, record in records.items():
        probes = record.get("probe_s") or {}
        shown = {
            k.removesuffix("_s"): round(v, 2)
            for k, v in probes.items()
            if k.endswith("_s") and isinstance(v, float)
        }
        wall = record.get("wall_s")
        wall_text = f"{wall:6.2f} s" if isinstance(wall, float) else "not measured"
        print(f"  {name:24s} wall {wall_text}  {shown}")
        if probes.get("turn_began") is not None:
            turns.append((probes["turn_began"], probes["turn_ended"], name))
    turns.sort()
    if turns:
        busy = sum(end - begin for begin, end, _ in turns)
        span = turns[-1][1] - turns[0][0]
        overlaps = sum(1 for a, b in itertools.pairwise(turns) if b[0] < a[1])
        print(
            f"device turns: {busy:.1f} s of {span:.1f} s from the first to the last "
            f"({busy / span:.0%} busy); {overlaps} overlapping"
        )
    compiles = _compiles(records)
    both = None
    if compiles:
        # The capture's serial path: compiles one at a time, measurements alone. What is left
        # of the span is time the device's one compile slot and its turns both stood idle.
        held = union(compiles)
        device = compiles + [(a, b) for a, b, _ in turns]
        both = union(device)
        span = max(b for _, b in device) - min(a for a, _ in device)
        print(
            f"compile slot: {held:.1f} s held in {len(compiles)} compile phases; with the "
            f"turns {both:.1f} s of the {span:.1f} s from the first of them to the last "
            f"({both / span:.0%} busy)"
        )
    ceilings = run / "ceilings.json"
    found = json.loads(ceilings.read_text()) if ceilings.is_file() else {}
    held = [tuple(span) for span in found.get("held") or ()]
    timeline(records, held)
    if found.get("measured"):
        # Measured beside the captures (the first worker done), compiles and timings alone.
        print(
            f"ceilings: {len(found['measured'])} measured in this run "
            f"({', '.join(found['measured'])}), holding the device {union(held):.1f} s"
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
    return both


def timeline(records: dict[str, dict], ceilings: list[tuple[float, float]] = ()) -> None:
    """Prints each worker's timeline, seconds from the first worker's start: its start, its
    device client, then each compile phase (asked, held from..to) and its turn, in order; and
    the spans from the first compile to the last turn when neither a compile, a turn nor the
    device's ceilings (`ceilings`, the spans their measurement held it) was busy, with how
    many workers were then still starting."""
    rows = [
        (name, probes)
        for name, record in records.items()
        if (probes := record.get("probe_s") or {}).get("worker_started") is not None
    ]
    if not rows:
        return
    rows.sort(key=lambda r: r[1]["worker_started"])
    zero = rows[0][1]["worker_started"]
    print("worker timeline (s from the first worker's start):")
    for name, p in rows:
        events = [("start", p["worker_started"]), ("client", p.get("worker_ready"))]
        for asked, (a, b) in zip(
            p.get("compiles_asked") or (), p.get("compiles") or (), strict=False
        ):
            events.append((f"ask {asked - zero:.1f} compile", a))
            events.append(("..", b))
        if p.get("turn_began") is not None:
            events += [("wants turn", p.get("turn_asked")), ("go", p.get("turn_go"))]
            events += [("turn", p["turn_began"]), ("..", p["turn_ended"])]
        events.append(("end", p.get("capture_ended")))
        shown = " ".join(f"{k} {t - zero:.1f}" for k, t in events if t is not None)
        print(f"  {name:24s} {shown}")
    busy = merge(
        [tuple(c) for _, p in rows for c in p.get("compiles") or ()]
        + [(p["turn_began"], p["turn_ended"]) for _, p in rows if p.get("turn_began")]
        + list(ceilings)
    )
    idle = []
    for (_, reach), (a, _) in itertools.pairwise(busy):
        if a > reach + 0.05:
            starting = sum(
                1
                for _, p in rows
                if p["worker_started"] <= a
                and ((p.get("compiles_asked") or [float("inf")])[0] > reach)
            )
            # Preparations hold the device shared: a measurement asking waits for them.
            preparing = {
                name: held
                for name, p in rows
                if (held := _overlap(p.get("preparations") or (), reach, a)) > 0.01
            }
            idle.append((reach - zero, a - reach, starting, preparing))
    total = sum(gap for _, gap, _, _ in idle)
    print(
        f"idle device: {total:.1f} s in {len(idle)} gaps (neither a compile, a turn nor the "
        "ceilings' measurement)"
    )
    for t, gap, starting, preparing in idle:
        held = ", ".join(f"{n} {x:.1f} s" for n, x in preparing.items()) or "none"
        print(f"  at {t:.1f} for {gap:.1f} s: {starting} workers starting; preparing: {held}")
    tail(rows, zero)


def tail(rows: list[tuple[str, dict]], zero: float) -> None:
    """Prints the capture's head (the first worker's start to the first compile) and its tail
    (the last compile's end to the last capture's end, and whose work that was): the parts of
    the capture no compile slot and no turn covers."""
    compiles = [tuple(c) for _, p in rows for c in p.get("compiles") or ()]
    ends = [(p["capture_ended"], name) for name, p in rows if p.get("capture_ended")]
    if not compiles or not ends:
        return
    last_compile = max(b for _, b in compiles)
    last_end, last = max(ends)
    print(
        f"head: {min(a for a, _ in compiles) - zero:.1f} s to the first compile; tail: "
        f"{last_end - last_compile:.1f} s from the last compile's end to the last capture's "
        f"({last}, ended at {last_end - zero:.1f})"
    )


def _overlap(spans: object, a: float, b: float) -> float:
    """Seconds of `spans` ((began, ended) pairs) inside [a, b]."""
    return sum(max(0.0, min(end, b) - max(began, a)) for began, end in spans)


def results(run: Path) -> dict[str, dict]:
    """Each variant's result.json of the run, by name, read once."""
    return {
        path.parent.name: json.loads(path.read_text())
        for path in sorted((run / "variants").glob("*/result.json"))
    }


def compile_phases(run: Path) -> list[tuple[float, float]]:
    """Every compile phase the run's variants held the device's one compile slot for (their
    result.json `probe_s.compiles`), as (began, ended) Unix seconds."""
    return _compiles(results(run))


def _compiles(records: dict[str, dict]) -> list[tuple[float, float]]:
    return [
        (a, b)
        for record in records.values()
        for a, b in (record.get("probe_s") or {}).get("compiles") or ()
    ]


def union(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the (began, ended) spans."""
    return sum(b - a for a, b in merge(spans))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
