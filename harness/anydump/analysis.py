"""A user's program analysed as a whole: which modules are the main program and which are
helpers, how many steps its profile holds, and each module analysed
(harness.analyze.module_analysis) into the `ProgramAnalysis` the analyze report shows.

Pure functions over what harness.anydump.dump read (parsed modules, clusters, costs, reverse
maps, the profile's attributed events); harness.anydump.report renders the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from harness.analyze import steps as by_step
from harness.analyze.module_analysis import (
    TOP_UNFUSED,
    analyse_module,
    helper_kind,
    program_of,
    self_times,
    unfused_rows,
)
from harness.analyze.program import (
    CeilingRates,
    ModuleInput,
    OutsideProgram,
    ProfileSummary,
    ProgramAnalysis,
    ProgramKey,
    Steps,
)
from harness.match.match import Attribution, MatchReport
from harness.profile.events import DeviceEvent, StepMarker
from harness.profile.table import self_ns

MAIN_FRACTION = 0.25  # another module is a main program too with this share of the top one's


class StepsUnknown(ValueError):
    """The profile cannot say how many steps it holds; the message names `--steps`."""


def time_by_program(events: Sequence[DeviceEvent]) -> dict[ProgramKey, float]:
    """Summed self time (ns) of each program's events."""
    out: dict[ProgramKey, float] = defaultdict(float)
    for e, t in zip(events, self_times(events), strict=True):
        key = program_of(e)
        if key is not None:
            out[key] += t
    return dict(out)


def choose_main(
    modules: Sequence[ModuleInput], time_ns: Mapping[ProgramKey, float] | None
) -> tuple[tuple[str, ...], str]:
    """Returns the keys of the main program's modules and a sentence saying how they were
    chosen: the module with the most device time (with a profile that has events of the
    analysed modules), else the most FLOPs; other modules with at least a quarter of its
    measure are main too unless their name marks them as helpers or as a recompile of it."""
    timed = bool(time_ns) and any(time_ns.get(m.program, 0.0) > 0 for m in modules)
    if timed:
        assert time_ns is not None
        measure = {m.key: time_ns.get(m.program, 0.0) for m in modules}
        what = "device time in the profile"
    else:
        measure = {m.key: m.cost.flops for m in modules}
        what = "FLOPs (our cost model)" + (
            "; the profile has no events of the analysed modules"
            if time_ns is not None
            else "; no profile"
        )
    order = sorted(modules, key=lambda m: (-measure[m.key], -len(m.clusters), m.key))
    top = order[0]
    main = [top.key]
    for m in order[1:]:
        if (
            measure[top.key] > 0
            and measure[m.key] >= MAIN_FRACTION * measure[top.key]
            and m.name != top.name  # a recompile is listed apart, as such
            and helper_kind(m.name, len(m.clusters)) == "other program"
        ):
            main.append(m.key)
    rule = f"`{top.key}` is the main program: the module with the most {what}"
    if len(main) > 1:
        rest = ", ".join(f"`{k}`" for k in main[1:])
        rule += f"; {rest} also, with at least {MAIN_FRACTION:.0%} of it"
    others = len(modules) - len(main)
    if others:
        rule += f". The other {others} module(s) are listed apart as helpers"
    return tuple(main), rule + "."


STEP_MARKER_HINT = (
    'mark steps with `with jax.profiler.StepTraceAnnotation("step", step_num=i):` or pass '
    "--steps=N (how many steps the profile covers)"
)


def count_steps(
    main_events: Sequence[DeviceEvent],
    main_label: str,
    marked_steps: int,
    flag: int | None,
) -> Steps:
    """Returns the steps of the steady window.

    In order: the StepTraceAnnotation markers (`marked_steps` > 0); `--steps` (`flag`); the
    executions of the main program, one `run_id` each (every one of its events must carry
    one). Raises StepsUnknown, naming --steps, when none applies: a step count is never
    guessed.
    """
    if flag is not None and flag <= 0:
        raise ValueError(f"--steps must be a positive integer, got {flag}")
    if marked_steps > 0:
        return Steps(
            marked_steps, "markers", f"{marked_steps} steps marked with StepTraceAnnotation"
        )
    runs = {e.run_id for e in main_events}
    detected = len(runs) if main_events and None not in runs else None
    if flag is not None:
        detail = f"--steps={flag}"
        if detected is not None and detected != flag:
            detail += f" (the profile holds {detected} executions of {main_label})"
        return Steps(flag, "flag", detail)
    if detected is None:
        why = (
            f"no events of {main_label}"
            if not main_events
            else f"the events of {main_label} carry no run_id"
        )
        raise StepsUnknown(f"the profile has no step markers and {why}: {STEP_MARKER_HINT}")
    return Steps(
        detected,
        "executions",
        f"{detected} executions of {main_label} (distinct run_id), no step markers",
    )


def analyse_program(
    modules: Sequence[ModuleInput],
    report: MatchReport | None,
    steps: Steps | None,
    profile_path: str = "",
    outside: Sequence[OutsideProgram] = (),
    ceilings: CeilingRates | None = None,
    notes: Sequence[str] = (),
    markers: Sequence[StepMarker] = (),
) -> ProgramAnalysis:
    """The whole program: main modules analysed in full, helpers summarised.

    With a profile (`report`, `steps`), clusters rank by device time per step and shares are of
    the window's summed self time; without one, by FLOPs, shares of the main modules' FLOPs.
    With marked steps, times and shares are of the median step (harness.analyze.steps).
    """
    timed = report is not None and steps is not None
    pairs: list[tuple[Attribution, float]] = []
    if report is not None:
        attributed = getattr(report.attributions, "attributed", None)
        if attributed is not None:  # the event table's match: self times by array passes
            times = self_ns(attributed.table).tolist()
        else:
            times = self_times([a.event for a in report.attributions])
        pairs = list(zip(report.attributions, times, strict=True))
    time_ns = None
    if report is not None:
        time_ns = defaultdict(float)
        for a, t in pairs:
            if (key := program_of(a.event)) is not None:
                time_ns[key] += t
    main, rule = choose_main(modules, time_ns)
    n_steps = steps.count if timed and steps is not None else 1
    has_time = timed and any(time_ns.get(m.program, 0.0) > 0 for m in modules)  # type: ignore[union-attr]
    rows = by_step.step_rows(pairs, markers) if has_time and by_step.per_step(pairs) else ()
    if rows:
        total = by_step.median_event_s(rows)
    elif has_time:
        total = sum(t for _, t in pairs) * 1e-9 / n_steps
    else:
        total = sum(m.cost.flops for m in modules if m.key in main)
    main_names = {m.name for m in modules if m.key in main}
    out = []
    for m in modules:
        role = "main" if m.key in main else "helper"
        kind = (
            "main program" if role == "main" else helper_kind(m.name, len(m.clusters), main_names)
        )
        mine = [(a, t) for a, t in pairs if program_of(a.event) == m.program] if has_time else None
        med = by_step.module_medians(mine or [], m.name, [r.step for r in rows]) if rows else None
        out.append(
            analyse_module(m, role, mine, n_steps, total, ceilings, role == "main", kind, med)
        )
    out.sort(key=lambda r: main.index(r.key) if r.key in main else len(main))
    helpers = [h for h in out if h.role == "helper"]
    if has_time:
        helpers.sort(key=lambda h: (-(h.time_s or 0.0), -h.flops, h.key))
    else:
        helpers.sort(key=lambda h: (-h.flops, h.key))
    summary = None
    if report is not None:
        summary = ProfileSummary(
            path=profile_path,
            marked=report.marked_steps,
            events_in_window=report.events_in_window,
            matched_fraction=report.matched_fraction,
            unmatched=len(report.unmatched),
            busy_time_s=report.device_time_per_step_s,
            event_time_s=sum(t for _, t in pairs) * 1e-9 / max(1, report.steps),
            kernels_per_step=report.kernels_per_step,
            device_ops_per_step=report.device_ops_per_step,
            outside=tuple(outside),
            rules=tuple(sorted(report.rule_counts().items())),
            gaps=report.gaps,
        )
    return ProgramAnalysis(
        ranked_by="device time" if has_time else "FLOPs",
        main=main,
        main_rule=rule,
        modules=tuple([h for h in out if h.role == "main"] + helpers),
        steps=steps,
        profile=summary,
        ceilings=ceilings,
        notes=tuple(notes),
        step_rows=rows,
    )


def with_reverse_maps(a: ProgramAnalysis, modules: Sequence[ModuleInput]) -> ProgramAnalysis:
    """The analysis with each main module's unfused ops and reverse-map notes taken from
    `modules`' reverse maps: the CLI analyses and draws while a large module's reverse map is
    still computing, then fills in what depends on it."""
    by_key = {m.key: m for m in modules}
    by_time = a.ranked_by == "device time"
    out = []
    for ma in a.modules:
        m = by_key.get(ma.key)
        if m is None:
            out.append(ma)
            continue
        unfused = (
            unfused_rows(m, {r.name: r for r in ma.clusters}, by_time) if ma.role == "main" else []
        )
        out.append(
            replace(
                ma,
                unfused=tuple(unfused[:TOP_UNFUSED]),
                unfused_total=sum(len(u.clusters) for u in unfused),
                reverse_method=m.reverse.method if m.reverse is not None else "",
                reverse_notes=m.reverse.notes if m.reverse is not None else (),
            )
        )
    return replace(a, modules=tuple(out))
