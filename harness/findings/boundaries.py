"""Why the baseline's clusters are not one: each boundary of one step, with its evidence.

Boundaries are only between clusters of the optimized HLO (a kernel the profile match could
not attribute is no cluster, and never named as one). The evidence for a boundary is what
the run recorded about its two clusters: a library call's structure (XLA fuses into it only
the epilogues the library offers), the pass that made the call, a variant of the same size
whose call holds more, and priority fusion's log, quoted only where a line names the
boundary's producer (a producer it could not fuse) or its consumer. Boundaries with the same
evidence are grouped, with counts and a few examples.
"""

from __future__ import annotations

import itertools
from collections import Counter

from harness.findings.base import Rule
from harness.findings.words import change_words, config_changes
from harness.records.findings import Boundaries, BoundaryGroup, BoundaryPair
from harness.saved.run import ClusterFact, DecisionStep, SavedRun, SavedVariant

NO_REASON = "no reason in XLA's log"
EXAMPLES = 3  # boundaries shown per group


def step_clusters(v: SavedVariant) -> tuple[str, ...]:
    """One step's launches as clusters of the optimized HLO, in order: memsets and transfers
    left out, an event no cluster holds (an unattributed kernel) left out, and a cluster
    that ran several kernels in a row counted once."""
    names = {c.name for c in v.clusters}
    seq = [x for x in v.summary.profile.step_sequence if x in names]
    return tuple(x for i, x in enumerate(seq) if i == 0 or seq[i - 1] != x)


def _epilogue_parts(epilogue: str | None) -> frozenset[str]:
    """The operations a library GEMM's epilogue applies: BIAS_GELU is {BIAS, GELU}."""
    if not epilogue or epilogue == "DEFAULT":
        return frozenset()
    return frozenset(epilogue.split("_"))


def where_it_fuses(run: SavedRun, base: SavedVariant) -> list[str]:
    """A variant of the same size whose library GEMM holds a larger epilogue: what it did
    differently, and where the two compiles part."""
    mine = max(
        (_epilogue_parts(c.epilogue) for c in base.summary.hlo.library_calls),
        key=len,
        default=frozenset(),
    )
    for v in run.variants:
        if v is base or not v.ok or not v.same_size(base) or v.framework != base.framework:
            continue
        for call in v.summary.hlo.library_calls:
            # A larger epilogue holds the base's and more (BIAS_GELU over BIAS); DEFAULT holds
            # nothing, however long its name.
            if _epilogue_parts(call.epilogue) > mine:
                d = v.summary.comparison.first_divergence
                part = f"; the compiles first differ at `{d.stage}`: {d.detail}" if d else ""
                return [
                    f"with {change_words(config_changes(v, base))} (`{v.name}`) the GEMM is "
                    f"{call.target} with epilogue {call.epilogue}, one launch{part}"
                ]
    return []


def library_reasons(run: SavedRun, base: SavedVariant, call: ClusterFact) -> list[str]:
    """Why a library call ends a fusion: its structure, the pass that made it, and a variant
    whose call fuses more."""
    target = call.target or "a library call"
    epi = f", epilogue {call.epilogue}" if call.epilogue else ""
    out = [
        f"structure: the producer is a library call ({target}{epi}): XLA fuses into it only "
        "the epilogues the library offers"
    ]
    for p in base.summary.hlo.fusion_changing_passes:
        if "cublas" in p.sentence or "custom-call" in p.sentence or "turned dot" in p.sentence:
            out.append(f"pass {p.index:04d} `{p.name}` ({p.pipeline}): {p.sentence}")
            break
    return out + where_it_fuses(run, base)


def log_lines(steps: tuple[DecisionStep, ...], producer: str, consumer: str) -> list[str]:
    """The fusion log's reasons that name this boundary's clusters: a producer it could not
    fuse, or a step whose consumer is this boundary's."""
    out = []
    for s in steps:
        if not s.reason:
            continue
        if s.producer == producer or consumer in s.consumers:
            line = f"XLA's fusion log (priority fusion): `{s.producer}`: {s.reason}"
            if line not in out:
                out.append(line)
    return out


def boundary_reasons(
    run: SavedRun, producer: str, consumer: str, library: list[str] | None
) -> tuple[str, ...]:
    """The evidence for one boundary (`library`: the reasons of a library-call producer)."""
    reasons = [*(library or []), *log_lines(run.decisions, producer, consumer)]
    return tuple(reasons) or (NO_REASON,)


class WhyNotFused(Rule):
    """Why the baseline's clusters are separate launches: the evidence at each boundary
    between consecutive clusters of one step, grouped by reason."""

    id = "structure.why_not_fused"
    kind = "boundaries"

    def applies(self, run: SavedRun) -> bool:
        base = run.by_role("baseline")
        return base is not None and len(step_clusters(base)) > 1

    def conclude(self, run: SavedRun) -> tuple[Boundaries, ...]:
        base = run.by_role("baseline")
        assert base is not None
        seq = step_clusters(base)
        clusters = {c.name: c for c in base.clusters}
        library: dict[str, list[str]] = {}
        groups: dict[tuple[str, ...], list[BoundaryPair]] = {}
        for producer, consumer in itertools.pairwise(seq):
            call = clusters[producer]
            if call.kind == "library" and producer not in library:
                library[producer] = library_reasons(run, base, call)
            reasons = boundary_reasons(run, producer, consumer, library.get(producer))
            groups.setdefault(reasons, []).append(BoundaryPair(producer, consumer))
        order = Counter({r: len(p) for r, p in groups.items()})
        ranked = sorted(groups, key=lambda r: (-order[r], r == (NO_REASON,)))
        return (
            Boundaries(
                rule=self.id,
                variant=base.name,
                clusters=len(set(seq)),
                boundaries=len(seq) - 1,
                groups=tuple(
                    BoundaryGroup(r, len(groups[r]), tuple(groups[r][:EXAMPLES])) for r in ranked
                ),
            ),
        )
