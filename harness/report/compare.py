"""python -m harness.commands.compare --a=RUN --b=RUN --out=DIR: what changed between two runs.

It states its ground first: the config differences and the environments, and a warning when
the two ran different problem sizes (then speed is compared per FLOP, never as a step ratio).
Then every finding of either run (summary.json's `findings`, matched by its rule and subject):
the same, changed (a timing finding only when the two runs' intervals are disjoint), the same
within noise (a different verdict, overlapping intervals), appeared or vanished. Then, for
each variant in both runs: clusters, library calls, kernels per step, the step time
with both runs' intervals and a verdict, and the first IR stage where the two ladders differ.
A pair that compiled to the same program is never called faster or slower: across runs its
difference is drift. Reads only the run folders.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common import fmt, stats
from harness.records.findings import MemoryFinding, TimingFinding
from harness.records.run_files import ClusterEntry
from harness.report import data, doc, unresolved
from harness.report.data import MISSING, RunData, VariantData
from harness.report.doc import Block, Bullets, Heading, Para, Table
from harness.report.memory import peak_cell
from harness.store import io
from harness.store.records import first_difference
from harness.store.runfolder import RunFolder

LIST_LIMIT = 6  # longer lists are cut to a count and this many examples
NOISE_RATIO = 3.0  # noise floors further apart than this are flagged


@dataclass(frozen=True)
class VariantChange:
    """How one variant differs between run a and run b."""

    name: str
    clusters: str
    clusters_added: tuple[str, ...]
    clusters_removed: tuple[str, ...]
    library_calls: str
    kernels_per_step: str
    step_time: str
    verdict: str
    compile_time: str
    divergence_stage: str
    divergence_detail: str
    peak_memory: str = MISSING  # XLA's live-range peaks, a → b


def cluster_signature(c: ClusterEntry) -> str:
    """Returns a cluster's identity across runs: kind, library target and epilogue, its name
    with numeric suffixes removed (fusion.3 and fusion.7 are the same kind of thing)."""
    name = re.sub(r"(\.\d+)+$", "", c.name if c.name is not None else "?")
    target = c.target or ""
    epi = f"+{c.epilogue}" if c.epilogue else ""
    kind = c.kind if c.kind is not None else "?"
    return f"{name} [{kind}{' ' + target if target else ''}{epi}]"


def cluster_changes(a: VariantData, b: VariantData) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Returns (added in b, removed from a) cluster signatures, counting repeats."""
    ca = Counter(cluster_signature(c) for c in a.clusters())
    cb = Counter(cluster_signature(c) for c in b.clusters())
    return tuple(sorted((cb - ca).elements())), tuple(sorted((ca - cb).elements()))


def shorten(items: Sequence[str], limit: int = LIST_LIMIT) -> str:
    """Returns a list as text, cut to `limit` examples and a count of the rest."""
    shown = ", ".join(doc.code(s) for s in items[:limit])
    return shown + (
        f" and {len(items) - limit} more ({len(items)} in all)" if len(items) > limit else ""
    )


def _arrow(x: str, y: str) -> str:
    return x if x == y else f"{x} → {y}"


def _libs(v: VariantData) -> str:
    h = v.summary.hlo
    if h.fusion_count is None:
        return MISSING
    return "; ".join(f"{c.target}+{c.epilogue or '∅'}" for c in h.library_calls) or "none"


# The config keys that set what is computed and on what: sizes, dtypes, the program and its
# inputs. A keyword knob (`program.kwargs.*`), an option or a timing key is not one of them:
# two runs that differ only there ran the same problem, and their step times pair.
SIZE_KEY = re.compile(
    r"(^|\.)(problem\.(m|k|n|batch|dtype|w_dtype)|program\.(function|init|inputs|dtype|w_dtype))"
    r"(\.|$)"
)


def size_differences(ra: RunData, rb: RunData) -> list[tuple[str, str, str]]:
    """The config keys of sizes, dtypes, the program or its inputs that differ: (key, a, b)."""
    return [d for d in config_differences(ra, rb) if SIZE_KEY.search(d[0])]


def same_problem(ra: RunData, rb: RunData) -> bool:
    """True when the two runs' configs ran the same problem sizes and dtypes (for a program
    study: the same program, inputs and dtypes); keyword knobs and options may differ."""
    return not size_differences(ra, rb)


def step_verdict(a: VariantData, b: VariantData, floor: float) -> tuple[str, str]:
    """Returns (step cell, verdict cell) for one variant across two runs."""
    ta, tb = a.summary.timing, b.summary.timing
    cell = _arrow(fmt.step(ta.step_s, ta.step_ci95_s), fmt.step(tb.step_s, tb.step_ci95_s))
    fa, fb = a.summary.hlo.fingerprint, b.summary.hlo.fingerprint
    same = fa is not None and fb is not None and fa.digest == fb.digest
    if same:
        return cell, "same program in both runs: any difference is run-to-run drift"
    if not ta.round_step_s or not tb.round_step_s:
        return cell, MISSING
    estimate = stats.independent_ratio(tb.round_step_s, ta.round_step_s)
    decision = stats.decide(estimate, floor)
    words = fmt.VERDICT_WORDS.get(decision.verdict, decision.verdict)
    lo, hi = estimate.ci95
    return cell, f"b/a {estimate.ratio:.3f}× ({lo:.3f}–{hi:.3f}): {words} in b"


def unresolved_runs(ra: RunData, rb: RunData) -> str:
    """Returns which of the two runs failed its own A/A check ("a", "b", "a and b"), or "":
    compare reports no verdict change for such a run (harness.records.resolution)."""
    return " and ".join(
        label for label, r in (("a", ra), ("b", rb)) if not unresolved.resolved(r.summary)
    )


def per_flop(v: VariantData) -> str:
    s = v.summary
    flops = s.cost.flops_analytic
    if not s.timing.step_s or not flops:
        return MISSING
    return f"{s.timing.step_s / flops * 1e12:.3f} ps/FLOP ({fmt.tflops(flops / s.timing.step_s)} TFLOP/s)"


def variant_change(
    ra: RunData, a: VariantData, rb: RunData, b: VariantData, floor: float
) -> VariantChange:
    """Returns what changed for one variant between the two runs."""
    added, removed = cluster_changes(a, b)
    gated = unresolved_runs(ra, rb)
    if same_problem(ra, rb) and gated:
        step, verdict = step_verdict(a, b, floor)
        runs = "runs" if " and " in gated else "run"
        verdict = f"no verdict: {runs} {gated} could not resolve differences (A/A check failed)"
    elif same_problem(ra, rb):
        step, verdict = step_verdict(a, b, floor)
    else:
        step, verdict = (
            _arrow(per_flop(a), per_flop(b)),
            "sizes differ: compared per FLOP, no verdict",
        )
    stage, detail = divergence(ra, a, rb, b)
    ka, kb = a.summary.profile.kernels_per_step, b.summary.profile.kernels_per_step
    return VariantChange(
        name=a.name,
        clusters=_arrow(str(len(a.clusters()) or MISSING), str(len(b.clusters()) or MISSING)),
        clusters_added=added,
        clusters_removed=removed,
        library_calls=_arrow(_libs(a), _libs(b)),
        kernels_per_step=_arrow(fmt.count(ka), fmt.count(kb)),
        step_time=step,
        verdict=verdict,
        compile_time=_arrow(
            fmt.secs(a.summary.compile.compile_s), fmt.secs(b.summary.compile.compile_s)
        ),
        divergence_stage=stage,
        divergence_detail=detail,
        peak_memory=_arrow(peak_cell(a.summary), peak_cell(b.summary)),
    )


def divergence(ra: RunData, a: VariantData, rb: RunData, b: VariantData) -> tuple[str, str]:
    """Returns (stage, detail) where the two ladders first differ (harness.analyze.crossrun)."""
    from harness.analyze.crossrun import ladder_divergence

    if not a.stages or not b.stages:
        return MISSING, "one of the runs has no IR ladder for this variant"
    return ladder_divergence(
        RunFolder(ra.path).variant(a.name).ir, RunFolder(rb.path).variant(b.name).ir
    )


# --- findings across the two runs --------------------------------------------------------------

SAME, CHANGED, WITHIN_NOISE = "same", "changed", "the same within noise"
APPEARED, VANISHED = "appeared in b", "vanished in b"


@dataclass(frozen=True)
class FindingChange:
    """One finding of either run, read in both: what each run concluded and how they relate."""

    rule: str
    subject: str
    a: str
    b: str
    status: str


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


def _timing(run: RunData) -> dict[tuple[str, str], TimingFinding]:
    f = run.summary.findings
    return {(t.variant, t.against): t for t in ((*f.timing, *f.noise) if f else ())}


def _memory_reading(m: MemoryFinding | None) -> str:
    return (
        MISSING if m is None else f"{fmt.si(abs(m.peak_bytes - m.against_bytes), 'B')} {m.verdict}"
    )


def _keyed_status(x: object, y: object, same: bool) -> str:
    if x is None or y is None:
        return APPEARED if x is None else VANISHED
    return SAME if same else CHANGED


def finding_changes(ra: RunData, rb: RunData) -> list[FindingChange]:
    """Every finding of either run, matched by its rule's subject: the timing pairs (changed
    only with disjoint intervals), the memory peaks, the unattributed time, the
    observations."""
    out: list[FindingChange] = []
    gated = unresolved_runs(ra, rb)
    ta, tb = _timing(ra), _timing(rb)
    for key in [*ta, *(k for k in tb if k not in ta)]:
        x, y = ta.get(key), tb.get(key)
        out.append(
            FindingChange(
                (x or y).rule if (x or y) else "",
                f"`{key[0]}` against `{key[1]}`",
                _timing_reading(x),
                _timing_reading(y),
                timing_status(x, y, gated),
            )
        )
    fa, fb = ra.summary.findings, rb.summary.findings
    ma = {(m.variant, m.against): m for m in (fa.memory if fa else ())}
    mb = {(m.variant, m.against): m for m in (fb.memory if fb else ())}
    for key in [*ma, *(k for k in mb if k not in ma)]:
        x, y = ma.get(key), mb.get(key)
        same = x is not None and y is not None and x.verdict == y.verdict
        out.append(
            FindingChange(
                "memory.peak",
                f"`{key[0]}`'s peak against `{key[1]}`",
                _memory_reading(x),
                _memory_reading(y),
                _keyed_status(x, y, same),
            )
        )
    ca = {c.variant: c for c in (fa.coverage if fa else ())}
    cb = {c.variant: c for c in (fb.coverage if fb else ())}
    for name in [*ca, *(n for n in cb if n not in ca)]:
        x, y = ca.get(name), cb.get(name)
        same = x is not None and y is not None and x.verdict == y.verdict
        out.append(
            FindingChange(
                "coverage.unattributed",
                f"`{name}`'s device time",
                x.verdict if x else MISSING,
                y.verdict if y else MISSING,
                _keyed_status(x, y, same),
            )
        )
    oa = {(o.key, o.framework): o for o in (fa.observations if fa else ())}
    ob = {(o.key, o.framework): o for o in (fb.observations if fb else ())}
    for key in [*oa, *(k for k in ob if k not in oa)]:
        x, y = oa.get(key), ob.get(key)
        same = x is not None and y is not None and x.verdict == y.verdict
        out.append(
            FindingChange(
                (x or y).rule if (x or y) else "",
                f"{(x or y).claim if (x or y) else key[0]} ({key[1]})",
                x.verdict if x else MISSING,
                y.verdict if y else MISSING,
                _keyed_status(x, y, same),
            )
        )
    return out


def finding_blocks(ra: RunData, rb: RunData, changes: Sequence[FindingChange]) -> list[Block]:
    """The findings of both runs side by side, each with how they relate."""
    out: list[Block] = [Heading(2, "Findings")]
    missing = [label for label, r in (("a", ra), ("b", rb)) if r.summary.findings is None]
    if missing:
        out.append(
            Para(
                f"Run {' and '.join(missing)} has no findings recorded (saved before schema 6): "
                "`python -m harness.commands.migrate --run=...` makes them."
            )
        )
    if not changes:
        return [*out, Para("Neither run has a finding.")]
    counts = Counter(c.status for c in changes)
    out.append(Para("; ".join(f"{n} {status}" for status, n in counts.most_common()) + "."))
    out.append(
        Table(
            ("finding", "rule", "a", "b", "in b"),
            tuple((c.subject, f"`{c.rule}`", c.a, c.b, c.status) for c in changes),
        )
    )
    return out


def _run_label(run: RunData) -> str:
    env = run.environment
    return (
        f"{doc.literal(run.experiment)}/{doc.literal(run.run_id)}: "
        f"{doc.literal(fmt.text(env.device_kind))} ({doc.literal(run.platform)}), "
        f"jax {doc.literal(fmt.text(env.value('jax')))}"
    )


def config_differences(ra: RunData, rb: RunData) -> list[tuple[str, str, str]]:
    """Returns every config key whose value differs between the runs: (key, a, b).

    A key one run's config lacks (saved before the key existed) counts as its default. A
    variant's key that differs exactly as the experiment's does (a variant inheriting
    `problem.m`) is not listed again.
    """
    ca, cb = configs(ra, rb)
    out: list[tuple[str, str, str]] = []
    _walk_diff(ca, cb, "", out)
    shared = {k: (a, b) for k, a, b in out if not k.startswith("variants.")}
    return [
        (k, a, b)
        for k, a, b in out
        if not (k.startswith("variants.") and shared.get(k.split(".", 2)[-1]) == (a, b))
    ]


def configs(ra: RunData, rb: RunData) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two runs' configs, each key a config saved before that key existed lacks filled in
    with the schema's default, so an older run compares like for like."""
    from harness.config.experiment import Experiment, Variant
    from harness.store.records import to_json

    top, variant = to_json(Experiment()), to_json(Variant(name=""))
    ca, cb = (_defaulted(r.manifest.config, top, variant) for r in (ra, rb))
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


def ground_blocks(ra: RunData, rb: RunData) -> list[Block]:
    """Returns what the comparison stands on: config differences, sizes, noise floors."""
    diffs = config_differences(ra, rb)
    blocks: list[Block] = [Heading(2, "Config differences")]
    if diffs:
        rows = tuple(diffs[:40])
        blocks.append(Table(("key", "a", "b"), rows))
        if len(diffs) > 40:
            blocks.append(Para(f"and {len(diffs) - 40} more keys ({len(diffs)} in all)."))
    else:
        blocks.append(Para("None: both runs used the same config."))
    sizes = size_differences(ra, rb)
    if sizes:
        keys = "; ".join(f"`{k}` {a} against {b}" for k, a, b in sizes[:6])
        more = f" and {len(sizes) - 6} more" if len(sizes) > 6 else ""
        blocks.append(
            Para(
                f"**Warning: the two runs ran different problem sizes or dtypes** ({keys}{more}). "
                "Step times are not comparable as ratios; each variant is compared per FLOP "
                "(time per analytic FLOP) instead."
            )
        )
    na, nb = ra.summary.noise, rb.summary.noise
    fa, fb = (na.floor if na else None), (nb.floor if nb else None)
    blocks.append(
        Para(
            f"Noise floors (each run's baseline against itself): a {fmt.pct(fa)}, b {fmt.pct(fb)}."
        )
    )
    for label, run in (("a", ra), ("b", rb)):
        if (line := unresolved.unresolved_line(run.summary)) is not None:
            blocks.append(Para(f"**Run {label}:** {line}"))
    if fa and fb and max(fa, fb) / max(min(fa, fb), 1e-6) > NOISE_RATIO:
        blocks.append(
            Para(
                f"**The noise floors differ by more than {NOISE_RATIO:.0f}×**: one run was much "
                "noisier, so small differences between them are not resolved."
            )
        )
    return blocks


def compare_blocks(
    ra: RunData,
    rb: RunData,
    changes: list[VariantChange],
    found: Sequence[FindingChange] = (),
) -> tuple[Block, ...]:
    """Returns the comparison page as document blocks."""
    env_keys = ("platform", "device_kind", "jax", "jaxlib", "flax", "python", "git_commit")
    env_rows = tuple(
        (k, fmt.text(ra.environment.value(k)), fmt.text(rb.environment.value(k))) for k in env_keys
    )
    only = sorted(set(ra.names()) ^ set(rb.names()))
    blocks: list[Block] = [
        Heading(1, f"Comparison: {doc.literal(ra.run_id)} against {doc.literal(rb.run_id)}"),
        Bullets((f"a = {_run_label(ra)}", f"b = {_run_label(rb)}")),
        *ground_blocks(ra, rb),
        *finding_blocks(ra, rb, found),
        Heading(2, "Environment"),
        Table(("what", "a", "b"), env_rows),
        Heading(2, "Variants in both runs"),
        Table(
            (
                "variant",
                "clusters",
                "library calls",
                "kernels/step",
                "step",
                "verdict",
                "compile",
                "peak memory",
                "first IR divergence",
            ),
            tuple(
                (
                    c.name,
                    c.clusters,
                    c.library_calls,
                    c.kernels_per_step,
                    c.step_time,
                    c.verdict,
                    c.compile_time,
                    c.peak_memory,
                    c.divergence_stage,
                )
                for c in changes
            ),
        ),
    ]
    if only:
        blocks.append(Para("In one run only: " + shorten(only)))
    for c in changes:
        blocks.append(Heading(3, c.name))
        items = [f"first IR divergence: `{c.divergence_stage}` — {c.divergence_detail}"]
        if c.clusters_added:
            items.append("clusters only in b: " + shorten(c.clusters_added))
        if c.clusters_removed:
            items.append("clusters only in a: " + shorten(c.clusters_removed))
        blocks.append(Bullets(tuple(items)))
    for label, run in (("a", ra), ("b", rb)):
        if run.notes:
            blocks += [Para(f"Notes on {label}:"), Bullets(run.notes)]
    return tuple(blocks)


def compare_runs(a: Path, b: Path, out: Path) -> tuple[Path, Path, list[FindingChange]]:
    """Writes out/compare.md and out/compare.html for runs a and b; returns their paths and
    the findings of both runs as it lists them."""
    ra, rb = data.load_run(a), data.load_run(b)
    na, nb = ra.summary.noise, rb.summary.noise
    floor = max(na.floor if na else 0.0, nb.floor if nb else 0.0)
    changes = [
        variant_change(ra, va, rb, vb, floor)
        for va in ra.variants
        if (vb := rb.variant(va.name)) is not None and va.ok and vb.ok
    ]
    found = finding_changes(ra, rb)
    blocks = compare_blocks(ra, rb, changes, found)
    md = io.write_text(out / "compare.md", doc.to_markdown(blocks))
    html = io.write_text(out / "compare.html", doc.to_html(blocks, f"{ra.run_id} vs {rb.run_id}"))
    return md, html, found


def default_out(a: Path, b: Path, root: Path = Path("results") / "compare") -> Path:
    """The folder a compare writes to without --out: named by the two resolved runs'
    experiments and ids, so a later compare of `latest` never replaces an earlier one."""
    return root / f"{a.parent.name}-{a.name}_vs_{b.parent.name}-{b.name}"
