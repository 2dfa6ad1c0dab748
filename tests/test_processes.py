"""The study across processes (`processes:`): a jax.distributed group of 2 CPU processes of 2
host devices each, with gloo collectives.

One tiny real run of configs/gelu_multiprocess.yaml (a local group) is shared by the module
and asserted on at length: the per-process records and profiles, one XProf session per
window, attribution of every process's profile, collectives within and across processes,
the same program everywhere, timing rounds every process ran alike, the report. Two more
real runs cover what only they can: a process that aborts (a new group runs the rest) and an
external launcher (SLURM's variables, the processes started by the test). Config errors and
the pure rules run in-process.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import REPO, harness_argv, harness_env, read_json, read_summary, run_harness

from harness.analyze.processes import as_process_0, empty_row, scope_of, spread
from harness.capture.processes import gather_profiles, session_name
from harness.config.load import load
from harness.config.schema import ConfigError, build_experiment
from harness.findings.processes import spread_finding
from harness.profile.events import DeviceEvent
from harness.records.processes import (
    CROSS,
    WITHIN,
    ProcessesSummary,
    ProcessFaults,
    ProcessRow,
    VariantProcesses,
    read,
)
from harness.timing import rounds

# The shared study, shrunk: no per-pass dumps and no new-shape call (neither is about
# processes), the fewest rounds that still pair up.
TINY_GROUP = (
    "--config=gelu_multiprocess.yaml",
    "--config.timing.rounds=4",
    "--config.timing.min_rounds=4",  # a busy machine's cut would leave 3 rounds to pair
    "--config.timing.budget_s=0.5",
    "--config.timing.max_budget_s=0.5",
    "--config.measure.steps=2",
    "--config.profile.steps=2",
    "--config.dump.passes=false",
    "--config.measure.recompile=false",
)
VARIANTS = ("single", "dp", "k_sharded", "k_within")


@pytest.fixture(scope="module")
def group_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results root every real run of this module shares: the CPU's ceilings are then
    measured once, by the first run, and read from the root's cache by the others."""
    return tmp_path_factory.mktemp("group_results")


@pytest.fixture(scope="module")
def group_run(group_root: Path) -> tuple[Path, str]:
    """Returns the folder of one tiny run of configs/gelu_multiprocess.yaml and its stdout."""
    root = group_root
    proc = run_harness(*TINY_GROUP, results_root=root)
    if proc.returncode != 0:
        raise AssertionError(f"the study across processes failed:\n{proc.stdout}\n{proc.stderr}")
    return (root / "gelu_multiprocess" / "latest").resolve(), proc.stdout


@pytest.fixture(scope="module")
def processes(group_run: tuple[Path, str]) -> ProcessesSummary:
    return read(ProcessesSummary, group_run[0] / "processes.json")


# --- one local group, end to end ----------------------------------------------------------------


def test_the_group_has_two_processes_of_two_devices(group_run: tuple[Path, str]) -> None:
    run, stdout = group_run
    assert "2 processes × 2 devices through jax.distributed (local launcher" in stdout
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "complete"
    assert manifest["workers"] == 2  # one group, no restart
    ranks = [read_json(run / "processes" / f"p{r}.json") for r in (0, 1)]
    assert [p["rank"] for p in ranks] == [0, 1]
    assert all(p["count"] == 2 and p["devices"] == 4 for p in ranks)
    assert all(p["coordinator"].startswith("127.0.0.1:") for p in ranks)
    mine = [set(p["local_devices"]) for p in ranks]
    assert len(mine[0]) == len(mine[1]) == 2 and not mine[0] & mine[1]
    assert manifest["environment"]["process"]["rank"] == 0


def test_every_process_profile_joins_one_xprof_session_per_window(
    group_run: tuple[Path, str],
) -> None:
    run, _ = group_run
    for name in VARIANTS:
        for window in ("first_call", "steady"):
            sessions = run / "variants" / name / "profile" / window / "plugins" / "profile"
            assert [p.name for p in sessions.iterdir()] == [run.name]  # no timestamp folder left
            files = sorted(p.name for p in (sessions / run.name).glob("*.xplane.pb"))
            assert len(files) == 2 and files[0].endswith("-p0.xplane.pb")
            assert files[1].endswith("-p1.xplane.pb")
            assert files[0].removesuffix("-p0.xplane.pb") == files[1].removesuffix("-p1.xplane.pb")
        record = read_json(run / "variants" / name / "processes" / "p1.json")
        assert any(p.startswith("profile/steady/") for p in record["profiles"])


def test_every_profile_of_every_process_is_attributed(processes: ProcessesSummary) -> None:
    for name in VARIANTS:
        v = processes.variants[name]
        assert v.status == "ok" and [p.rank for p in v.processes] == [0, 1]
        for p in v.processes:
            assert p.attributed_fraction == 1.0, (name, p.rank, p.unattributed)
            assert p.events_per_step and p.kernels_per_step == p.events_per_step


def test_collectives_are_split_within_and_across_processes(processes: ProcessesSummary) -> None:
    owner = {int(d): r for d, r in processes.device_process.items()}
    assert sorted(set(owner.values())) == [0, 1] and len(owner) == 4
    assert processes.variants["dp"].collectives == ()  # data parallel: no collective at all
    assert processes.variants["single"].collectives == ()
    (across,) = processes.variants["k_sharded"].collectives
    assert across.opcode == "all-reduce" and across.scope == CROSS
    assert across.process_groups == ((0, 1),) and len(across.device_groups[0]) == 4
    (within,) = processes.variants["k_within"].collectives
    assert within.opcode == "all-reduce" and within.scope == WITHIN
    assert within.process_groups == ((0,), (1,))
    for c in (across, within):
        assert set(c.time_s) == set(c.exposed_s) == {"0", "1"}
        assert all(t > 0 for t in c.time_s.values())
    assert processes.variants["k_sharded"].cross_process == 1
    assert processes.variants["k_within"].cross_process == 0
    for p in processes.variants["k_sharded"].processes:
        assert p.cross_process_exposed_s and p.within_process_exposed_s == 0.0
    for p in processes.variants["k_within"].processes:
        assert p.within_process_exposed_s and p.cross_process_exposed_s == 0.0


def test_every_process_compiled_the_same_program(
    group_run: tuple[Path, str], processes: ProcessesSummary
) -> None:
    run, _ = group_run
    for name in VARIANTS:
        v = processes.variants[name]
        assert v.same_program is True
        mine = [read_json(run / "variants" / name / "processes" / f"p{r}.json") for r in (0, 1)]
        assert mine[0]["fingerprint"] and mine[0]["fingerprint"] == mine[1]["fingerprint"]
        assert v.fingerprints == {"0": mine[0]["fingerprint"], "1": mine[1]["fingerprint"]}
    # Different programs have different fingerprints: the check can fail.
    assert len({processes.variants[n].fingerprints["0"] for n in VARIANTS}) == len(VARIANTS)


def test_every_process_ran_the_same_timing_rounds(group_run: tuple[Path, str]) -> None:
    run, _ = group_run
    mine = [read_json(run / "processes" / f"timing-p{r}.json") for r in (0, 1)]
    assert mine[0]["rounds"] == mine[1]["rounds"] >= 4
    assert mine[0]["orders"] == mine[1]["orders"]
    for name in VARIANTS:
        # The calls per batch are process 0's everywhere (calibration passes through `agree`),
        # so no process waits in a collective for calls another does not make.
        calls = [m["variants"][name]["calls_per_batch"] for m in mine]
        assert calls[0] == calls[1]
        assert len(mine[1]["variants"][name]["round_step_s"]) == mine[1]["rounds"]
    assert read_json(run / "timing.json")["variants"] == mine[0]["variants"]


def test_the_straggler_and_the_spread(processes: ProcessesSummary) -> None:
    for name in VARIANTS:
        v = processes.variants[name]
        rows = {p.rank: p for p in v.processes}
        assert {v.straggler, v.fastest} == {0, 1}
        assert rows[v.straggler].step_s >= rows[v.fastest].step_s > 0
        assert v.spread is not None and v.spread_ci95[0] <= v.spread <= v.spread_ci95[1]


def test_the_report_has_a_row_per_process(group_run: tuple[Path, str]) -> None:
    run, _ = group_run
    text = (run / "details.md").read_text()
    section = text[text.index("## Processes") : text.index("## Environment")]
    for name in VARIANTS:
        assert f"| {name} | 0 |" in section and f"| {name} | 1 |" in section
    assert "| k_sharded | all-reduce | all-reduce | cross-process |" in section
    assert "| k_within | all-reduce | all-reduce | within-process |" in section
    assert "straggler" in section and "spread" in section
    summary = read_summary(run)
    assert summary["k_sharded"].comm.collectives[0].opcode == "all-reduce"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            import gzip

            body = gzip.decompress(body)
    return json.loads(body)


def test_xprof_opens_the_session_with_one_host_per_process(group_run: tuple[Path, str]) -> None:
    pytest.importorskip("xprof")
    run, _ = group_run
    logdir = run / "variants" / "k_sharded" / "profile" / "steady"
    port, grpc = _free_port(), _free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("xprof")),
            f"--logdir={logdir}",
            f"--port={port}",
            f"--grpc_port={grpc}",
            f"--worker_service_address=127.0.0.1:{grpc}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/data/plugin/profile"
        runs: object = None
        for _ in range(200):  # the server's start: bounded by tries, not seconds
            try:
                runs = _get(f"{base}/runs")
                break
            except OSError:
                time.sleep(0.1)
        assert runs == [run.name]
        hosts = _get(f"{base}/hosts?run={run.name}&tag=trace_viewer")
        names = sorted(h["hostname"] for h in hosts)
        assert len(names) == 2 and names[0].endswith("-p0") and names[1].endswith("-p1")
    finally:
        server.kill()
        server.wait()


# --- a process that aborts ----------------------------------------------------------------------

CRASHING = f"""\
experiment: group_crash
baseline: after
processes: {{count: 2, devices: 1, barrier_s: 60}}
program:
  function: {REPO}/tests/multiprocess_program.py:step
  init: {REPO}/tests/multiprocess_program.py:init
  inputs:
    - {{shape: [16, 32], dtype: float32}}
measure: {{warmup: 1, steps: 2, recompile: false}}
profile: {{enabled: false}}
dump: {{passes: false, emitters: false}}
timing: {{rounds: 3, budget_s: 0.3, max_budget_s: 0.3}}
variants:
  - {{name: crashes, mode: jit, program: {{kwargs: {{crash: true}}}}}}
  - {{name: after, mode: jit}}
"""


@pytest.mark.study
def test_a_process_that_aborts_fails_its_variant_and_a_new_group_runs_the_rest(
    tmp_path: Path, group_root: Path, group_run: tuple[Path, str]
) -> None:
    del group_run  # it measured the ceilings this run reads from the root's cache
    config = tmp_path / "crash.yaml"
    config.write_text(CRASHING)
    proc = run_harness(f"--config={config}", results_root=group_root)
    assert proc.returncode == 1, proc.stderr
    run = (group_root / "group_crash" / "latest").resolve()
    summary = read_summary(run)
    crashed = summary["crashes"].identity
    assert crashed.status == "failed" and crashed.failure.signal == "SIGABRT"
    assert crashed.reason.startswith("process 1 of 2 crashed the process (SIGABRT)")
    assert "[1/2] crashes                  failed  process 1 of 2" in proc.stdout
    after = summary["after"]  # captured and timed by the new group
    assert after.identity.status == "ok" and after.timing.step_s > 0
    (fault,) = read(ProcessFaults, run / "processes" / "faults.json").faults
    assert (fault.variant, fault.process, fault.stage, fault.signal) == (
        "crashes", 1, "capture", "SIGABRT",
    )  # fmt: skip
    assert read_json(run / "manifest.json")["workers"] == 4  # two groups of two
    assert "a new group of processes takes over" in proc.stderr
    assert "failed variants: crashes" in proc.stderr
    found = read(ProcessesSummary, run / "processes.json")
    assert found.faults == (fault,)
    assert "process 1 of 2 crashed the process (SIGABRT)" in (run / "report.md").read_text()


# --- an external launcher -----------------------------------------------------------------------


@pytest.mark.study
def test_an_external_launcher_runs_the_same_config(
    tmp_path: Path, group_run: tuple[Path, str]
) -> None:
    port = _free_port()
    results = tmp_path / "results"
    # The shared root's cache holds the ceilings the local run measured for these shapes.
    (results / ".cache").mkdir(parents=True)
    for f in (group_run[0].parent.parent / ".cache").iterdir():
        (results / ".cache" / f.name).write_bytes(f.read_bytes())
    argv = harness_argv(
        "--config=gelu_multiprocess.yaml",
        "--config.processes.launcher=external",
        "--config.select=k_sharded",
        "--config.baseline=k_sharded",
        *TINY_GROUP[1:],
        "--config.profile.enabled=false",
        results_root=results,
    )
    procs = []
    for rank in (0, 1):
        env = {
            **harness_env(),
            # What srun sets, as jax's cluster detection reads it (jax._src.clusters.slurm_cluster).
            "SLURM_JOB_ID": "31",
            "SLURM_NTASKS": "2",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "SLURM_STEP_NODELIST": "127.0.0.1",
            "JAX_COORDINATOR_PORT": str(port),  # else a port from the job id
            "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}",
        }
        procs.append(
            subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "process 1 of 2: following process 0" in outs[1][0]
    assert "report:" in outs[0][0] and "report:" not in outs[1][0]
    (run,) = [p for p in (results / "gelu_multiprocess").iterdir() if not p.is_symlink()]
    found = read(ProcessesSummary, run / "processes.json")
    assert found.launcher == "external" and found.count == 2
    assert sorted(found.hosts) == ["0", "1"]
    ranks = [read_json(run / "processes" / f"p{r}.json") for r in (0, 1)]
    assert [(p["rank"], p["launcher"]) for p in ranks] == [(0, "external"), (1, "external")]
    assert all(p["coordinator"] == f"127.0.0.1:{port}" for p in ranks)
    k = found.variants["k_sharded"]
    assert k.same_program is True and [p.step_s is not None for p in k.processes] == [True, True]
    (across,) = k.collectives
    assert across.scope == CROSS and across.time_s == {}  # no profile: no time per process
    assert read_summary(run)["k_sharded"].comm.collectives[0].opcode == "all-reduce"


# --- the config ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "key", "complaint"),
    [
        ("processes.launcher=ssh", "processes.launcher", "'ssh' is not supported"),
        ("processes.count=1", "processes.devices", "applies to a group of processes"),
        ("processes.count=0", "processes.count", "must be in [1, 64]"),
        ("processes.devices=1", "variants.dp.sharding.mesh", "a mesh must hold all 2"),
        ("processes.barrier_s=0", "processes.barrier_s", "must be in [1, 86400]"),
        ("processes.hosts=2", "processes.hosts", "unknown key"),
    ],
)
def test_a_bad_processes_section_is_one_line_naming_the_key(
    override: str, key: str, complaint: str
) -> None:
    with pytest.raises(ConfigError) as e:
        load("gelu_multiprocess.yaml", [f"--config.{override}"])
    assert f": {key}: " in str(e.value) and complaint in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_a_search_or_a_torch_variant_across_processes_is_refused() -> None:
    raw = yaml.safe_load((REPO / "configs" / "gelu_multiprocess.yaml").read_text())
    search = {"base": "single", "space": {"xla_options": {"xla_cpu_enable_fast_math": [True]}}}
    with pytest.raises(ConfigError, match=r": search\.base: a search compiles its candidates"):
        build_experiment({**raw, "search": search}, "mp.yaml")
    torch = {"name": "torch_eager", "mode": "torch_eager"}
    with pytest.raises(ConfigError, match=r"variants\.torch_eager\.mode: torch_eager runs no JAX"):
        build_experiment({**raw, "variants": [*raw["variants"], torch]}, "mp.yaml")


def test_one_process_forces_the_largest_mesh_and_a_group_its_own_devices() -> None:
    assert load("gelu_multiprocess.yaml", []).experiment.cpu_devices == 2
    assert load("gelu_sharded.yaml", []).experiment.cpu_devices == 4


# --- the pure pieces ----------------------------------------------------------------------------


def test_collective_scope_is_read_from_the_device_owners() -> None:
    owner = {0: 0, 1: 0, 2048: 1, 2049: 1}
    assert scope_of([[0, 1, 2048, 2049]], owner) == (CROSS, ((0, 1),))
    assert scope_of([[0, 1], [2048, 2049]], owner) == (WITHIN, ((0,), (1,)))
    assert scope_of([[0, 2048], [1, 2049]], owner) == (CROSS, ((0, 1), (0, 1)))
    assert scope_of([[0, 7]], owner)[0] == CROSS  # an unknown owner is never assumed local


def _row(rank: int, step: float) -> ProcessRow:
    return dataclasses.replace(empty_row(rank), step_s=step)


def test_the_straggler_is_the_slowest_and_the_spread_pairs_rounds() -> None:
    slow, fast, ratio = spread(
        [_row(0, 1.0), _row(1, 1.2)], {0: (1.0, 1.0, 1.1), 1: (1.2, 1.25, 1.3)}
    )
    assert (slow, fast) == (1, 0) and ratio is not None and ratio.ratio == pytest.approx(1.2)
    assert spread([_row(0, 1.0)], {0: (1.0,)})[2] is None  # one process: no spread


def _spread(ratio: float, lo: float, hi: float) -> VariantProcesses:
    return VariantProcesses(
        status="ok", same_program=True, straggler=1, fastest=0, spread=ratio,
        spread_ci95=(lo, hi),
    )  # fmt: skip


def test_a_spread_is_a_finding_only_when_resolvable() -> None:
    rule = "processes.straggler"
    found = spread_finding(rule, "dp", _spread(1.30, 1.20, 1.40), floor=0.05, resolved=True)
    assert found is not None and found.straggler == 1 and "process 1 is the straggler" in found.what
    assert spread_finding(rule, "dp", _spread(1.30, 0.98, 1.40), 0.05, True) is None  # holds 1.0
    assert spread_finding(rule, "dp", _spread(1.04, 1.02, 1.06), 0.05, True) is None  # floor
    assert spread_finding(rule, "dp", _spread(1.30, 1.20, 1.40), 0.05, False) is None  # A/A


def test_timing_decisions_pass_through_agreement() -> None:
    # Process 0 said its warm-up call took a second: every process times one call per batch
    # (a call that fills a batch is not calibrated), whatever its own clock read.
    t = rounds.Timed("x", lambda: None, lambda out: out)
    said: list[object] = []

    def agree(value: object) -> object:
        said.append(value)
        return 1.0 if isinstance(value, float) else value

    # Every warm-up, calibration and budget reading is agreed to 1.0 s, whatever the load: the
    # count below cannot move (this process's own calls take microseconds).
    out = rounds.time_rounds([t], 2, target_batch_s=0.5, budget_s=10.0, agree=agree)
    assert out.calls_per_batch == {"x": 1}
    assert said and all(isinstance(v, float) for v in said)


def test_profile_files_get_per_process_names(tmp_path: Path) -> None:
    assert session_name("vm.xplane.pb", 1) == "vm-p1.xplane.pb"
    assert session_name("vm.trace.json.gz", 0) == "vm-p0.trace.json.gz"
    scratch, target = tmp_path / "scratch", tmp_path / "variant"
    written = scratch / "profile" / "steady" / "plugins" / "profile" / "2026_12_02_00_39_47"
    written.mkdir(parents=True)
    (written / "vm.xplane.pb").write_bytes(b"x")
    (written / "vm.trace.json.gz").write_bytes(b"y")
    moved = gather_profiles(scratch, target, "20261202-003947", 1)
    assert moved == ("profile/steady/plugins/profile/20261202-003947/vm-p1.xplane.pb",)
    session = target / "profile" / "steady" / "plugins" / "profile" / "20261202-003947"
    assert sorted(p.name for p in session.iterdir()) == ["vm-p1.trace.json.gz", "vm-p1.xplane.pb"]
    assert not any(written.iterdir())


def test_a_missing_process_is_named_by_the_barrier() -> None:
    from harness.capture.distributed import ProcessesMissing

    e = ProcessesMissing("the end of capturing dp", (1,), 2, 60.0)
    assert str(e) == (
        "process 1 of 2 did not reach the end of capturing dp within 60 s (it died or hangs)"
    )
    assert e.how() == "did not reach the end of capturing dp within 60 s (it died or hangs)"


def test_processes_json_is_documented_key_for_key(processes: ProcessesSummary) -> None:
    from harness.records.keytables import PROCESSES_BEGIN, PROCESSES_END, processes_table
    from harness.store import records

    readme = (REPO / "results" / "README.md").read_text()
    table = readme[
        readme.index(PROCESSES_BEGIN) + len(PROCESSES_BEGIN) : readme.index(PROCESSES_END)
    ]
    # `python -m harness.records.processes results/README.md` regenerates it
    assert table.strip() == processes_table()
    documented = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    emitted = records.emitted_keys(ProcessesSummary, records.to_json(processes))
    assert emitted == documented


def _event(module: str, program: int, start: float) -> DeviceEvent:
    return DeviceEvent(
        step=0, name="t", kind="host_thunk", direction=None, bytes=None, hlo_module=module,
        hlo_op="t", program_id=program, correlation_id=None, device="/host:CPU", stream="0",
        start_ns=start, duration_ns=1.0,
    )  # fmt: skip


def test_another_process_eager_programs_take_process_0s_ids_by_dispatch_order() -> None:
    # Process 0 compiled more modules before (its preflight): the same primitives have
    # higher ids there; the n-th program of a name maps to the n-th of process 0's.
    p0 = [_event("jit_multiply", 26, 0), _event("jit_tanh", 27, 1), _event("jit_multiply", 66, 2)]
    p1 = [_event("jit_multiply", 22, 0), _event("jit_tanh", 23, 1), _event("jit_multiply", 60, 2)]
    p1.append(_event("jit_add", 61, 3))  # a name process 0 never ran keeps its id
    found = [(e.hlo_module, e.program_id) for e in as_process_0(p1, p0)]
    assert found == [("jit_multiply", 26), ("jit_tanh", 27), ("jit_multiply", 66), ("jit_add", 61)]


# Two bare members of a group (no study): process 1 joins and leaves without reaching the
# barrier, as a process that died or hangs; process 0's barrier names it when its time is up.
BARRIER = """\
import sys
from harness.capture import distributed
rank, port = int(sys.argv[1]), sys.argv[2]
spec = {"launcher": "local", "coordinator": f"127.0.0.1:{port}", "count": 2, "rank": rank}
distributed.join(spec, 60)
group = distributed.Group(rank, 2, barrier_s=1.0)
group.barrier("the start")
if rank == 0:
    try:
        group.barrier("the end of capturing dp")
    except distributed.ProcessesMissing as e:
        print("missing", list(e.missing), e.how(), flush=True)
import os
os._exit(0)
"""


def test_a_barrier_names_the_process_that_never_came() -> None:
    port = str(_free_port())
    env = {**harness_env(), "JAX_PLATFORMS": "cpu"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARRIER, str(rank), port],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for rank in (0, 1)
    ]
    out = [p.communicate(timeout=120)[0] for p in procs]
    assert out[0].strip() == (
        "missing [1] did not reach the end of capturing dp within 1 s (it died or hangs)"
    )
    assert out[1] == ""
