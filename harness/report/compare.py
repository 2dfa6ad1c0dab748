"""python -m harness.commands.compare --a=RUN --b=RUN --out=DIR: what changed between two runs.

It states its ground first: the config differences and the environments, and a warning when
the two ran different problem sizes (then speed is compared per FLOP, never as a step ratio).
Then every finding of either run (summary.json's `findings`, matched by its rule and subject):
the same, changed (a timing finding only when the two runs' intervals are disjoint), the same
within noise (a different verdict, overlapping intervals), appeared or vanished. Then, for
each variant in both runs: clusters, library calls, kernels per step, the step time
with both runs' intervals and a verdict, and the first IR stage where the two ladders differ.
A pair that compiled to the same program is never called faster or slower: across runs its
difference is drift. Reads only the run folders. The conclusions (which finding changed, each
variant's verdict, which config keys differ) are the rules' (harness.findings.compare, called
by harness.commands.compare); this module renders them.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.records.compare import NO_LINE_VERDICT, FindingChange, LineChange, RunsCompared
from harness.records.run_files import ClusterEntry
from harness.report import doc, unresolved
from harness.report.doc import Block, Bullets, Heading, Para, Table
from harness.report.memory import peak_cell
from harness.saved.run import SavedRun, SavedVariant
from harness.store import io
from harness.store.runfolder import RunFolder

LIST_LIMIT = 6  # longer lists are cut to a count and this many examples


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


def cluster_changes(a: SavedVariant, b: SavedVariant) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Returns (added in b, removed from a) cluster signatures, counting repeats."""
    ca = Counter(cluster_signature(c) for c in a.cluster_entries())
    cb = Counter(cluster_signature(c) for c in b.cluster_entries())
    return tuple(sorted((cb - ca).elements())), tuple(sorted((ca - cb).elements()))


def shorten(items: Sequence[str], limit: int = LIST_LIMIT) -> str:
    """Returns a list as text, cut to `limit` examples and a count of the rest."""
    shown = ", ".join(doc.code(s) for s in items[:limit])
    return shown + (
        f" and {len(items) - limit} more ({len(items)} in all)" if len(items) > limit else ""
    )


def _arrow(x: str, y: str) -> str:
    return x if x == y else f"{x} → {y}"


def _libs(v: SavedVariant) -> str:
    h = v.summary.hlo
    if h.fusion_count is None:
        return MISSING
    return "; ".join(f"{c.target}+{c.epilogue or '∅'}" for c in h.library_calls) or "none"


def step_cell(a: SavedVariant, b: SavedVariant) -> str:
    """The step time in run a → run b, each with its interval."""
    ta, tb = a.summary.timing, b.summary.timing
    return _arrow(fmt.step(ta.step_s, ta.step_ci95_s), fmt.step(tb.step_s, tb.step_ci95_s))


def per_flop(v: SavedVariant) -> str:
    s = v.summary
    flops = s.cost.flops_analytic
    if not s.timing.step_s or not flops:
        return MISSING
    return f"{s.timing.step_s / flops * 1e12:.3f} ps/FLOP ({fmt.tflops(flops / s.timing.step_s)} TFLOP/s)"


def variant_change(
    a: SavedVariant,
    b: SavedVariant,
    compared: RunsCompared,
    divergences: Mapping[str, tuple[str, str]],
) -> VariantChange:
    """Returns what changed for one variant between the two runs, with the rules' verdict."""
    added, removed = cluster_changes(a, b)
    # Two problems of different sizes pair per FLOP, never as a step ratio.
    step = step_cell(a, b) if compared.same_problem else _arrow(per_flop(a), per_flop(b))
    verdict = compared.verdict(a.name) or MISSING
    stage, detail = divergence(a, b, divergences)
    ka, kb = a.summary.profile.kernels_per_step, b.summary.profile.kernels_per_step
    return VariantChange(
        name=a.name,
        clusters=_arrow(
            str(len(a.cluster_entries()) or MISSING), str(len(b.cluster_entries()) or MISSING)
        ),
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


def divergence(
    a: SavedVariant, b: SavedVariant, divergences: Mapping[str, tuple[str, str]]
) -> tuple[str, str]:
    """Returns (stage, detail) where the two ladders first differ, as the command found it
    (harness.hlo.diverge.ladder_divergence over `ladders`: the report reads no IR)."""
    if not a.stages or not b.stages:
        return MISSING, "one of the runs has no IR ladder for this variant"
    return divergences[a.name]


def _pairs(ra: SavedRun, rb: SavedRun) -> Iterator[tuple[SavedVariant, SavedVariant]]:
    """Each variant of run a that run b holds too, both of which ran."""
    for va in ra.variants:
        if (vb := rb.variant(va.name)) is not None and va.ok and vb.ok:
            yield va, vb


def ladders(ra: SavedRun, rb: SavedRun) -> dict[str, tuple[Path, Path]]:
    """The IR ladder folders, a's and b's, of each variant the page compares, by name: what
    the command diverges before the page is rendered."""
    return {
        va.name: (RunFolder(ra.path).variant(va.name).ir, RunFolder(rb.path).variant(vb.name).ir)
        for va, vb in _pairs(ra, rb)
        if va.stages and vb.stages
    }


def finding_blocks(ra: SavedRun, rb: SavedRun, changes: Sequence[FindingChange]) -> list[Block]:
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


def _run_label(run: SavedRun) -> str:
    env = run.environment
    return (
        f"{doc.literal(run.experiment)}/{doc.literal(run.run_id)}: "
        f"{doc.literal(fmt.text(env.device_kind))} ({doc.literal(run.platform)}), "
        f"jax {doc.literal(fmt.text(env.value('jax')))}"
    )


def ground_blocks(ra: SavedRun, rb: SavedRun, compared: RunsCompared) -> list[Block]:
    """Returns what the comparison stands on: config differences, sizes, noise floors."""
    diffs = compared.config_differences
    blocks: list[Block] = [Heading(2, "Config differences")]
    if diffs:
        # A config's keys and values are the user's text: shown as that text, never Markdown
        # (`![i](http://...)` in a value was a live link, issue 59).
        rows = tuple(tuple(doc.literal(cell) for cell in row) for row in diffs[:40])
        blocks.append(Table(("key", "a", "b"), rows))
        if len(diffs) > 40:
            blocks.append(Para(f"and {len(diffs) - 40} more keys ({len(diffs)} in all)."))
    else:
        blocks.append(Para("None: both runs used the same config."))
    sizes = compared.size_differences
    if sizes:
        keys = "; ".join(
            f"{doc.code(k)} {doc.literal(a)} against {doc.literal(b)}" for k, a, b in sizes[:6]
        )
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
    if compared.floors_differ_by is not None:
        blocks.append(
            Para(
                f"**The noise floors differ by more than {compared.floors_differ_by:.0f}×**: "
                "one run was much noisier, so small differences between them are not resolved."
            )
        )
    return blocks


LINES_SHOWN = 40  # rows of the line table: every line that moved, then the largest others


def _seconds_ci(ci: tuple[float, float]) -> str:
    return f"{ci[0] * 1e3:+.3f} to {ci[1] * 1e3:+.3f} ms"


def _ratio_ci(ci: tuple[float, float] | None) -> str:
    return "new in b" if ci is None else f"{ci[0]:.3f}× to {ci[1]:.3f}×"


def _verdict_cell(c: LineChange) -> str:
    if c.verdict != NO_LINE_VERDICT:
        return c.verdict
    if c.floor != c.floor:  # NaN: a run without a resolved A/A floor
        return "no verdict (a run could not resolve differences)"
    return f"no verdict ({c.steps[0]} and {c.steps[1]} profiled steps)"


def line_blocks(lines: Sequence[LineChange]) -> list[Block]:
    """Device time a step per source line and kind of work, side by side, each difference
    with its bootstrap interval; the lines that moved lead (harness.analyze.line_diff
    decided which)."""
    if not lines:
        return []
    moved = [c for c in lines if c.moved]
    shown = [*moved, *[c for c in lines if not c.moved][: max(0, LINES_SHOWN - len(moved))]]
    floors = {c.floor for c in lines if c.floor == c.floor}  # NaN: no verdict
    resolution = max((c.resolution_s for c in lines), default=0.0)
    head = (
        f"{len(moved)} of {len(lines)} lines moved beyond both runs' noise"
        + (f" (floor {fmt.pct(max(floors))}" if floors else "")
        + (f", at least {fmt.ms(resolution)} a step" if floors and resolution else "")
        + (")" if floors else "")
        + "; intervals resample each run's profiled steps"
    )
    return [
        Heading(2, "Source lines", "lines"),
        Para(head + "."),
        Table(
            (
                "variant",
                "source line",
                "kind of work",
                "a",
                "b",
                "b − a (95% CI)",
                "b / a (95% CI)",
                "verdict",
            ),
            tuple(
                (
                    doc.literal(c.variant),
                    doc.literal(c.line.rsplit("/", 1)[-1]),
                    c.work,
                    fmt.ms(c.a_s),
                    fmt.ms(c.b_s),
                    f"{(c.b_s - c.a_s) * 1e3:+.3f} ms ({_seconds_ci(c.ci95_s)})",
                    _ratio_ci(c.ratio_ci95),
                    _verdict_cell(c),
                )
                for c in shown
            ),
        ),
    ]


def compare_blocks(
    ra: SavedRun,
    rb: SavedRun,
    changes: list[VariantChange],
    compared: RunsCompared,
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
        *line_blocks(compared.lines),
        *ground_blocks(ra, rb, compared),
        *finding_blocks(ra, rb, compared.findings),
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


def write(
    ra: SavedRun,
    rb: SavedRun,
    compared: RunsCompared,
    divergences: Mapping[str, tuple[str, str]],
    out: Path,
) -> tuple[Path, Path]:
    """Writes out/compare.md and out/compare.html for runs a and b, as the rules compared them
    (harness.findings.compare), with each of `ladders`' first divergence; returns their paths."""
    changes = [variant_change(va, vb, compared, divergences) for va, vb in _pairs(ra, rb)]
    blocks = compare_blocks(ra, rb, changes, compared)
    md = io.write_text(out / "compare.md", doc.to_markdown(blocks))
    html = io.write_text(out / "compare.html", doc.to_html(blocks, f"{ra.run_id} vs {rb.run_id}"))
    return md, html


def default_out(a: Path, b: Path, root: Path = Path("results") / "compare") -> Path:
    """The folder a compare writes to without --out: named by the two resolved runs'
    experiments and ids, so a later compare of `latest` never replaces an earlier one, and a
    digest of their absolute paths, so two pairs of runs in two results roots whose
    experiments and ids coincide get two folders."""
    where = f"{Path(a).absolute()}\0{Path(b).absolute()}".encode()
    digest = hashlib.sha256(where).hexdigest()[:8]
    return root / f"{a.parent.name}-{a.name}_vs_{b.parent.name}-{b.name}-{digest}"


if __name__ == "__main__":  # a command here once: say where it went
    import harness

    harness.moved("harness.report.compare")
