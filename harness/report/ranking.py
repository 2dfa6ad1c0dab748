"""The run report's "Where the time goes": each compiled variant's clusters ranked by device
time a step, and rolled up by source line and named scope, for any config.

Reads each variant's ranking.json (written by harness.analyze.ranking with the functions of
`python -m harness.analyze`) and draws it with the tables the analyze report draws too
(harness.report.cluster_tables), so a run and an analysis rank and roll up alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from harness.common import fmt
from harness.frontends import registry
from harness.records.program import ModuleAnalysis
from harness.report.cluster_tables import (
    CONVENTIONS,
    Paths,
    cluster_table,
    rollup_table,
    step_time,
)
from harness.report.doc import Block, Bullets, Heading, Para, Table, literal
from harness.saved.run import SavedRun, SavedVariant
from harness.store.records import from_json
from harness.store.runfolder import TIMELINE_FILE, RunFolder

TOP = 10  # clusters and source lines on a variant's page
TOP_CELL = 2  # in the overview's cells


@dataclasses.dataclass(frozen=True)
class Ranked:
    """One variant's ranking: its module analysed, and whether by device time or by FLOPs."""

    module: ModuleAnalysis
    by_time: bool
    steps: int | None


_READ: dict[int, tuple[Any, Ranked | None]] = {}


def ranked(run: SavedRun, v: SavedVariant) -> Ranked | None:
    """Returns the variant's ranking from its ranking.json, or None when it has none (eager
    dispatch, a variant that did not run) or it cannot be read. Read once per report: every
    section asks."""
    held = _READ.get(id(v.ranking))
    if held is not None and held[0] is v.ranking:
        return held[1]
    _READ[id(v.ranking)] = (v.ranking, _read(run, v))
    return _READ[id(v.ranking)][1]


def ranked_modules(run: SavedRun, v: SavedVariant) -> tuple[ModuleAnalysis, ...]:
    """The ranking's modules, typed: they are harness.records.program's records, which
    RankingFile keeps open (`Plain`), so typed here, with the file and key named."""
    where = str(RunFolder(run.path).variant(v.name).ranking)
    return tuple(
        from_json(ModuleAnalysis, m, where, f"modules[{i}]")
        for i, m in enumerate(v.ranking.modules if v.ranking is not None else ())
    )


def _read(run: SavedRun, v: SavedVariant) -> Ranked | None:
    modules = ranked_modules(run, v)
    if v.ranking is None or not modules:
        return None
    steps = v.ranking.steps.count if v.ranking.steps else None
    return Ranked(modules[0], v.ranking.ranked_by == "device time", steps)


def _paths(found: Sequence[Ranked]) -> Paths:
    return Paths([line for r in found for row in r.module.clusters for line in row.lines])


def _cell(items: Sequence[tuple[str, float]]) -> str:
    return "; ".join(f"`{label}` {fmt.pct(share)}" for label, share in items) or "–"


def _why_unranked(v: SavedVariant) -> str:
    i = v.summary.identity
    if i.status != "ok":
        return literal(i.status) + (f": {literal(i.reason)}" if i.reason else "")
    if registry.op_by_op(i.mode):
        return "eager: one small module per primitive (its page lists them)"
    if i.expected_error is not None:
        return "nothing compiled (an expected error)"
    traits = registry.traits(v.framework)
    if traits.compiler and not traits.xla:  # PyTorch: Inductor's kernels, not XLA's clusters
        return f"a {traits.label} variant: {traits.compiler}'s kernels are listed on its page"
    return "no single optimized module was analysed"


def overview_blocks(run: SavedRun) -> list[Block]:
    """The leading page's section: one row per variant with its largest clusters and source
    lines; each variant's page ranks and rolls up its clusters in full."""
    found = {v.name: r for v in run.variants if (r := ranked(run, v)) is not None}
    out: list[Block] = [Heading(2, "Where the time goes", "where-the-time-goes")]
    if not found:
        out.append(
            Para("No variant has a ranking: no compiled variant's optimized module was analysed.")
        )
        return out
    paths = _paths(list(found.values()))
    base = run.by_role("baseline")
    out.append(
        Para(
            f"Each compiled variant's largest clusters by {fmt.KERNEL_TIME} (by our FLOP count "
            "without a profile) and the source lines they came from, the innermost frame in your "
            "code. Each variant's page ranks them all"
            + (f" ([the baseline's]({base.page}))" if base else "")
            + "; `ranking.json` has every row."
            + (f" Source paths are relative to `{paths.root}`." if paths.root else "")
        )
    )
    rows = []
    for v in run.variants:
        r = found.get(v.name)
        if r is None and not v.ok:
            continue  # skipped or failed: the summary says so
        if r is None:
            rows.append((v.name, "–", _why_unranked(v), "–"))
            continue
        top = [(row.name, row.share) for row in r.module.clusters[:TOP_CELL]]
        lines = [(paths.short(u.label), u.share) for u in r.module.by_line[:TOP_CELL]]
        rows.append(
            (
                v.name,
                "kernel time" if r.by_time else "FLOPs",
                _cell(top),
                _cell(lines),
            )
        )
    out.append(
        Table(("variant", "ranked by", "largest clusters", "largest source lines"), tuple(rows))
    )
    return out


def _module_line(v: SavedVariant, r: Ranked) -> str:
    m = r.module
    what = (
        f"{fmt.count(m.kernels_per_step)} kernels and "
        f"{step_time(m.time_s)} of {fmt.KERNEL_TIME} over "
        f"{r.steps} profiled steps"
        if r.by_time
        else "no profile: ranked by our FLOP count"
    )
    return (
        f"Module `{m.name}`: {m.cluster_count} clusters ({m.fusion_count} fusions), "
        f"{fmt.si(m.flops, 'FLOP')} and {fmt.si(m.bytes, 'B')} a run (our cost model); {what}."
    )


def variant_blocks(v: SavedVariant, run: SavedRun) -> list[Block]:
    """A variant's page's section: its clusters ranked, rolled up by source line and named
    scope, and how to read the tables."""
    r = ranked(run, v)
    if r is None:
        return []
    paths = _paths([x for u in run.variants if (x := ranked(run, u)) is not None])
    more = len(r.module.clusters) - TOP
    out: list[Block] = [
        Heading(2, "Where its time goes", "where-the-time-goes"),
        Para(
            _module_line(v, r)
            + (f" Source paths are relative to `{paths.root}`." if paths.root else "")
        ),
        cluster_table(r.module, r.by_time, paths, TOP),
    ]
    if more > 0:
        out.append(Para(f"{more} more clusters in `ranking.json`."))
    if v.timeline:
        out.append(
            Para(
                f"Timeline: [`{TIMELINE_FILE}`]({TIMELINE_FILE}), every device event named by "
                "its cluster, each step and command-buffer execution a slice; open it offline "
                'in ui.perfetto.dev ("Open trace file") or chrome://tracing.'
            )
        )
    out += [
        Para("By source line:"),
        rollup_table(r.module.by_line[:TOP], "source line", r.by_time, paths),
    ]
    if any(u.label for u in r.module.by_scope):  # not only the top level
        out += [
            Para("By named scope (the op_name path: `jax.named_scope`, flax module paths):"),
            rollup_table(r.module.by_scope[:TOP], "named scope", r.by_time, None),
        ]
    return [*out, Para("How to read these tables:"), Bullets(CONVENTIONS)]
