"""Communication on the device: per-device events, collective kernels attributed by hlo_op,
compute / communication / exposed / idle time, and the link-bandwidth model; on the 2xH200
fixture profiles and on live 4-device CPU profiles."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path

import pytest
from mesh_helpers import MeshCapture, mesh_capture, x2, x2_module

from harness.hlo.clusters import find_clusters
from harness.hlo.collectives import find_collectives
from harness.hlo.parser import parse_file
from harness.match.comm import (
    CommReport,
    communication_report,
    compare_with_link,
    expected_time_s,
    merge,
    subtract,
)
from harness.profile.devices import device_of, runs_by_step, split_by_device
from harness.profile.events import DeviceEvent, find_xplane
from harness.profile.reader import read_events_and_markers

US = 1e-6
LIVE = ("dp", "k_sharded", "column", "mesh_2d", "k_2d", "k_mixed", "psum_scatter", "psum_pair")


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> MeshCapture:
    return mesh_capture(tmp_path_factory)


def gpu_events(variant: str) -> tuple[DeviceEvent, ...]:
    return read_events_and_markers(x2(variant) / "profile.xplane.pb")[0]


def gpu_report(variant: str, events: tuple[DeviceEvent, ...] | None = None) -> CommReport:
    module = x2_module(variant)
    return communication_report(
        gpu_events(variant) if events is None else events,
        {module.name: find_clusters(module)},
        {module.name: find_collectives(module)},
    )


def live_report(mesh: MeshCapture, variant: str) -> tuple[CommReport, tuple[DeviceEvent, ...]]:
    module = parse_file(mesh.after_optimizations(variant))
    events = read_events_and_markers(find_xplane(mesh.profile(variant)))[0]
    report = communication_report(
        events,
        {module.name: find_clusters(module)},
        {module.name: find_collectives(module)},
    )
    return report, events


# --- the 2xH200 fixtures --------------------------------------------------------------------------


def test_the_nccl_all_reduce_is_attributed_by_hlo_op_and_fully_exposed() -> None:
    report = gpu_report("k_sharded_replicated_out")
    assert (report.devices, report.steps, report.matched_fraction) == ((0, 1), 3, 1.0)
    timing = report.collective("all-reduce.3")
    assert timing.events_per_step == 1.0
    per_device = dict(timing.per_device_s)
    # The fixture README: about 478 us a step on each GPU.
    assert 440 * US < per_device[0] < 520 * US and 440 * US < per_device[1] < 520 * US
    assert timing.time_s == pytest.approx(476 * US, abs=10 * US)
    for device in (0, 1):
        summary = report.device(device)
        assert summary.communication_s == pytest.approx(per_device[device])
        # Same stream as the GEMM: nothing can hide it.
        assert summary.exposed_s == summary.communication_s
        assert summary.overlapped_s == 0.0
        assert summary.compute_s > summary.communication_s


def test_the_all_reduce_runs_after_the_gemm_on_the_gemms_stream() -> None:
    events = gpu_events("k_sharded_replicated_out")
    gemm = [e for e in events if e.hlo_op == "custom-call.1" and e.kind == "kernel"]
    nccl = [e for e in events if e.hlo_op == "all-reduce.3"]
    assert len(gemm) == len(nccl) == 6  # 2 GPUs x 3 steps
    gemm_time = sum(e.duration_ns for e in gemm if device_of(e) == 0) / 3 * 1e-9
    assert gemm_time == pytest.approx(698 * US, abs=15 * US)
    for g in gemm:
        (n,) = [e for e in nccl if (device_of(e), e.step) == (device_of(g), g.step)]
        assert n.stream == g.stream and n.start_ns >= g.end_ns


@pytest.mark.parametrize("variant", ["dp_m", "n_sharded_out"])
def test_variants_without_a_collective_spend_nothing_on_communication(variant: str) -> None:
    report = gpu_report(variant)
    assert report.matched_fraction == 1.0
    assert (report.communication_events, report.collectives) == (0, ())
    assert all(d.communication_s == d.exposed_s == 0.0 for d in report.per_device)
    assert all(d.compute_s > 600 * US for d in report.per_device)


@pytest.mark.parametrize(
    ("variant", "collective", "low_us", "high_us"),
    [
        ("k_sharded_scattered_out", "reduce-scatter.3", 290, 330),
        ("n_sharded_replicated_out", "all-gather.3", 280, 310),
    ],
)
def test_reduce_scatter_and_all_gather_are_timed_on_both_gpus(
    variant: str, collective: str, low_us: float, high_us: float
) -> None:
    report = gpu_report(variant)
    assert report.matched_fraction == 1.0
    timing = report.collective(collective)
    assert [d for d, _ in timing.per_device_s] == [0, 1]
    assert all(low_us * US < t < high_us * US for _, t in timing.per_device_s)
    # 64 MiB sent per GPU.
    assert timing.achieved_bandwidth_Bps == pytest.approx(64 * 2**20 / timing.time_s)


def test_partition_id_memsets_are_clusters_of_their_own() -> None:
    # The GPU writes partition-id with a 4-byte memset whose hlo_op names it.
    module = x2_module("n_sharded_replicated_out")
    ids = [c for c in find_clusters(module) if c.kind == "partition-id"]
    assert [c.name for c in ids] == ["partition-id.1"]
    report = gpu_report("n_sharded_replicated_out")
    assert (report.matched_fraction, report.unmatched) == (1.0, ())
    memsets = [e for e in gpu_events("n_sharded_replicated_out") if e.hlo_op == "partition-id.1"]
    assert memsets and all(e.kind == "memset" for e in memsets)


def test_attribution_never_reads_nccl_kernel_names() -> None:
    events = gpu_events("k_sharded_replicated_out")
    renamed = tuple(
        dataclasses.replace(e, name="ncclDevKernel_Generic") if e.hlo_op == "all-reduce.3" else e
        for e in events
    )
    assert gpu_report("k_sharded_replicated_out", renamed) == gpu_report("k_sharded_replicated_out")


def test_compute_on_another_stream_hides_part_of_the_collective() -> None:
    events = list(gpu_events("k_sharded_replicated_out"))
    nccl = {(e.step, device_of(e)): e for e in events if e.hlo_op == "all-reduce.3"}
    # Move GPU 0's GELU fusion to a second stream, starting with the all-reduce.
    moved = []
    for e in events:
        if e.hlo_op == "loop_multiply_fusion" and device_of(e) == 0:
            e = dataclasses.replace(e, stream="Stream #99", start_ns=nccl[(e.step, 0)].start_ns)
        moved.append(e)
    fusion = sum(e.duration_ns for e in moved if e.stream == "Stream #99") / 3 * 1e-9
    before, after = (
        gpu_report("k_sharded_replicated_out"),
        gpu_report("k_sharded_replicated_out", tuple(moved)),
    )
    assert after.device(0).communication_s == pytest.approx(before.device(0).communication_s)
    assert after.device(0).overlapped_s == pytest.approx(fusion)
    assert after.device(0).exposed_s == pytest.approx(before.device(0).exposed_s - fusion)
    assert after.device(1) == before.device(1)


def test_the_link_model_puts_expected_time_next_to_the_measured_one() -> None:
    report = gpu_report("k_sharded_replicated_out")
    (row,) = compare_with_link(report.collectives, link_bandwidth_Bps=450e9, latency_s=5 * US)
    assert row.sent_bytes == 2**27
    assert row.expected_s == pytest.approx(5 * US + 2**27 / 450e9)
    assert row.achieved_s == report.collective("all-reduce.3").time_s
    assert row.achieved_bandwidth_Bps == pytest.approx(2**27 / row.achieved_s)
    assert 250e9 < row.achieved_bandwidth_Bps < 310e9
    assert row.efficiency == pytest.approx(row.expected_s / row.achieved_s)
    assert json.loads(json.dumps(row.to_json()))["collective"] == "all-reduce.3"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [((1.0, 0.0), "bandwidth must be > 0"), ((-1.0, 1e9), ">= 0"), ((1.0, 1e9, -1.0), ">= 0")],
)
def test_the_link_model_rejects_impossible_inputs(args: tuple[float, ...], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        expected_time_s(*args)


def test_the_report_is_json() -> None:
    doc = json.loads(json.dumps(gpu_report("k_sharded_replicated_out").to_json()))
    assert doc["matched_fraction"] == 1.0
    assert doc["collectives"][0]["name"] == "all-reduce.3"
    assert set(doc["collectives"][0]["per_device_s"]) == {"0", "1"}
    assert {s["device"] for s in doc["device_steps"]} == {0, 1}
    assert all("all-reduce.3" in s["collective_s"] for s in doc["device_steps"])


def test_interval_union_and_difference() -> None:
    assert merge([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]
    assert subtract([(0, 10), (20, 30)], [(2, 3), (5, 22), (29, 40)]) == [
        (0, 2),
        (3, 5),
        (22, 29),
    ]
    assert subtract([(0, 10)], []) == [(0, 10)]


def test_gpu_events_name_their_device_by_plane() -> None:
    events = gpu_events("k_sharded_replicated_out")
    split = split_by_device(events)
    assert [d.device for d in split] == [0, 1]
    assert all(e.device == f"/device:GPU:{d.device}" for d in split for e in d.events)


# --- live: 4 forced CPU devices --------------------------------------------------------------------


def test_cpu_thunks_name_their_device_and_each_step_is_one_run(mesh: MeshCapture) -> None:
    events = read_events_and_markers(find_xplane(mesh.profile("k_sharded")))[0]
    # Every device shares the host plane; the device is a stat of each thunk event.
    assert {e.device for e in events} == {"/host:CPU"}
    assert all(e.device_ordinal is not None and e.run_id is not None for e in events)
    assert all(e.stream.startswith("tf_XLAPjRtCpuClient/") for e in events)
    split = split_by_device(events)
    assert [d.device for d in split] == [0, 1, 2, 3]
    ops: dict[tuple[int, int | None], list[str]] = defaultdict(list)
    for d in split:
        for e in d.events:
            ops[(d.device, e.step)].append(e.hlo_op or "")
    assert set(map(tuple, ops.values())) == {
        ("ynn_fusion", "all-reduce", "multiply_multiply_fusion")
    }
    runs = runs_by_step(events)
    assert sorted(runs) == [0, 1] and all(len(ids) == 1 for ids in runs.values())


def test_host_events_without_a_device_cannot_be_placed(mesh: MeshCapture) -> None:
    events = read_events_and_markers(find_xplane(mesh.profile("k_sharded")))[0]
    blind = [dataclasses.replace(e, device_ordinal=None) for e in events]
    (single,) = split_by_device(blind)  # no event names a device: a one-device profile
    assert single.device == 0 and len(single.events) == len(events)
    with pytest.raises(ValueError, match="carries no device_ordinal"):
        split_by_device([*events[1:], blind[0]])


@pytest.mark.parametrize("variant", LIVE)
def test_every_cpu_collective_thunk_is_attributed_on_every_device(
    mesh: MeshCapture, variant: str
) -> None:
    report, _ = live_report(mesh, variant)
    module = parse_file(mesh.after_optimizations(variant))
    collectives = find_collectives(module)
    assert (report.devices, report.steps, report.matched_fraction) == ((0, 1, 2, 3), 2, 1.0)
    assert report.communication_events == len(collectives) * 4 * 2
    assert sorted(t.name for t in report.collectives) == sorted(c.name for c in collectives)
    for timing in report.collectives:
        assert [d for d, _ in timing.per_device_s] == [0, 1, 2, 3]
        assert timing.events_per_step == 1.0
        assert all(t > 0 for _, t in timing.per_device_s)
    for d in report.per_device:
        assert 0 <= d.exposed_s <= d.communication_s + 1e-12
        assert d.compute_s > 0 and d.idle_s >= 0
        assert (d.communication_s > 0) == bool(collectives)
    assert len(report.device_steps) == 4 * 2


def test_cpu_all_reduce_time_is_its_thunk_durations(mesh: MeshCapture) -> None:
    report, events = live_report(mesh, "k_sharded")
    timing = report.collective("all-reduce")
    for device, seconds in timing.per_device_s:
        thunks = [e for e in events if e.hlo_op == "all-reduce" and device_of(e) == device]
        assert seconds == pytest.approx(sum(e.duration_ns for e in thunks) * 1e-9 / 2)
    assert timing.sent_bytes == 18432
    assert timing.achieved_bandwidth_Bps == pytest.approx(18432 / timing.time_s)


def test_reports_of_a_live_capture_write_json(mesh: MeshCapture, tmp_path: Path) -> None:
    report, _ = live_report(mesh, "k_mixed")
    path = tmp_path / "comm.json"
    path.write_text(json.dumps(report.to_json()))
    doc = json.loads(path.read_text())
    assert {c["name"] for c in doc["collectives"]} == {"all-reduce", "collective-permute"}
