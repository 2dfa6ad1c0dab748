"""The program analysis of one dump (and profile) written into a folder: what `python -m
harness.analyze` runs.

`analyse(dump, xplane, out, options)` takes every input as an argument and reads no flags; an
input it cannot use raises InputError (a ValueError) in one line, which the command says as a
usage error. The folder holds analysis.json, kernels.json and events (with a profile), the
timeline, each module's folder (cost, fusions, hlo, memory) and report.md/report.html.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.analyze import memory
from harness.common import fmt, terminal
from harness.hlo.instruction import ParseError
from harness.match.match import Attribution, MatchReport
from harness.match.table_match import AttributionView
from harness.profile.events import ProfileError, StepMarker, session_xplanes
from harness.profile.table import NULL
from harness.program import dump as analysis
from harness.program.analysis import analyse_program, with_reverse_maps
from harness.program.hosts import attach_session
from harness.program.timeline import timeline_of
from harness.records import run_files
from harness.records.program import ProgramAnalysis, Roofs, analysis_file, merged_hosts, roofs_of
from harness.report.memory import module_blocks
from harness.store import io, runfolder
from harness.store.records import to_json

# Faults of the disk the output is written to (full, read-only, over quota), never the dump's.
OUTPUT_FAULTS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
# Events a timeline draws at most: its JSON is written in a few seconds and Perfetto and
# chrome://tracing open it in one; a longer profile's timeline shows its first whole steps,
# and every event stays in events.parquet.
TIMELINE_EVENTS = 50_000


class InputError(ValueError):
    """A dump, profile or ceilings file the analysis cannot use, said in one line."""


@dataclass(frozen=True)
class AnalyzeOptions:
    """How to analyse: which modules, how to count the profile's steps, and the roofs."""

    module: str = ""  # the regex a module's key must match, as the user wrote it ("": all)
    pattern: Any = None  # `module` compiled (harness.common.textsafety.user_pattern)
    steps: int | None = None  # the steps the profile covers, when it marks none
    mode: str = "jit"  # "eager": one module per primitive
    ceilings: Roofs | None = None  # the roofline's roofs (a run's ceilings.json)


@dataclass(frozen=True)
class Analysed:
    """What `analyse` wrote: the program analysis, the attributed profile (None without one),
    each module's memory and the report's path."""

    program: ProgramAnalysis
    profile: analysis.ProfileResult | None
    memories: list[tuple[str, Any]]
    report: Path


def read_ceilings(path: Path) -> Roofs:
    """The roofs of a run's ceilings.json, read as the run's own reader reads it
    (harness.records.run_files.CEILINGS); an InputError naming the file when unusable."""
    try:
        ceilings = run_files.load(run_files.CEILINGS, path)
    except (OSError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{path}: not a readable ceilings.json ({first})") from None
    try:
        return roofs_of(ceilings, str(path))
    except ValueError as e:
        raise InputError(str(e)) from None


def check_inputs(dump: Path, xplane: Path | None) -> None:
    """Refuses a dump that holds no HLO module and a profile path with no profile, before any
    work and before the output folder is made: a wrong path costs nothing."""
    try:
        analysis.find_modules(dump)
    except ValueError as e:
        raise InputError(f"--dump: {e}") from None
    if xplane is not None:
        try:
            session_xplanes(xplane)
        except ProfileError as e:
            raise InputError(f"--xplane: {e}") from None


def analyse(
    dump: Path,
    xplane: Path | None,
    out: Path,
    options: AnalyzeOptions,
    say: Callable[[str], None] = print,
) -> Analysed:
    """Analyses the dump (and the profile at `xplane`) into `out`, an emptied folder; `say`
    prints the progress lines (the modules' table, each memory not read)."""
    try:
        results = analysis.analyze_dump(dump, out, options.pattern, finish=False)
    except (ValueError, OSError) as e:
        if isinstance(e, OSError) and e.errno in OUTPUT_FAULTS:
            raise  # the output's disk, not the dump: said as it is
        msg = str(e) if isinstance(e, ParseError) or str(dump) in str(e) else f"{dump}: {e}"
        raise InputError(msg.splitlines()[0] if msg else f"{dump}: failed") from None
    say(terminal.lines(analysis.format_table(results)))
    profile = None
    try:
        if xplane is not None:
            try:
                profile = attach_session(
                    results, session_xplanes(xplane), out, options.steps, options.mode
                )
            except (ValueError, OSError, ProfileError) as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise InputError(f"{xplane}: {first}") from None
            results = analysis.recost(results, profile)
        # Everything that needs no reverse map is done while a large module's may still be
        # computing in a child: the imports, the rankings and the figures.
        from harness.program.report import (  # imports matplotlib: loaded only when called
            host_blocks,
            write_analysis_report,
            write_figures,
        )

        program = analyse_modules(results, profile, options.ceilings)
        figs = write_figures(out, program)
        results = analysis.finish_dump(results)
    except BaseException:
        analysis.cancel_dump(results)
        raise
    program = with_reverse_maps(program, [r.as_input() for r in results])
    hosts = profile.hosts if profile is not None else ()
    run_files.write(runfolder.RunFolder(out).analysis, analysis_file(program, hosts))
    if profile is not None:
        write_timeline(out, program, profile)
    memories = dump_memory(results)
    extra = (*host_blocks(hosts), *module_blocks(memories))
    report = write_analysis_report(out, program, str(dump), options.module, figs, extra)
    return Analysed(program, profile, memories, report)


def analyse_modules(
    results: list[analysis.ModuleResult],
    profile: analysis.ProfileResult | None,
    ceilings: Roofs | None,
) -> ProgramAnalysis:
    """The program analysis of the dump's modules and, when given, the attributed profile."""
    inputs = [
        r.as_input(profile.bound.get(r.key) if profile is not None else None) for r in results
    ]
    return analyse_program(
        inputs,
        profile.report if profile is not None else None,
        profile.steps if profile is not None else None,
        str(profile.path) if profile is not None else "",
        profile.outside if profile is not None else (),
        ceilings,
        (*(profile.notes if profile is not None else ()), *analysis.loop_notes(results)),
        profile.markers if profile is not None else (),
    )


def write_timeline(out: Path, program: ProgramAnalysis, profile: analysis.ProfileResult) -> Path:
    """Writes the attributed timeline (harness.program.timeline) beside the report."""
    lines = {(m.name, c.name): c.lines for m in program.modules for c in m.clusters}
    rows, markers, shown = timeline_window(profile.report, profile.markers, TIMELINE_EVENTS)
    timeline = timeline_of(rows, lines, markers)
    return run_files.write(out / runfolder.TIMELINE_FILE, replace(timeline, shown=shown))


def timeline_window(
    report: MatchReport, markers: Sequence[StepMarker], limit: int
) -> tuple[Sequence[Attribution], Sequence[StepMarker], str]:
    """The attributions the timeline draws (at most `limit`: the first whole steps, at least
    one, or the first events without steps), their markers, and a sentence saying what was
    left out ("" when nothing was)."""
    rows = report.attributions
    if len(rows) <= limit or not isinstance(rows, AttributionView):
        return rows, markers, ""
    table = rows.attributed.table
    steps = table.ints["step"]
    if (steps == NULL).any():
        return (
            rows[:limit],
            markers,
            (f"the first {limit} of {len(rows)} events (the profile marks no steps)"),
        )
    numbers, counts = np.unique(steps, return_counts=True)
    kept = numbers[: max(1, int(np.searchsorted(np.cumsum(counts), limit, side="right")))]
    chosen = np.flatnonzero(np.isin(steps, kept))
    wanted = set(kept.tolist())
    return (
        AttributionView(rows.attributed, chosen),
        [m for m in markers if m.step in wanted],
        f"steps {kept[0]}-{kept[-1]} ({len(kept)} of {len(numbers)}), {len(chosen)} of "
        f"{len(rows)} events",
    )


def dump_memory(results: list[analysis.ModuleResult]) -> list[tuple[str, Any]]:
    """Each module's memory (beside its optimized HLO in the dump), written to
    `<out>/<module>/memory.json`; a module without live ranges has none. Memory is an optional
    part: a file of it that cannot be read is said in one line and the analysis goes on."""

    found = []
    for r in results:
        path = getattr(r.hlo, "path", None)
        if not path:
            continue
        try:
            m = memory.module_memory(memory.dump_files(Path(path)))
        except (ValueError, OSError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(terminal.lines(f"memory {r.key}: not read ({first})"), file=sys.stderr)
            continue
        if m is None:
            continue
        section, top = memory.section([m], None, False)
        io.write_json(r.out_dir / "memory.json", to_json(memory.memory_file(section, top)))
        found.append((r.key, m))
    return found


def summary_line(program: ProgramAnalysis) -> str:
    """One line: the main program and its largest cluster."""
    main = next(m for m in program.modules if m.role == "main")
    top = main.clusters[0] if main.clusters else None
    where = f" at {top.lines[0]}" if top is not None and top.lines else ""
    what = (
        (
            f"{top.share * 100:.1f}% of the {fmt.KERNEL_TIME}"
            if program.ranked_by == "device time"
            else f"{top.share * 100:.1f}% of the FLOPs"
        )
        if top is not None
        else "no clusters"
    )
    largest = f"largest cluster {top.name}{where}: {what}" if top is not None else what
    return f"main program {main.key}; {largest}"


def profile_line(profile: analysis.ProfileResult, program: ProgramAnalysis, out: Path) -> str:
    """One line: the profile's match and per-step numbers, and what lay outside the selection."""
    report = profile.report
    steps = profile.steps
    main = next(m for m in program.modules if m.role == "main")
    line = (
        f"profile: {report.events_in_window} device events, matched {report.matched_fraction:.3f}; "
    )
    if steps is not None:
        line += (
            f"{steps.count} steps ({steps.how}); main program {main.name}: "
            f"{main.kernels_per_step or 0:g} kernels a step, "
            f"{(main.time_s or 0) * 1e3:.3f} ms of {fmt.KERNEL_TIME}; all analysed modules: "
            f"{report.kernels_per_step:g} kernels and {report.device_ops_per_step:g} device ops "
            f"a step, {report.device_time_per_step_s * 1e3:.3f} ms of {fmt.DEVICE_TIME} (busy); "
        )
    else:
        line += "no events of the analysed modules; "
    if profile.hosts:
        m = merged_hosts(profile.hosts)
        line += (
            f"{len(report.unmatched)} unmatched on {profile.hosts[0].host}; {len(profile.hosts)} "
            f"hosts: {m.events} device events, {m.matched} matched, {m.steps} host steps "
            f"(see {out / analysis.EVENTS_DIR}/host=*/)"
        )
    else:
        line += f"{len(report.unmatched)} unmatched (see {out / analysis.EVENTS_FILE})"
    if profile.outside:
        n = sum(o.events for o in profile.outside)
        names = ", ".join(f"{o.module} (program {o.program_id})" for o in profile.outside[:3])
        more = f" and {len(profile.outside) - 3} more" if len(profile.outside) > 3 else ""
        line += f"; {n} events of other programs outside the selection: {names}{more}"
        again = [o for o in profile.outside if o.module == main.name]
        if again and main.program_id is not None:
            ids = ", ".join(str(o.program_id) for o in again)
            line += (
                f". {main.name} is one program compiled twice: the dump's compile is module "
                f"{main.program_id}, the profiled one program {ids} (another compile of the "
                "same function, so none of its events is attributed); analyse a dump and a "
                "profile of the same compile (a study's variants/<name>/dump/ and its "
                "profile/steady/ are two compiles)"
            )
    return line


def closing_lines(result: Analysed, out: Path) -> list[str]:
    """The lines the command prints once the folder is written, each safe for a terminal."""
    lines = [terminal.lines(summary_line(result.program))]
    if result.profile is not None:
        lines.append(terminal.lines(profile_line(result.profile, result.program, out)))
    for key, m in result.memories:
        lines.append(
            terminal.lines(f"memory {key}: peak {m.peak_bytes} B, total {m.total_bytes} B")
        )
    lines.append(f"report: {terminal.shown(result.report)} (and report.html)")
    return lines
