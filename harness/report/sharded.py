"""The report's section on sharded variants: collectives, bytes, exposed time, scaling.

Built from each variant's `comm` summary section only (harness.analyze.comm wrote it); a run
without a sharded variant gets no section.
"""

from __future__ import annotations

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.report.doc import Block, Bullets, Heading, Para, Table
from harness.saved.run import SavedRun, SavedVariant

COLLECTIVES_HEADER = (
    "variant", "collective", "opcode", "device groups", "sent / device", "made by",
    "time / step", "achieved", "link model", "of link",
)  # fmt: skip
DEVICES_HEADER = (
    "variant", "device", "compute / step", "communication", "overlapped", "exposed", "idle",
    "waits for others", "of its step", "arrives after first", "last at",
)  # fmt: skip
OVERLAP_HEADER = (
    "variant", "comm / step", "overlapped / step", "hidden", "exposed / step",
    "most waiting", "straggler", "its lag / step",
)  # fmt: skip
SCALING_HEADER = (
    "variant", "mesh", "devices", "collectives", "sent / device", "comm / step",
    "exposed / step", "step (95% CI)", "against", "speedup (95% CI)", "efficiency (95% CI)",
)  # fmt: skip


def sharded(run: SavedRun) -> list[SavedVariant]:
    """Returns the run's variants that ran on a mesh, in config order."""
    return [v for v in run.variants if v.summary.comm.devices is not None]


def _groups(groups: tuple[tuple[int, ...], ...]) -> str:
    return " ".join("{" + ",".join(map(str, g)) + "}" for g in groups) or MISSING


def _interval(value: float | None, bounds: tuple[float, float] | None, fmt_: str) -> str:
    if value is None:
        return MISSING
    text = format(value, fmt_)
    return text + (f" ({format(bounds[0], fmt_)}–{format(bounds[1], fmt_)})" if bounds else "")


def _mesh(v: SavedVariant) -> str:
    c = v.summary.comm
    axes = ", ".join(f"{a}={n}" for a, n in zip(c.axes, c.mesh, strict=False))
    return f"[{axes}]" + (f" shard_map {c.shard_map}" if c.shard_map else "")


def scaling_table(variants: list[SavedVariant]) -> Table:
    """Returns one row per sharded variant: what it sends, what shows, how it scales."""
    rows = []
    for v in variants:
        c, s = v.summary.comm, v.summary.comm.scaling
        rows.append(
            (
                v.name,
                _mesh(v),
                fmt.count(c.devices),
                ", ".join(x.opcode for x in c.collectives) or "none",
                fmt.si(c.sent_bytes_per_call, "B"),
                fmt.ms(c.communication_per_step_s),
                fmt.ms(c.exposed_per_step_s),
                fmt.step(v.summary.timing.step_s, v.summary.timing.step_ci95_s),
                s.against if s else MISSING,
                _interval(s.speedup, s.speedup_ci95, ".2f") if s else MISSING,
                _interval(s.efficiency, s.efficiency_ci95, ".1%") if s else MISSING,
            )
        )
    return Table(SCALING_HEADER, tuple(rows))


def collectives_table(variants: list[SavedVariant]) -> Table | None:
    """Returns one row per collective of every sharded variant, or None when none has one."""
    rows = []
    for v in variants:
        for x in v.summary.comm.collectives:
            rows.append(
                (
                    v.name,
                    x.name,
                    x.opcode,
                    _groups(x.device_groups or x.replica_groups),
                    fmt.si(x.sent_bytes, "B"),
                    x.made_by + (f" ({x.pass_name})" if x.pass_name else ""),
                    fmt.ms(x.time_per_step_s),
                    fmt.si(x.achieved_bytes_per_s, "B/s"),
                    fmt.ms(x.link_expected_s),
                    fmt.pct(x.link_efficiency),
                )
            )
    return Table(COLLECTIVES_HEADER, tuple(rows)) if rows else None


def devices_table(variants: list[SavedVariant]) -> Table:
    """Returns compute, communication, exposed and idle time per device and step."""
    rows = tuple(
        (
            v.name,
            str(d.device),
            fmt.ms(d.compute_s),
            fmt.ms(d.communication_s),
            fmt.ms(d.overlapped_s),
            fmt.ms(d.exposed_s),
            fmt.ms(d.idle_s),
            fmt.ms(d.waited_s),
            fmt.pct(d.wait_share),
            fmt.ms(d.lag_s),
            fmt.count(d.last_arrivals),
        )
        for v in variants
        for d in v.summary.comm.per_device
    )
    return Table(DEVICES_HEADER, rows)


def overlap_table(variants: list[SavedVariant]) -> Table:
    """Returns per sharded variant its collective time, the part compute hides, the largest
    wait share and the straggler, as the analysis recorded them."""
    rows = tuple(
        (
            v.name,
            fmt.ms(c.communication_per_step_s),
            fmt.ms(c.overlapped_per_step_s),
            fmt.pct(c.overlap_fraction),
            fmt.ms(c.exposed_per_step_s),
            fmt.pct(c.max_wait_share),
            MISSING if c.straggler is None else f"device {c.straggler}",
            fmt.ms(c.straggler_lag_s),
        )
        for v in variants
        for c in (v.summary.comm,)
    )
    return Table(OVERLAP_HEADER, rows)


def waiting_blocks(run: SavedRun) -> list[Block]:
    """Returns the `communication.waiting` findings, one bullet each, or nothing."""
    recorded = run.summary.findings
    found = recorded.communication if recorded is not None else ()
    if not found:
        return []
    return [
        Para("Devices that wait at collectives for the others:"),
        Bullets(tuple(f"{f.what} (rule `{f.rule}`)" for f in found)),
    ]


def sharded_blocks(run: SavedRun) -> list[Block]:
    """Returns the section on sharded variants, or nothing when the run has none."""
    variants = sharded(run)
    if not variants:
        return []
    first = variants[0].summary.comm
    link = (
        f"Link bandwidth measured in this run: {fmt.si(first.link_bytes_per_s, 'B/s')} "
        f"({first.link_source})."
        if first.link_bytes_per_s
        else f"No link bandwidth was measured in this run ({first.link_source or MISSING})."
    )
    out: list[Block] = [
        Heading(2, "Sharded variants", "sharded"),
        Para(
            "Each sharded variant against the one-device variant of the same problem, timed in "
            "the same rounds: speedup is the median of per-round ratios (one device / sharded) "
            "with its 95% bootstrap interval, efficiency is speedup / devices. Communication "
            "is the union of a device's collective events per step, exposed the part no "
            "compute on another stream hides; both are means over devices. " + link
        ),
        scaling_table(variants),
    ]
    table = collectives_table(variants)
    if table is not None:
        out += [
            Para(
                "Collectives of the optimized HLO: bytes each device sends per call under the "
                "ring model, which pass inserted each, its measured time per step (mean over "
                "devices, rendezvous waits included) and the link model's time for its bytes."
            ),
            table,
        ]
    out += [
        Para(
            "Overlap of compute and communication, and waits: overlapped is collective time "
            "during which compute ran on the device's other streams (CPU: threads), hidden its "
            "share of the collective time. A device waits at a collective from its arrival "
            "until the last device of its group arrives; the straggler arrived last at the "
            "most calls, its lag is how long after the first device it arrived, per step."
        ),
        overlap_table(variants),
        *waiting_blocks(run),
        Para("Time per device and step, from the steady-state profile:"),
        devices_table(variants),
    ]
    unmatched = [
        f"`{v.name}` {fmt.pct(v.summary.comm.collective_matched_fraction)}"
        for v in variants
        if v.summary.comm.collective_matched_fraction not in (None, 1.0)
    ]
    if unmatched:
        out.append(Para("Collective events not all attributed: " + ", ".join(unmatched) + "."))
    return out
