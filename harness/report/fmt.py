"""Number formatting for the report: harness.fmt, which the analysis stage's rules share, so a
finding's sentence and a table print the same figure the same way."""

from __future__ import annotations

from harness.fmt import (
    VERDICT_WORDS,
    age,
    ci,
    count,
    counted,
    ms,
    num,
    pct,
    ratio,
    sci,
    secs,
    si,
    step,
    text,
    tflops,
    verdict,
)

__all__ = [
    "VERDICT_WORDS",
    "age",
    "ci",
    "count",
    "counted",
    "ms",
    "num",
    "pct",
    "ratio",
    "sci",
    "secs",
    "si",
    "step",
    "text",
    "tflops",
    "verdict",
]
