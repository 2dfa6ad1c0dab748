"""The match of harness.match.match over the event table, for profiles of millions of events.

The rules are the same functions; what changes is how often they run. An event's attribution
by name depends only on its module, program, `hlo_op`, name and kind, so each distinct
signature is decided once and the decision spread to its rows. A reused kernel's n-th launch
in a step is a running count per (step, module, kernel). A command buffer's events are placed
one execution (a step, or a run) at a time, and executions whose events have the same names,
kinds and launch shapes are placed once. The report's per-step figures are array reductions.
The result is the same `MatchReport`, its attributions a view that makes each `Attribution`
only when read (`AttributionView`); tests/test_table_match.py checks it equals
`match_events` on every fixture profile.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from harness.hlo.thunks import CommandBuffer
from harness.match.command_buffers import place_stream
from harness.match.match import (
    Attribution,
    ClusterLike,
    MatchReport,
    Mode,
    ModuleKey,
    NextLaunch,
    TransferSummary,
    _attribute,
    _clusters_for,
    _placed,
    program_ids,
    reused_launch,
    reused_twins,
    step_count,
)
from harness.profile.table import (
    NULL,
    EventTable,
    Interned,
    groups_of,
    members_of,
    union_ns,
)
from harness.records.gaps import TOP_UNATTRIBUTED, AttributionGaps, UnattributedKernel

_FIELDS = ("rule", "reason", "module", "cluster", "primitive")


class _Codes(Interned):
    """A string column being built, a code per row (0 is None)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.codes = np.zeros(n, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class AttributedTable:
    """The steady window's rows and, per row, what the match decided."""

    table: EventTable
    matched: np.ndarray
    ambiguous: np.ndarray
    codes: Mapping[str, np.ndarray]  # rule, reason, module, cluster, primitive
    strings: Mapping[str, tuple[Any, ...]]

    def attribution(self, i: int) -> Attribution:
        def get(field: str) -> Any:
            return self.strings[field][self.codes[field][i]]

        return Attribution(
            self.table.event(i),
            bool(self.matched[i]),
            get("rule"),
            get("reason"),
            get("module"),
            get("cluster"),
            get("primitive"),
            bool(self.ambiguous[i]),
        )

    def rows(self, rows: np.ndarray) -> AttributedTable:
        """The given rows of the table and of what was decided for them."""
        return AttributedTable(
            self.table.take(rows),
            self.matched[rows],
            self.ambiguous[rows],
            {f: c[rows] for f, c in self.codes.items()},
            self.strings,
        )

    def arrow_columns(self) -> dict[str, Any]:
        """The attribution as extra columns of events.parquet (EventTable.to_arrow)."""
        out: dict[str, Any] = {f: (self.codes[f], self.strings[f]) for f in _FIELDS}
        out["matched"] = self.matched
        out["ambiguous"] = self.ambiguous
        return out


# Rows of events.parquet converted at a time: the Arrow form of a slice, not of a profile of
# millions of events, is what its writer holds.
EVENTS_SLICE = 262_144


def arrow_slices(report: MatchReport) -> Iterator[Any]:
    """A table match's events and attributions as Arrow tables of EVENTS_SLICE rows, in order:
    what harness.records.events_file.write writes as events.parquet."""
    attributed = report.attributions.attributed  # type: ignore[attr-defined]
    for lo in range(0, max(1, len(attributed.table)), EVENTS_SLICE):
        rows = np.arange(lo, min(lo + EVENTS_SLICE, len(attributed.table)))
        part = attributed.rows(rows)
        yield part.table.to_arrow(part.arrow_columns())


class AttributionView(Sequence[Attribution]):
    """The attributions of an AttributedTable, each made when read."""

    def __init__(self, attributed: AttributedTable, rows: np.ndarray | None = None) -> None:
        self.attributed = attributed
        self.rows = np.arange(len(attributed.matched)) if rows is None else rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> Attribution: ...
    @overload
    def __getitem__(self, i: slice) -> AttributionView: ...
    def __getitem__(self, i: int | slice) -> Attribution | AttributionView:
        if isinstance(i, slice):
            return AttributionView(self.attributed, self.rows[i])
        return self.attributed.attribution(int(self.rows[i]))

    def __iter__(self) -> Iterator[Attribution]:
        for i in self.rows:
            yield self.attributed.attribution(int(i))

    def unmatched(self) -> AttributionView:
        return AttributionView(self.attributed, self.rows[~self.attributed.matched[self.rows]])

    def rule_counts(self) -> dict[str, int]:
        codes = self.attributed.codes["rule"][self.rows]
        values = self.attributed.strings["rule"]
        found = np.bincount(codes, minlength=len(values))
        return {values[c]: int(n) for c, n in enumerate(found) if n}


def match_table(
    table: EventTable,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    steps: int | None = None,
    mode: Mode = "jit",
    command_buffers: Mapping[ModuleKey, Sequence[CommandBuffer]] | None = None,
    left_out: int = 0,
) -> MatchReport:
    """`harness.match.match.match_events` over an EventTable (see the module docstring).
    `left_out`: rows the caller already left out of the window (no step), which the report
    counts as outside it, so a caller that took the window itself holds no second copy."""
    if mode not in ("jit", "eager"):
        raise ValueError(f"mode must be 'jit' or 'eager', got {mode!r}")
    has_step = table.ints["step"] != NULL
    marked = bool(has_step.any())
    window = table.subset(has_step) if marked else table
    counted = int(np.unique(window.ints["step"]).size) if marked else 0
    n_steps, notes = step_count(counted, len(window), marked, steps)
    programs = program_ids(clusters_by_module)
    out = _by_signature(window, clusters_by_module, mode, programs)
    _spread_reused(window, out, clusters_by_module, n_steps)
    if command_buffers:
        _place(window, out, clusters_by_module, command_buffers, programs)
    attributed = AttributedTable(
        window,
        out.matched,
        out.ambiguous,
        {f: c.codes for f, c in out.fields.items()},
        {f: tuple(c.values) for f, c in out.fields.items()},
    )
    outside = len(table) - len(window) + left_out
    return report_of_table(attributed, n_steps, marked, outside, notes)


class _Out:
    """The attribution columns being filled."""

    def __init__(self, n: int) -> None:
        self.matched = np.zeros(n, dtype=bool)
        self.ambiguous = np.zeros(n, dtype=bool)
        self.fields = {f: _Codes(n) for f in _FIELDS}

    def set(self, rows: np.ndarray | int, a: Attribution) -> None:
        self.matched[rows] = a.matched
        self.ambiguous[rows] = a.ambiguous
        for f in _FIELDS:
            column = self.fields[f]
            column.codes[rows] = column(getattr(a, f))

    def packed(self, found: Sequence[Attribution]) -> tuple[np.ndarray, ...]:
        """Attributions as arrays (matched, ambiguous, then each field's codes), to assign."""
        return (
            np.array([a.matched for a in found], dtype=bool),
            np.array([a.ambiguous for a in found], dtype=bool),
            *(
                np.array([self.fields[f](getattr(a, f)) for a in found], dtype=np.int32)
                for f in _FIELDS
            ),
        )

    def assign(self, rows: np.ndarray, group: np.ndarray, packed: tuple[np.ndarray, ...]) -> None:
        """Row rows[k] takes the packed attribution group[k]."""
        self.matched[rows] = packed[0][group]
        self.ambiguous[rows] = packed[1][group]
        for f, codes in zip(_FIELDS, packed[2:], strict=True):
            self.fields[f].codes[rows] = codes[group]

    def spread(self, rows: np.ndarray, group: np.ndarray, found: Sequence[Attribution]) -> None:
        """Row rows[k] takes found[group[k]]: one decision per group, assigned at once."""
        self.assign(rows, group, self.packed(found))

    def get(self, i: int, event: Any) -> Attribution:
        def value(field: str) -> Any:
            column = self.fields[field]
            return column.values[column.codes[i]]

        return Attribution(
            event,
            bool(self.matched[i]),
            value("rule"),
            value("reason"),
            value("module"),
            value("cluster"),
            value("primitive"),
            bool(self.ambiguous[i]),
        )


def _by_signature(
    window: EventTable,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    mode: Mode,
    programs: Mapping[str, set[int]],
) -> _Out:
    """Every row attributed by the name rules: once per signature for rows of a program, one
    by one for the few outside any (runtime copies, whose owner is the next launch)."""
    out = _Out(len(window))
    c = window.codes
    has_module = c["hlo_module"] != 0
    rows = np.flatnonzero(has_module)
    first, inverse = groups_of(
        c["hlo_module"][rows],
        window.ints["program_id"][rows],
        c["hlo_op"][rows],
        c["name"][rows],
        c["kind"][rows],
    )
    no_launch = NextLaunch(())
    found = [
        _attribute(window.event(int(rows[rep])), no_launch, clusters_by_module, mode, programs)
        for rep in first
    ]
    if len(rows):
        out.spread(rows, inverse, found)
    loose = np.flatnonzero(~has_module)
    if len(loose):
        next_launch = _TableNextLaunch(window, rows)
        for i in loose:
            a = _attribute(window.event(int(i)), next_launch, clusters_by_module, mode, programs)
            out.set(int(i), a)
    return out


class _TableNextLaunch:
    """NextLaunch over the table's rows of a program (in start order, as the window is)."""

    def __init__(self, window: EventTable, program_rows: np.ndarray) -> None:
        self.window = window
        self.rows = program_rows
        self.starts = window.floats["start_ns"][program_rows]

    def __call__(self, event: Any) -> Any:
        at = int(np.searchsorted(self.starts, event.end_ns, side="left"))
        return self.window.event(int(self.rows[at])) if at < len(self.rows) else None


def _running_index(*keys: np.ndarray) -> np.ndarray:
    """Each row's index among the earlier rows with the same keys (a running count)."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    _, group = groups_of(*keys)
    order = np.argsort(group, kind="stable")
    sorted_groups = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    index = np.empty(len(order), dtype=np.int64)
    index[order] = np.arange(len(order)) - np.repeat(starts, counts)
    return index


def _spread_reused(
    window: EventTable,
    out: _Out,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    n_steps: int,
) -> None:
    """harness.match.match._spread_reused_kernels over the table (the same twins and turns)."""
    rule = out.fields["rule"]
    code = rule.code.get("command_buffer_kernel")
    if code is None:
        return
    module = out.fields["module"].codes
    name = window.codes["name"]
    rows = np.flatnonzero((rule.codes == code) & (out.fields["cluster"].codes != 0))
    if not len(rows):
        return
    pairs, pair_of = groups_of(module, name)
    counts = np.bincount(pair_of, minlength=len(pairs))
    in_window = {(int(module[f]), int(name[f])): int(counts[g]) for g, f in enumerate(pairs)}
    names_seen = {window.strings["name"][n] for n in np.unique(name)}
    index = _running_index(window.ints["step"][rows], module[rows], name[rows])
    first, inverse = groups_of(
        module[rows], name[rows], out.fields["cluster"].codes[rows], window.ints["program_id"][rows]
    )
    for g, members in enumerate(members_of(inverse, len(first))):
        row = int(rows[first[g]])
        cluster = out.fields["cluster"].values[out.fields["cluster"].codes[row]]
        launches = max(1, round(in_window[(int(module[row]), int(name[row]))] / n_steps))
        twins = reused_twins(window.event(row), cluster, clusters_by_module, launches, names_seen)
        if len(twins) < 2:
            continue
        moved = members[index[members] % len(twins) != 0]
        if not len(moved):
            continue
        # One attribution per launch number (its reason names it), spread to its rows at once.
        turns, which = np.unique(index[moved], return_inverse=True)
        before = out.get(row, window.event(row))
        found = [reused_launch(before, twins[int(t) % len(twins)], int(t)) for t in turns]
        out.spread(rows[moved], which.reshape(-1), found)


def _place(
    window: EventTable,
    out: _Out,
    clusters_by_module: Mapping[ModuleKey, Sequence[ClusterLike]],
    command_buffers: Mapping[ModuleKey, Sequence[CommandBuffer]],
    programs: Mapping[str, set[int]],
) -> None:
    """Places every event of a known command buffer on its command, one execution at a time;
    executions alike (names, kinds, launch shapes) are placed once."""
    c = window.codes
    rows = np.flatnonzero(c["hlo_module"] != 0)
    first, inverse = groups_of(
        c["hlo_module"][rows], window.ints["program_id"][rows], c["hlo_op"][rows]
    )
    buffers: list[CommandBuffer] = []
    index_of_group = np.full(len(first), -1, dtype=np.int64)
    for g, rep in enumerate(first):
        e = window.event(int(rows[rep]))
        found = _clusters_for(e, command_buffers, programs)  # type: ignore[arg-type]
        hit = next((b for b in found or () if b.name == e.hlo_op), None)
        if isinstance(hit, CommandBuffer):
            index_of_group[g] = len(buffers)
            buffers.append(hit)
    buffer_of = np.full(len(window), -1, dtype=np.int64)
    if len(rows):
        buffer_of[rows] = index_of_group[inverse]
    placed = np.flatnonzero(buffer_of >= 0)
    if not len(placed):
        return
    ints = window.ints
    runs = ints["run_id"][placed]
    steps = ints["step"][placed]
    execution = steps if (steps != NULL).all() else (runs if (runs != NULL).all() else steps)
    _, chunk = groups_of(
        buffer_of[placed],
        c["device"][placed],
        c["stream"][placed],
        ints["program_id"][placed],
        execution,
    )
    order = np.lexsort((placed, window.floats["start_ns"][placed], chunk))
    ordered, chunks = placed[order], chunk[order]
    bounds = np.flatnonzero(np.r_[True, chunks[1:] != chunks[:-1], True])
    shape = np.stack([c["name"], c["kind"], c["grid"], c["block"]], axis=1)
    # An execution's placements depend on its events' names, kinds and shapes (and the
    # buffer, whose module and program fix the clusters): alike executions share them.
    cache: dict[tuple[int, bytes], tuple[np.ndarray, tuple[np.ndarray, ...]]] = {}
    for lo, hi in itertools.pairwise(bounds):
        members = ordered[lo:hi]
        buffer_index = int(buffer_of[members[0]])
        key = (buffer_index, shape[members].tobytes())
        found = cache.get(key)
        if found is None:
            events = [(pos, window.event(int(i))) for pos, i in enumerate(members)]
            placements = place_stream(buffers[buffer_index], events)
            positions = np.array(sorted(placements), dtype=np.int64)
            decided = []
            for pos in positions.tolist():
                i, e = int(members[pos]), events[pos][1]
                clusters = _clusters_for(e, clusters_by_module, programs) or ()
                primitive = out.fields["primitive"].values[out.fields["primitive"].codes[i]]
                decided.append(_placed(e, placements[pos], {cl.name for cl in clusters}, primitive))
            found = cache[key] = (positions, out.packed(decided))
        positions, packed = found
        if len(positions):
            out.assign(members[positions], np.arange(len(positions)), packed)


def report_of_table(
    attributed: AttributedTable,
    n_steps: int,
    marked: bool,
    outside_window: int,
    notes: tuple[str, ...],
) -> MatchReport:
    """`harness.match.match.report_of` over an AttributedTable."""
    w = attributed.table
    n = len(w)
    if not n:
        notes = (*notes, "no device events in the steady window")
    starts, ends = w.floats["start_ns"], w.end_ns
    if marked:
        by_step = []
        step = w.ints["step"]
        for s in np.unique(step):
            rows = step == s
            by_step.append(union_ns(starts[rows], ends[rows]) * 1e-9)
        busy = tuple(by_step)
    else:
        busy = (union_ns(starts, ends) * 1e-9,)
    view = AttributionView(attributed)
    return MatchReport(
        steps=n_steps,
        marked_steps=marked,
        events_in_window=n,
        matched_fraction=float(attributed.matched.sum()) / n if n else 0.0,
        attributions=view,  # type: ignore[arg-type]
        kernels_per_step=float(w.is_kind("kernel", "host_thunk").sum()) / n_steps,
        memsets_per_step=float(w.is_kind("memset").sum()) / n_steps,
        device_ops_per_step=n / n_steps,
        launches_per_cluster=_launches_per_cluster(attributed, n_steps),
        transfers_per_step=_transfers(w, n_steps),
        device_time_per_step_s=sum(busy) / n_steps,
        device_time_by_step_s=busy if marked else (),
        outside_window=outside_window,
        notes=notes,
        gaps=_gaps(attributed, n_steps),
    )


def _launches_per_cluster(attributed: AttributedTable, n_steps: int) -> dict[str, float]:
    rows = np.flatnonzero(attributed.matched)
    first, inverse = groups_of(
        attributed.codes["module"][rows],
        attributed.codes["cluster"][rows],
        attributed.codes["primitive"][rows],
    )
    counts: Counter[str] = Counter()
    found = np.bincount(inverse, minlength=len(first)) if len(rows) else []
    for g, rep in enumerate(first):
        i = int(rows[rep])
        s = attributed.strings
        module = s["module"][attributed.codes["module"][i]]
        cluster = s["cluster"][attributed.codes["cluster"][i]]
        primitive = s["primitive"][attributed.codes["primitive"][i]]
        counts[f"{module}:{cluster or primitive}"] += int(found[g])
    return {key: count / n_steps for key, count in sorted(counts.items())}


def _transfers(w: EventTable, n_steps: int) -> tuple[TransferSummary, ...]:
    rows = np.flatnonzero(w.is_kind("memcpy"))
    groups: dict[str, list[int]] = {}
    for i, code in zip(rows.tolist(), w.codes["direction"][rows].tolist(), strict=True):
        groups.setdefault(w.strings["direction"][code] or "unknown", []).append(i)
    out = []
    for direction, members in sorted(groups.items()):
        moved = w.ints["bytes"][members]
        known = moved[moved != NULL]
        out.append(
            TransferSummary(
                direction=direction,
                count_per_step=len(members) / n_steps,
                bytes_per_step=float(known.sum()) / n_steps,
                sizes=tuple(int(x) for x in np.unique(known)),
            )
        )
    return tuple(out)


def _gaps(attributed: AttributedTable, n_steps: int) -> AttributionGaps:
    """harness.match.gaps.gaps_of over the table."""
    w = attributed.table
    durations = w.floats["duration_ns"]
    total = len(w)
    total_ns = float(durations.sum())
    ambiguous = int((attributed.matched & attributed.ambiguous).sum())
    missing = np.flatnonzero(~attributed.matched)
    missing_ns = float(durations[missing].sum())
    steps = max(1, n_steps)
    first, inverse = groups_of(w.codes["name"][missing], w.codes["kind"][missing])
    rows = []
    if len(missing):
        sums = np.bincount(inverse, weights=durations[missing], minlength=len(first))
        counts = np.bincount(inverse, minlength=len(first))
        for g, rep in enumerate(first):
            i = int(missing[rep])
            name = w.strings["name"][w.codes["name"][i]]
            kind = w.strings["kind"][w.codes["kind"][i]]
            reason = attributed.strings["reason"][attributed.codes["reason"][i]]
            rows.append((float(sums[g]), (name, kind), int(counts[g]), reason))
    rows.sort(key=lambda r: (-r[0], r[1]))
    return AttributionGaps(
        ambiguous_fraction=ambiguous / total if total else 0.0,
        unattributed_time_per_step_s=missing_ns * 1e-9 / steps,
        unattributed_share=missing_ns / total_ns if total_ns else 0.0,
        unattributed=tuple(
            UnattributedKernel(name, kind, count / steps, ns * 1e-9 / steps, reason)
            for ns, (name, kind), count, reason in rows[:TOP_UNATTRIBUTED]
        ),
    )
