"""Does the study reach an idle machine's conclusions on a busy one, or say that it can't tell?

Run: python benchmarks/busy_machine.py [--idle=5] [--loaded=6] [--idle_checks=3]
     [--config=gelu.yaml] [--wait_idle_s=300] [--results_root=DIR] [--config.KEY=VALUE ...]
     python benchmarks/busy_machine.py --idle_only=10    # floors of 10 idle runs and their p90
     python benchmarks/busy_machine.py --reference=RUN,RUN,...  # pool earlier idle runs instead

1. The reference: `--idle` runs of the study on the idle machine (the 1-minute load average is
   printed before each; with `--wait_idle_s` the benchmark first waits up to that long for it
   to fall under 0.5), pooled per pair of variants into one ratio and 95% interval: each run's
   ratio from its rounds (harness.common.stats), then their random-effects mean (`Pooled`).
2. `--loaded` runs while two single-threaded background processes of its own
   (`OMP_NUM_THREADS=1` NumPy matmuls, started and stopped here) keep both cores busy.
3. `--idle_checks` more idle runs, each of which should resolve `eager` and
   `xla_host_callback` as slower than `xla` and not declare itself unresolved.

For every run after the reference it prints the load average it saw, the A/A result, whether
the run declared itself unresolved, and every contradicting finding: one whose direction is
opposite to a pooled reference pair whose interval excludes 1.0, or whose interval is disjoint
from the reference's. The acceptance (issue 24): 0 contradicting findings over the loaded
runs; each idle check passes.

`--idle_only=N` runs N idle studies and prints each one's noise floor and their 90th
percentile: the measurement `timing.max_noise`'s default is set from (harness.records.resolution).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness import saved  # noqa: E402
from harness.analyze import between_runs  # noqa: E402
from harness.common import stats  # noqa: E402
from harness.records.summary import TIMING_FILE, TimingRecord  # noqa: E402

IDLE_LOAD = 0.5
BURNER = (
    "import numpy as np\n"
    "a = np.random.default_rng(0).random((384, 384))\n"
    "while True:\n"
    "    a = (a @ a) / 384.0\n"
)


def load_1m() -> float:
    return os.getloadavg()[0]


def wait_for_idle(limit_s: float) -> float:
    """Waits up to `limit_s` for the 1-minute load to fall under IDLE_LOAD; returns it."""
    deadline = time.monotonic() + limit_s
    while load_1m() >= IDLE_LOAD and time.monotonic() < deadline:
        time.sleep(5)
    return load_1m()


@contextlib.contextmanager
def busy_cores(count: int = 2) -> Iterator[list[int]]:
    """Keeps `count` cores busy with single-threaded NumPy matmuls while inside; yields their
    pids. Only these processes are stopped at the end, by their pid."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    procs = [
        subprocess.Popen([sys.executable, "-c", BURNER], env=env, stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        time.sleep(3)  # let the load average climb a little before the first run
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@dataclass(frozen=True)
class Study:
    path: Path
    wall_s: float
    load_before: float
    stdout: str


def run_study(config: str, root: Path, overrides: Sequence[str]) -> Study:
    """Runs the study once in a fresh process; returns its run folder and what it saw."""
    before = load_1m()
    started = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            f"--config={config}",
            f"--results_root={root}",
            *overrides,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - started
    found = re.search(r"^report: (.+)/report\.md$", proc.stdout, re.M)
    if proc.returncode not in (0, 1) or not found:
        raise SystemExit(f"the study failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return Study(Path(found[1]), wall, before, proc.stdout)


@dataclass(frozen=True)
class Pooled:
    """The reference runs' rounds, pooled per pair of variants across runs.

    A run is the unit: each reference run's ratio and its variance (from its own rounds) enter
    a random-effects mean (DerSimonian–Laird, as harness.analyze.between_runs measures a run's
    spread), so the reference's interval holds how far the ratio moves between runs. Pooling
    the rounds of five runs as if one run's (what this did before) gave an interval that held
    only rounds, narrower than the spread between the runs themselves.
    """

    runs: tuple[TimingRecord, ...]

    @classmethod
    def of(cls, runs: Sequence[Path]) -> Pooled:
        return cls(tuple(read_timing(run) for run in runs))

    def ratio(self, a: str, b: str) -> stats.RatioEstimate | None:
        found = []
        for timed in self.runs:
            x, y = timed.variants.get(a), timed.variants.get(b)
            if x and y and x.round_step_s and len(x.round_step_s) == len(y.round_step_s):
                r = between_runs.run_ratio(stats.ratio_estimate(x.round_step_s, y.round_step_s))
                if r is not None:
                    found.append(r)
        if not found:
            return None
        tau2 = between_runs.dersimonian_laird(found)
        weights = [1.0 / (r.variance + tau2) for r in found]
        mean = sum(w * r.log_ratio for w, r in zip(weights, found, strict=True)) / sum(weights)
        half = between_runs.Z95 * math.sqrt(1.0 / sum(weights))
        return stats.RatioEstimate(
            math.exp(mean), (math.exp(mean - half), math.exp(mean + half)), len(found)
        )


def read_timing(run: Path) -> TimingRecord:
    import json

    from harness.store.records import from_json

    return from_json(TimingRecord, json.loads((run / TIMING_FILE).read_text()), str(run))


def timing_findings(run: saved.SavedRun) -> tuple:
    """The run's ranked timing findings, as its summary.json records them."""
    return run.summary.findings.timing if run.summary.findings is not None else ()


def contradictions(run: saved.SavedRun, reference: Pooled) -> list[str]:
    """Returns the run's findings that contradict the pooled reference, each in words."""
    out = []
    for f in timing_findings(run):
        ref = reference.ratio(f.variant, f.against)
        if f.ratio is None or f.ci95 is None or ref is None:
            continue
        lo, hi = f.ci95
        rlo, rhi = ref.ci95
        opposite = (rlo > 1.0 and f.ratio < 1.0) or (rhi < 1.0 and f.ratio > 1.0)
        disjoint = hi < rlo or lo > rhi
        if opposite or disjoint:
            out.append(
                f"{f.what}; reference {ref.ratio:.3f} ({rlo:.3f}–{rhi:.3f})"
                + (": opposite direction" if opposite else ": intervals disjoint")
            )
    return out


def describe(study: Study, reference: Pooled | None) -> tuple[saved.SavedRun, list[str]]:
    """Prints one run's line and its contradicting findings; returns the run and them."""
    run = saved.load_run(study.path)
    n = run.summary.noise
    m = n.machine if n else None
    during = f"{m.load_1m[0]:.1f}–{m.load_1m[1]:.1f}" if m and m.load_1m else "?"
    aa = (
        f"A/A {n.self_ratio:.4f} ({n.self_ci95[0]:.4f}–{n.self_ci95[1]:.4f}) floor {n.floor * 100:.1f}%"
        if n and n.self_ratio is not None and n.self_ci95
        else "A/A not measured"
    )
    others = (
        f", others {m.others_share * 100:.0f}% of the CPUs"
        if m is not None and m.others_share is not None
        else ""
    )
    state = "UNRESOLVED" if n is not None and not n.resolved else "resolved"
    found = timing_findings(run)
    bad = contradictions(run, reference) if reference else []
    print(
        f"  {run.run_id}: {study.wall_s:.1f} s, load before {study.load_before:.2f}, during "
        f"{during}{others}; {aa}; {state}; {len(found)} findings, {len(bad)} contradicting",
        flush=True,
    )
    if n is not None and not n.resolved:
        print(f"    reasons: {'; '.join(n.reasons)}")
    for line in bad:
        print(f"    CONTRADICTS: {line}")
    return run, bad


def slower_than_baseline(run: saved.SavedRun, name: str) -> bool:
    v = run.variant(name)
    verdict = v.summary.comparison.vs_baseline if v else None
    return verdict is not None and verdict.verdict == stats.SLOWER


def idle_only(args: argparse.Namespace, root: Path, overrides: Sequence[str]) -> int:
    floors = []
    for i in range(args.idle_only):
        print(f"idle run {i + 1}: load {wait_for_idle(args.wait_idle_s):.2f} before", flush=True)
        study = run_study(args.config, root, overrides)
        run, _ = describe(study, None)
        if run.summary.noise is not None:
            floors.append(run.summary.noise.floor)
    if floors:
        print("floors: " + ", ".join(f"{f * 100:.1f}%" for f in floors))
        print(f"90th percentile: {stats.percentile(floors, 90) * 100:.1f}%")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/gelu.yaml")
    parser.add_argument("--idle", type=int, default=5, help="idle runs pooled as the reference")
    parser.add_argument("--loaded", type=int, default=6, help="runs with both cores kept busy")
    parser.add_argument("--idle_checks", type=int, default=3, help="idle runs checked after")
    parser.add_argument("--idle_only", type=int, default=0, help="only N idle runs' floors")
    parser.add_argument("--wait_idle_s", type=float, default=300.0)
    parser.add_argument("--results_root", default=None)
    parser.add_argument(
        "--reference",
        default="",
        help="comma-separated run folders of earlier idle runs to pool as the reference, "
        "instead of making it (their machine readings are not checked here: say how they ran)",
    )
    args, overrides = parser.parse_known_args()
    config = args.config if "/" in args.config else f"configs/{args.config}"
    args.config = config
    root = Path(args.results_root or tempfile.mkdtemp(prefix="busy_machine_"))
    print(f"results under {root}; {os.cpu_count()} CPUs", flush=True)
    if args.idle_only:
        return idle_only(args, root, overrides)

    ref_runs = [Path(p) for p in args.reference.split(",") if p]
    if ref_runs:
        print(f"reference: {len(ref_runs)} earlier idle runs, pooled", flush=True)
    else:
        print(f"reference: {args.idle} idle runs, pooled", flush=True)
    for _ in range(0 if ref_runs else args.idle):
        wait_for_idle(args.wait_idle_s)
        study = run_study(config, root, overrides)
        describe(study, None)
        ref_runs.append(study.path)
    reference = Pooled.of(ref_runs)
    for name in ("eager", "xla_host_callback", "xla_exact_gelu", "xla_lax_cond", "matmul_only"):
        if (r := reference.ratio(name, "xla")) is not None:
            print(f"  pooled {name} / xla: {r.ratio:.3f} ({r.ci95[0]:.3f}–{r.ci95[1]:.3f})")

    print(f"loaded: {args.loaded} runs, both cores kept busy", flush=True)
    loaded_bad = 0
    unresolved = 0
    with busy_cores(2) as pids:
        print(f"  background matmuls: pids {', '.join(map(str, pids))}", flush=True)
        for _ in range(args.loaded):
            run, bad = describe(run_study(config, root, overrides), reference)
            loaded_bad += len(bad)
            unresolved += run.summary.noise is not None and not run.summary.noise.resolved
    print(f"loaded: {loaded_bad} contradicting findings, {unresolved} of {args.loaded} unresolved")

    passed = 0
    for i in range(args.idle_checks):
        load = wait_for_idle(args.wait_idle_s)
        print(f"idle check {i + 1}: 1-minute load {load:.3f} before", flush=True)
        run, bad = describe(run_study(config, root, overrides), reference)
        ok = (
            not bad
            and (run.summary.noise is None or run.summary.noise.resolved)
            and slower_than_baseline(run, "eager")
            and slower_than_baseline(run, "xla_host_callback")
        )
        print(f"    {'passes' if ok else 'FAILS'}: eager and xla_host_callback slower than xla")
        passed += ok
    if args.idle_checks:
        print(f"idle checks: {passed} of {args.idle_checks} pass")
    return 0 if loaded_bad == 0 and passed == args.idle_checks else 1


if __name__ == "__main__":
    sys.exit(main())
