"""What a report, a plot, compare and the terminal say about what a run could resolve: a run
that could not time at all (a busy machine, no A/A pair), and one whose A/A check failed.

The analysis records the gate once (`noise.resolved`, `noise.reasons`: harness.records.resolution)
and its rule words it (`findings.gate`, harness.findings.timing.AaGate): the A/A ratio
and its interval, the load average, and how much of the wall time the timing worker got as
CPU time (on a GPU, the SM clock's spread). Every reader here only reads those records.
"""

from __future__ import annotations

from harness.records.summary import RunSummary


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


def aa_failed_line(summary: RunSummary) -> str | None:
    """Returns the sentence that says the run's A/A check failed and which comparisons its
    floor left unresolved, for a run that could still call differences; None otherwise."""
    n = summary.noise
    if n is None or not n.resolved or n.aa_held is not False:
        return None
    f = summary.findings
    if f is not None and f.gate is not None and f.gate.line:
        return f.gate.line
    return "This run's A/A check failed: " + "; ".join(n.aa_reasons) + "."


def between_runs_line(summary: RunSummary) -> str | None:
    """Returns the phrase that says whether the intervals hold the run-to-run spread (measured
    from earlier runs on this machine, harness.analyze.between_runs); None before it was."""
    b = summary.noise.between_runs if summary.noise is not None else None
    if b is None or not b.comparisons:
        return None
    earlier = len(b.earlier_runs)
    if not b.widened:
        return (
            f"the intervals hold this run's rounds only: {earlier} earlier run"
            f"{'' if earlier == 1 else 's'} of these programs on this machine, fewer than the "
            f"{b.min_runs - 1} needed to measure how far a ratio moves between runs"
        )
    spreads = [
        (verdict.between_runs, name, verdict.against)
        for name, v in summary.variants.items()
        for verdict in (v.comparison.vs_baseline, v.comparison.vs_lower_bound)
        if verdict is not None and verdict.between_runs is not None
    ]
    tau, name, against = max(spreads, default=(0.0, "", ""))
    largest = f" (largest for `{name}`/`{against}`: {tau * 100:.1f}%)" if tau > 0 else ""
    return (
        f"{b.widened} of {b.comparisons} intervals hold how far the ratio moves between runs on "
        f"this machine, measured over {earlier} earlier runs{largest}"
    )


def not_timed_line(summary: RunSummary) -> str | None:
    """Returns the sentence naming the variants left out of the timing rounds (its rule's
    words, harness.findings.timing.not_timed_line); None when every variant was timed."""
    f = summary.findings
    return f.gate.not_timed or None if f is not None and f.gate is not None else None
