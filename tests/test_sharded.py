"""Sharded variants end to end: the `sharding` key, forced host devices, the collectives the
SPMD partitioner inserts, their bytes and time per device, and scaling against one device.

One tiny real run of configs/gelu_sharded.yaml (4 CPU host devices) is shared by the session;
the GPU path of the analysis runs on the 2xH200 fixtures.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import read_json, read_summary, run_harness
from mesh_helpers import x2

from harness.analyze import comm, files
from harness.common import userfiles
from harness.config.experiment import ConfigError, Experiment
from harness.config.load import load
from harness.hlo.diverge import first_divergence
from harness.records import ladder
from harness.records.run_files import Ceilings
from harness.records.summary import CaptureRecord, MeshRecord, TimedVariant, TimingRecord
from harness.store.runfolder import VariantFolder

F32 = 4
M, K, N = 32, 64, 64  # configs/gelu_sharded.yaml
SHARDED = ("dp", "k_sharded", "k_scattered", "column", "column_sharded", "mesh_2d", "psum_scatter")


@pytest.fixture(scope="session")
def sharded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the folder of one complete run of configs/gelu_sharded.yaml."""
    root = tmp_path_factory.mktemp("sharded_results")
    proc = run_harness("--config=gelu_sharded.yaml", results_root=root)
    if proc.returncode != 0:
        raise AssertionError(f"the sharded study failed:\n{proc.stdout}\n{proc.stderr}")
    return (root / "gelu_sharded" / "latest").resolve()


@pytest.fixture(scope="session")
def summaries(sharded_run: Path) -> dict:
    return read_summary(sharded_run)


# --- the config --------------------------------------------------------------------------------


def sharded_config(*overrides: str) -> Experiment:
    return load("gelu_sharded.yaml", list(overrides)).experiment


@pytest.mark.parametrize(
    ("override", "key", "complaint"),
    [
        (
            "variants.dp.sharding.x=e,null",
            "variants.dp.sharding.x",
            "'e', which is not a mesh axis",
        ),
        ("variants.dp.sharding.axes=d,e", "variants.dp.sharding.axes", "names 2 axes for a mesh"),
        ("variants.dp.sharding.x=d,d", "variants.dp.sharding.x", "uses axis 'd' twice"),
        ("variants.dp.sharding.out=d,null,null", "variants.dp.sharding.out", "has 3 entries"),
        ("problem.n=66", "variants.column.sharding.w", "size 66 into 4"),
        ("problem.m=12", "variants.dp.sharding.x", "the recompile halves m to 6"),
        ("variants.dp.sharding.mesh=0", "variants.dp.sharding.mesh[0]", "must be in [1, 4096]"),
        ("variants.single.sharding.x=d", "variants.single.sharding.x", "the mesh is empty"),
        ("variants.dp.mode=eager", "variants.dp.sharding.mesh", "not 'eager'"),
        (
            "variants.psum_scatter.sharding.shard_map=allreduce",
            "variants.psum_scatter.sharding.shard_map",
            "is no body",
        ),
        ("variants.psum_scatter.sharding.out=", "variants.psum_scatter.sharding.out", "must be"),
        (
            "variants.psum_scatter.sharding.w=null,d",
            "variants.psum_scatter.sharding.w",
            "split on k",
        ),
    ],
)
def test_a_bad_sharding_is_one_line_naming_its_key(override: str, key: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(complaint)) as err:
        sharded_config(f"--config.{override}")
    if key:
        assert err.value.key == key
    # One line a mistake: an override that breaks several variants' meshes names each.
    for line in str(err.value).splitlines():
        assert re.match(r".*gelu_sharded.yaml.*: variants\.\w+\.sharding\.\w+(\[\d\])?: ", line)


def test_specs_read_from_yaml_and_flags_alike() -> None:
    exp = sharded_config("--config.variants.dp.sharding.x=null,d", "--config.select=single,dp")
    dp = exp.variant("dp").sharding
    assert (dp.mesh, dp.axes, dp.x, dp.out) == ((4,), ("d",), (None, "d"), ("d", None))
    assert exp.variant("mesh_2d").sharding.axis_size("m+n") == 4
    # The worker forces as many CPU devices as the largest selected mesh needs.
    assert exp.cpu_devices == 4
    assert sharded_config("--config.select=single").cpu_devices == 1
    assert load("gelu.yaml").experiment.cpu_devices == 1


def test_the_h200x2_config_is_valid_and_pairs_each_size_with_one_gpu() -> None:
    exp = load("gelu_h200x2.yaml").experiment
    assert exp.cpu_devices == 2
    for v in exp.variants:
        if v.sharding.enabled:
            ref = comm.reference_for(exp, v)
            assert ref is not None and ref.problem.m == v.problem.m and not ref.sharding.enabled
    assert comm.reference_for(exp, exp.variant("dp_16k")).name == "single_16k"
    assert comm.reference_for(exp, exp.variant("ag_windowed")).name == "single"


def test_a_mesh_larger_than_the_process_is_skipped_with_the_reason() -> None:
    from harness.capture.mesh import unavailable

    exp = sharded_config("--config.variants.dp.sharding.mesh=64", "--config.problem.m=256")
    reason = unavailable(exp.variant("dp"))
    assert reason is not None and reason.startswith("its mesh [64] needs 64 devices; this cpu")
    assert (
        unavailable(dataclasses.replace(exp.variant("dp"), sharding=exp.variant("single").sharding))
        is None
    )


# --- the run: collectives ----------------------------------------------------------------------


def collectives(summaries: dict, name: str) -> dict:
    return {c.opcode: c for c in summaries[name].comm.collectives}


def test_data_parallel_and_column_sharded_outputs_need_no_collective(summaries: dict) -> None:
    for name in ("dp", "column_sharded"):
        c = summaries[name].comm
        assert (c.collectives, c.sent_bytes_per_call, c.collective_events) == ((), 0, 0)
        assert c.communication_per_step_s == c.exposed_per_step_s == 0.0


def test_the_contraction_split_all_reduces_the_partial_products(summaries: dict) -> None:
    (ar,) = summaries["k_sharded"].comm.collectives
    assert (ar.opcode, ar.replica_groups, ar.device_groups, ar.participants) == (
        "all-reduce",
        ((0, 1, 2, 3),),
        ((0, 1, 2, 3),),
        4,
    )
    # Each device holds the whole f32[32,64] partial product; ring: 2(P-1)/P of it.
    assert (ar.payload_bytes, ar.sent_bytes) == (M * N * F32, 2 * 3 * M * N * F32 // 4)
    assert (ar.made_by, ar.pass_name) == ("spmd-partitioner", "spmd-partitioning")
    assert ar.op_name.endswith("dot_general") and ar.time_per_step_s > 0
    # On the CPU a scattered output is the same all-reduce, then each device's slice.
    assert set(collectives(summaries, "k_scattered")) <= {"all-reduce", "reduce-scatter"}
    assert summaries["k_scattered"].comm.specs["output_sharding"] == "P('d', None)"


def test_column_parallel_with_a_replicated_output_all_gathers(summaries: dict) -> None:
    ag = collectives(summaries, "column")["all-gather"]
    # Each device's 16 columns gathered into all 64 (XLA picks the layouts).
    assert (ag.in_shape.split("{")[0], ag.out_shape.split("{")[0]) == ("f32[32,16]", "f32[32,64]")
    assert ag.sent_bytes == 3 * M * N * F32 // 4
    # On the 2x2 mesh only the devices of one row of the mesh gather.
    row = collectives(summaries, "mesh_2d")["all-gather"]
    assert (row.device_groups, row.sent_bytes) == (((0, 1), (2, 3)), (M // 2) * N * F32 // 2)


def test_the_hand_written_reduce_scatter_is_the_programs_own(summaries: dict) -> None:
    rs = collectives(summaries, "psum_scatter")["reduce-scatter"]
    assert (rs.made_by, rs.out_shape) == ("program", "f32[8,64]{1,0}")
    assert rs.sent_bytes == 3 * M * N * F32 // 4
    assert summaries["psum_scatter"].comm.shard_map == "psum_scatter"


@pytest.mark.parametrize("name", SHARDED)
def test_every_event_is_attributed_and_the_numerics_hold(summaries: dict, name: str) -> None:
    s = summaries[name]
    assert s.identity.status == "ok" and "sharded" in s.identity.roles
    assert s.numerics.ok and s.analysis_errors == ()
    assert s.profile.matched_fraction == 1.0 and s.comm.matched_fraction == 1.0
    # Every collective event, on every device and step, is one of the module's collectives.
    n = len(s.comm.collectives)
    assert s.comm.collective_events == n * 4 * 2
    assert s.comm.collective_matched_fraction == (1.0 if n else None)
    assert [d.device for d in s.comm.per_device] == [0, 1, 2, 3]
    for d in s.comm.per_device:
        assert 0 <= d.exposed_s <= d.communication_s + 1e-12 and d.compute_s > 0
        assert (d.communication_s > 0) == bool(n)


def test_comm_json_times_each_collective_on_every_device(sharded_run: Path) -> None:
    doc = read_json(sharded_run / "variants" / "k_sharded" / "comm.json")
    (c,) = doc["collectives"]
    assert c["origin"]["made_by"] == "spmd-partitioner"
    assert c["origin"]["path"].startswith("dump/")  # the raw dump names each pass's successor
    (timing,) = doc["profile"]["collectives"]
    assert set(timing["per_device_s"]) == {"0", "1", "2", "3"}
    (link,) = doc["link"]
    assert link["sent_bytes"] == c["sent_bytes"] and link["link_bandwidth_Bps"] > 0


# --- the run: devices, link, scaling, ladder, report ---------------------------------------------


def test_the_worker_forced_four_host_devices_and_measured_the_link(sharded_run: Path) -> None:
    env = read_json(sharded_run / "manifest.json")["environment"]
    assert (env["device_count"], env["host_devices"]) == (4, "jax_num_cpu_devices=4")
    ceilings = read_json(sharded_run / "ceilings.json")
    assert ceilings["link_bytes_per_s"] > 0
    assert (
        "all-reduce" in ceilings["link_source"] and "over 4 cpu devices" in ceilings["link_source"]
    )


def test_scaling_pairs_each_sharded_variant_with_the_one_device_run(summaries: dict) -> None:
    single = summaries["single"].timing.round_step_s
    for name in SHARDED:
        s = summaries[name].comm.scaling
        assert (s.against, s.devices) == ("single", 4)
        lo, hi = s.speedup_ci95
        assert lo <= s.speedup <= hi
        assert s.efficiency == pytest.approx(s.speedup / 4)
        mine = summaries[name].timing.round_step_s
        ratios = sorted(a / b for a, b in zip(single, mine, strict=True))
        assert ratios[0] <= s.speedup <= ratios[-1]
    assert summaries["single"].comm.scaling is None


def test_the_ladder_keeps_the_partitioned_module_and_the_pass_that_made_it(
    sharded_run: Path,
) -> None:
    vdir = sharded_run / "variants" / "k_sharded"
    lad = ladder.read_ladder(vdir / "ir")
    spmd = userfiles.read_text(lad.files("spmd")[0], userfiles.IR_TEXT)
    assert lad.has("spmd") and "all-reduce(" in spmd
    passes = read_json(vdir / "passes.json")["passes"]
    assert ("spmd-partitioner", "spmd-partitioning") in {(p["pipeline"], p["pass"]) for p in passes}
    assert not ladder.read_ladder(sharded_run / "variants" / "single" / "ir").has("spmd")


def test_the_first_divergence_runs_across_the_partitioned_stage(
    sharded_run: Path, summaries: dict, tmp_path: Path
) -> None:
    assert summaries["k_sharded"].comparison.first_divergence.stage == "stablehlo"
    assert summaries["psum_scatter"].comparison.first_divergence.stage == "jaxpr"
    # The same program up to the partitioner, partitioned differently: it differs at `spmd`.
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sharded_run / "variants" / "k_sharded" / "ir", a)
    shutil.copytree(a, b)
    scattered = ladder.read_ladder(sharded_run / "variants" / "k_scattered" / "ir")
    userfiles.stored(b / "25-spmd-partitioned.txt").unlink()  # kept gzipped: replaced
    spmd = userfiles.read_text(scattered.files("spmd")[0], userfiles.IR_TEXT)
    (b / "25-spmd-partitioned.txt").write_text(spmd)
    found = first_divergence(a, b)
    assert found.stage == "spmd" and "dynamic-slice" in found.detail


def test_the_report_has_the_sharded_section(sharded_run: Path) -> None:
    report = (sharded_run / "details.md").read_text()
    section = report[report.index("## Sharded variants") :].split("\n## ", 1)[0]
    assert (
        "| k_sharded | all-reduce | all-reduce | {0,1,2,3} | 12.3 kB | spmd-partitioner" in section
    )
    assert "| mesh_2d | [m=2, n=2] | 4 | all-gather |" in section
    assert "Link bandwidth measured in this run" in section


# --- the GPU path, on the 2xH200 fixtures ---------------------------------------------------------


def fixture_variant(tmp_path: Path, fixture: str) -> Path:
    """A variant folder as the capture would leave it: the ladder from the fixture's dump and
    its profile as the steady window."""
    vdir = tmp_path / fixture
    (module,) = ladder.dump_modules(sorted((x2(fixture) / "dump").iterdir()))
    writer = ladder.LadderWriter(vdir / "ir")
    writer.module(module)
    writer.finish()
    steady = vdir / "profile" / "steady"
    steady.mkdir(parents=True)
    shutil.copy(x2(fixture) / "profile.xplane.pb", steady / "host.xplane.pb")
    return vdir


RECORD = CaptureRecord(
    status="ok",
    reason=None,
    mode="jit",
    module="jit_gelu_linear",
    mesh=MeshRecord(
        mesh=(2,),
        axes=("d",),
        devices=2,
        device_assignment=(0, 1),
        device_kind="NVIDIA H200",
        specs={},
        shard_map=None,
        output_sharding=None,
    ),
)


def gpu_comm(tmp_path: Path, fixture: str, variant: str, timed: TimingRecord | None = None):
    exp = load("gelu_h200x2.yaml").experiment
    vdir = fixture_variant(tmp_path, fixture)
    ceilings = Ceilings(link_bytes_per_s=300e9, link_source="a test figure")
    lad = ladder.read_ladder(vdir / "ir")
    section, made = comm.comm(vdir, lad, exp, exp.variant(variant), RECORD, timed, ceilings)
    files.write(VariantFolder(vdir), made)
    return section, vdir


def test_the_nccl_all_reduce_is_exposed_in_full_and_compared_with_the_link(tmp_path: Path) -> None:
    rounds = TimingRecord(
        rounds=3,
        target_batch_s=0.1,
        wall_s=1.0,
        baseline="single",
        repeat=None,
        variants={
            "single": TimedVariant(round_step_s=(1.714e-3, 1.72e-3, 1.71e-3), calls_per_batch=30),
            "k_replicated": TimedVariant(round_step_s=(1.307e-3, 1.31e-3, 1.30e-3), calls_per_batch=30),
        },
    )  # fmt: skip
    c, vdir = gpu_comm(tmp_path, "k_sharded_replicated_out", "k_replicated", rounds)
    assert ladder.read_ladder(vdir / "ir").has("spmd")  # XLA's after_spmd_partitioner dump
    (ar,) = c.collectives
    assert (ar.name, ar.sent_bytes, ar.made_by) == ("all-reduce.3", 2**27, "spmd-partitioner")
    assert ar.time_per_step_s == pytest.approx(476e-6, abs=10e-6)
    assert ar.link_expected_s == pytest.approx(2**27 / 300e9)
    assert ar.link_efficiency == pytest.approx(ar.link_expected_s / ar.time_per_step_s)
    assert (c.matched_fraction, c.collective_events, c.collective_matched_fraction) == (1.0, 6, 1.0)
    assert c.exposed_per_step_s == pytest.approx(c.communication_per_step_s)
    assert c.scaling.against == "single" and c.scaling.speedup == pytest.approx(
        1.714 / 1.307, rel=0.01
    )
    assert c.scaling.efficiency == pytest.approx(c.scaling.speedup / 2)
    assert json.loads((vdir / "comm.json").read_text())["stages"][1]["label"] == (
        "after_spmd_partitioner"
    )


def test_the_gpu_reduce_scatter_is_made_after_partitioning(tmp_path: Path) -> None:
    c, _ = gpu_comm(tmp_path, "k_sharded_scattered_out", "k_scattered")
    (rs,) = c.collectives
    assert (rs.opcode, rs.made_by, rs.sent_bytes) == ("reduce-scatter", "later-pass", 2**26)
    assert c.scaling.speedup is None and any("no paired timing rounds" in n for n in c.notes)


def test_the_partition_id_memset_counts_as_attributed_compute(tmp_path: Path) -> None:
    c, _ = gpu_comm(tmp_path, "n_sharded_replicated_out", "n_replicated")
    assert [x.opcode for x in c.collectives] == ["all-gather"]
    assert c.matched_fraction == 1.0 and c.collective_matched_fraction == 1.0


def test_the_options_that_change_communication_are_known_to_the_installed_jaxlib() -> None:
    from harness.capture import preflight

    exp = load("gelu_h200x2.yaml").experiment
    tried: list[str] = []
    preflight.check_options(exp, "gpu", lambda key, options: tried.append(key))
    assert {
        "variants.ag_windowed.xla_options.xla_gpu_threshold_for_windowed_einsum_mib",
        "variants.ag_windowed.xla_options.xla_gpu_multi_streamed_windowed_einsum",
        "variants.k_replicated_lhs.xla_options.xla_gpu_enable_latency_hiding_scheduler",
        "variants.k_replicated_sync.xla_options.xla_gpu_disable_async_collectives",
    } <= set(tried)
    # An older name of the async switch is gone: preflight names the key that set it.
    old = "variants.k_replicated_sync.xla_options.xla_gpu_enable_async_collectives"
    exp = load("gelu_h200x2.yaml", [f"--config.{old}=false"]).experiment
    with pytest.raises(ConfigError, match="No such compile option") as err:
        preflight.check_options(exp, "gpu", lambda key, options: None)
    assert err.value.key == old
