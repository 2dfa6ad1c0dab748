"""What a report, a plot, compare and the terminal say about a run that failed its A/A check.

The analysis records the gate once (`noise.resolved`, `noise.reasons`: harness.resolution)
and its rule words it (`findings.gate`, harness.analyze.rules.timing.AaGate): the A/A ratio
and its interval, the load average, and how much of the wall time the timing worker got as
CPU time (on a GPU, the SM clock's spread). Every reader here only reads those records.
"""

from __future__ import annotations

from harness.summary import RunSummary


def resolved(summary: RunSummary) -> bool:
    """True unless the run's noise section says it could not resolve differences (a run with
    no timing rounds has no timing verdicts, and nothing here to suppress)."""
    return summary.noise is None or summary.noise.resolved


def evidence(summary: RunSummary) -> tuple[str, ...]:
    """The gate's measured evidence, as its rule worded it (none before schema 6)."""
    f = summary.findings
    return f.gate.evidence if f is not None and f.gate is not None else ()


def unresolved_line(summary: RunSummary) -> str | None:
    """Returns the one sentence that says the run could not resolve differences, with its
    reasons and evidence; None for a run that could."""
    if resolved(summary):
        return None
    f = summary.findings
    if f is not None and f.gate is not None and f.gate.line:
        return f.gate.line
    reasons = "; ".join(summary.noise.reasons if summary.noise else ()) or "its A/A check failed"
    return f"This run could not resolve differences between variants: {reasons}."
