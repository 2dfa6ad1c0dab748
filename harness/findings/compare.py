"""The rules over two runs' records: what compare concludes (harness.records.compare).

A timing finding has changed only when the two runs' intervals are disjoint; a different
verdict with overlapping intervals is the same within noise. A variant's step time gets a
verdict across the runs only when both ran the same problem (sizes, dtypes, program and
inputs) and both could resolve differences (their A/A checks held); a pair that compiled to
the same program is never called faster or slower, since across runs its difference is drift.
The report renders these conclusions; it makes none of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeVar

from harness.common import fmt, stats
from harness.common.fmt import MISSING
from harness.config.experiment import Experiment, Variant
from harness.records.compare import (
    APPEARED,
    CHANGED,
    SAME,
    VANISHED,
    WITHIN_NOISE,
    FindingChange,
    RunsCompared,
    VariantVerdict,
)
from harness.records.findings import Findings, MemoryFinding, Observation, TimingFinding
from harness.records.run_files import Manifest
from harness.records.summary import RunSummary, VariantSummary
from harness.store.records import first_difference, to_json

K = TypeVar("K")
V = TypeVar("V")

NOISE_RATIO = 3.0  # noise floors further apart than this are flagged

# The config keys that set what is computed and on what: sizes, dtypes, the program and its
# inputs. A keyword knob (`program.kwargs.*`), an option or a timing key is not one of them:
# two runs that differ only there ran the same problem, and their step times pair.
SIZE_KEY = re.compile(
    r"(^|\.)(problem\.(m|k|n|batch|dtype|w_dtype)|program\.(function|init|inputs|dtype|w_dtype))"
    r"(\.|$)"
)


def compare_runs(sa: RunSummary, ma: Manifest, sb: RunSummary, mb: Manifest) -> RunsCompared:
    """Returns what compare concludes about runs a and b from their summaries and manifests."""
    na, nb = sa.noise, sb.noise
    floor = max(na.floor if na else 0.0, nb.floor if nb else 0.0)
    same = same_problem(ma, mb)
    fa, fb = (na.floor if na else None), (nb.floor if nb else None)
    apart = bool(fa and fb and max(fa, fb) / max(min(fa, fb), 1e-6) > NOISE_RATIO)
    return RunsCompared(
        config_differences=tuple(config_differences(ma, mb)),
        size_differences=tuple(size_differences(ma, mb)),
        floors_differ_by=NOISE_RATIO if apart else None,
        findings=tuple(finding_changes(sa, sb)),
        verdicts=tuple(
            VariantVerdict(name, variant_verdict(sa, a, sb, b, floor, same))
            for name, a in sa.variants.items()
            if (b := sb.variants.get(name)) is not None and _ok(a) and _ok(b)
        ),
    )


def _ok(v: VariantSummary) -> bool:
    return v.identity.status == "ok"


def size_differences(ma: Manifest, mb: Manifest) -> list[tuple[str, str, str]]:
    """The config keys of sizes, dtypes, the program or its inputs that differ: (key, a, b)."""
    return [d for d in config_differences(ma, mb) if SIZE_KEY.search(d[0])]


def same_problem(ma: Manifest, mb: Manifest) -> bool:
    """True when the two runs' configs ran the same problem sizes and dtypes (for a program
    study: the same program, inputs and dtypes); keyword knobs and options may differ."""
    return not size_differences(ma, mb)


def step_verdict(a: VariantSummary, b: VariantSummary, floor: float) -> str:
    """Returns the step-time verdict for one variant across two runs of the same problem."""
    ta, tb = a.timing, b.timing
    fa, fb = a.hlo.fingerprint, b.hlo.fingerprint
    same = fa is not None and fb is not None and fa.digest == fb.digest
    if same:
        return "same program in both runs: any difference is run-to-run drift"
    if not ta.round_step_s or not tb.round_step_s:
        return MISSING
    estimate = stats.independent_ratio(tb.round_step_s, ta.round_step_s)
    decision = stats.decide(estimate, floor)
    words = fmt.VERDICT_WORDS.get(decision.verdict, decision.verdict)
    lo, hi = estimate.ci95
    tuned = autotune_difference(a.compile.autotune_choices, b.compile.autotune_choices)
    return f"b/a {estimate.ratio:.3f}× ({lo:.3f}–{hi:.3f}): {words} in b" + (
        f"; {tuned}" if tuned else ""
    )


def autotune_difference(a: dict[str, str] | None, b: dict[str, str] | None) -> str:
    """Why one config compiled to two programs, where the autotuner says: how many of the
    fusions both runs autotuned chose differently. (On the H200, a scanned LM's variants
    captured alone and again in a study differed in 2-4 of 74-150 fusions each, with or
    without another compile beside them.)"""
    if not a or not b:
        return ""
    both = a.keys() & b.keys()
    differ = sum(a[k] != b[k] for k in both)
    only = len(a.keys() ^ b.keys())
    tuned = f"of the {fmt.count(len(both))} fusions autotuned in both runs"
    said = (
        "no fusion was autotuned in both runs"
        if not both
        else f"{fmt.count(differ)} {tuned} chose differently"
        if differ
        else f"each {tuned} chose alike"
    )
    lone = (
        f"{fmt.counted(only, 'fusion')} {'was' if only == 1 else 'were'} autotuned in one run only"
    )
    return said + (f"; {lone}" if only else "")


def unresolved_runs(sa: RunSummary, sb: RunSummary) -> str:
    """Returns which of the two runs failed its own A/A check ("a", "b", "a and b"), or "":
    compare reports no verdict change for such a run (harness.records.resolution)."""
    return " and ".join(
        label for label, s in (("a", sa), ("b", sb)) if not (s.noise is None or s.noise.resolved)
    )


def variant_verdict(
    sa: RunSummary,
    a: VariantSummary,
    sb: RunSummary,
    b: VariantSummary,
    floor: float,
    same: bool,
) -> str:
    """Returns one variant's verdict across the two runs: none when the sizes differ (`same`
    false) or a run could not resolve differences, else its step-time verdict."""
    if not same:
        return "sizes differ: compared per FLOP, no verdict"
    gated = unresolved_runs(sa, sb)
    if gated:
        runs = "runs" if " and " in gated else "run"
        return f"no verdict: {runs} {gated} could not resolve differences (A/A check failed)"
    return step_verdict(a, b, floor)


# --- findings across the two runs --------------------------------------------------------------


def disjoint(x: tuple[float, float] | None, y: tuple[float, float] | None) -> bool:
    """True when both intervals exist and do not overlap: only then has a ratio changed."""
    return x is not None and y is not None and (x[1] < y[0] or y[1] < x[0])


def _timing_reading(t: TimingFinding | None) -> str:
    if t is None:
        return MISSING
    words = fmt.VERDICT_WORDS.get(t.verdict, t.verdict)
    if t.ratio is None:
        return words
    interval = f" ({t.ci95[0]:.3f}–{t.ci95[1]:.3f})" if t.ci95 else ""
    return f"{words} {t.ratio:.3f}×{interval}"


def timing_status(x: TimingFinding | None, y: TimingFinding | None, gated: str) -> str:
    """How one pair's timing relates across the runs: changed only when the two intervals
    are disjoint; a different verdict with overlapping intervals is the same within noise."""
    if x is None or y is None:
        return APPEARED if x is None else VANISHED
    if x.verdict == y.verdict == stats.SAME_PROGRAM:
        return SAME  # a fingerprint, not a timing: no gate holds it back
    if gated:
        runs = "runs" if " and " in gated else "run"
        return f"no verdict: {runs} {gated} could not resolve differences"
    if disjoint(x.ci95, y.ci95):
        return CHANGED
    return SAME if x.verdict == y.verdict else WITHIN_NOISE


def _timing(s: RunSummary) -> dict[tuple[str, str], TimingFinding]:
    f = s.findings
    return {(t.variant, t.against): t for t in ((*f.timing, *f.noise) if f else ())}


def _memory_reading(m: MemoryFinding | None) -> str:
    return (
        MISSING if m is None else f"{fmt.si(abs(m.peak_bytes - m.against_bytes), 'B')} {m.verdict}"
    )


def _keyed_status(x: Any, y: Any) -> str:
    """A keyed finding's change: appeared, vanished, or its verdict the same or changed."""
    if x is None or y is None:
        return APPEARED if x is None else VANISHED
    return SAME if x.verdict == y.verdict else CHANGED


def _paired(a: dict[K, V], b: dict[K, V]) -> Iterator[tuple[K, V | None, V | None]]:
    """Each key of either run's findings, the first run's order then the second's new ones,
    with each run's finding under it (None where that run has none)."""
    for key in [*a, *(k for k in b if k not in a)]:
        yield key, a.get(key), b.get(key)


def finding_changes(sa: RunSummary, sb: RunSummary) -> list[FindingChange]:
    """Every finding of either run, matched by its rule's subject: the timing pairs (changed
    only with disjoint intervals), the memory peaks, the unattributed time, the
    observations."""
    fa, fb = sa.findings, sb.findings
    return [
        *_timing_changes(sa, sb),
        *_memory_changes(fa, fb),
        *_coverage_changes(fa, fb),
        *_observation_changes(fa, fb),
    ]


def _timing_changes(sa: RunSummary, sb: RunSummary) -> list[FindingChange]:
    """Each timing pair's reading in the two runs, changed only with disjoint intervals."""
    gated = unresolved_runs(sa, sb)
    return [
        FindingChange(
            (x or y).rule if (x or y) else "",
            f"`{key[0]}` against `{key[1]}`",
            _timing_reading(x),
            _timing_reading(y),
            timing_status(x, y, gated),
        )
        for key, x, y in _paired(_timing(sa), _timing(sb))
    ]


def _memory_changes(fa: Findings | None, fb: Findings | None) -> list[FindingChange]:
    """Each memory peak's reading in the two runs, paired by variant and reference."""
    ma = {(m.variant, m.against): m for m in (fa.memory if fa else ())}
    mb = {(m.variant, m.against): m for m in (fb.memory if fb else ())}
    return [
        FindingChange(
            "memory.peak",
            f"`{key[0]}`'s peak against `{key[1]}`",
            _memory_reading(x),
            _memory_reading(y),
            _keyed_status(x, y),
        )
        for key, x, y in _paired(ma, mb)
    ]


def _coverage_changes(fa: Findings | None, fb: Findings | None) -> list[FindingChange]:
    """Each variant's unattributed device time in the two runs."""
    ca = {c.variant: c for c in (fa.coverage if fa else ())}
    cb = {c.variant: c for c in (fb.coverage if fb else ())}
    return [
        FindingChange(
            "coverage.unattributed",
            f"`{name}`'s device time",
            x.verdict if x else MISSING,
            y.verdict if y else MISSING,
            _keyed_status(x, y),
        )
        for name, x, y in _paired(ca, cb)
    ]


def _observation_changes(fa: Findings | None, fb: Findings | None) -> list[FindingChange]:
    """Each observation in the two runs, paired by its key and framework."""
    oa = {(o.key, o.framework): o for o in (fa.observations if fa else ())}
    ob = {(o.key, o.framework): o for o in (fb.observations if fb else ())}
    return [_observation_change(key, x, y) for key, x, y in _paired(oa, ob)]


def _observation_change(
    key: tuple[str, str], x: Observation | None, y: Observation | None
) -> FindingChange:
    either = x or y
    return FindingChange(
        either.rule if either else "",
        f"{either.claim if either else key[0]} ({key[1]})",
        x.verdict if x else MISSING,
        y.verdict if y else MISSING,
        _keyed_status(x, y),
    )


# --- the ground: what differs in the two configs -----------------------------------------------


def config_differences(ma: Manifest, mb: Manifest) -> list[tuple[str, str, str]]:
    """Returns every config key whose value differs between the runs: (key, a, b).

    A key one run's config lacks (saved before the key existed) counts as its default. A
    variant's key that differs exactly as the experiment's does (a variant inheriting
    `problem.m`) is not listed again.
    """
    ca, cb = configs(ma, mb)
    out: list[tuple[str, str, str]] = []
    _walk_diff(ca, cb, "", out)
    shared = {k: (a, b) for k, a, b in out if not k.startswith("variants.")}
    return [
        (k, a, b)
        for k, a, b in out
        if not (k.startswith("variants.") and shared.get(k.split(".", 2)[-1]) == (a, b))
    ]


def configs(ma: Manifest, mb: Manifest) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two runs' configs, each key a config saved before that key existed lacks filled in
    with the schema's default, so an older run compares like for like."""

    top, variant = to_json(Experiment()), to_json(Variant(name=""))
    ca, cb = (_defaulted(m.config, top, variant) for m in (ma, mb))
    return ca, cb


def _defaulted(config: dict[str, Any], top: dict[str, Any], variant: dict[str, Any]) -> Any:
    """The config with the top-level and variant keys it lacks filled from the schema's
    defaults. A section it has is kept as saved: a key missing inside it (`timing.settle`)
    is a behaviour the older code did not have, and shows as a difference."""
    out = {**{k: v for k, v in top.items() if k != "variants"}, **config}
    variants = config.get("variants")
    if isinstance(variants, list):
        out["variants"] = [{**variant, **v} if isinstance(v, dict) else v for v in variants]
    return out


def _walk_diff(a: Any, b: Any, path: str, out: list[tuple[str, str, str]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            _walk_diff(a.get(k), b.get(k), f"{path}.{k}" if path else k, out)
    elif (
        isinstance(a, list)
        and isinstance(b, list)
        and all(isinstance(x, dict) and "name" in x for x in a + b)
    ):
        by_a, by_b = {x["name"]: x for x in a}, {x["name"]: x for x in b}
        for name in [*by_a, *(n for n in by_b if n not in by_a)]:
            _walk_diff(by_a.get(name), by_b.get(name), f"{path}.{name}", out)
    elif first_difference(a, b, path) is not None:
        out.append((path, fmt.text(a)[:80], fmt.text(b)[:80]))
