"""The timing rules: the A/A gate, the ranked differences and what is noise, what to change,
and the device time a profile match left out.

A finding is one measured difference between a variant and its reference (the baseline of
its framework and size, else the lower bound), ranked by effect size, in three sentences: what
(the ratio with its interval), why (what differs in the config and in what XLA made of it)
and the evidence. Every rule here that rests on timing reads the gate (`noise.resolved`): a
run that could not time (a busy machine, no A/A pair) ranks no timing finding and recommends
no change; a failed A/A check widens each verdict instead (harness.analyze.judging). The coverage
rule does not rest on timing and is never suppressed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

from harness.common import fmt, stats
from harness.findings import explain
from harness.findings.base import Rule, timing_resolved
from harness.findings.memory import peak_tradeoff
from harness.findings.words import config_changes, divergence_sentence, mechanism_parts
from harness.records import numerics_effect
from harness.records.findings import Change, CoverageFinding, Gate, TimingFinding
from harness.records.summary import Noise, Verdict
from harness.saved.run import SavedRun, SavedVariant


def gate_evidence(n: Noise, host_bound: bool = True) -> tuple[str, ...]:
    """The measured evidence for the gate's decision, as short phrases; the worker's CPU time
    only where the calls compute on the host (`host_bound`: not a GPU run, whose worker waits
    on the device by design)."""
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
    if m is not None and m.others_share is not None:
        out.append(f"other processes took {m.others_share * 100:.0f}% of the CPUs")
    if n.sm_clock_spread is not None:
        out.append(f"SM clock spread {fmt.pct(n.sm_clock_spread)}")
    if m is not None and m.flagged_rounds:
        out.append(f"{len(m.flagged_rounds)} of {n.rounds} rounds flagged by the machine readings")
    return tuple(out)


def aa_failure(n: Noise) -> str:
    """How the A/A check failed, in a few words (its reasons in full are `noise.aa_reasons`)."""
    out = []
    if n.self_ci95 is not None and not n.self_ci95[0] <= 1.0 <= n.self_ci95[1]:
        out.append("the pair's interval excludes 1.0")
    if n.max_noise is not None and n.floor > n.max_noise:
        out.append(f"its floor exceeds timing.max_noise {fmt.pct(n.max_noise)}")
    return "; ".join(out) or "; ".join(n.aa_reasons)


class AaGate(Rule):
    """What the run can resolve: its baseline timed against itself, and the machine."""

    id = "gate.aa_check"
    kind = "gate"

    def applies(self, run: SavedRun) -> bool:
        return run.summary.noise is not None

    def conclude(self, run: SavedRun) -> tuple[Gate, ...]:
        n = run.summary.noise
        assert n is not None  # applies() held
        evidence = gate_evidence(n, run.platform not in ("gpu", "tpu"))
        line = ""
        if n.resolved and n.aa_held is False:
            left = n.unresolvable
            # The comparisons are named in the noise section (`noise.unresolvable`): the
            # report's opening sentence stays short enough to leave the findings in view.
            named = (
                f", which left {len(left)} comparison{'' if len(left) == 1 else 's'} with an "
                "interval excluding 1.0 unresolved (the noise section names them)"
                if left
                else ", which left no difference unresolved"
            )
            how = aa_failure(n)
            line = (
                f"Its A/A check failed{f' ({how})' if how else ''}, so each comparison's "
                "interval was "
                f"widened by the floor {fmt.pct(n.floor)} (the pair's deviation from 1.0 plus its "
                f"half-width) before a difference was called{named}."
            )
        elif not n.resolved:
            reasons = "; ".join(n.reasons) or "its A/A check failed"
            facts = "; ".join(evidence)
            line = (
                f"This run could not resolve differences between variants: {reasons}"
                + (f" ({facts})" if facts else "")
                + ". No timing finding is ranked and no change is recommended; time it again "
                "on a quieter machine."
            )
        return (Gate(self.id, n.resolved, n.reasons, evidence, line, not_timed_line(n)),)


def not_timed_line(n: Noise) -> str:
    """The sentence naming the variants left out of the timing rounds, with why: a reader
    looking for one of them among the findings learns it was never compared."""
    if not n.not_timed:
        return ""
    if len(n.not_timed) == 1:
        ((name, why),) = n.not_timed.items()
        return f"`{name}` was not timed, so none of its timing comparisons is made: {why}."
    each = "; ".join(f"`{name}` ({why})" for name, why in sorted(n.not_timed.items()))
    return (
        f"{len(n.not_timed)} variants were not timed, so none of their timing comparisons is "
        f"made: {each}."
    )


def reference(run: SavedRun, v: SavedVariant) -> tuple[SavedVariant | None, Verdict | None]:
    """The variant `v` is judged against: the baseline of its size, else the lower bound."""
    c = v.summary.comparison
    for verdict in (c.vs_baseline, c.vs_lower_bound):
        if verdict is not None and verdict.against != v.name:
            return run.variant(verdict.against), verdict
    return None, None


def judged_pairs(run: SavedRun) -> Iterator[tuple[SavedVariant, SavedVariant, Verdict]]:
    """Each measured variant with its reference and verdict. The lower bound is what the
    others are measured against: "it is faster than the baseline" only restates the
    baseline's own finding, so it is never judged."""
    for v in run.variants:
        if not v.measured or "lower_bound" in v.roles:
            continue
        ref, verdict = reference(run, v)
        if ref is not None and verdict is not None:
            yield v, ref, verdict


def _pair(rule: str, v: SavedVariant, ref: SavedVariant, verdict: Verdict) -> TimingFinding:
    """The typed evidence of one pair, without its sentences."""
    d = v.summary.comparison.first_divergence
    diverged = d is not None and d.against == ref.name and d.stage != "none"
    return TimingFinding(
        rule=rule,
        variant=v.name,
        against=ref.name,
        verdict=verdict.verdict,
        ratio=verdict.ratio,
        ci95=verdict.ci95,
        p_holm=verdict.p_holm,
        effect=abs(math.log(verdict.ratio)) if verdict.ratio else 0.0,
        changes=config_changes(v, ref),
        kernels_per_step=v.summary.profile.kernels_per_step,
        against_kernels_per_step=ref.summary.profile.kernels_per_step,
        bytes=v.summary.cost.bytes,
        against_bytes=ref.summary.cost.bytes,
        divergence_stage=d.stage if diverged and d else None,
        divergence_detail=d.detail if diverged and d else None,
    )


def _differs(run: SavedRun, verdict: Verdict) -> bool:
    """A resolved difference: the run passed its gate and the verdict says one."""
    if not timing_resolved(run):
        return False
    return verdict.verdict not in stats.NO_DIFFERENCE and verdict.ratio is not None


class TimingDifference(Rule):
    """A variant resolved as faster or slower than its reference, with what differs and why."""

    id = "timing.difference"
    kind = "timing"

    def conclude(self, run: SavedRun) -> tuple[TimingFinding, ...]:
        out = []
        for v, ref, verdict in judged_pairs(run):
            if not _differs(run, verdict):
                continue
            pair = _pair(self.id, v, ref, verdict)
            ratio = verdict.ratio or 1.0
            lo, hi = verdict.ci95 or (ratio, ratio)
            words = "slower" if ratio > 1 else "faster"
            what = (
                f"`{v.name}` is {max(ratio, 1 / ratio):.2f}× {words} than `{ref.name}` "
                f"(ratio {ratio:.3f}, 95% CI {lo:.3f}–{hi:.3f})"
            )
            parts = mechanism_parts(v, ref)
            mech = tuple(phrase for _, phrase in parts)
            d = explain.decompose(v, ref)
            # The decomposition leads: it says where the time went. A mechanism follows only
            # where the part of the timeline it acts on carries the difference.
            kinds = {"device": explain.DEVICE_KINDS, "host": explain.HOST_KINDS}
            carried = [p for on, p in parts if explain.carries(d, kinds[on])]
            said = explain.sentence(d) if d is not None else ""
            lead = [said] if said else []
            why = (
                "; ".join([*lead, *(c.phrase for c in pair.changes[:2]), *carried[:4]])
                or "no difference in config or in what XLA made was recorded"
            )
            t, rt = v.summary.timing, ref.summary.timing
            evidence = [
                f"time per step {fmt.step(t.step_s, t.step_ci95_s)} against "
                f"{fmt.step(rt.step_s, rt.step_ci95_s)}, {t.rounds} paired rounds"
            ]
            if pair.divergence_stage is not None:
                evidence.append(divergence_sentence(v))
            evidence += mech[4:]
            out.append(
                dataclasses.replace(
                    pair,
                    what=what,
                    why=why,
                    evidence=tuple(evidence),
                    mechanisms=mech,
                    decomposition=d,
                )
            )
        return tuple(sorted(out, key=lambda f: -f.effect))


class NoDifference(Rule):
    """A pair the run cannot tell apart: the same program, an interval around 1.0, under the
    noise floor, not resolved, or a run that could not time. Never ranked."""

    id = "timing.no_difference"
    kind = "noise"

    def conclude(self, run: SavedRun) -> tuple[TimingFinding, ...]:
        gated = not timing_resolved(run)
        out = []
        for v, ref, verdict in judged_pairs(run):
            if gated and verdict.verdict != stats.SAME_PROGRAM:
                why = "the run could not resolve differences"
            elif verdict.verdict == stats.SAME_PROGRAM:
                why = "the same program"
            elif verdict.verdict in stats.NO_DIFFERENCE:
                why = verdict.why
            else:
                continue
            what = f"`{v.name}` against `{ref.name}`: {why}"
            out.append(dataclasses.replace(_pair(self.id, v, ref, verdict), what=what))
        return tuple(out)


class Coverage(Rule):
    """A profiled variant whose steady window holds device time no cluster holds (or
    ambiguous matches): the rankings leave that time out. Not timing: never suppressed."""

    id = "coverage.unattributed"
    kind = "coverage"

    def conclude(self, run: SavedRun) -> tuple[CoverageFinding, ...]:
        out = []
        for v in run.variants:
            g = v.summary.profile.gaps
            if g is None or (g.complete and g.ambiguous_fraction <= 0):
                continue
            if not g.complete:
                what = (
                    f"`{v.name}`: {fmt.ms(g.unattributed_time_per_step_s)} of {fmt.KERNEL_TIME} "
                    f"({fmt.pct(g.unattributed_share)}) ran in events no cluster holds"
                )
            else:
                what = f"`{v.name}`: {fmt.pct(g.ambiguous_fraction)} of the events are ambiguous"
            verdict = "unattributed" if not g.complete else "ambiguous"
            out.append(CoverageFinding(self.id, v.name, verdict, what, g))
        return tuple(out)


# --- what to change ---------------------------------------------------------------------------


def _numerics(v: SavedVariant, ref: SavedVariant) -> str:
    """The change's numerics trade-off, only where it moves the compiler-effect figure: the
    variant's result is further from the baseline's than two correct implementations of its
    dtype are (numerics.compiler_effect); the dtype's own rounding is stated once elsewhere."""
    del ref  # the distances are the variant's own, from its baseline
    d = v.distances
    w = numerics_effect.worst(d.leaves) if d is not None and d.comparable else None
    if w is None or not numerics_effect.moved(w) or w.vs_baseline is None:
        return ""
    where = f"`{w.path}`" if w.path else "the result"
    return (
        f"changes the numerics: {where} {fmt.sci(w.vs_baseline)} from {d.baseline}'s "
        f"(allowed {fmt.sci(w.allowed)})"
        if d is not None
        else ""
    )


def _pause(v: SavedVariant, ref: SavedVariant, platform: str) -> str:
    a, b = v.summary.compile.first_call_s, ref.summary.compile.first_call_s
    if a is None or b is None:
        return ""
    fresh = v.summary.compile.fresh_process and ref.summary.compile.fresh_process
    if platform != "cpu" and not fresh:
        # One process compiled both (capture.isolation: shared): the later compile found what
        # the earlier had autotuned (XLA's autotune results live as long as the process), so
        # its pause is not its own. On the H200 a no-fusion variant's first call was 0.21 s
        # after the baseline's in one process, 1.86 s in a process of its own.
        return (
            f"first calls not compared ({fmt.secs(a)}, was {fmt.secs(b)}): compiled in one "
            "process, where a later compile reuses what an earlier one autotuned "
            "(capture.isolation: per_variant compiles each in its own)"
        )
    together = max(v.summary.compile.compiled_together, ref.summary.compile.compiled_together)
    if together > 1:
        # Compiles run together share the host's cores and the autotuner's GPU: the pauses
        # hold one another's contention (four at once took 2.3x longer each on the H200).
        return (
            f"first calls not compared ({fmt.secs(a)}, was {fmt.secs(b)}): compiled up to "
            f"{together} at once (capture.compiles: 1 measures each pause alone)"
        )
    return f"first call {fmt.secs(a)} (was {fmt.secs(b)})"


class MeasuredChange(Rule):
    """What to change, as measured: adopt what a faster variant did (its config difference),
    keep what a slower one changed. Keyword knobs are named like XLA options."""

    id = "change.measured"
    kind = "changes"

    def conclude(self, run: SavedRun) -> tuple[Change, ...]:
        out = []
        for f in TimingDifference().conclude(run):
            v, ref = run.variant(f.variant), run.variant(f.against)
            if v is None or ref is None or not f.changes:
                continue
            if f.verdict != stats.FASTER and "lower_bound" in ref.roles:
                continue  # slower than the GEMM alone: nothing the user would undo
            interval = (
                f"{f.ratio:.3f}× the time of `{ref.name}` (95% CI {f.ci95[0]:.3f}–{f.ci95[1]:.3f})"
                if f.ratio is not None and f.ci95
                else "?"
            )
            adopt = f.verdict == stats.FASTER
            change = (
                "use " + "; ".join(c.phrase for c in f.changes)
                if adopt
                else "keep " + "; ".join(c.reverse for c in f.changes)
            )
            tradeoff = "; ".join(
                x
                for x in (_numerics(v, ref), _pause(v, ref, run.platform), peak_tradeoff(v, ref))
                if x
            )
            out.append(
                Change(
                    rule=self.id,
                    variant=v.name,
                    against=ref.name,
                    verdict="adopt" if adopt else "keep",
                    change=change,
                    effect=f"`{v.name}` measured {interval}",
                    tradeoff=tradeoff,
                    ratio=f.ratio,
                    ci95=f.ci95,
                    effect_size=f.effect,
                    changes=f.changes,
                )
            )
        return tuple(sorted(out, key=lambda r: -r.effect_size))
