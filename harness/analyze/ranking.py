"""Where a variant's time goes: its clusters ranked and rolled up by source line, for any config.

The run report's counterpart of `python -m harness.analyze`'s main-module tables, made by the
same function (harness.analyze.module_analysis.analyse_module) from what the other producers
already wrote for the variant: the optimized module of its IR ladder and kernels.json (every
event of the steady window with the cluster it is attributed to). Without a profile the
clusters are ranked by our FLOPs. Writes ranking.json (a `ProgramAnalysis` with the one
module); eager variants, which run one module per primitive, get none.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness import io, ladder
from harness.analyze import modules as hlo_files
from harness.analyze.module_analysis import analyse_module, program_of, self_times
from harness.analyze.program import ModuleInput, ProgramAnalysis, Steps, ceilings_from_json
from harness.match.match import Attribution
from harness.profile.events import DeviceEvent, events_from_json

RANKING_FILE = "ranking.json"
_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(DeviceEvent))


def attributions(kernels: dict[str, Any]) -> tuple[Attribution, ...]:
    """Returns kernels.json's events with the clusters they were attributed to (the inverse of
    `kernels_document`), each credited to its event's module."""
    rows = [r for r in kernels.get("events") or [] if isinstance(r, dict)]
    events = events_from_json({k: r.get(k) for k in _EVENT_FIELDS if k in r} for r in rows)
    return tuple(
        Attribution(
            event=e,
            matched=bool(r.get("matched")),
            rule=str(r.get("rule") or ""),
            reason=str(r.get("reason") or ""),
            module=e.hlo_module,
            cluster=r.get("cluster"),
            primitive=r.get("primitive"),
        )
        for e, r in zip(events, rows, strict=True)
    )


def ranking(
    vdir: Path, lad: ladder.Ladder, op_by_op: bool, ceilings: dict[str, Any]
) -> ProgramAnalysis | None:
    """Returns the variant's module analysed as a main program: clusters ranked by device time
    a step (by FLOPs without a profile), rolled up by source line and named scope; None for
    eager dispatch or a ladder without exactly one optimized module."""
    after = lad.hlo_files("hlo_after")
    if op_by_op or len(after) != 1:
        return None
    module = hlo_files.parsed(after[0])
    clusters = hlo_files.clusters_of(module)
    (cost,) = hlo_files.costs_of([module])
    try:
        roofs = ceilings_from_json(ceilings, "ceilings.json") if ceilings else None
    except ValueError:
        roofs = None
    path = vdir / "kernels.json"
    kernels = io.read_json(path) if path.is_file() else {}
    found = attributions(kernels if isinstance(kernels, dict) else {})
    steps = int((kernels.get("match") or {}).get("steps") or 0) if found else 0
    pids = {a.event.program_id for a in found if a.event.hlo_module == module.name}
    m = ModuleInput(
        module.name,
        module.name,
        next(iter(pids)) if len(pids) == 1 else None,
        module,
        clusters,
        cost,
    )
    if found and steps > 0:
        times = self_times([a.event for a in found])
        pairs = list(zip(found, times, strict=True))
        total = sum(times) * 1e-9 / steps
        mine = [(a, t) for a, t in pairs if program_of(a.event) == m.program]
        analysed = analyse_module(m, "main", mine, steps, total, roofs, True, "main program")
        how = Steps(steps, "markers", f"{steps} profiled steps (StepTraceAnnotation)")
        by = "device time"
    else:
        analysed = analyse_module(m, "main", None, 1, cost.flops, roofs, True, "main program")
        how, by = None, "FLOPs"
    return ProgramAnalysis(
        ranked_by=by,
        main=(m.key,),
        main_rule=f"`{m.key}`: the variant's optimized module",
        modules=(analysed,),
        steps=how,
        ceilings=roofs,
    )


def write_ranking(
    vdir: Path, lad: ladder.Ladder, op_by_op: bool, ceilings: dict[str, Any]
) -> Path | None:
    """Writes ranking.json for the variant (see `ranking`); returns its path, or None."""
    found = ranking(vdir, lad, op_by_op, ceilings)
    if found is None:
        return None
    io.write_json(vdir / RANKING_FILE, found.to_json(), compact=True)
    return vdir / RANKING_FILE
