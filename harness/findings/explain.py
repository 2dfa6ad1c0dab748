"""A timing difference taken apart on the profiled timeline, so a finding's "why" explains its
ratio instead of listing what differs beside it.

A profiled step is the device's busy time plus the host gap (its wall time with the device
idle). The busy time is the clusters' device time (ranking.json, per cluster) plus what no
cluster holds, less any overlap. So the difference of two variants' profiled steps is exactly
the sum of: each cluster's device-time difference, the difference outside the clusters, and
the host-gap difference (`decompose`). What the timed steps (the rounds' medians, which the
ratio is of) differ by beyond that is the residual: the profiled window ran otherwise than the
timed one (profiler overhead, clocks, a host-bound step). A finding states the residual; where
it is larger than the explained part the profile does not explain the ratio, and says so.

Where either side has no profile (failed, or skipped), the difference is measured but not
explained, and the decomposition is null with its note: a figure never measured is never a
zero to compare with.
"""

from __future__ import annotations

from harness.common import fmt
from harness.findings.facts import ClusterTime, VariantFacts
from harness.records.findings import Decomposition, TimePart

TOP_CLUSTERS = 3  # clusters named one by one; the rest are summed as `other_clusters`
# A mechanism (kernels, bytes, transfers) is given as a reason only where the part of the
# timeline it acts on carries at least this share of the measured difference.
CARRIES = 0.25


def _missing(v: VariantFacts) -> str | None:
    p = v.summary.profile
    if p.profiled_step_time_s is None or p.device_time_per_step_s is None:
        errors = [e for e in v.summary.analysis_errors if "profile" in e.lower()]
        why = errors[0].splitlines()[0][:160] if errors else "no profiled step"
        return f"`{v.name}` has no profiled step ({why})"
    return None


def _cluster_parts(v: VariantFacts, ref: VariantFacts) -> list[TimePart]:
    mine = {c.key or c.name: c for c in v.times}
    theirs = {c.key or c.name: c for c in ref.times}
    parts = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        shown = a or b or ClusterTime(name, 0.0)
        where = f" ({shown.line.rsplit('/', 1)[-1]})" if shown.line else ""
        parts.append(
            TimePart(
                kind="cluster",
                what=f"`{shown.name}`{where}",
                delta_s=(a.time_s if a else 0.0) - (b.time_s if b else 0.0),
                variant_s=a.time_s if a else None,
                against_s=b.time_s if b else None,
                launches=a.launches if a else None,
                against_launches=b.launches if b else None,
            )
        )
    parts.sort(key=lambda p: -abs(p.delta_s))
    rest = parts[TOP_CLUSTERS:]
    if rest:
        other = TimePart(
            kind="other_clusters",
            what=f"{len(rest)} other clusters",
            delta_s=sum(p.delta_s for p in rest),
            variant_s=None,
            against_s=None,
            launches=None,
            against_launches=None,
        )
        parts = [*parts[:TOP_CLUSTERS], other]
    return parts


def decompose(v: VariantFacts, ref: VariantFacts) -> Decomposition | None:
    """Returns the difference of `v` from `ref` per step taken apart (None where either has
    no timed step)."""
    sv, sr = v.summary.timing.step_s, ref.summary.timing.step_s
    if sv is None or sr is None:
        return None
    measured = sv - sr
    missing = _missing(v) or _missing(ref)
    if missing is not None:
        return Decomposition(measured, (), measured, None, f"measured but not explained: {missing}")
    pv, pr = v.summary.profile, ref.summary.profile
    busy_v, busy_r = pv.device_time_per_step_s or 0.0, pr.device_time_per_step_s or 0.0
    gap_v = (pv.profiled_step_time_s or 0.0) - busy_v
    gap_r = (pr.profiled_step_time_s or 0.0) - busy_r
    parts: list[TimePart] = []
    if v.times and ref.times:
        parts = _cluster_parts(v, ref)
        in_v = sum(c.time_s for c in v.times)
        in_r = sum(c.time_s for c in ref.times)
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
    parts.append(TimePart("host_gap", "the host gap", gap_v - gap_r, gap_v, gap_r, None, None))
    parts.sort(key=lambda p: -abs(p.delta_s))
    explained = sum(p.delta_s for p in parts)
    share = explained / measured if measured else None
    note = ""
    if share is not None and not 0.5 <= share <= 2.0:
        note = (
            f"the profiled steps differ by {fmt.ms(explained)}, the timed ones by "
            f"{fmt.ms(measured)}: the profile explains this ratio poorly"
        )
    return Decomposition(measured, tuple(parts), measured - explained, share, note)


def _signed_ms(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + fmt.ms(abs(seconds))


def sentence(d: Decomposition) -> str:
    """The decomposition as the finding's lead: "of the +1.20 ms a step: the host gap +0.90 ms,
    `fusion` (model.py:42) +0.25 ms, …; residual +0.05 ms (4%) between the timed and
    profiled windows"."""
    if not d.parts:
        return d.note
    shown = [p for p in d.parts if abs(p.delta_s) >= 0.05 * abs(d.measured_s)][:4] or [d.parts[0]]
    items = ", ".join(f"{p.what} {_signed_ms(p.delta_s)}" for p in shown)
    hidden = len(d.parts) - len(shown)
    more = f" (and {hidden} smaller part{'' if hidden == 1 else 's'})" if hidden else ""
    share = f" ({abs(d.residual_s / d.measured_s) * 100:.0f}% of it)" if d.measured_s else ""
    tail = f"; {d.note}" if d.note else ""
    return (
        f"of the {_signed_ms(d.measured_s)} a step: {items}{more}; residual "
        f"{_signed_ms(d.residual_s)}{share} between the timed and profiled windows{tail}"
    )


def carries(d: Decomposition | None, kinds: tuple[str, ...]) -> bool:
    """True when the parts of these kinds carry at least CARRIES of the measured difference,
    in its direction (or when there is no decomposition to say otherwise)."""
    if d is None or not d.parts or not d.measured_s:
        return True
    part = sum(p.delta_s for p in d.parts if p.kind in kinds)
    return part / d.measured_s >= CARRIES


DEVICE_KINDS = ("cluster", "other_clusters", "outside_clusters", "device")
HOST_KINDS = ("host_gap",)
