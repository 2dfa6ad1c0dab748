"""A timing difference taken apart, grouped the way an engineer explains one: by kind of work
(library GEMMs, loop fusions, copies and dynamic slices, collectives, control flow, ...), by
source line, the launch gaps and the host gap; led by the largest group, tied to its mechanism
(bytes moved and the bandwidth they ran at, FLOPs and their rate, launches) from the run's own
measurements (issue 60).

The windows. A timing finding's ratio is of the timed steps (the rounds' medians); the parts
come from the profiled steps, which the profiler lengthens: its host tracing runs on the
thread that launches the work, so it lands in the host gap (torch_print's profiled step on the
H200 reference was 1.15 ms longer than its timed one, torch_compile's 0.01 ms shorter). So:
- the device parts (each kind of work, the device time outside the clusters) are the profiled
  steps' device time, which the host's tracing does not slow;
- the launch gaps are the profiled steps' idle time between their first and last event;
- the host gap is the timed step less those two: the part of the timed step with the device
  idle, which the profiled window cannot measure undisturbed.
The parts and the residual sum to the timed difference. The residual is what is left where a
variant's profiled device time and launch gaps exceed its timed step (the device itself ran
slower under the profiler, or steps overlapped); a finding whose residual is over a quarter
of its difference says so, with those numbers. Each side's profiler overhead (profiled step
less timed step) is recorded beside, and said where it differs by more than a quarter of the
difference: that is how much the profiled window alone would have misread the host gap.

Where either side has no profile (failed, or skipped), the difference is measured but not
explained, and the decomposition is null with its note: a figure never measured is never a
zero to compare with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from harness.common import fmt
from harness.hlo import work
from harness.records.findings import Decomposition, TimePart
from harness.saved.run import ClusterTime, SavedVariant

# A mechanism (kernels, bytes, transfers) is given as a reason only where the part of the
# timeline it acts on carries at least this share of the measured difference; the same share
# of residual is where a finding says its profile explains it poorly.
CARRIES = 0.25
SHOWN_PARTS = 4  # parts named in the "why" after the lead
SHOWN_LINES = 3  # source lines named in the "why"
NO_LINE = "(no source line)"
# Parts that say where time went without saying what did it: they may end a list, never lead.
UNNAMED = ("other", "outside_clusters")


def _missing(v: SavedVariant) -> str | None:
    p = v.summary.profile
    if p.profiled_step_time_s is None or p.device_time_per_step_s is None:
        errors = [e for e in v.summary.analysis_errors if "profile" in e.lower()]
        why = errors[0].splitlines()[0][:160] if errors else "no profiled step"
        return f"`{v.name}` has no profiled step ({why})"
    return None


@dataclass
class _Sum:
    """One group's figures a step on one side, summed over its clusters."""

    time_s: float = 0.0
    launches: float | None = 0.0
    bytes: float | None = 0.0
    flops: float | None = 0.0
    lines: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, c: ClusterTime) -> None:
        self.time_s += c.time_s
        self.launches = (
            None if self.launches is None or c.launches is None else self.launches + c.launches
        )
        self.bytes = None if self.bytes is None or c.bytes is None else self.bytes + c.bytes
        self.flops = None if self.flops is None or c.flops is None else self.flops + c.flops
        held = _lines(c)
        for line in held:
            self.lines[line] += c.time_s / len(held)


def _lines(c: ClusterTime) -> tuple[str, ...]:
    """The cluster's source lines, each given an equal part of it (NO_LINE where none)."""
    return c.lines or ((c.line,) if c.line else (NO_LINE,))


def _sums(times: Iterable[ClusterTime], key: str) -> dict[str, _Sum]:
    """Each group's sums: by kind of work (`key` "work") or by source line ("line")."""
    out: dict[str, _Sum] = defaultdict(_Sum)
    for c in times:
        if key == "work":
            out[c.work].add(c)
            continue
        lines = _lines(c)
        for line in lines:
            share = ClusterTime(
                c.name,
                c.time_s / len(lines),
                None if c.launches is None else c.launches / len(lines),
                line,
                lines=(line,),
                work=c.work,
                bytes=None if c.bytes is None else c.bytes / len(lines),
                flops=None if c.flops is None else c.flops / len(lines),
            )
            out[line].add(share)
    return out


def _short(line: str) -> str:
    return line.rsplit("/", 1)[-1]


def _group_part(kind: str, what: str, a: _Sum | None, b: _Sum | None) -> TimePart:
    """One group on both sides. A side without the group ran none of it (its profile was
    ranked), so its launches, bytes and FLOPs are zeros that were measured, not unknowns."""
    ta, tb = (a.time_s if a else 0.0), (b.time_s if b else 0.0)
    a, b = a or _Sum(), b or _Sum()
    lines: dict[str, float] = defaultdict(float)
    for line, t in a.lines.items():
        lines[line] += t
    for line, t in b.lines.items():
        lines[line] -= t
    ranked = sorted(lines, key=lambda x: (x == NO_LINE, -abs(lines[x])))
    return TimePart(
        kind=kind,
        what=what,
        delta_s=ta - tb,
        variant_s=ta,
        against_s=tb,
        launches=a.launches,
        against_launches=b.launches,
        lines=tuple(ranked),
        bytes=a.bytes,
        against_bytes=b.bytes,
        flops=a.flops,
        against_flops=b.flops,
    )


def work_parts(v: SavedVariant, ref: SavedVariant) -> list[TimePart]:
    """The clusters' device time a step grouped by kind of work, the variant's less the
    reference's. Clusters pair by nothing: a kind's clusters are summed on each side, so
    instruction names that change between compiles never matter."""
    mine, theirs = _sums(v.times, "work"), _sums(ref.times, "work")
    return [
        _group_part(k, work.words(k), mine.get(k), theirs.get(k))
        for k in sorted(set(mine) | set(theirs), key=work.order)
    ]


def line_parts(v: SavedVariant, ref: SavedVariant) -> tuple[TimePart, ...]:
    """The clusters' device time a step by source line (a cluster over several lines gives
    each an equal part), largest |difference| first; clusters with no line last."""
    mine, theirs = _sums(v.times, "line"), _sums(ref.times, "line")
    parts = [
        replace(_group_part("line", _short(line), mine.get(line), theirs.get(line)), lines=(line,))
        for line in sorted(set(mine) | set(theirs))
    ]
    # Equal differences are common (a line in neither side's steps): ordered by the line, not by
    # the set's hash order, so the report is the same from one process to the next.
    return tuple(sorted(parts, key=lambda p: (p.lines == (NO_LINE,), -abs(p.delta_s))))


def _windows(v: SavedVariant) -> tuple[float, float, float, float]:
    """One side's (timed step, profiled device busy, launch gaps, host gap of the timed
    step), seconds a step; the host gap may be negative (the residual takes it)."""
    timed = v.summary.timing.step_s or 0.0
    busy = v.summary.profile.device_time_per_step_s or 0.0
    gaps = max(0.0, v.span_s - busy) if v.span_s is not None else 0.0
    return timed, busy, gaps, timed - busy - gaps


def _overhead(v: SavedVariant) -> float | None:
    p, t = v.summary.profile.profiled_step_time_s, v.summary.timing.step_s
    return None if p is None or t is None else p - t


def _lead_index(parts: list[TimePart], measured: float) -> int:
    """The part that leads: the largest named part in the difference's direction (a kind of
    work, the launch gaps, the host gap), else the largest named part, else the first."""
    named = [i for i, p in enumerate(parts) if p.kind not in UNNAMED]
    along = [i for i in named if parts[i].delta_s * measured > 0]
    for pool in (along, named):
        if pool:
            return max(pool, key=lambda i: abs(parts[i].delta_s))
    return 0


def decompose(v: SavedVariant, ref: SavedVariant) -> Decomposition | None:
    """Returns the difference of `v` from `ref` per step taken apart (None where either has
    no timed step)."""
    sv, sr = v.summary.timing.step_s, ref.summary.timing.step_s
    if sv is None or sr is None:
        return None
    measured = sv - sr
    missing = _missing(v) or _missing(ref)
    if missing is not None:
        return Decomposition(measured, (), measured, None, f"measured but not explained: {missing}")
    _, busy_v, gaps_v, host_v = _windows(v)
    _, busy_r, gaps_r, host_r = _windows(ref)
    parts: list[TimePart] = []
    by_line: tuple[TimePart, ...] = ()
    if v.times and ref.times:
        parts = work_parts(v, ref)
        by_line = line_parts(v, ref)
        in_v, in_r = sum(c.time_s for c in v.times), sum(c.time_s for c in ref.times)
        parts.append(
            TimePart(
                "outside_clusters",
                "device time outside the clusters (unattributed, less overlap)",
                (busy_v - in_v) - (busy_r - in_r),
                busy_v - in_v,
                busy_r - in_r,
                None,
                None,
            )
        )
    else:
        pv, pr = v.summary.profile, ref.summary.profile
        parts.append(
            TimePart(
                "device",
                "device busy time",
                busy_v - busy_r,
                busy_v,
                busy_r,
                pv.kernels_per_step,
                pr.kernels_per_step,
            )
        )
    if v.span_s is not None and ref.span_s is not None:
        parts.append(
            TimePart("launch_gaps", "launch gaps", gaps_v - gaps_r, gaps_v, gaps_r, None, None)
        )
    hv, hr = max(0.0, host_v), max(0.0, host_r)
    parts.append(TimePart("host_gap", "the host gap", hv - hr, hv, hr, None, None))
    parts.sort(key=lambda p: (-abs(p.delta_s), work.order(p.kind)))
    lead = parts.pop(_lead_index(parts, measured))
    parts.insert(0, lead)
    explained = sum(p.delta_s for p in parts)
    residual = measured - explained
    share = explained / measured if measured else None
    ov_v, ov_r = _overhead(v), _overhead(ref)
    windows = _windows_sentence(v, ref, ov_v, ov_r, host_v - host_r, measured)
    note = _residual_note(v, ref, host_v, host_r, residual, measured)
    return Decomposition(
        measured,
        tuple(parts),
        residual,
        share,
        note,
        lead=mechanism(lead, measured),
        by_line=by_line,
        overhead_s=ov_v,
        against_overhead_s=ov_r,
        windows=windows,
    )


def _windows_sentence(
    v: SavedVariant,
    ref: SavedVariant,
    ov_v: float | None,
    ov_r: float | None,
    host_delta: float,
    measured: float,
) -> str:
    """How the decomposition's windows relate to the timed ones, with the profiler's measured
    cost to each side; where that cost differs by more than CARRIES of the difference, how
    much the profiled host gap alone would have misread."""
    if ov_v is None or ov_r is None:
        return ""
    said = (
        "device parts from the profiled steps; the host gap is the timed step less the profiled "
        f"device time and launch gaps, because profiling changed each step: `{v.name}` by "
        f"{_signed_ms(ov_v)} (profiled {fmt.ms(v.summary.profile.profiled_step_time_s)}, timed "
        f"{fmt.ms(v.summary.timing.step_s)}), `{ref.name}` by {_signed_ms(ov_r)}"
    )
    if measured and abs(ov_v - ov_r) > CARRIES * abs(measured):
        said += (
            f"; in the profiled window the host gap would differ by "
            f"{_signed_ms(host_delta + ov_v - ov_r)}, of which {_signed_ms(ov_v - ov_r)} is the "
            "profiler's own cost (its host tracing)"
        )
    return said


def _residual_note(
    v: SavedVariant,
    ref: SavedVariant,
    host_v: float,
    host_r: float,
    residual: float,
    measured: float,
) -> str:
    """Why the profile explains the ratio poorly, measured: a side whose profiled device time
    and launch gaps exceed its timed step (the residual), where that is over CARRIES."""
    if not measured or abs(residual) <= CARRIES * abs(measured):
        return ""
    over = [(x, -h) for x, h in ((v, host_v), (ref, host_r)) if h < 0]
    why = "; ".join(
        f"`{x.name}`'s profiled device time and launch gaps "
        f"({fmt.ms((x.summary.timing.step_s or 0.0) + excess)}) exceed its timed step "
        f"({fmt.ms(x.summary.timing.step_s)}) by {fmt.ms(excess)}: its device ran slower "
        "under the profiler, or its timed steps overlapped"
        for x, excess in over
    )
    return f"the profile explains this ratio poorly: {why or 'no side exceeds its timed step'}"


def _signed_ms(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + fmt.ms(abs(seconds))


def _rate(amount: float | None, seconds: float | None, unit: str) -> str:
    if not amount or not seconds:
        return ""
    return fmt.si(amount / seconds, unit)


def _lines_of(p: TimePart, limit: int = 2) -> str:
    named = [_short(x) for x in p.lines if x != NO_LINE][:limit]
    return f" ({', '.join(named)})" if named else ""


def mechanism(p: TimePart, measured: float) -> str:
    """The lead part in one sentence tied to what it measured: "+1.148 ms of the +1.067 ms a
    step is loop fusions (expression.py:42): 4.7 GB more traffic a step (5.37 GB against
    671 MB), at 3.3 TB/s; 14 launches more a step (15 against 1)"."""
    head = f"{_signed_ms(p.delta_s)} of the {_signed_ms(measured)} a step is {p.what}{_lines_of(p)}"
    said = _work_measures(p) if p.kind in work.KINDS else _idle_measures(p)
    return head + (": " + "; ".join(said) if said else "")


def _work_measures(p: TimePart) -> list[str]:
    """What a part of one kind of work measured: its traffic for memory work, its FLOPs for
    compute, else the same bytes at two rates; and its launches where they differ."""
    said: list[str] = []
    moved = p.bytes is not None and p.against_bytes is not None and p.bytes != p.against_bytes
    if moved and (p.kind in work.MEMORY_KINDS or p.kind not in work.COMPUTE_KINDS):
        said.append(_traffic(p))
    elif p.kind in work.COMPUTE_KINDS and p.flops and p.against_flops:
        said.append(_flops(p, p.flops, p.against_flops))
    elif p.bytes is not None and p.bytes == p.against_bytes and p.bytes:
        said.append(
            f"the same {fmt.si(p.bytes, 'B')} a step at {_rate(p.bytes, p.variant_s, 'B/s')} "
            f"against {_rate(p.bytes, p.against_s, 'B/s')}"
        )
    if (
        p.launches is not None
        and p.against_launches is not None
        and p.launches != p.against_launches
    ):
        said.append(fmt.versus(p.launches, p.against_launches, "launch", "a step"))
    return said


def _traffic(p: TimePart) -> str:
    """The traffic a step on each side, at the rate of the side that moved more of it: the
    traffic that differs ran at that rate."""
    big = (
        (p.bytes, p.variant_s)
        if (p.bytes or 0) >= (p.against_bytes or 0)
        else (p.against_bytes, p.against_s)
    )
    rate = _rate(big[0], big[1], "B/s")
    return fmt.bytes_versus(p.bytes, p.against_bytes, "traffic a step") + (
        f", at {rate}" if rate else ""
    )


def _flops(p: TimePart, flops: float, against: float) -> str:
    """The FLOPs a step on each side and the rate each ran them at."""
    rv, rr = _rate(flops, p.variant_s, "FLOP/s"), _rate(against, p.against_s, "FLOP/s")
    if flops == against:
        return f"the same {fmt.si(flops, 'FLOP')} a step at {rv} against {rr}"
    return f"{fmt.si(flops, 'FLOP')} a step against {fmt.si(against, 'FLOP')}, at {rv} against {rr}"


def _idle_measures(p: TimePart) -> list[str]:
    """What a part that is no kind of work measured: the device idle, or its kernels."""
    if p.kind == "host_gap":
        return [
            f"the device idle while the host works: {fmt.ms(p.variant_s)} a step against "
            f"{fmt.ms(p.against_s)}"
        ]
    if p.kind == "launch_gaps":
        return [
            f"the device idle between its launches: {fmt.ms(p.variant_s)} a step against "
            f"{fmt.ms(p.against_s)}"
        ]
    if p.kind == "device" and p.launches is not None and p.against_launches is not None:
        return [fmt.versus(p.launches, p.against_launches, "kernel", "a step")]
    return []


def sentence(d: Decomposition) -> str:
    """The decomposition as the finding's lead: its largest group tied to its mechanism, the
    next parts, the source lines that moved, and the residual: "+1.148 ms of the +1.067 ms a
    step is loop fusions (expression.py:42): 4.7 GB more traffic …; then the host gap
    +0.020 ms, …; by source line: expression.py:42 +1.05 ms, …; residual −0.197 ms (18%) …"."""
    if not d.parts:
        return d.note
    lead = d.lead or mechanism(d.parts[0], d.measured_s)
    floor = 0.05 * abs(d.measured_s)
    rest = [p for p in d.parts[1:] if abs(p.delta_s) >= floor and p.delta_s][:SHOWN_PARTS]
    hidden = len(d.parts) - 1 - len(rest)
    items = ", ".join(f"{p.what} {_signed_ms(p.delta_s)}" for p in rest)
    more = f" (and {hidden} smaller part{'' if hidden == 1 else 's'})" if hidden and rest else ""
    then = f"; then {items}{more}" if items else ""
    lines = [p for p in d.by_line if abs(p.delta_s) >= floor][:SHOWN_LINES]
    by_line = (
        "; by source line: " + ", ".join(f"{p.what} {_signed_ms(p.delta_s)}" for p in lines)
        if len(d.by_line) > 1 and lines
        else ""
    )
    share = f" ({abs(d.residual_s / d.measured_s) * 100:.0f}% of it)" if d.measured_s else ""
    tail = f"; {d.note}" if d.note else ""
    return (
        f"{lead}{then}{by_line}; residual {_signed_ms(d.residual_s)}{share} between the timed "
        f"and profiled windows{_profiler_clause(d)}{tail}"
    )


def _profiler_clause(d: Decomposition) -> str:
    """Where profiling lengthened one side's step by more than CARRIES of the difference
    beyond the other's: by how much each, measured, and so where the host gap comes from."""
    ov, against = d.overhead_s, d.against_overhead_s
    if ov is None or against is None or not d.measured_s:
        return ""
    if abs(ov - against) <= CARRIES * abs(d.measured_s):
        return ""
    return (
        f"; the profiled steps ran {_signed_ms(ov)} (variant) and {_signed_ms(against)} "
        "(reference) off the timed ones, so the host gap is the timed steps'"
    )


def carries(d: Decomposition | None, kinds: tuple[str, ...]) -> bool:
    """True when the parts of these kinds carry at least CARRIES of the measured difference,
    in its direction (or when there is no decomposition to say otherwise)."""
    if d is None or not d.parts or not d.measured_s:
        return True
    part = sum(p.delta_s for p in d.parts if p.kind in kinds)
    return part / d.measured_s >= CARRIES


DEVICE_KINDS = (*work.KINDS, "outside_clusters", "device", "launch_gaps")
HOST_KINDS = ("host_gap",)
