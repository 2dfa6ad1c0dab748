"""How `python -m harness.analyze` runs a profiling session of many hosts: 1, 8 and 64 of them.

    PYTHONPATH=$PWD python benchmarks/multihost_scaling.py --out=DIR [--hosts=1,8,64] [--times=1]
        [--xplane=P --dump=DIR]   # another real profile and its dump (each host a copy of it)

The hosts are synthetic, made from a real profile: the H200 fixture's scan/cond/fori_loop
train step with command buffers (1,565 device events over 5 marked steps), `--times` times
longer (benchmarks/longer_profile.py), copied once per host with its clock and its ids
shifted past the other hosts' and a host name of its own (`longer_profile.as_host`), written
as one session folder (`<session>/<host>.xplane.pb`, as jax.profiler writes one per host).
Each session is analysed by the command in a child: its wall time, the time per host, the
peak resident memory of the analysing process itself (VmHWM) and of its whole process tree
(its forked workers' proportional shares summed, sampled every 50 ms), and the events
dataset's size. It checks that the merged totals are the hosts' sum (every host holds the
same events). Prints one JSON line per session, then the time a host at the largest count
over that at one host (below 1.0: the workers ran hosts side by side).

Speed is measured here, never asserted in tests: the machine is shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from absl import app, flags

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.analyze_scaling import fixture_run  # noqa: E402
from benchmarks.longer_profile import as_host, lengthen  # noqa: E402
from benchmarks.peak import PEAK  # noqa: E402
from harness.profile import xspace  # noqa: E402
from harness.profile.events import find_xplane  # noqa: E402

_OUT = flags.DEFINE_string("out", "/tmp/multihost_scaling", "Where the sessions and analyses go.")
_HOSTS = flags.DEFINE_list("hosts", ["1", "8", "64"], "Hosts of each session.")
_TIMES = flags.DEFINE_integer("times", 1, "How many times longer each host's profile is.")
_XPLANE = flags.DEFINE_string("xplane", None, "A profile to copy instead of the fixture's.")
_DUMP = flags.DEFINE_string("dump", None, "The dump of --xplane's program.")


def make_session(folder: Path, hosts: int, times: int) -> Path:
    """A session folder of `hosts` synthetic hosts (see the module docstring)."""
    if folder.is_dir() and len(list(folder.glob("*.xplane.pb"))) == hosts:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    source = _XPLANE.value or fixture_run() / "trace_marked"
    data = find_xplane(source).read_bytes()
    longer = lengthen(xspace.parse(data), times).SerializeToString()
    for k in range(hosts):
        space = as_host(xspace.parse(longer), k, f"host{k:03d}")
        (folder / f"host{k:03d}.xplane.pb").write_bytes(space.SerializeToString())
    return folder


def _tree(pid: int) -> list[int]:
    """The process and every descendant of it (through /proc's children lists)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def measured_tree(argv: list[str]) -> dict:
    """Runs a command; its wall seconds, its own VmHWM (peak.PEAK prints it) and the peak of
    its process tree's summed proportional set size (shared pages counted once in all)."""
    peak = [0]
    with open(os.devnull, "w") as quiet:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=quiet, stderr=subprocess.PIPE, text=True, cwd=REPO)

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], sum(_pss_kb(p) for p in _tree(proc.pid)))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, err = proc.communicate()
        wall = time.perf_counter() - start
        sampler.join()
    if proc.returncode:
        raise RuntimeError(f"{argv[3:6]} exited {proc.returncode}: {err[-500:]}")
    own = [line.split()[1] for line in err.splitlines() if line.startswith("VmHWM_kB ")]
    return {
        "wall_s": round(wall, 2),
        "own_peak_mb": round(int(own[-1]) / 1024, 1) if own else None,
        "tree_peak_pss_mb": round(peak[0] / 1024, 1),
    }


def main(argv: list[str]) -> None:
    del argv
    if bool(_XPLANE.value) != bool(_DUMP.value):
        raise app.UsageError("--xplane and --dump go together")
    dump = Path(_DUMP.value) if _DUMP.value else fixture_run() / "dump"
    out = Path(_OUT.value)
    rows = []
    for hosts in (int(h) for h in _HOSTS.value):
        name = f"{'given' if _XPLANE.value else 'fixture'}_{hosts}x{_TIMES.value}"
        session = make_session(out / f"session_{name}", hosts, _TIMES.value)
        target = out / f"analysis_{name}"
        figures = measured_tree(
            [
                sys.executable,
                "-c",
                PEAK,
                "harness.analyze",
                f"--dump={dump}",
                f"--xplane={session}",
                f"--out={target}",
            ]
        )
        kernels = json.loads((target / "kernels.json").read_text())
        merged = kernels.get("merged") or {"events": kernels["match"]["events_in_window"]}
        per_host = kernels["match"]["events_in_window"]
        assert merged["events"] == hosts * per_host, (merged["events"], hosts, per_host)
        stored = sum(p.stat().st_size for p in target.rglob("*.parquet"))
        xplanes = sum(p.stat().st_size for p in session.glob("*.xplane.pb"))
        rows.append(
            {
                "hosts": hosts,
                "events": merged["events"],
                "xplanes_mb": round(xplanes / 1e6, 1),
                **figures,
                "s_per_host": round(figures["wall_s"] / hosts, 3),
                "events_dataset_mb": round(stored / 1e6, 2),
                "cpus": len(os.sched_getaffinity(0)),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    print(
        json.dumps(
            {
                "s_per_host_ratio_largest_to_one": round(
                    rows[-1]["s_per_host"] / rows[0]["s_per_host"], 2
                )
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
