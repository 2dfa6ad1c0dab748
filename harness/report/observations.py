"""The report's observations: the seed chapter's claims as summary.json's `findings` holds them.

Each claim is a rule of the analysis stage (harness.findings.observations), judged once
per framework of the study; this module only lays out the records: one row per claim, one
column per framework the study has variants of, then the quoted logs and IR lines. A claim
no framework of the study has a variant for is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.frontends import registry
from harness.records.findings import Observation
from harness.report.doc import Block, Code, Heading, Para, Table
from harness.saved.run import SavedRun

# A framework of the study that has no variant in the role a claim needs (a framework with
# no traced branch): nothing was measured there, and nothing is claimed.
NOT_IN_STUDY = "not measured in this study"


@dataclass(frozen=True)
class ObservationRow:
    """One claim, judged once per framework (`by_framework`: framework -> its Observation)."""

    key: str
    claim: str
    rule: str
    by_framework: dict[str, Observation]


def observation_rows(observations: Sequence[Observation]) -> tuple[ObservationRow, ...]:
    """The records grouped by claim, in the order the rules made them."""
    rows: dict[str, ObservationRow] = {}
    for o in observations:
        row = rows.setdefault(o.key, ObservationRow(o.key, o.claim, o.rule, {}))
        row.by_framework[o.framework] = o
    return tuple(rows.values())


def columns(observations: Sequence[Observation]) -> tuple[str, ...]:
    """The frameworks the records judge, in the registry's order (the built-ins first), then
    any whose plug-in this process did not load (a saved run read elsewhere)."""
    have = {o.framework for o in observations}
    known = registry.names()
    return (*(f for f in known if f in have), *sorted(have - set(known)))


def label(framework: str) -> str:
    """The framework's name in prose, from its frontend's traits (its own name when no
    loaded frontend has it)."""
    return registry.traits(framework).label or framework


def observation_cell(o: Observation | None) -> str:
    """Returns one framework's verdict and its evidence, for one cell of the table."""
    if o is None:
        return NOT_IN_STUDY
    return o.verdict + (" — " + "; ".join(o.evidence) if o.evidence else "")


def observation_blocks(run: SavedRun) -> list[Block]:
    """Returns the observations: claim | each framework's verdict and evidence, then the
    quoted logs and IR lines that back them."""
    out: list[Block] = [Heading(2, "Observations", "observations")]
    found = run.summary.findings
    if found is None:
        return [*out, Para("Not recorded: this run's summary was saved before schema 6.")]
    rows, frameworks = observation_rows(found.observations), columns(found.observations)
    if not rows:
        return [*out, Para("No claim of the seed chapter has a variant in its role here.")]
    header = (
        "claim",
        *(f"{label(f)}: verdict and evidence" for f in frameworks),
        "rule",
    )
    out.append(
        Table(
            header,
            tuple(
                (
                    f"{i}. {r.claim}",
                    *(observation_cell(r.by_framework.get(f)) for f in frameworks),
                    f"`{r.rule}`",
                )
                for i, r in enumerate(rows, 1)
            ),
            wrap=True,
        )
    )
    for i, r in enumerate(rows, 1):
        for f in frameworks:
            o = r.by_framework.get(f)
            if o is not None and o.quote:
                out.append(Para(f"Quoted for {i} ({label(f)}):"))
                out.append(Code(o.quote))
    return out
