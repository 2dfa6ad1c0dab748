"""The run's conclusions as rules over its typed summary: summary.json's `findings` section.

Each conclusion the harness draws is a rule here, after XProf's smart suggestions: a small
class that says when it applies and what it concludes, and returns typed records
(harness.records.findings) that name it by its stable id. The analysis runs every rule once,
after the summary's sections are made (`evaluate`); the report, compare, the results index
and the terminal only read the records, and the report names each finding's rule beside it.

    gate.aa_check              timing.py      the run's A/A check; every timing rule reads it
    coverage.unattributed      timing.py      device time no cluster holds (never gated)
    timing.difference          timing.py      ranked differences against the reference
    timing.no_difference       timing.py      pairs the run cannot tell apart
    change.measured            timing.py      what to change, as measured (keyword knobs too)
    memory.peak                memory.py      peaks that differ (never gated)
    untested.*                 untested.py    known changes this run did not measure
    structure.why_not_fused    boundaries.py  why the baseline's clusters are separate launches
    control_flow.loop          control_flow.py  a loop's iterations, kernels and copies a step
    control_flow.host_sync     control_flow.py  predicates read back to the host a step
    processes.straggler        processes.py   a process slower than the run's noise explains
    communication.waiting      communication.py  a device waiting for the others at collectives
    observation.*              observations.py  the seed chapter's claims, per framework
    numerics.accuracy          numerics.py    each dtype's accuracy against float64, once
    numerics.compiler_effect   numerics.py    results that moved from the baseline's

Rules that rest on timing read the gate (`noise.resolved`, through `base.timing_resolved`):
a run that could not time ranks no timing finding and recommends no change, and each verdict
was judged against the A/A floor (harness.analyze.judging). Rules that
do not rest on timing (coverage, memory, structure, untested, observations) never read it.

To add a rule:
1. Write a class in the module of its kind (or a new module here), subclassing `Rule`: a
   stable `id` (`<kind>.<what>`, never renamed once released: compare matches findings
   across runs by it), the `kind` of record it makes, a docstring whose first line says what
   it concludes, `applies(run)` (the run has what the rule needs) and `conclude(run)` (its
   records; an empty tuple when nothing is concluded). It reads only the `SavedRun`; if it
   needs a file the summary does not hold, `facts.read_facts` reads it at the edge.
2. A new kind of conclusion needs its record in harness/records/findings.py and a field in
   `Findings` (a schema change: bump SCHEMA_VERSION with a migration, and regenerate
   results/README.md's key table with `python -m harness.records.keytables results/README.md`).
3. Register it in RULES below, and render its records where the report shows that kind.
4. Test it on a constructed summary (tests/test_rules.py): once where it fires, once where
   it stays silent.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.findings import (
    boundaries,
    communication,
    control_flow,
    memory,
    numerics,
    observations,
    processes,
    timing,
    untested,
)
from harness.findings.base import Rule
from harness.findings.facts import facts_of, read_facts
from harness.records.findings import Findings, RuleInfo
from harness.saved.run import SavedRun

RULES: tuple[Rule, ...] = (
    timing.AaGate(),
    timing.Coverage(),
    timing.TimingDifference(),
    timing.NoDifference(),
    memory.MemoryPeak(),
    timing.MeasuredChange(),
    untested.UntestedOption(),
    untested.UntestedTanh(),
    untested.UntestedBf16(),
    untested.UntestedProgramBf16(),
    boundaries.WhyNotFused(),
    control_flow.LoopCost(),
    control_flow.HostSync(),
    processes.Straggler(),
    communication.Waiting(),
    *observations.CLAIMS,
    numerics.Accuracy(),
    numerics.CompilerEffect(),
)
KINDS = (
    "gate",
    "coverage",
    "timing",
    "noise",
    "memory",
    "changes",
    "untested",
    "boundaries",
    "control_flow",
    "observations",
    "processes",
    "communication",
    "numerics",
    "effects",
)


def _run_rule(rule: Rule, run: SavedRun) -> tuple[tuple[Any, ...], str | None]:
    """A rule's records, or none and why: one rule's fault never stops the others."""
    try:
        return (rule.conclude(run) if rule.applies(run) else ()), None
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        return (), f"{type(e).__name__}: {e}".splitlines()[0][:200] + f" (at {where})"


def top_finding(found: Findings) -> str:
    """The run's headline: its largest timing finding, else why it could not resolve
    differences, else its largest memory finding, else that it found none."""
    if found.timing:
        return found.timing[0].what
    if found.gate is not None and not found.gate.resolved:
        return "could not resolve differences: " + "; ".join(found.gate.reasons)
    if found.memory:
        return "memory: " + found.memory[0].what
    return "no resolvable difference between the variants"


def evaluate(run: SavedRun, rules: Sequence[Rule] = RULES) -> Findings:
    """Runs every rule on `run`; returns the findings section."""
    made: dict[str, list[Any]] = {k: [] for k in KINDS}
    infos = []
    for rule in rules:
        records, error = _run_rule(rule, run)
        made[rule.kind] += records
        infos.append(RuleInfo(rule.id, rule.kind, rule.summary(), error))
    found = Findings(
        rules=tuple(infos),
        gate=made["gate"][0] if made["gate"] else None,
        boundaries=made["boundaries"][0] if made["boundaries"] else None,
        **{k: tuple(made[k]) for k in KINDS if k not in ("gate", "boundaries")},
    )
    return dataclasses.replace(found, top=top_finding(found))


__all__ = ["RULES", "Rule", "SavedRun", "evaluate", "facts_of", "read_facts"]
