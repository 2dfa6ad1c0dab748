"""When two variants' peaks differ enough to be a memory finding (harness.findings.memory)."""

from __future__ import annotations

import dataclasses

from harness.config.fields import ranged


@dataclasses.dataclass(frozen=True)
class MemoryOptions:
    """A memory finding needs both: a peak differing by more than `min_ratio` of the smaller
    one, and by more than `min_bytes`. The peak is XLA's live-range peak, which does not
    depend on timing, so the timing gate never suppresses these findings."""

    min_ratio: float = ranged(0.10, 0.0, 100.0, "relative difference of the two peaks")
    min_bytes: int = ranged(16 << 20, 0, 1 << 50, "bytes by which the two peaks differ")
