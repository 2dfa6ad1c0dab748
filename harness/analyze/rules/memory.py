"""The memory rule: two variants of one size whose compiled peaks differ (issue 28).

A peak is compiled, not timed, so the timing gate never suppresses this rule. It needs two
variants of one problem size whose peaks differ by more than `memory.min_ratio` of the
smaller and more than `memory.min_bytes`, and names the source lines behind the difference.
"""

from __future__ import annotations

from harness import fmt
from harness.analyze.memory import differences
from harness.analyze.rules.base import Rule
from harness.analyze.rules.facts import RunFacts, VariantFacts, same_size
from harness.summary import VariantSummary
from harness.summary_findings import MemoryFinding, SourceBytes


def peak(s: VariantSummary) -> int | None:
    return s.memory.peak_bytes if s.memory is not None else None


def peak_tradeoff(v: VariantFacts, ref: VariantFacts) -> str:
    """The change in peak a recommendation brings: "What to change"'s trade-off column."""
    a, b = peak(v.summary), peak(ref.summary)
    if a is None or b is None:
        return ""
    delta = a - b
    sign = "+" if delta >= 0 else "−"
    return f"peak memory {sign}{fmt.si(abs(delta), 'B')} ({fmt.si(a, 'B')})"


def memory_finding(
    rule: str, v: VariantFacts, base: VariantFacts, min_ratio: float, min_bytes: int
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

    def applies(self, run: RunFacts) -> bool:
        return run.variant(run.baseline) is not None

    def conclude(self, run: RunFacts) -> tuple[MemoryFinding, ...]:
        base = run.variant(run.baseline)
        assert base is not None  # applies() held
        found = [
            f
            for v in run.variants
            if v.framework == base.framework
            and same_size(v, base)
            and (f := memory_finding(self.id, v, base, run.min_ratio, run.min_bytes)) is not None
        ]
        return tuple(sorted(found, key=lambda f: -abs(f.peak_bytes - f.against_bytes)))
