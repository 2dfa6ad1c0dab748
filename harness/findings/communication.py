"""The rule over a sharded variant's waits at collectives: a device that spends more than a
stated share of its step waiting for the others (harness.match.waits, in summary.json's
`comm`).

A collective finishes on no device before the last device of its group arrives, so an
early device's collective time is partly waiting. The waits come from the profile, not from
the timing rounds, so the rule does not read the A/A gate; on a CPU with forced host devices
the devices are threads of one process, and a busy machine delays some of them: the finding
then says how the run's threads were scheduled, which the evidence names.
"""

from __future__ import annotations

from harness.findings.base import Rule
from harness.records.comm import Comm
from harness.records.findings import WaitFinding
from harness.saved.run import SavedRun

WAIT_SHARE = 0.10  # a device waiting more than this share of its step is named


def wait_findings(rule: str, name: str, comm: Comm, threshold: float) -> tuple[WaitFinding, ...]:
    """The devices of variant `name` whose wait share exceeds `threshold`, largest first."""
    found = sorted(
        (
            d
            for d in comm.per_device
            if d.wait_share is not None and d.waited_s is not None and d.wait_share > threshold
        ),
        key=lambda d: -(d.wait_share or 0.0),
    )
    out = []
    for d in found:
        share, waited = d.wait_share or 0.0, d.waited_s or 0.0  # both measured: filtered above
        lag = comm.straggler_lag_s
        on = (
            f"; device {comm.straggler} arrived last at the most calls"
            + (f", {lag * 1e6:.1f} µs a step after the first" if lag is not None else "")
            if comm.straggler is not None and comm.straggler != d.device
            else ""
        )
        what = (
            f"`{name}`: device {d.device} waits {waited * 1e6:.1f} µs a step at its "
            f"collectives for the others, {share:.0%} of its step (above {threshold:.0%}){on}"
        )
        out.append(
            WaitFinding(
                rule=rule,
                variant=name,
                device=d.device,
                waited_s=waited,
                share=share,
                threshold=threshold,
                straggler=comm.straggler,
                straggler_lag_s=comm.straggler_lag_s,
                what=what,
            )
        )
    return tuple(out)


class Waiting(Rule):
    """A device that waits at collectives for the others more than a stated share of its step."""

    id = "communication.waiting"
    kind = "communication"
    threshold = WAIT_SHARE

    def applies(self, run: SavedRun) -> bool:
        return any(v.comm.per_device for v in run.summary.variants.values())

    def conclude(self, run: SavedRun) -> tuple[WaitFinding, ...]:
        return tuple(
            f
            for name, v in run.summary.variants.items()
            for f in wait_findings(self.id, name, v.comm, self.threshold)
        )
