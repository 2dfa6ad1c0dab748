"""The report's findings, what to change and why-not-fused: summary.json's `findings` rendered.

The conclusions are made by the analysis stage's rules (harness.findings) and stored in
the run's summary; this module only lays out their records as document blocks, each finding
with the id of the rule that made it. A summary saved before findings were recorded (schema
6) says so, with the command that adds them.
"""

from __future__ import annotations

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.records.findings import Boundaries, Decomposition, Findings
from harness.report import doc, unresolved
from harness.report.conclusion import retimable, retime_commands
from harness.report.doc import Block, Bullets, Code, Heading, Para, Table
from harness.report.gaps import gap_blocks
from harness.saved.run import SavedRun
from harness.store.runfolder import DETAILS_FILE


def rule(rule_id: str) -> str:
    """The rule's id as the report names it beside its finding."""
    return f"(rule `{rule_id}`)"


def not_recorded(run: SavedRun) -> Para:
    return Para(
        f"This run's summary was saved before findings were recorded (schema 6): "
        f"`python -m harness.commands.migrate --run={run.path}` makes them from its summary and kept "
        "files."
    )


def verdict_blocks(run: SavedRun) -> list[Block]:
    """The line the page opens with: whether the run resolves differences, and its noise
    floor; an unresolved run's command to time it again."""
    n = run.summary.noise
    f = run.summary.findings
    left_out = unresolved.not_timed_line(run.summary)
    left_out = f" {left_out}" if left_out else ""
    line = unresolved.unresolved_line(run.summary)
    if line is not None:
        gate = f" {rule(f.gate.rule)}" if f is not None and f.gate is not None else ""
        out: list[Block] = [
            Para(f"**Not resolved.** {line}{left_out} [Noise]({DETAILS_FILE}#noise).{gate}")
        ]
        if retimable(run):
            out.append(
                Para(
                    "To time the saved run again (each variant compiled again and checked by "
                    "fingerprint against its captured program; the earlier timing is kept):"
                )
            )
            out.append(Code("\n".join(retime_commands(run)), "sh"))
        return out
    if n is None:
        return [Para("**No timing.** This run has no timing rounds: no difference is resolved.")]
    aa = (
        f"`{n.baseline}` against itself {n.self_ratio:.4f}× "
        f"(95% CI {n.self_ci95[0]:.4f}–{n.self_ci95[1]:.4f}) over {n.rounds} rounds"
        if n.self_ratio is not None and n.self_ci95
        # The same record the sentence after it reads (`aa_held`): never "passed" beside
        # "failed".
        else f"its A/A check {'failed' if n.aa_held is False else 'passed'}"
    )
    spread = unresolved.between_runs_line(run.summary)
    spread = f" {spread[0].upper()}{spread[1:]}." if spread else ""
    widened = unresolved.aa_failed_line(run.summary)
    return [
        Para(
            f"**Resolved.** {aa}: a difference is called only where its interval clears "
            f"{fmt.pct(n.floor)}.{spread} "
            + (f"{widened} " if widened else "")
            + (f"{left_out.strip()} " if left_out else "")
            + f"[Noise]({DETAILS_FILE}#noise)."
        )
    ]


def findings_blocks(run: SavedRun) -> list[Block]:
    """The verdict, then the findings: resolved differences largest first, each a heading and
    its reason with its rule (the evidence comes later on the page); the memory findings."""
    out: list[Block] = [*verdict_blocks(run), Heading(2, "Findings", "findings")]
    f = run.summary.findings
    if f is None:
        return [*out, not_recorded(run)]
    if not f.timing and not f.noise:
        out.append(Para("No variant has paired timing rounds to compare, so nothing is claimed."))
    for i, t in enumerate(f.timing, 1):
        out.append(Heading(3, f"{i}. {t.what}", f"finding-{i}"))
        out.append(Para(f"Why: {t.why}. [Evidence]({DETAILS_FILE}#evidence-{i}). {rule(t.rule)}"))
    if f.noise:
        pairs = "1 pair shows" if len(f.noise) == 1 else f"{len(f.noise)} pairs show"
        out.append(
            Para(
                f"{pairs} no resolvable difference (noise, never ranked): "
                f"[which, and why]({DETAILS_FILE}#no-difference). {rule(f.noise[0].rule)}"
            )
        )
    # Peaks are compiled, not timed: the timing gate above never holds these back.
    for i, m in enumerate(f.memory, 1):
        out.append(Heading(3, f"Memory: {m.what}", f"memory-{i}"))
    if f.memory:
        made_by = sorted({m.rule for m in f.memory})
        out.append(Para(f"Memory findings: rule {', '.join(f'`{r}`' for r in made_by)}."))
    return [*out, *numerics_blocks(run)]


def numerics_blocks(run: SavedRun) -> list[Block]:
    """Each dtype's accuracy against float64, once, and the results a compiler choice moved."""
    f = run.summary.findings
    if f is None or not (f.numerics or f.effects):
        return []
    out: list[Block] = [Heading(3, "Numerics", "numerics")]
    out += [Para(f"Accuracy: {a.what}. {rule(a.rule)}") for a in f.numerics]
    moved = [e for e in f.effects if e.verdict == "changes"]
    out += [Para(f"Compiler effect: {e.what}. {rule(e.rule)}") for e in moved]
    if f.effects and not moved:
        out.append(
            Para(
                "Compiler effect: no variant moves the result beyond the rounding of two "
                f"correct implementations of its dtype. {rule(f.effects[0].rule)}"
            )
        )
    return out


def _launches(x: float | None) -> str:
    return "" if x is None else f" ({fmt.counted(x, 'launch')})"


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + fmt.ms(abs(seconds))


def _where(lines: tuple[str, ...], limit: int = 3) -> str:
    shown = [x.rsplit("/", 1)[-1] for x in lines[:limit]]
    return ", ".join(doc.literal(x) for x in shown) + (
        f" (+{len(lines) - limit})" if len(lines) > limit else ""
    )


def decomposition_blocks(d: Decomposition | None, variant: str, against: str) -> list[Block]:
    """A finding's difference taken apart per step: a row a kind of work (with its source
    lines), the launch gaps and the host gap; then a row a source line; the residual and how
    the windows relate to the timed ones."""
    if d is None or not d.parts:
        return [Para(d.note)] if d is not None and d.note else []
    rows = tuple(
        (
            p.what,
            _where(p.lines),
            fmt.ms(p.variant_s) + _launches(p.launches),
            fmt.ms(p.against_s) + _launches(p.against_launches),
            _signed(p.delta_s),
        )
        for p in d.parts
    )
    explained = (
        f"The parts are {fmt.pct(d.explained_share)} of the measured difference"
        if d.explained_share is not None
        else "The parts"
    )
    out: list[Block] = [
        Table(
            ("part of the step", "source lines", f"`{variant}`", f"`{against}`", "difference"), rows
        )
    ]
    if d.by_line:
        out.append(
            Table(
                ("source line", f"`{variant}`", f"`{against}`", "difference"),
                tuple(
                    (
                        doc.literal(p.what),
                        fmt.ms(p.variant_s),
                        fmt.ms(p.against_s),
                        _signed(p.delta_s),
                    )
                    for p in d.by_line
                ),
            )
        )
    out.append(
        Para(
            f"{explained} ({fmt.ms(d.measured_s)} a step between the timed medians); the "
            f"residual {fmt.ms(d.residual_s)} is what the timed and profiled windows disagree by."
            + (f" {d.note[0].upper()}{d.note[1:]}." if d.note else "")
            + (f" Windows: {d.windows}." if d.windows else "")
        )
    )
    return out


def has_evidence(run: SavedRun) -> bool:
    """True when a finding (timing, noise, or memory with sources) has evidence to show."""
    f = run.summary.findings
    return f is not None and bool(f.timing or f.noise or any(m.evidence for m in f.memory))


def evidence_blocks(run: SavedRun) -> list[Block]:
    """What backs each finding, by its number; the pairs that are noise, and why."""
    f = run.summary.findings
    if f is None or not has_evidence(run):
        return []
    with_sources = [(i, m) for i, m in enumerate(f.memory, 1) if m.evidence]
    out: list[Block] = [Heading(2, "Evidence", "evidence")]
    for i, t in enumerate(f.timing, 1):
        out += [Heading(3, f"For finding {i}", f"evidence-{i}"), Bullets(t.evidence)]
        out += decomposition_blocks(t.decomposition, t.variant, t.against)
    for i, m in with_sources:
        out += [
            Heading(3, f"For memory finding {i}", f"memory-evidence-{i}"),
            Bullets(m.evidence),
        ]
    if f.noise:
        out += [
            Heading(3, "No resolvable difference", "no-difference"),
            Bullets(tuple(n.what for n in f.noise)),
        ]
    return out


def coverage_blocks(run: SavedRun) -> list[Block]:
    """Device time the profile match could not attribute, per variant (nothing when all is);
    never held back by the timing gate."""
    f = run.summary.findings
    out: list[Block] = []
    for c in f.coverage if f is not None else ():
        out += gap_blocks(c.gaps, f"`{c.variant}`")
    return [Heading(2, "Coverage", "coverage"), *out] if out else []


def changes_blocks(run: SavedRun) -> list[Block]:
    """What to change: measured changes with their effect and trade-off; then the untested
    ones, a row each, with the variants that would measure them."""
    out: list[Block] = [Heading(2, "What to change", "what-to-change")]
    f = run.summary.findings
    if f is None:
        return [*out, not_recorded(run)]
    if not unresolved.resolved(run.summary):
        out.append(Para("No change is recommended: this run could not resolve differences."))
    elif f.changes:
        out.append(
            Table(
                ("change", "measured effect", "trade-off", "rule"),
                tuple(
                    (c.change, c.effect, c.tradeoff or MISSING, f"`{c.rule}`") for c in f.changes
                ),
            )
        )
    else:
        out.append(Para("No change measured in this run made a resolvable difference."))
    if f.untested:
        out.append(Para("Untested in this run; the variants below would measure them:"))
        out.append(
            Table(
                ("untested change", "what it does", "rule"),
                tuple((u.change, u.why, f"`{u.rule}`") for u in f.untested),
            )
        )
        out.append(Code("\n".join(u.snippet.rstrip("\n") for u in f.untested), "yaml"))
    return out


def _examples(b: Boundaries, i: int) -> str:
    g = b.groups[i]
    shown = ", ".join(f"`{p.producer}` → `{p.consumer}`" for p in g.examples)
    more = f" and {g.count - len(g.examples)} more" if g.count > len(g.examples) else ""
    return f"{g.count} {'boundary' if g.count == 1 else 'boundaries'}: {shown}{more}"


def boundaries_blocks(run: SavedRun, level: int = 3) -> list[Block]:
    """Why the baseline's clusters are separate launches, grouped by reason (under a heading
    of `level`)."""
    f: Findings | None = run.summary.findings
    b = f.boundaries if f is not None else None
    if b is None or not b.groups:
        return []
    out: list[Block] = [
        Heading(level, f"Why `{b.variant}`'s clusters are not one", "why-not-fused"),
        Para(
            f"{b.boundaries} {'boundary' if b.boundaries == 1 else 'boundaries'} between "
            f"{b.clusters} clusters of one step's launches, by reason {rule(b.rule)}:"
        ),
    ]
    for i, g in enumerate(b.groups):
        out.append(Para(_examples(b, i)))
        out.append(Bullets(g.reasons))
    return out


def control_flow_blocks(run: SavedRun, variant: str, level: int = 2) -> list[Block]:
    """What the variant's loops and conditionals cost a step: the `control_flow.*` rules'
    records, one line each with its figures."""
    f: Findings | None = run.summary.findings
    mine = [c for c in (f.control_flow if f is not None else ()) if c.variant == variant]
    if not mine:
        return []
    return [
        Heading(level, "Control flow", "control-flow"),
        Bullets(
            tuple(
                f"{c.what} {rule(c.rule)}" + (f" ({'; '.join(c.evidence)})" if c.evidence else "")
                for c in mine
            )
        ),
    ]
