"""One optional probe's failure, as a capture records it and the summary keeps it (kept apart
from harness.records.summary, which is over its size limit).

A variant's optional probes are the new-shape call (`recompile`), the profiler traces
(`profile`), the emitters' dumps (`emitter_dumps`) and the float64 reference (`numerics`). One
that fails records its own failure here; the variant's other results stand.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import doc


@dataclass(frozen=True)
class ProbeFailure:
    probe: str = doc("`recompile`, `profile`, `emitter_dumps` or `numerics`")
    reason: str = doc("the exception's type and first line")
