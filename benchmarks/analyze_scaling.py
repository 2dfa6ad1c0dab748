"""How `python -m harness.analyze` grows with a profile's length: 10 K, 100 K and 1 M events.

    python benchmarks/analyze_scaling.py [--sizes=10000,100000,1000000] [--folder=DIR]

The profiles are a real one made longer (benchmarks/longer_profile.py): the H200 fixture's
scan/cond/fori_loop train step with command buffers (313 device events a step, its thunk
files placing every event), repeated as later steps. For each size it measures, in children:
the whole command (wall seconds, peak resident memory) and, in process, reading the profile
into the event table and attributing it (`read_table` + `match_table`), the part that grows
with the events. Prints one JSON line: per size the events, seconds, microseconds an event and
peak MB, and the time an event at the largest size over that at the smallest (1.0 is linear).

Speed is measured here, never asserted in tests: the machine is shared.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from absl import app, flags

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.longer_profile import lengthen  # noqa: E402
from benchmarks.peak import module_measured  # noqa: E402
from harness.profile import xspace  # noqa: E402
from harness.profile.events import find_xplane  # noqa: E402

_SIZES = flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "Device events to reach.")
_FOLDER = flags.DEFINE_string("folder", "/tmp/analyze_scaling", "Where the profiles go.")
_RUN = REPO.parent / "shared" / "fixtures" / "h200-jax0.11.2-loops" / "loops_cmdbuf"

_IN_PROCESS = """
import sys, time
from harness.program import modules as hlo_files
from harness.hlo.thunks import read_command_buffers, thunk_files
from harness.match.table_match import match_table
from harness.profile.reader import read_table
from pathlib import Path
after = next(Path(sys.argv[2]).glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
module = hlo_files.parsed(after)
clusters = {module.name: hlo_files.clusters_of(module)}
buffers = {module.name: read_command_buffers(*thunk_files(after, after.name.split(".sm_")[0]))}
start = time.perf_counter()
table, _ = read_table(sys.argv[1])
read = time.perf_counter() - start
report = match_table(table, clusters, command_buffers=buffers)
print(len(table), read, time.perf_counter() - start, report.matched_fraction)
"""


def _child(argv: list[str]) -> tuple[str, float, float]:
    """A child's standard output, wall seconds and its own peak resident memory (MB)."""
    with tempfile.TemporaryFile("w+") as printed:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=printed, stderr=subprocess.DEVNULL, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"{argv[:4]} exited {proc.returncode}")
        printed.seek(0)
        return printed.read(), wall, usage.ru_maxrss / 1024


def fixture_run() -> Path:
    """The loops fixture: ../shared/fixtures, else the copy tests unpack (tests/fixture_root)."""
    if _RUN.exists():
        return _RUN
    sys.path.insert(0, str(REPO / "tests"))
    from fixture_root import fixtures_root  # type: ignore[import-not-found]

    return fixtures_root() / "h200-jax0.11.2-loops" / "loops_cmdbuf"


def main(argv: list[str]) -> None:
    del argv
    run = fixture_run()
    original = find_xplane(run / "trace_marked")
    per_copy = 1565  # device events of the fixture's 5 steps
    out = Path(_FOLDER.value)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in (int(s) for s in _SIZES.value):
        times = max(1, math.ceil(size / per_copy))
        xplane = out / f"x{times}" / "vm.xplane.pb"
        if not xplane.exists():
            xplane.parent.mkdir(parents=True, exist_ok=True)
            space = lengthen(xspace.parse(original.read_bytes()), times, "launches")
            xplane.write_bytes(space.SerializeToString())
            del space
        stdout, _, _ = _child([sys.executable, "-c", _IN_PROCESS, str(xplane), str(run / "dump")])
        events, read_s, attributed_s, matched = stdout.split()
        analysed = module_measured(
            "harness.analyze",
            f"--dump={run / 'dump'}",
            f"--xplane={xplane}",
            f"--out={out / f'analysis_x{times}'}",
        )
        wall, peak = analysed["wall_s"], analysed["peak_rss_mb"]
        n = int(events)
        rows.append(
            {
                "events": n,
                "xplane_mb": round(xplane.stat().st_size / 1e6, 1),
                "read_and_attribute_s": round(float(attributed_s), 3),
                "read_s": round(float(read_s), 3),
                "attribute_us_per_event": round(float(attributed_s) / n * 1e6, 2),
                "matched": float(matched),
                "analyze_s": round(wall, 2),
                "analyze_us_per_event": round(wall / n * 1e6, 2),
                "analyze_peak_mb": peak,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    first, last = rows[0], rows[-1]
    print(
        json.dumps(
            {
                "read_and_attribute_us_ratio_largest_to_smallest": round(
                    last["attribute_us_per_event"] / first["attribute_us_per_event"], 2
                ),
                "analyze_us_ratio_largest_to_smallest": round(
                    last["analyze_us_per_event"] / first["analyze_us_per_event"], 2
                ),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
