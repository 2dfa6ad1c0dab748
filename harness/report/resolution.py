"""What a report, a plot, compare and the terminal say about a run that failed its A/A check.

The analysis records the gate once (`noise.resolved`, `noise.reasons`: harness.resolution);
every reader here asks `resolved` and words the evidence with `unresolved_line`: the A/A
ratio and its interval, the load average, and how much of the wall time the timing worker got
as CPU time (on a GPU, the SM clock's spread).
"""

from __future__ import annotations

from harness.report import fmt
from harness.summary import Noise, RunSummary


def resolved(summary: RunSummary) -> bool:
    """True unless the run's noise section says it could not resolve differences (a run with
    no timing rounds has no timing verdicts, and nothing here to suppress)."""
    return summary.noise is None or summary.noise.resolved


def evidence(n: Noise, host_bound: bool = True) -> list[str]:
    """Returns the measured evidence for the gate's decision, as short phrases; the worker's
    CPU time only where the calls compute on the host (`host_bound`: not a GPU run, whose
    worker waits on the device by design)."""
    out = []
    if n.self_ratio is not None and n.self_ci95:
        out.append(
            f"`{n.baseline}` against itself {n.self_ratio:.4f}× "
            f"(95% CI {n.self_ci95[0]:.4f}–{n.self_ci95[1]:.4f}), noise floor {fmt.pct(n.floor)}"
        )
    m = n.machine
    if m is not None and m.load_1m is not None:
        out.append(f"load average {m.load_1m[0]:.1f}–{m.load_1m[1]:.1f} on {m.cpus} CPUs")
    if host_bound and m is not None and m.cpu_share_min is not None:
        out.append(
            f"the timing worker got {m.cpu_share_min * 100:.0f}% of the wall time as CPU time "
            "in its worst round"
        )
    if m is not None and m.steal_max:
        out.append(f"CPU steal up to {m.steal_max * 100:.0f}% of a round")
    if n.sm_clock_spread is not None:
        out.append(f"SM clock spread {fmt.pct(n.sm_clock_spread)}")
    if m is not None and m.flagged_rounds:
        out.append(f"{len(m.flagged_rounds)} of {n.rounds} rounds flagged by the machine readings")
    return out


def unresolved_line(summary: RunSummary) -> str | None:
    """Returns the one sentence that says the run could not resolve differences, with its
    reasons and evidence; None for a run that could."""
    n = summary.noise
    if n is None or n.resolved:
        return None
    reasons = "; ".join(n.reasons) or "its A/A check failed"
    facts = "; ".join(evidence(n, summary.platform not in ("gpu", "tpu")))
    return (
        f"This run could not resolve differences between variants: {reasons}"
        + (f" ({facts})" if facts else "")
        + ". No timing finding is ranked and no change is recommended; time it again on a "
        "quieter machine."
    )
