"""The comm section of summary.json: a sharded variant's collectives and its communication
per device, beside the link model (producer: harness.analyze.comm). Kept apart from
harness.records.summary, which would be over its size limit with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import EMPTY, Plain, doc


@dataclass(frozen=True)
class CollectiveSummary:
    name: str = doc("the HLO instruction that runs it (an async pair's `-start`)")
    opcode: str = doc(
        "`all-reduce`, `all-gather`, `reduce-scatter`, `collective-permute`, `all-to-all`, ..."
    )
    replica_groups: tuple[tuple[int, ...], ...] = doc(
        "the groups of logical ids (partitions) that communicate", ()
    )
    device_groups: tuple[tuple[int, ...], ...] = doc(
        "the same groups as device ids, through the mesh's device assignment", ()
    )
    participants: int = doc("devices in each group")
    dtype: str = doc("element type of the payload")
    in_shape: str = doc("its operand shapes on one device")
    out_shape: str = doc("its result shape on one device")
    payload_bytes: int = doc("N: the bytes the ring model is applied to (`model`)")
    sent_bytes: int = doc("bytes each device sends per call under the ring model")
    received_bytes: int = doc("bytes each device receives per call")
    model: str = doc("the byte model applied, e.g. `ring all-reduce: 2(P-1)/P * N_in`")
    made_by: str = doc(
        "what inserted it: `spmd-partitioner`, `later-pass` (a collective optimization after "
        "partitioning), `program` (written in the program, e.g. shard_map's psum), "
        "`compiler` (no partitioning stage to tell), `unknown`"
    )
    pass_name: str = doc("the pass whose dump first shows it, where per-pass dumps say", "")
    op_name: str = doc("the source op (jax's op_name metadata)", "")
    source: str = doc("the source file and line", "")
    time_per_step_s: float | None = doc("its measured time per step, mean over devices")
    events_per_step: float | None = doc("profiled events per device and step (1: one kernel)")
    achieved_bytes_per_s: float | None = doc("`sent_bytes` / `time_per_step_s`")
    link_expected_s: float | None = doc(
        "`sent_bytes` over the run's measured link bandwidth (ceilings.json `link_bytes_per_s`)"
    )
    link_efficiency: float | None = doc(
        "`link_expected_s` / `time_per_step_s`: 1.0 at the measured link speed"
    )


@dataclass(frozen=True)
class DeviceComm:
    device: int = doc("the device id")
    events_per_step: float = doc("profiled events of this device per step")
    compute_s: float = doc("union of its non-collective events per step")
    communication_s: float = doc("union of its collective events per step")
    overlapped_s: float = doc("communication hidden under compute on its other streams")
    exposed_s: float = doc("communication no compute hides: `communication_s` − `overlapped_s`")
    idle_s: float = doc("its span in the step (first start to last end) minus busy time")
    busy_s: float = doc("union of all its events per step")
    waited_s: float | None = doc(
        "per step, the time its collectives spent before the last device of their group "
        "arrived: its wait on the others (harness.match.waits; schema 11)",
        None,
    )
    wait_share: float | None = doc("`waited_s` over its step (first start to last end)", None)
    lag_s: float | None = doc(
        "per step, how long after the first device of each group it arrived at its collectives",
        None,
    )
    last_arrivals: int | None = doc("the collective calls of the window it arrived at last", None)


@dataclass(frozen=True)
class Scaling:
    against: str = doc("the one-device variant of the same problem, timed in the same rounds")
    devices: int = doc("devices this variant runs on")
    speedup: float | None = doc("the one-device step over this step, median of paired rounds")
    speedup_ci95: tuple[float, float] | None = doc("95% bootstrap interval of `speedup`")
    efficiency: float | None = doc("`speedup` / `devices`")
    efficiency_ci95: tuple[float, float] | None = doc("95% interval of `efficiency`")


@dataclass(frozen=True)
class Comm:
    """A sharded variant's communication (producer: harness.analyze.comm)."""

    devices: int | None = doc("devices in the variant's mesh")
    mesh: tuple[int, ...] = doc("devices along each mesh axis", ())
    axes: tuple[str, ...] = doc("the mesh axes' names", ())
    specs: dict[str, Plain] = doc(
        "the PartitionSpecs of x, w, b and out, and the output's sharding as jax reported it",
        EMPTY,
    )
    shard_map: str | None = doc("the hand-written shard_map body (`psum`, `psum_scatter`), if any")
    device_assignment: tuple[int, ...] = doc(
        "the device id that runs each partition (`mesh.devices.flat`)", ()
    )
    collectives: tuple[CollectiveSummary, ...] = doc(
        "every collective of the optimized HLO (comm.json has all their fields)", ()
    )
    sent_bytes_per_call: int | None = doc(
        "bytes each device sends per call of the program: the sum of `sent_bytes` (a "
        "collective inside a loop counted once)"
    )
    compute_per_step_s: float | None = doc("compute per step, mean over devices")
    communication_per_step_s: float | None = doc("communication per step, mean over devices")
    exposed_per_step_s: float | None = doc(
        "exposed communication per step (no compute hides it), mean over devices"
    )
    idle_per_step_s: float | None = doc("idle time per step, mean over devices")
    per_device: tuple[DeviceComm, ...] = doc("the same per device", ())
    overlapped_per_step_s: float | None = doc(
        "communication per step during which compute ran on the device's other streams (CPU: "
        "threads), mean over devices: the overlap of compute and communication (schema 11)",
        None,
    )
    overlap_fraction: float | None = doc(
        "`overlapped_per_step_s` / `communication_per_step_s`: the share compute hides", None
    )
    straggler: int | None = doc(
        "the device that arrived last at the most collective calls (harness.match.waits)", None
    )
    straggler_lag_s: float | None = doc(
        "per step, how long after the first device of each group the straggler arrived", None
    )
    max_wait_share: float | None = doc("the largest `wait_share` of any device", None)
    matched_fraction: float | None = doc(
        "events of the steady window attributed to a cluster or a collective / all events"
    )
    collective_events: int | None = doc(
        "events of the window that look like collectives (a collective opcode in their name "
        "or hlo_op, or an NCCL kernel)"
    )
    collective_matched_fraction: float | None = doc(
        "of those, the fraction attributed to one of the module's collectives"
    )
    link_bytes_per_s: float | None = doc("the run's measured link bandwidth (ceilings.json)")
    link_source: str | None = doc("how it was measured")
    scaling: Scaling | None = doc("speed against the one-device variant of the same problem")
    notes: tuple[str, ...] = doc("what this analysis could not determine, and why", ())


# --- numerics ---------------------------------------------------------------------------------
