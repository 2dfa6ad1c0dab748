"""A user's program analysed as a whole: which modules are the main program and which are
helpers, how many steps its profile holds, and each module analysed
(harness.program.module_analysis) into the `ProgramAnalysis` the analyze report shows.

Pure functions over what harness.program.dump read (parsed modules, clusters, costs, reverse
maps, the profile's attributed events); harness.program.report renders the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from harness.match.match import MatchReport
from harness.match.table_match import AttributedTable
from harness.profile.events import DeviceEvent, StepMarker
from harness.profile.table import NULL, self_ns
from harness.program import steps as by_step
from harness.program.event_facts import (
    ModuleFacts,
    StepTotal,
    facts_from_pairs,
    facts_from_table,
    steps_from_pairs,
    steps_from_table,
)
from harness.program.module_analysis import (
    TOP_UNFUSED,
    analyse_module,
    helper_kind,
    program_of,
    self_times,
    unfused_rows,
)
from harness.program.record import ModuleInput, ProgramKey
from harness.records.program import (
    ModuleAnalysis,
    OutsideProgram,
    ProfileSummary,
    ProgramAnalysis,
    Roofs,
    StepRow,
    Steps,
)

MAIN_FRACTION = 0.25  # another module is a main program too with this share of the top one's


class StepsUnknown(ValueError):
    """The profile cannot say how many steps it holds; the message names `--steps`."""


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
    ceilings: Roofs | None = None,
    notes: Sequence[str] = (),
    markers: Sequence[StepMarker] = (),
) -> ProgramAnalysis:
    """The whole program: main modules analysed in full, helpers summarised.

    With a profile (`report`, `steps`), clusters rank by device time per step and shares are of
    the window's summed self time; without one, by FLOPs, shares of the main modules' FLOPs.
    With marked steps, times and shares are of the median step (harness.program.steps).
    """
    timed = report is not None and steps is not None
    events = _events_of(report) if report is not None else None
    time_ns = events.time_by_program() if events is not None else None
    main, rule = choose_main(modules, time_ns)
    n_steps = steps.count if timed and steps is not None else 1
    # Ranked by time only where an analysed module has any: `events` is then the profile's.
    timed_events = (
        events
        if timed and events is not None and any(time_ns.get(m.program, 0.0) > 0 for m in modules)  # type: ignore[union-attr]
        else None
    )
    rows, total = _shares_of(modules, main, timed_events, n_steps, markers)
    return ProgramAnalysis(
        ranked_by="device time" if timed_events is not None else "FLOPs",
        main=main,
        main_rule=rule,
        modules=_ranked_modules(modules, main, timed_events, n_steps, total, ceilings, rows),
        steps=steps,
        profile=(
            _profile_summary(report, events, profile_path, outside)
            if report is not None and events is not None
            else None
        ),
        ceilings=ceilings,
        notes=tuple(notes),
        step_rows=rows,
    )


def _shares_of(
    modules: Sequence[ModuleInput],
    main: tuple[str, ...],
    events: _PairEvents | _TableEvents | None,
    n_steps: int,
    markers: Sequence[StepMarker],
) -> tuple[tuple[StepRow, ...], float]:
    """The marked steps' rows (none without marked steps or `events`, the timed profile's)
    and what every share is of: the median step's event time, else the window's a step, else
    (no time) the main modules' FLOPs."""
    if events is None:
        return (), sum(m.cost.flops for m in modules if m.key in main)
    rows = by_step.rows_of(events.step_totals(), markers) if events.per_step() else ()
    if rows:
        return rows, by_step.median_event_s(rows)
    return rows, events.total_ns() * 1e-9 / n_steps


def _ranked_modules(
    modules: Sequence[ModuleInput],
    main: tuple[str, ...],
    events: _PairEvents | _TableEvents | None,
    n_steps: int,
    total: float,
    ceilings: Roofs | None,
    rows: Sequence[StepRow],
) -> tuple[ModuleAnalysis, ...]:
    """Every module analysed: the main ones in `main`'s order, then the helpers by time a step
    (by FLOPs without `events`, the timed profile's)."""
    main_names = {m.name for m in modules if m.key in main}
    out = []
    for m in modules:
        role = "main" if m.key in main else "helper"
        kind = (
            "main program" if role == "main" else helper_kind(m.name, len(m.clusters), main_names)
        )
        facts = events.facts(m.program, m.name) if events is not None else None
        med = by_step.medians_of(facts, [r.step for r in rows]) if rows and facts else None
        out.append(
            analyse_module(
                m, role, None, n_steps, total, ceilings, role == "main", kind, med, facts=facts
            )
        )
    out.sort(key=lambda r: main.index(r.key) if r.key in main else len(main))
    helpers = [h for h in out if h.role == "helper"]
    if events is not None:
        helpers.sort(key=lambda h: (-(h.time_s or 0.0), -h.flops, h.key))
    else:
        helpers.sort(key=lambda h: (-h.flops, h.key))
    return tuple([h for h in out if h.role == "main"] + helpers)


def _profile_summary(
    report: MatchReport,
    events: _PairEvents | _TableEvents,
    profile_path: str,
    outside: Sequence[OutsideProgram],
) -> ProfileSummary:
    """The profile as a whole: its window, its match, what lay outside the selection."""
    return ProfileSummary(
        path=profile_path,
        marked=report.marked_steps,
        events_in_window=report.events_in_window,
        matched_fraction=report.matched_fraction,
        unmatched=len(report.unmatched),
        busy_time_s=report.device_time_per_step_s,
        event_time_s=events.total_ns() * 1e-9 / max(1, report.steps),
        kernels_per_step=report.kernels_per_step,
        device_ops_per_step=report.device_ops_per_step,
        outside=tuple(outside),
        rules=tuple(sorted(report.rule_counts().items())),
        gaps=report.gaps,
    )


class _PairEvents:
    """The window's events as (Attribution, self time) pairs: a study's few steps."""

    def __init__(self, report: MatchReport) -> None:
        times = self_times([a.event for a in report.attributions])
        self.pairs = list(zip(report.attributions, times, strict=True))

    def time_by_program(self) -> dict[ProgramKey, float]:
        out: dict[ProgramKey, float] = defaultdict(float)
        for a, t in self.pairs:
            if (key := program_of(a.event)) is not None:
                out[key] += t
        return out

    def per_step(self) -> bool:
        return by_step.per_step(self.pairs)

    def step_totals(self) -> dict[int, StepTotal]:
        return steps_from_pairs(self.pairs)

    def total_ns(self) -> float:
        return sum(t for _, t in self.pairs)

    def facts(self, program: ProgramKey, module: str) -> ModuleFacts:
        return facts_from_pairs(
            [(a, t) for a, t in self.pairs if program_of(a.event) == program], module
        )


class _TableEvents:
    """The window's events as the attributed event table: a profile of any length."""

    def __init__(self, attributed: AttributedTable) -> None:
        self.attributed = attributed
        table = attributed.table
        self.self_ns = self_ns(table)
        self.keys, self.program = table.programs()

    def time_by_program(self) -> dict[ProgramKey, float]:
        if not len(self.program):
            return {}
        sums = np.bincount(self.program, weights=self.self_ns, minlength=len(self.keys))
        return {k: float(sums[g]) for g, k in enumerate(self.keys) if k is not None}

    def per_step(self) -> bool:
        steps = self.attributed.table.ints["step"]
        return bool(len(steps)) and bool((steps != NULL).all())

    def step_totals(self) -> dict[int, StepTotal]:
        return steps_from_table(self.attributed, self.self_ns)

    def total_ns(self) -> float:
        return float(self.self_ns.sum())

    def facts(self, program: ProgramKey, module: str) -> ModuleFacts:
        wanted = [g for g, k in enumerate(self.keys) if k == program]
        rows = np.flatnonzero(np.isin(self.program, wanted))
        return facts_from_table(self.attributed, self.self_ns, rows, module)


def _events_of(report: MatchReport) -> _PairEvents | _TableEvents:
    attributed = getattr(report.attributions, "attributed", None)
    return _TableEvents(attributed) if attributed is not None else _PairEvents(report)


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
