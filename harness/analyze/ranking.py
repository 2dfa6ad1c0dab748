"""Where a variant's time goes: its clusters ranked and rolled up by source line, for any config.

The run report's counterpart of `python -m harness.analyze`'s main-module tables, made by the
same function (harness.program.module_analysis.analyse_module) from what the other producers
already wrote for the variant: the optimized module of its IR ladder and events.parquet (every
event of the steady window with the cluster it is attributed to). Without a profile the
clusters are ranked by our FLOPs. Returns ranking.json's record (a `ProgramAnalysis` with the one
module); eager variants, which run one module per primitive, get none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.analyze.files import NONE, VariantFiles
from harness.match.match import Attribution
from harness.profile.events import DeviceEvent, events_from_json
from harness.program import modules as hlo_files
from harness.program.module_analysis import analyse_module, program_of, self_times
from harness.program.record import ModuleInput
from harness.program.timeline import timeline_of
from harness.records import events_file, ladder, run_files
from harness.records.program import ProgramAnalysis, Steps, roofs_of
from harness.records.run_files import Ceilings, KernelEvent, KernelsFile
from harness.store.runfolder import CEILINGS_FILE, VariantFolder

_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(DeviceEvent))


def attributions(events: Sequence[KernelEvent]) -> tuple[Attribution, ...]:
    """Returns events.parquet's rows as the attributions they record (the inverse of the
    match's Arrow columns), each credited to its event's module."""
    rows = events_from_json({k: getattr(r, k) for k in _EVENT_FIELDS} for r in events)
    return tuple(
        Attribution(
            event=e,
            matched=bool(r.matched),
            rule=r.rule or "",
            reason=r.reason or "",
            module=e.hlo_module,
            cluster=r.cluster,
            primitive=r.primitive,
        )
        for e, r in zip(rows, events, strict=True)
    )


def ranking(
    lad: ladder.Ladder,
    op_by_op: bool,
    ceilings: Ceilings | None,
    kernels: KernelsFile | None,
    events: Sequence[KernelEvent] = (),
) -> ProgramAnalysis | None:
    """Returns the variant's module analysed as a main program: clusters ranked by device time
    a step (by FLOPs without a profile), rolled up by source line and named scope; None for
    eager dispatch or a ladder without exactly one optimized module. `kernels` is the
    variant's kernels.json record and `events` events.parquet's rows, as their producer
    returned them."""
    after = lad.hlo_files("hlo_after")
    if op_by_op or len(after) != 1:
        return None
    module = hlo_files.parsed(after[0])
    clusters = hlo_files.clusters_of(module)
    match = kernels.match if kernels is not None else None
    (cost,) = hlo_files.costs_of([module], match.launches_per_cluster if match else None)
    try:
        roofs = roofs_of(ceilings, CEILINGS_FILE) if ceilings is not None else None
    except ValueError:
        roofs = None
    found = attributions(events)
    steps = int(match.steps or 0) if found and match is not None else 0
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


def ranking_file(
    vdir: Path,
    lad: ladder.Ladder,
    op_by_op: bool,
    ceilings: Ceilings | None,
    kernels: KernelsFile | None,
    events: Sequence[Any] | None = None,
) -> VariantFiles:
    """Returns ranking.json's record for the variant (see `ranking`) and its timeline; none for
    eager. `events` is events.parquet's Arrow tables, as the profile's producer returned them."""
    folder = VariantFolder(vdir)
    rows = events_file.rows_of_all(events or (), str(folder.events))
    found = ranking(lad, op_by_op, ceilings, kernels, rows)
    if found is None:
        return NONE
    found_events = attributions(rows)
    lines = {(m.name, c.name): c.lines for m in found.modules for c in m.clusters}
    return VariantFiles(
        ranking=run_files.from_document(run_files.RANKING, found.to_json(), str(folder.ranking)),
        timeline=timeline_of(found_events, lines) if found_events else None,
    )
