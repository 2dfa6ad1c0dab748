"""The memory rule: two variants of one size whose compiled peaks differ (issue 28).

A peak is compiled, not timed, so the timing gate never suppresses this rule. It needs two
variants of one problem size whose peaks differ by more than `memory.min_ratio` of the
smaller and more than `memory.min_bytes`, and names the source lines behind the difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from harness.common import fmt
from harness.findings.base import Rule
from harness.records.findings import MemoryFinding, SourceBytes
from harness.records.memory import PeakBuffer
from harness.records.summary import VariantSummary
from harness.saved.run import SavedRun, SavedVariant


@dataclasses.dataclass(frozen=True)
class SourceDifference:
    """The bytes live at the peak from one source line and named scope, in two variants."""

    source_line: str | None
    scope: str | None
    bytes_a: int
    bytes_b: int
    buffers: tuple[str, ...]  # the larger side's buffers: `instruction shape`

    @property
    def delta(self) -> int:
        return self.bytes_b - self.bytes_a


def _key(b: PeakBuffer) -> tuple[str, str]:
    return (b.source_line or "", b.scope or b.op_name or b.instruction)


def differences(
    a: Iterable[PeakBuffer], b: Iterable[PeakBuffer], top: int = 5
) -> tuple[SourceDifference, ...]:
    """Returns what makes two peaks differ: the buffers at each peak grouped by source line
    and named scope (instruction names differ between programs; their sources do not), the
    groups whose bytes differ most first."""
    groups: dict[tuple[str, str], list[list[PeakBuffer]]] = {}
    for side, buffers in enumerate((a, b)):
        for buf in buffers:
            groups.setdefault(_key(buf), [[], []])[side].append(buf)
    out = []
    for (line, scope), (left, right) in groups.items():
        sa, sb = sum(x.bytes for x in left), sum(x.bytes for x in right)
        if sa == sb:
            continue
        larger = right if sb > sa else left
        named = tuple(f"{x.instruction} {x.shape or '?'}" for x in larger[:4])
        out.append(SourceDifference(line or None, scope or None, sa, sb, named))
    return tuple(sorted(out, key=lambda d: -abs(d.delta))[:top])


def peak(s: VariantSummary) -> int | None:
    return s.memory.peak_bytes if s.memory is not None else None


def peak_tradeoff(v: SavedVariant, ref: SavedVariant) -> str:
    """The change in peak a recommendation brings: "What to change"'s trade-off column."""
    a, b = peak(v.summary), peak(ref.summary)
    if a is None or b is None:
        return ""
    delta = a - b
    sign = "+" if delta >= 0 else "−"
    return f"peak memory {sign}{fmt.si(abs(delta), 'B')} ({fmt.si(a, 'B')})"


def memory_finding(
    rule: str, v: SavedVariant, base: SavedVariant, min_ratio: float, min_bytes: int
) -> MemoryFinding | None:
    """A finding when the two peaks differ by more than `min_ratio` of the smaller and more
    than `min_bytes`, naming the buffers (by source line) that make the difference."""
    a, b = peak(v.summary), peak(base.summary)
    if a is None or b is None or v.name == base.name:
        return None
    delta = a - b
    if abs(delta) <= min_bytes or abs(delta) <= min_ratio * min(a, b):
        return None
    mine = v.summary.memory.largest if v.summary.memory else ()
    theirs = base.summary.memory.largest if base.summary.memory else ()
    sources = tuple(
        SourceBytes(d.source_line, d.scope, d.bytes_b, d.bytes_a, d.buffers)
        for d in differences(theirs, mine)
    )
    more = "more" if delta > 0 else "less"
    what = (
        f"`{v.name}` peaks at {fmt.si(a, 'B')}, {fmt.si(abs(delta), 'B')} {more} than "
        f"`{base.name}` ({fmt.si(b, 'B')}; XLA's live-range peaks)"
    )
    return MemoryFinding(
        rule=rule,
        variant=v.name,
        against=base.name,
        verdict=more,
        peak_bytes=a,
        against_bytes=b,
        min_ratio=min_ratio,
        min_bytes=min_bytes,
        what=what,
        sources=sources,
        evidence=tuple(_line(s, v.name, base.name) for s in sources),
    )


def _line(s: SourceBytes, variant: str, against: str) -> str:
    where = f"`{s.source_line}`" if s.source_line else "no source line"
    scope = f" (`{s.scope}`)" if s.scope else ""
    return (
        f"{where}{scope}: {fmt.si(s.bytes, 'B')} at `{variant}`'s peak against "
        f"{fmt.si(s.against_bytes, 'B')} at `{against}`'s: "
        + ", ".join(f"`{b}`" for b in s.buffers)
    )


class MemoryPeak(Rule):
    """A variant whose compiled peak differs from its framework's baseline of the same size
    beyond `memory.min_ratio` and `memory.min_bytes`, with the source lines that differ."""

    id = "memory.peak"
    kind = "memory"

    def applies(self, run: SavedRun) -> bool:
        return run.variant(run.baseline) is not None

    def conclude(self, run: SavedRun) -> tuple[MemoryFinding, ...]:
        base = run.variant(run.baseline)
        assert base is not None  # applies() held
        found = [
            f
            for v in run.variants
            if v.framework == base.framework
            and v.same_size(base)
            and (f := memory_finding(self.id, v, base, run.min_ratio, run.min_bytes)) is not None
        ]
        return tuple(sorted(found, key=lambda f: -abs(f.peak_bytes - f.against_bytes)))
