"""One module analysed: its clusters ranked by device time a step (by FLOPs without a
profile), with achieved rates against the device's ceilings, its kernels, the ops that run
unfused, and its roll-ups by source line and named scope (harness.program.sources).

Pure functions over parsed modules, clusters, costs, reverse maps and attributed events, shared
by a study's ranking.json (harness.analyze.ranking) and `python -m harness.analyze`
(harness.program).

Conventions (the reports state them too):
- A cluster's time is the summed *self* time of its events: an event's duration minus the
  events nested inside it on the same stream (a CPU `while` thunk contains its body's thunks),
  so no time is counted twice. Shares are of the summed self time of every event in the steady
  window (per step); overlapping events on different streams or threads each count in full, so
  the union "device busy time" can be smaller than the sum.
- Per step = over the steady window / the step count (`Steps`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.hlo.clusters import Cluster
from harness.hlo.cost import ClusterCost
from harness.match.match import Attribution
from harness.profile.events import DeviceEvent
from harness.program import roof as roofs
from harness.program import steps as by_step
from harness.program.event_facts import KernelGroup, ModuleFacts, facts_from_pairs
from harness.program.record import ModuleInput, ProgramKey
from harness.program.sources import cluster_lines, cluster_scopes, fold_repeats, roll_up
from harness.records.program import ClusterRow, KernelRow, ModuleAnalysis, Roofs, UnfusedRow

TOP_ROLLUP = 20
TOP_KERNELS = 15
TOP_UNFUSED = 20

_HELPERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"threefry|random|prng|_normal|_uniform|randint|bernoulli|_gamma|permutation"),
        "RNG set-up",
    ),
    (re.compile(r"convert_element_type"), "dtype conversion"),
    (re.compile(r"device_put|identity_fn|^jit_copy$|_multi_slice|_unstack|transfer"), "transfer"),
)
# Opcodes XLA's fusion passes never put into a fusion, with the reason.
_NEVER_FUSED = (
    (frozenset({"while", "conditional", "call"}), "control flow: XLA does not fuse it"),
    (
        frozenset(
            {
                "all-reduce",
                "all-reduce-start",
                "all-gather",
                "all-gather-start",
                "reduce-scatter",
                "all-to-all",
                "collective-permute",
                "collective-permute-start",
                "collective-broadcast",
            }
        ),
        "collective: runs as its own communication operation",
    ),
    (
        frozenset({"infeed", "outfeed", "send", "recv", "send-done", "recv-done"}),
        "host or peer transfer: never fused",
    ),
    (frozenset({"custom-call"}), "custom-call: opaque to XLA's fusion passes"),
)
NO_REASON = "no reason recorded"


# jax primitives (and jnp functions) that run as a module of their own when called eagerly.
_PRIMITIVE_NAMES = """
    abs acos acosh add and argmax argmin asin asinh atan atan2 atanh bitcast_convert_type
    broadcast_in_dim cbrt ceil clamp concatenate conj copy cos cosh cumlogsumexp cummax
    cummin cumprod cumsum div dot_general dynamic_slice dynamic_update_slice eq erf erf_inv
    erfc exp exp2 expm1 floor full gather ge gt imag integer_pow iota is_finite le log log1p
    logistic lt max maximum mean min minimum mul multiply ne neg negative nextafter not or
    pad pow real reduce_and reduce_max reduce_min reduce_or reduce_prod reduce_sum rem
    reshape rev round rsqrt scatter scatter_add select_n shift_left shift_right_arithmetic
    shift_right_logical sign sin sinh slice sort sqrt square squeeze stage sub subtract sum
    tan tanh transpose true_divide where xor zeros_like ones_like
"""
_PRIMITIVES = frozenset(_PRIMITIVE_NAMES.split())


def helper_kind(name: str, cluster_count: int, main_names: Iterable[str] = ()) -> str:
    """What a module that is not the main program probably is, from its name: a recompile of
    the main program, RNG set-up, dtype conversion, transfer, a single eager primitive, or
    another program."""
    if name in set(main_names):
        return "recompile of the main program (same name, another program id)"
    for pattern, kind in _HELPERS:
        if pattern.search(name):
            return kind
    bare = re.sub(r"^(jit|pjit)_+", "", name)
    if bare in _PRIMITIVES and cluster_count <= 3:
        return "single primitive (eager op)"
    return "other program"


def self_times(events: Sequence[DeviceEvent]) -> list[float]:
    """Each event's duration minus the time of the events nested inside it on the same
    device and stream (ns), in the input order; events that only overlap are not nested."""
    out = [e.duration_ns for e in events]
    by_stream: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        by_stream[(e.device, e.stream)].append(i)
    for indices in by_stream.values():
        indices.sort(key=lambda i: (events[i].start_ns, -events[i].duration_ns))
        stack: list[int] = []
        for i in indices:
            e = events[i]
            while stack and events[stack[-1]].end_ns <= e.start_ns:
                stack.pop()
            if stack and e.end_ns <= events[stack[-1]].end_ns:
                out[stack[-1]] -= e.duration_ns
            stack.append(i)
    return [max(0.0, t) for t in out]


def program_of(event: DeviceEvent) -> ProgramKey | None:
    """The (module, program id) an event ran in, or None for runtime work outside programs."""
    return None if event.hlo_module is None else (event.hlo_module, event.program_id)


_CONV_DTYPES = {"bf16": "bf16", "f16": "f16", "f32": "f32"}


def _precision(cluster: Cluster, ceilings: Roofs | None) -> str:
    """The precision whose peak a cluster's `of roof` is held to: its GEMM's operands, or a
    convolution's output dtype (a float32 convolution against the f32 peak, never the bf16
    one); "" for other clusters (the largest peak measured)."""
    gemm = cluster.gemm
    if gemm is None:
        convolves = (
            cluster.kind == "convolution"
            or any(op == "convolution" for op, _ in cluster.member_opcodes)
            or "conv" in cluster.target.lower()  # cuDNN's convolution custom-calls
        )
        head = cluster.output_shape.lstrip("(").split("[", 1)[0]  # a tuple's first element
        dtype = _CONV_DTYPES.get(head) if convolves else None
        if dtype is None:
            return ""
        dtypes = {dtype}
    else:
        dtypes = {gemm.lhs_dtype, gemm.rhs_dtype}
    if dtypes == {"bf16"}:
        return "bf16"
    if dtypes == {"f16"}:
        return "f16"
    tf32 = ceilings is not None and "tf32" in ceilings.peaks
    return "tf32" if tf32 else "f32"


def unfused_rows(m: ModuleInput, rows: Mapping[str, ClusterRow], by_time: bool) -> list[UnfusedRow]:
    """Lone-instruction clusters (not a fusion, not a library call), with the pre-optimization
    ops the reverse map placed in them and the reason XLA leaves such an op alone, if any."""
    held: dict[str, list[str]] = defaultdict(list)
    if m.reverse is not None:
        for op, clusters in m.reverse.mapping.items():
            for c in clusters:
                held[c].append(op)
    out = []
    for c in m.clusters:
        if c.is_fusion or c.is_library:
            continue
        reason = next((why for ops, why in _NEVER_FUSED if c.kind in ops), NO_REASON)
        ops = tuple(held.get(c.name, ()))
        if m.reverse is None:
            placed = "no reverse map (no before-optimizations module)"
        else:
            placed = ", ".join(sorted({m.reverse.placed_by.get(op) or "unplaced" for op in ops}))
            placed = placed or "no op placed here"
        row = rows[c.name]
        out.append(
            UnfusedRow(
                cluster=c.name,
                opcode=c.kind,
                ops=ops,
                placed_by=placed,
                lines=row.lines,
                value=(row.time_s or 0.0) if by_time else row.flops,
                share=row.share,
                reason=reason,
                clusters=(c.name,),
            )
        )
    groups: dict[tuple[str, tuple[str, ...], str], list[UnfusedRow]] = defaultdict(list)
    for u in out:
        groups[(u.opcode, u.lines, u.reason)].append(u)
    merged = []
    for members_ in groups.values():
        first = max(members_, key=lambda u: (u.value, u.cluster))
        placed = sorted({part for u in members_ for part in u.placed_by.split(", ")})
        merged.append(
            replace(
                first,
                placed_by=", ".join(placed),
                value=sum(u.value for u in members_),
                share=sum(u.share for u in members_),
                clusters=tuple(u.cluster for u in members_),
            )
        )
    merged.sort(key=lambda r: (-r.value, r.cluster))
    return merged


def _kernels(groups: Sequence[KernelGroup], steps: int, total_ns: float) -> tuple[KernelRow, ...]:
    rows = [
        KernelRow(
            name=g.name,
            cluster=g.cluster,
            launches=g.count / steps,
            time_s=g.ns * 1e-9 / steps,
            share=g.ns / total_ns if total_ns else 0.0,
            grid=g.grid,
            block=g.block,
            registers=g.registers,
            occupancy_pct=g.occupancy_pct,
        )
        for g in groups
    ]
    rows.sort(key=lambda r: (-r.time_s, r.name))
    return tuple(rows[:TOP_KERNELS])


@dataclass(frozen=True)
class Shown:
    """How a module's clusters are measured: over `steps` (or the median step's `medians`),
    as shares of `total`, by time when the program has a profile (`by_time`), else by FLOPs."""

    steps: int
    total: float
    ceilings: Roofs | None
    medians: by_step.StepMedians | None
    by_time: bool


def _cluster_row(
    c: Cluster,
    cost: ClusterCost | None,
    ns: float,
    launches: tuple[int, int],
    shown: Shown,
    lines: tuple[str, ...],
    scopes: tuple[str, ...],
) -> ClusterRow:
    """One cluster's row: its cost, its time a step (`ns` over the steps, or the median
    step's), its launches and its place under the roofline."""
    flops, moved = (cost.flops, cost.bytes) if cost is not None else (0.0, 0.0)
    steps = shown.steps
    mean_ns = ns / steps if shown.medians is None else shown.medians.clusters.get(c.name, 0.0)
    time_s = mean_ns * 1e-9 if shown.by_time else None
    launched, distinct = launches
    runs = (launched / distinct / steps) if launched else None
    fps, bps = roofs.rates(flops, moved, runs, time_s)
    precision = _precision(c, shown.ceilings)
    fraction, roof = roofs.roof(fps, flops / moved if moved else None, precision, shown.ceilings)
    value = (time_s or 0.0) if shown.by_time else flops
    return ClusterRow(
        name=c.name,
        kind=c.kind,
        target=c.target,
        flops=flops,
        bytes=moved,
        time_s=time_s,
        share=value / shown.total if shown.total else 0.0,
        launches=launched / steps if shown.by_time else None,
        runs=runs,
        flops_per_s=fps,
        bytes_per_s=bps,
        roof_fraction=fraction,
        roof=roof,
        above_ceiling=roofs.above_ceiling(fraction, shown.ceilings),
        precision=precision,
        lines=lines,
        scopes=scopes,
    )


def cluster_rows(
    m: ModuleInput,
    facts: ModuleFacts | None,
    shown: Shown,
    lines: Mapping[str, tuple[str, ...]],
    scopes: Mapping[str, tuple[str, ...]],
) -> list[ClusterRow]:
    """Every cluster's row, the longest first (by time), else the most FLOPs first."""
    costs = {c.name: c for c in m.cost.clusters}
    ns = facts.cluster_ns if facts is not None else {}
    launches_of = facts.cluster_launches if facts is not None else {}
    rows = [
        _cluster_row(
            c,
            costs.get(c.name),
            ns.get(c.name, 0.0),
            launches_of.get(c.name, (0, 0)),
            shown,
            lines.get(c.name, ()),
            scopes.get(c.name, ()),
        )
        for c in m.clusters
    ]
    if shown.by_time:
        rows.sort(key=lambda r: (-(r.time_s or 0.0), -r.flops, r.name))
    else:
        rows.sort(key=lambda r: (-r.flops, -r.bytes, r.name))
    return rows


def _event_counts(facts: ModuleFacts | None, steps: int) -> dict[str, Any]:
    """ModuleAnalysis's counts of the profile's events (none without a profile)."""
    if facts is None:
        return {}
    return {
        "events": facts.events,
        "kernels_per_step": facts.kernels / steps,
        "executions": facts.executions,
    }


def _rankings(
    m: ModuleInput,
    rows: list[ClusterRow],
    lines: Mapping[str, tuple[str, ...]],
    scopes: Mapping[str, tuple[str, ...]],
    facts: ModuleFacts | None,
    shown: Shown,
) -> dict[str, Any]:
    """ModuleAnalysis's rankings, a main module's detail: its rows and their roll-ups by
    source line, scope and folded layer, its kernels, its unfused clusters, its outliers."""
    folded = fold_repeats(scopes)
    unfused = unfused_rows(m, {r.name: r for r in rows}, shown.by_time)
    total, by_time = shown.total, shown.by_time
    own_ns = facts.own_ns if facts is not None else 0.0
    return {
        "clusters": tuple(rows),
        "by_line": roll_up(rows, lines, total, by_time)[:TOP_ROLLUP],
        "by_scope": roll_up(rows, scopes, total, by_time)[:TOP_ROLLUP],
        "by_layer": roll_up(rows, folded, total, by_time)[:TOP_ROLLUP] if folded != scopes else (),
        "kernels": _kernels(facts.kernel_groups, shown.steps, own_ns) if facts else (),
        "unfused": tuple(unfused[:TOP_UNFUSED]),
        "unfused_total": sum(len(u.clusters) for u in unfused),
        "outliers": shown.medians.outliers if shown.medians is not None else (),
    }


def analyse_module(
    m: ModuleInput,
    role: str,
    attributions: Sequence[tuple[Attribution, float]] | None,
    steps: int,
    total: float,
    ceilings: Roofs | None,
    detail: bool = True,
    kind: str = "",
    medians: by_step.StepMedians | None = None,
    facts: ModuleFacts | None = None,
) -> ModuleAnalysis:
    """One module's analysis. `attributions`: this program's window events with their self
    times (None without a profile); `total`: the share denominator (window self time per step
    in seconds, or FLOPs without a profile). `detail=False` leaves out rankings (helpers).
    `medians`: times of the median step (analyze.steps) instead of the mean over steps.
    `facts`: the same events already summed (harness.program.event_facts), in place of
    `attributions` for a profile too long to hold an object per event."""
    by_time = attributions is not None or facts is not None
    if facts is None and attributions is not None:
        facts = facts_from_pairs(
            [(a, t) for a, t in attributions if program_of(a.event) == m.program], m.name
        )
    lines = cluster_lines(m.hlo, m.clusters) if detail else {}
    scopes = cluster_scopes(m.clusters) if detail else {}
    shown = Shown(steps, total, ceilings, medians, by_time)
    rows = cluster_rows(m, facts, shown, lines, scopes)
    calls = Counter((c.target, c.epilogue) for c in m.clusters if c.is_library)
    own_ns = facts.own_ns if facts is not None else 0.0
    own_step_ns = own_ns / steps if medians is None else medians.module_ns
    module_value = own_step_ns * 1e-9 if by_time else m.cost.flops
    return ModuleAnalysis(
        key=m.key,
        name=m.name,
        program_id=m.program_id,
        role=role,
        kind=kind or ("main program" if role == "main" else helper_kind(m.name, len(m.clusters))),
        cluster_count=len(m.clusters),
        fusion_count=sum(1 for c in m.clusters if c.is_fusion),
        library_calls=tuple((t, e, n) for (t, e), n in sorted(calls.items())),
        flops=m.cost.flops,
        bytes=m.cost.bytes,
        time_s=module_value if by_time else None,
        share=module_value / total if total else None,
        **_event_counts(facts, steps),
        **(_rankings(m, rows, lines, scopes, facts, shown) if detail else {}),
        reverse_method=m.reverse.method if m.reverse is not None else "",
        reverse_notes=m.reverse.notes if m.reverse is not None else (),
        uncosted_calls=roofs.uncosted_calls(m.cost.clusters, {r.name: r.time_s for r in rows}),
    )
