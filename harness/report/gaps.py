"""What a profile match could not attribute, rendered above a report's rankings.

Both the analyze report and the run report's findings show it: a ranking that leaves out
unattributed events ranks part of the step, so the reader sees that first. Renders only the
typed `harness.match.gaps.AttributionGaps` record the run wrote.
"""

from __future__ import annotations

from harness.common import fmt
from harness.records.gaps import AttributionGaps
from harness.report.doc import Block, Para, Table, code, literal


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else fmt.ms(seconds)


def gap_blocks(gaps: AttributionGaps | None, whose: str = "") -> list[Block]:
    """The unattributed device time and its kernels (nothing when every event is attributed),
    then the share of ambiguous matches (nothing when there are none)."""
    if gaps is None:
        return []
    out: list[Block] = []
    prefix = f"{whose}: " if whose else ""
    if not gaps.complete:
        out.append(
            Para(
                f"**{prefix}Not attributed: {_time(gaps.unattributed_time_per_step_s)} of device "
                f"time a step** ({fmt.pct(gaps.unattributed_share)} of the summed event time) "
                "ran in events no cluster holds; the rankings leave it out. By kernel name "
                "(every event's reason is in `kernels.json`):"
            )
        )
        out.append(
            Table(
                ("kernel", "kind", "a step", "time a step", "why"),
                tuple(
                    (
                        code(k.name[:80]),
                        k.kind,
                        fmt.count(k.events_per_step),
                        _time(k.time_per_step_s),
                        literal(k.reason[:160]),
                    )
                    for k in gaps.unattributed
                ),
            )
        )
    if gaps.ambiguous_fraction > 0:
        out.append(
            Para(
                f"{prefix}{fmt.pct(gaps.ambiguous_fraction)} of the events are ambiguous: each "
                "ran inside a command buffer where another command of the same kernel could "
                "have run it, so it was matched to the first in command order (counts per "
                "cluster hold; which of the candidates took the time does not). `kernels.json` "
                "marks them `ambiguous` and names the candidates."
            )
        )
    return out
