"""What the rules read: a saved run's view (harness.saved.SavedRun), with the few facts only the
rules need added at their edge.

The rules are pure functions of a `SavedRun`. `read_facts` is their edge: it reads the run
folder once (harness.saved.load_run) and adds what needs the IR and profile readers the report
never imports (each profiled cluster's time and kind of work, a step's span, the baseline's
priority-fusion log and the emitted code from the IR ladder), so a test builds a SavedRun by
hand and a rule never opens a file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.frontends import registry
from harness.hlo import work
from harness.match import step_events
from harness.records import ladder, run_files
from harness.records.summary import RunSummary
from harness.saved.read import load_run
from harness.saved.run import (
    ClusterFact,
    ClusterTime,
    DecisionStep,
    IrText,
    SavedRun,
    SavedVariant,
)
from harness.store.runfolder import RunFolder


def facts_of(
    summary: RunSummary,
    clusters: Mapping[str, tuple[ClusterFact, ...]] | None = None,
    **run: Any,
) -> SavedRun:
    """A SavedRun from a summary alone (and, optionally, clusters per variant): what a test
    or a caller without a run folder builds."""
    return SavedRun(
        summary=summary,
        variants=tuple(
            SavedVariant(name, s, (clusters or {}).get(name, ()))
            for name, s in summary.variants.items()
        ),
        platform=run.pop("platform", None) or summary.platform or "unknown",
        **run,
    )


# --- the edge: what only the rules read ------------------------------------------------------


def _per_step(c: dict[str, Any], key: str) -> float | None:
    """A ranking row's cost a step: one run's cost times its runs a step (None where unknown)."""
    value, runs = c.get(key), c.get("runs")
    if not isinstance(value, int | float) or not isinstance(runs, int | float):
        return None
    return float(value) * float(runs)


def _add(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else x + y


def cluster_times(
    ranking: run_files.RankingFile | None, clusters: tuple[ClusterFact, ...] = ()
) -> tuple[ClusterTime, ...]:
    """Each timed cluster's device time a step, summed over the ranked modules by name (none
    without the file, or where the ranking was by FLOPs: no profile), with its kind of work
    from fusions.json's record of it (`clusters`), else from the ranking row's kind."""
    if ranking is None or ranking.ranked_by != "device time":
        return ()
    facts = {c.name: c for c in clusters}
    found: dict[str, ClusterTime] = {}
    for module in ranking.modules:
        for c in module.get("clusters") or ():
            if not isinstance(c, dict) or not isinstance(c.get("time_s"), int | float):
                continue
            timed = _cluster_time(c, facts)
            had = found.get(timed.key)
            found[timed.key] = timed if had is None else _summed(had, timed)
    return tuple(found.values())


def _cluster_time(c: dict[str, Any], facts: Mapping[str, ClusterFact]) -> ClusterTime:
    """One timed row of the ranking as a ClusterTime, keyed by what pairs it across variants."""
    name = str(c.get("name") or "?")
    lines = c.get("lines") or ()
    line = str(lines[0]) if isinstance(lines, list | tuple) and lines else ""
    launches = c.get("launches")
    # A library call is named by its instruction (`custom-call.1`, `cublas-lt-matmul.1`),
    # which differs between compiles of one GEMM: it pairs by its entry and source line.
    target = c.get("target")
    key = f"{target}@{line}" if c.get("kind") == "library" and target else name
    return ClusterTime(
        name,
        float(c["time_s"]),
        float(launches) if isinstance(launches, int | float) else None,
        line,
        key,
        tuple(str(x) for x in lines) if isinstance(lines, list | tuple) else (),
        _work_of(c, facts.get(name)),
        _per_step(c, "bytes"),
        _per_step(c, "flops"),
    )


def _work_of(c: dict[str, Any], fact: ClusterFact | None) -> str:
    """A ranking row's kind of work: the row's own kind and target first, else its fusion's."""
    return work.kind_of(
        str(c.get("kind") or (fact.kind if fact else "")),
        str(c.get("target") or (fact.target if fact and fact.target else "")),
        fact.backend if fact else "",
        fact.opcodes if fact else (),
    )


def _summed(had: ClusterTime, more: ClusterTime) -> ClusterTime:
    """`had` with a second row of the same key added: its time, launches, lines and costs."""
    return dataclasses.replace(
        had,
        time_s=had.time_s + more.time_s,
        launches=_add(had.launches, more.launches),
        line=had.line or more.line,
        lines=tuple(dict.fromkeys((*had.lines, *more.lines))),
        bytes=_add(had.bytes, more.bytes),
        flops=_add(had.flops, more.flops),
    )


_STEP = re.compile(r"fusion_steps \{\s*(\w+) \{([^{}]*)\}\s*\}")
_FIELD = re.compile(r'(\w+): "?([^"\n]*)"?')


def decision_steps(text: str) -> tuple[DecisionStep, ...]:
    """Parses priority fusion's decision log (a text proto) into its steps."""
    out = []
    for kind, body in _STEP.findall(text):
        fields: dict[str, list[str]] = {}
        for key, value in _FIELD.findall(body):
            fields.setdefault(key, []).append(value)
        out.append(
            DecisionStep(
                kind=kind,
                producer=(fields.get("producer_name") or [""])[0],
                consumers=tuple(fields.get("consumer_names", []) + fields.get("consumer_name", [])),
                reason=(fields.get("reason") or [""])[0],
            )
        )
    return tuple(out)


def _ladder(workdir: Path, name: str) -> ladder.Ladder | None:
    ir = RunFolder(workdir).variant(name).ir
    if not ladder.has_ladder(ir):
        return None
    try:
        return ladder.read_ladder(ir)
    except ValueError:
        return None


def read_decisions(
    workdir: Path, baseline: str, limit: int = 2_000_000
) -> tuple[DecisionStep, ...]:
    """The baseline's priority-fusion decision log (GPU); none when the ladder lacks it."""
    lad = _ladder(workdir, baseline)
    path = lad.path("fusion_decisions") if lad else None
    if path is None or not userfiles.is_file(path):
        return ()
    return decision_steps(userfiles.read_head(path, limit).decode(errors="replace"))


def read_emitted(
    workdir: Path,
    variants: tuple[SavedVariant, ...],
    framework: str,
    limit: int = 500_000,
    per_stage: int = 200,
) -> dict[str, tuple[IrText, ...]]:
    """The first `limit` characters of up to `per_stage` files per emitter stage of the
    framework's variants (each its traits' `emitter_stages`); the baseline's first, so
    quotes prefer it."""
    stages = registry.traits(framework).emitter_stages
    mine = sorted(
        (v for v in variants if v.framework == framework), key=lambda v: "baseline" not in v.roles
    )
    out: dict[str, list[IrText]] = {s: [] for s in stages}
    for v in mine:
        lad = _ladder(workdir, v.name)
        for stage in (s for s in stages if lad is not None and lad.has(s)):
            for path in lad.files(stage):
                if len(out[stage]) >= per_stage:
                    break
                text = userfiles.read_head(path, limit).decode(errors="replace")
                out[stage].append(IrText(str(path.relative_to(workdir)), text))
    return {s: tuple(files) for s, files in out.items()}


def _with_times(v: SavedVariant) -> SavedVariant:
    """A variant with its profiled clusters' times and a step's span (none unprofiled)."""
    times = cluster_times(v.ranking, v.clusters)
    # The events load_run read (SavedVariant.kernels), not the file again.
    span = step_events.mean_span_s(step_events.of_events(v.kernels)) if times else None
    return dataclasses.replace(v, times=times, span_s=span)


def read_facts(
    workdir: Path,
    summary: RunSummary,
    min_ratio: float | None = None,
    min_bytes: int | None = None,
) -> SavedRun:
    """Returns the facts of the run folder `workdir` whose summary is `summary`: the memory
    thresholds from its manifest's config unless given (an analysis passes the config's)."""
    workdir = Path(workdir)
    run = load_run(workdir, summary)
    variants = tuple(_with_times(v) for v in run.variants)
    # The baseline of the framework the others are timed against (JAX's).
    base = next(
        (
            v
            for v in variants
            if "baseline" in v.roles and registry.traits(v.framework).timed_against is None
        ),
        None,
    )
    return dataclasses.replace(
        run,
        variants=variants,
        min_ratio=run.min_ratio if min_ratio is None else min_ratio,
        min_bytes=run.min_bytes if min_bytes is None else min_bytes,
        decisions=read_decisions(workdir, base.name) if base is not None else (),
        emitted={f: read_emitted(workdir, variants, f) for f in registry.names()},
    )
