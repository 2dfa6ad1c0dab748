"""The report's findings, what to change and why-not-fused: summary.json's `findings` rendered.

The conclusions are made by the analysis stage's rules (harness.analyze.rules) and stored in
the run's summary; this module only lays out their records as document blocks, each finding
with the id of the rule that made it. A summary saved before findings were recorded (schema
6) says so, with the command that adds them.
"""

from __future__ import annotations

from harness.report import resolution
from harness.report.conclusion import retimable, retime_command
from harness.report.data import MISSING, RunData
from harness.report.doc import Block, Bullets, Code, Heading, Para, Table
from harness.report.gaps import gap_blocks
from harness.summary_findings import Boundaries, Findings


def rule(rule_id: str) -> str:
    """The rule's id as the report names it beside its finding."""
    return f"(rule `{rule_id}`)"


def not_recorded(run: RunData) -> Para:
    return Para(
        f"This run's summary was saved before findings were recorded (schema 6): "
        f"`python -m harness.migrate --run={run.path}` makes them from its summary and kept "
        "files."
    )


def findings_blocks(run: RunData) -> list[Block]:
    """The Findings section: the gate, the unattributed time, resolved differences largest
    first, what is noise, and the memory findings."""
    out: list[Block] = [Heading(2, "Findings", "findings")]
    f = run.summary.findings
    if f is None:
        return [*out, not_recorded(run)]
    if (line := resolution.unresolved_line(run.summary)) is not None:
        out.append(Para(f"**{line}** {rule(f.gate.rule) if f.gate else ''}".rstrip()))
        if retimable(run):
            out.append(
                Para(
                    "To time the saved run again (each variant compiled again and checked by "
                    "fingerprint against its captured program; the earlier timing is kept):"
                )
            )
            out.append(Code(retime_command(run), "sh"))
    for c in f.coverage:
        out += gap_blocks(c.gaps, f"`{c.variant}`")
    if not f.timing and not f.noise:
        out.append(Para("No variant has paired timing rounds to compare, so nothing is claimed."))
    for i, t in enumerate(f.timing, 1):
        out.append(Para(f"**{i}. {t.what}.** Why: {t.why}. {rule(t.rule)}"))
        out.append(Bullets(t.evidence))
    if f.noise:
        ranked = f"noise, never ranked; rule `{f.noise[0].rule}`"
        out.append(Para(f"No resolvable difference ({ranked}):"))
        out.append(Bullets(tuple(n.what for n in f.noise)))
    # Peaks are compiled, not timed: the timing gate above never holds these back.
    for m in f.memory:
        out.append(Para(f"**Memory: {m.what}.** {rule(m.rule)}"))
        if m.evidence:
            out.append(Bullets(m.evidence))
    return out


def changes_blocks(run: RunData) -> list[Block]:
    """What to change: measured changes with their effect and trade-off; then untested ones."""
    out: list[Block] = [Heading(2, "What to change", "what-to-change")]
    f = run.summary.findings
    if f is None:
        return [*out, not_recorded(run)]
    if not resolution.resolved(run.summary):
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
        out.append(Para("Untested in this run (add a variant to measure it):"))
        for u in f.untested:
            out.append(Para(f"{u.change}: {u.why}. {rule(u.rule)}"))
            out.append(Code(u.snippet, "yaml"))
    return out


def _examples(b: Boundaries, i: int) -> str:
    g = b.groups[i]
    shown = ", ".join(f"`{p.producer}` → `{p.consumer}`" for p in g.examples)
    more = f" and {g.count - len(g.examples)} more" if g.count > len(g.examples) else ""
    return f"{g.count} {'boundary' if g.count == 1 else 'boundaries'}: {shown}{more}"


def boundaries_blocks(run: RunData) -> list[Block]:
    """Why the baseline's clusters are separate launches, grouped by reason."""
    f: Findings | None = run.summary.findings
    b = f.boundaries if f is not None else None
    if b is None or not b.groups:
        return []
    out: list[Block] = [
        Heading(3, f"Why `{b.variant}`'s clusters are not one", "why-not-fused"),
        Para(
            f"{b.boundaries} {'boundary' if b.boundaries == 1 else 'boundaries'} between "
            f"{b.clusters} clusters of one step's launches, by reason {rule(b.rule)}:"
        ),
    ]
    for i, g in enumerate(b.groups):
        out.append(Para(_examples(b, i)))
        out.append(Bullets(g.reasons))
    return out
