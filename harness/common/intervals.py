"""Spans of time as (start, end) pairs: their union, for the profile's streams and a study's
worker timeline alike. Imports nothing of JAX, so a benchmark reading records can use it."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Returns the union of [start, end) intervals as sorted, disjoint intervals."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
