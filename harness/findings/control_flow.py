"""What control flow costs, as findings over the attributed events (issue 40).

Facts (read at the edge by `facts.read_facts`, from the variant's cost.json, kernels.json and
events.parquet):
- each while loop the cost model found (`ClusterCostRow.loop`, with XLA's or the pattern's
  trip count) and, from the profile, the iterations it ran a step (the launches of its body's
  own kernels), the kernels an iteration launches and the device time of its copies (the
  `memcpy*` kernels of a command buffer and D2D memcpys: a scan's dynamic slices of its
  stacked operands);
- the device-to-host copies a step that belong to a conditional or a while (their cluster's
  kind): without command buffers XLA reads each predicate back to the host to choose the
  branch or the next iteration, a sync each.

A loop inside another is judged per entry: its iterations a step over the times a step its
parent enters it (its parent's iterations); it `differs` only where that and the HLO's trip
count (per entry) disagree.

Rules:
    control_flow.loop        a loop's iterations, kernels an iteration and copies' share
    control_flow.host_sync   predicates read back to the host, per step
"""

from __future__ import annotations

from harness.findings.base import Rule
from harness.records.findings import ControlFlowFinding
from harness.saved.control_flow import LoopFacts
from harness.saved.run import SavedRun


class LoopCost(Rule):
    """What each while loop costs a step: its iterations, the kernels of one, its copies' share."""

    id = "control_flow.loop"
    kind = "control_flow"

    def applies(self, run: SavedRun) -> bool:
        return any(v.control_flow.loops for v in run.variants)

    def conclude(self, run: SavedRun) -> tuple[ControlFlowFinding, ...]:
        out = []
        for v in run.variants:
            for lf in v.control_flow.loops:
                out.append(_loop_finding(self.id, v.name, lf))
        return tuple(out)


def _loop_finding(rule: str, variant: str, lf: LoopFacts) -> ControlFlowFinding:
    if lf.iterations_per_step is None:
        return _unmeasured_loop(rule, variant, lf)
    return _measured_loop(rule, variant, lf, lf.iterations_per_step)


def _trip_evidence(lf: LoopFacts) -> str:
    return f"trip count {lf.trip_count if lf.trip_count is not None else 'unknown'}"


def _unmeasured_loop(rule: str, variant: str, lf: LoopFacts) -> ControlFlowFinding:
    """A loop no profiled kernel counts: unprofiled, or its body never seen in the profile."""
    trip = f"{lf.trip_count}" if lf.trip_count is not None else "an unknown number of"
    why = (
        "the profile shows no kernel of its body" if lf.step_s else "no profile says what they cost"
    )
    if lf.step_s and lf.entries == 0:
        why += ": it sits in a branch that did not run (entered 0 times a call)"
    what = (
        f"{lf.loop} runs {trip} iterations a call ({lf.body_clusters} clusters in its body); {why}"
    )
    verdict = "unmeasured" if lf.step_s else "unprofiled"
    return ControlFlowFinding(
        rule, variant, lf.loop, verdict, what, lf.trip_count, evidence=(_trip_evidence(lf),)
    )


def _entries_per_step(lf: LoopFacts) -> float | None:
    """The times a step the loop is entered, where a count rests on it (None: unknown)."""
    # A loop inside another is entered once an iteration of its parent: its trip count is per
    # entry, judged against the iterations a step over the entries a step. Where the entries
    # rest on no count (a parent loop nobody measured), nothing is judged.
    return lf.entries if lf.entries and lf.count_source != "unknown" else None


def _trip_differs(lf: LoopFacts, per_entry: float) -> bool:
    """Whether the measured iterations an entry disagree with the HLO's trip count (by 1%)."""
    # `unknown` with a trip count of its own: a loop around it has no count, nor its entries.
    return (
        lf.trip_count is not None
        and lf.count_source != "unknown"
        and abs(per_entry - lf.trip_count) > 0.01 * max(1, lf.trip_count)
    )


def _measured_loop(rule: str, variant: str, lf: LoopFacts, iters: float) -> ControlFlowFinding:
    """A loop the profile counts: its iterations, kernels an iteration, its copies' share."""
    share = lf.copy_s_per_step / lf.step_s if lf.step_s else None
    body = lf.body_s_per_step / lf.step_s if lf.step_s else None
    what = (
        f"{lf.loop} runs {iters:g} iterations a step of {lf.kernels_per_iteration or 0:.0f} kernels"
        + (f"; {share:.0%} of the step is its copies (a scan's dynamic slices)" if share else "")
    )
    entries = _entries_per_step(lf)
    nested = entries is not None and entries != 1.0
    per_entry = iters / entries if entries else iters
    if nested and entries is not None:
        what += f"; {per_entry:g} per entry, entered {entries:g} times a step (a nested loop)"
    evidence = [_trip_evidence(lf)]
    if lf.trip_count is None and lf.count_source == "measured":
        evidence.append("the cost model counts it by this measure")
    verdict = "as counted"
    if _trip_differs(lf, per_entry):
        verdict = "differs"
        what += f"; the HLO's trip count says {lf.trip_count}" + (" per entry" if nested else "")
    evidence += [
        f"measured {iters:g} iterations a step",
        f"{lf.kernels_per_iteration or 0:.1f} kernels an iteration",
        f"the body's events: {body:.1%} of the step" if body is not None else "",
    ]
    return ControlFlowFinding(
        rule,
        variant,
        lf.loop,
        verdict,
        what,
        lf.trip_count,
        iters,
        lf.kernels_per_iteration,
        share,
        evidence=tuple(e for e in evidence if e),
    )


class HostSync(Rule):
    """Predicates read back to the host: a device-to-host sync for each branch or iteration."""

    id = "control_flow.host_sync"
    kind = "control_flow"

    def applies(self, run: SavedRun) -> bool:
        return any(v.control_flow.syncs for v in run.variants)

    def conclude(self, run: SavedRun) -> tuple[ControlFlowFinding, ...]:
        out = []
        for v in run.variants:
            s = v.control_flow.syncs
            if s is None:
                continue
            owners = ", ".join(s.owners)
            out.append(
                ControlFlowFinding(
                    self.id,
                    v.name,
                    owners,
                    "host_sync",
                    f"{v.name} reads a predicate back to the host {s.per_step:g} times a step "
                    f"({owners}): each is a sync the host waits on; command buffers "
                    "(CUDA-graph conditionals) choose on the device",
                    syncs_per_step=s.per_step,
                    evidence=(f"{s.per_step:g} D2H copies a step for {owners}",),
                )
            )
        return tuple(out)
