"""Who waits for whom at a collective, the overlap of compute and communication, and the
rule that names a waiting device: the arithmetic on constructed arrivals, the NCCL
all-reduce of the 2xH200 fixture, and a live data- and tensor-parallel train step on 4 CPU
host devices (configs/train_sharded.yaml)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import read_json, run_harness
from mesh_helpers import x2, x2_module

from harness.config.load import load
from harness.findings.communication import Waiting, wait_findings
from harness.hlo.clusters import find_clusters
from harness.hlo.collectives import find_collectives
from harness.match.comm import collective_events, communication_report
from harness.match.waits import collective_waits
from harness.profile.events import DeviceEvent
from harness.profile.reader import read_events_and_markers
from harness.records.comm import Comm, DeviceComm


@dataclasses.dataclass(frozen=True)
class Named:
    name: str


def event(device: int, start_us: float, length_us: float, step: int = 0) -> DeviceEvent:
    return DeviceEvent(
        step=step, name="all-reduce", kind="kernel", direction=None, bytes=None,
        hlo_module="jit_f", hlo_op="all-reduce", program_id=1, correlation_id=None,
        device=f"/device:GPU:{device}", stream="s", start_ns=start_us * 1e3,
        duration_ns=length_us * 1e3, device_ordinal=device,
    )  # fmt: skip


def test_the_early_devices_wait_for_the_last_and_it_is_the_straggler() -> None:
    # Three devices arrive at 0, 10 and 30 µs; the call ends for all at 40 µs.
    calls = [(event(0, 0, 40), Named("ar")), (event(1, 10, 30), Named("ar")),
             (event(2, 30, 10), Named("ar"))]  # fmt: skip
    spans = {(0, 0): 100e-6, (1, 0): 100e-6, (2, 0): 100e-6}
    w = collective_waits(calls, 1, {"ar": ((0, 1, 2),)}, spans)
    by = {d.device: d for d in w.per_device}
    assert [by[d].waited_s for d in (0, 1, 2)] == pytest.approx([30e-6, 20e-6, 0.0])
    assert [by[d].lag_s for d in (0, 1, 2)] == pytest.approx([0.0, 10e-6, 30e-6])
    assert by[0].wait_share == pytest.approx(0.3)
    assert (w.straggler, w.straggler_lag_s, w.calls, w.unpaired) == (2, pytest.approx(30e-6), 1, 0)


def test_a_wait_is_bounded_by_the_event_and_groups_wait_apart() -> None:
    # Groups {0,1} and {2,3}: device 3 is late only within its own group.
    calls = [(event(0, 0, 5), Named("ar")), (event(1, 50, 5), Named("ar")),
             (event(2, 0, 8), Named("ar")), (event(3, 8, 1), Named("ar"))]  # fmt: skip
    w = collective_waits(calls, 1, {"ar": ((0, 1), (2, 3))}, {})
    by = {d.device: d for d in w.per_device}
    assert by[0].waited_s == pytest.approx(5e-6)  # its event lasted 5 µs, not 50
    assert by[2].waited_s == pytest.approx(8e-6) and by[3].lag_s == pytest.approx(8e-6)
    assert by[0].wait_share is None  # no step span given


def test_calls_of_unequal_counts_are_left_out_and_counted() -> None:
    calls = [(event(0, 0, 5), Named("ar")), (event(0, 9, 5), Named("ar")),
             (event(1, 1, 5), Named("ar"))]  # fmt: skip
    w = collective_waits(calls, 1, {}, {})
    assert (w.calls, w.unpaired, w.straggler) == (0, 2, None)


def test_the_nccl_all_reduce_of_two_h200s_pairs_once_a_step() -> None:
    variant = "k_sharded_replicated_out"
    module = x2_module(variant)
    events = read_events_and_markers(x2(variant) / "profile.xplane.pb")[0]
    clusters, collectives = (
        {module.name: find_clusters(module)},
        {module.name: find_collectives(module)},
    )
    steps, attributed = collective_events(events, clusters, collectives)
    report = communication_report(events, clusters, collectives)
    spans = {(s.device, s.step): s.span_s for s in report.device_steps}
    w = collective_waits(attributed, steps, {}, spans)
    assert (steps, w.calls, w.unpaired) == (3, 3, 0)
    assert sum(d.last_arrivals for d in w.per_device) == 3
    for d in w.per_device:
        ar = report.collective("all-reduce.3")
        assert 0.0 <= d.waited_s <= dict(ar.per_device_s)[d.device]
        assert 0.0 <= d.wait_share < 1.0
    assert w.straggler in (0, 1) and w.straggler_lag_s >= 0.0


def device(d: int, share: float) -> DeviceComm:
    return DeviceComm(
        device=d, events_per_step=10, compute_s=1e-3, communication_s=1e-3, overlapped_s=0.0,
        exposed_s=1e-3, idle_s=0.0, busy_s=2e-3, waited_s=share * 2e-3, wait_share=share,
        lag_s=0.0, last_arrivals=0,
    )  # fmt: skip


def test_the_waiting_rule_names_each_device_above_the_share_and_no_other() -> None:
    comm = Comm(
        devices=2, per_device=(device(0, 0.05), device(1, 0.25)), straggler=0,
        straggler_lag_s=5e-4,
    )  # fmt: skip
    (found,) = wait_findings(Waiting.id, "tp", comm, Waiting.threshold)
    assert (found.device, found.straggler, found.share) == (1, 0, 0.25)
    assert "device 1 waits" in found.what and "device 0 arrived last" in found.what
    assert wait_findings(Waiting.id, "tp", comm, 0.3) == ()


def test_the_sharded_program_config_takes_a_mesh_and_refuses_specs() -> None:
    exp = load("train_sharded.yaml").experiment
    assert exp.cpu_devices == 4
    assert {v.name: v.sharding.mesh for v in exp.variants if v.sharding.enabled}["dp_tp"] == (2, 2)
    with pytest.raises(Exception, match="only `mesh` and `axes`"):
        load("train_sharded.yaml", ["--config.variants.dp.sharding.x=[data,null]"])


@pytest.fixture(scope="session")
def train_sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train_sharded")
    proc = run_harness(
        "--config=train_sharded.yaml", "--config.select=one_device,dp_tp",
        "--config.timing.rounds=3", results_root=root,
    )  # fmt: skip
    if proc.returncode != 0:
        raise AssertionError(f"the sharded train step failed:\n{proc.stdout}\n{proc.stderr}")
    return (root / "train_sharded" / "latest").resolve()


@pytest.mark.study
def test_the_sharded_train_step_reports_collectives_overlap_and_waits(train_sharded: Path) -> None:
    s = read_json(train_sharded / "summary.json")
    c = s["variants"]["dp_tp"]["comm"]
    assert c["devices"] == 4 and c["axes"] == ["data", "model"]
    groups = {tuple(map(tuple, x["device_groups"])) for x in c["collectives"]}
    assert ((0, 1), (2, 3)) in groups and ((0, 2), (1, 3)) in groups  # model, then data
    assert all(x["opcode"] == "all-reduce" and x["sent_bytes"] > 0 for x in c["collectives"])
    assert c["matched_fraction"] == 1.0 and c["collective_matched_fraction"] == 1.0
    assert c["communication_per_step_s"] > 0 and c["overlapped_per_step_s"] is not None
    assert 0.0 <= c["overlap_fraction"] <= 1.0
    assert c["straggler"] in range(4) and c["straggler_lag_s"] >= 0.0
    assert all(
        d["waited_s"] is not None and d["last_arrivals"] is not None for d in c["per_device"]
    )
    assert s["variants"]["one_device"]["comm"]["devices"] is None
    rules = {r["id"] for r in s["findings"]["rules"]}
    assert "communication.waiting" in rules
    assert "Overlap of compute and communication" in (train_sharded / "details.md").read_text()


# --- NCCL kernels inside a command buffer -----------------------------------------------------


def _buffer(order: tuple[str, ...]):
    from harness.hlo.thunks import Command, CommandBuffer

    kinds = {"custom-call.1": "kCublasLtMatmul", "all-reduce.3": "kAllReduce",
             "all-gather.9": "kAllGather", "loop_multiply_fusion": "kCustomKernel"}  # fmt: skip
    kernels = {"loop_multiply_fusion": "loop_multiply_fusion"}
    n = len(order)
    return CommandBuffer(
        "command_buffer_1",
        tuple(
            Command(
                index=i + 1,
                kind=kinds[op],
                kernel=kernels.get(op),
                grid=None,
                block=None,
                prev=(i,) if i else (),
                next=(i + 2,) if i + 1 < n else (),
                instruction=op,
            )
            for i, op in enumerate(order)
        ),
    )


def test_an_nccl_kernel_in_a_command_buffer_goes_to_its_collective() -> None:
    """The 2xH200 fixture ran without command buffers (its thunk sequence has none), so its
    real events are put in one as XLA reports a buffer's events (`hlo_op` the buffer's name),
    and the buffer lists an all-gather before the all-reduce that ran: the NCCL AllReduce
    kernel must skip the ready all-gather and land on `all-reduce.3`, the GEMM on the cuBLAS
    call. How XLA prints a collective command inside a buffer is not in any fixture: that
    needs a command-buffer run on several GPUs (`--xla_gpu_enable_command_buffer=+COLLECTIVES`)."""
    from harness.match.command_buffers import place_events

    variant = "k_sharded_replicated_out"
    events = read_events_and_markers(x2(variant) / "profile.xplane.pb")[0]
    window = [
        dataclasses.replace(e, hlo_op="command_buffer_1")
        for e in events
        if e.step == 0 and e.device_ordinal in (None, 0) and e.device.endswith("GPU:0")
    ]
    buffer = _buffer(("custom-call.1", "all-gather.9", "all-reduce.3", "loop_multiply_fusion"))
    buffer = dataclasses.replace(
        buffer,
        commands=tuple(dataclasses.replace(c, prev=(), next=()) for c in buffer.commands),
    )
    placed = place_events(window, dict.fromkeys(range(len(window)), buffer))
    by_name = {
        window[i].name: p.instruction for i, p in placed.items() if window[i].kind == "kernel"
    }
    nccl = [n for n in by_name if n.lower().startswith("nccl")]
    assert nccl and all(by_name[n] == "all-reduce.3" for n in nccl)
    assert by_name["loop_multiply_fusion"] == "loop_multiply_fusion"
    assert any(v == "custom-call.1" for n, v in by_name.items() if n.startswith("nvjet"))
    assert "all-gather.9" not in by_name.values()
