"""Any program's XLA dump, analyzed: modules found, clusters, costs, and its profile attributed.

Used by `python -m harness.analyze` (harness.commands.analyze). Works on an XLA dump folder
(`--xla_dump_to=DIR --xla_dump_hlo_as_text`) or on a single HLO text file from any program. For
each module it writes `<out>/<module>/fusions.json` (the clusters, with their source ops and
file:line, and a map from each pre-optimization op to the cluster that now holds it) and
`cost.json`; with a profile, every device event of the analysed modules is attributed to a
cluster in `<out>/kernels.json`. harness.program.analysis turns all of it into the report's
rankings.

Programs are told apart by (module name, program id): XLA's dump file `module_NNNN.<name>`
has NNNN == the profile's `program_id`. Events of any other program, a recompile of the same
function included, are never attributed to an analysed module: they are counted outside the
selection.
"""

from __future__ import annotations

import multiprocessing
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.common import forked, userfiles
from harness.hlo.clusters import Cluster
from harness.hlo.cost import ModuleCost
from harness.hlo.parser import HloModule
from harness.hlo.reverse_map import ReverseMap, reverse_map
from harness.hlo.thunks import CommandBuffer, read_command_buffers, thunk_files
from harness.match.match import MatchReport
from harness.match.table_match import arrow_slices, match_table
from harness.profile.events import DeviceEvent, StepMarker, find_xplane
from harness.profile.reader import read_table
from harness.profile.table import NULL, EventTable, self_ns
from harness.program import modules as hlo_files
from harness.program.analysis import choose_main, count_steps
from harness.program.record import ModuleInput, ProgramKey
from harness.records import events_file
from harness.records.program import HostTotals, OutsideProgram, Steps, merged_hosts
from harness.store import io
from harness.store.records import to_json
from harness.store.runfolder import EVENTS_DIR, EVENTS_FILE

_DUMP_NAME = re.compile(r"^(module_\d{1,9}\.[^.]{1,512}(?:\.[^.]{1,512}){0,8}?)\.([^/]{1,1024})$")
_PASS_FILE = re.compile(r"\.\d{4}\.[^.]{1,256}\.after_")
_NUMBER = re.compile(r"^module_(\d+)\.")


@dataclass(frozen=True)
class ModuleFiles:
    """The files that describe one module: its optimized HLO and, if dumped, the input HLO."""

    key: str
    after: Path
    before: Path | None


@dataclass(frozen=True)
class ModuleResult:
    """What the analysis learned about one module (the parsed objects stay in memory)."""

    key: str
    out_dir: Path
    summary: dict[str, Any]
    module: str = ""
    program_id: int | None = None
    hlo: HloModule | None = field(default=None, repr=False, compare=False)
    clusters: tuple[Cluster, ...] = field(default=(), repr=False, compare=False)
    cost: ModuleCost | None = field(default=None, repr=False, compare=False)
    reverse: ReverseMap | None = field(default=None, repr=False, compare=False)
    before: HloModule | None = field(default=None, repr=False, compare=False)
    pending: _ReverseMapJob | None = field(default=None, repr=False, compare=False)

    def as_input(self, program_id: int | None = None) -> ModuleInput:
        """This module as the analysis reads it (with the program id it was bound to)."""
        assert self.hlo is not None and self.cost is not None
        pid = self.program_id if program_id is None else program_id
        return ModuleInput(
            self.key, self.module, pid, self.hlo, self.clusters, self.cost, self.reverse
        )


# A reverse map of a module this large is computed in a forked child while the parent goes on
# (cost model, profile, report imports): on the 48-block train step it is the largest single
# step (about 2.4 s of 7 s), and the machine has two cores.
FORK_INSTRUCTIONS = 20_000


class _ReverseMapJob:
    """`reverse_map(before, after, clusters)` in a forked child; `result()` waits for it.

    The child inherits the parsed modules (nothing is pickled on the way in) and sends the
    ReverseMap back through a pipe. If the child fails in any way the map is computed again
    in this process, so an error surfaces here exactly as it would have without the child.
    """

    def __init__(self, before: HloModule, after: HloModule, clusters: tuple[Cluster, ...]):
        self.args = (before, after, clusters)
        # The child flushes the standard streams it inherits when it ends: empty them first so
        # nothing printed so far is printed twice.
        sys.stdout.flush()
        sys.stderr.flush()
        ctx = multiprocessing.get_context("fork")
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_reverse_map_child, args=(send, *self.args), daemon=True)
        self.proc.start()
        send.close()

    def result(self) -> ReverseMap:
        try:
            found = self.recv.recv()
        except (EOFError, OSError):
            found = None
        finally:
            self.recv.close()
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
        return found if isinstance(found, ReverseMap) else reverse_map(*self.args)

    def cancel(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.recv.close()


def _reverse_map_child(
    send: Any, before: HloModule, after: HloModule, clusters: tuple[Cluster, ...]
) -> None:
    try:
        send.send(reverse_map(before, after, clusters))
    except BaseException:  # the parent computes it again and raises the error itself
        send.send(None)
    finally:
        send.close()


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and forked.fork_safe()


@dataclass(frozen=True)
class ProfileResult:
    """The profile attributed to the analysed modules."""

    path: Path
    report: MatchReport
    steps: Steps | None
    outside: tuple[OutsideProgram, ...]
    bound: dict[str, int | None]  # module key -> the program id its events carry
    notes: tuple[str, ...] = ()
    markers: tuple[StepMarker, ...] = ()  # the host's step windows: each step's wall time
    # A session of several hosts (harness.program.hosts): each host's totals; everything
    # above is the first host's. Empty for one host.
    hosts: tuple[HostTotals, ...] = ()


def _is_hlo(path: Path) -> bool:
    try:
        return userfiles.read_head(path, 9) == b"HloModule"
    except userfiles.Unreadable:
        return False


def find_modules(dump: Path) -> list[ModuleFiles]:
    """The modules under `dump`: per XLA module the after-optimizations file (falling back to
    before_optimizations), plus any other `HloModule` text file as its own module.

    Raises ValueError naming the path when it does not exist or holds no HLO module.
    """
    if dump.suffix == ".gz" and userfiles.is_file(dump.with_suffix("")):
        dump = dump.with_suffix("")  # a run's file kept compressed, named as stored
    if not dump.exists() and not userfiles.is_file(dump):
        raise ValueError(f"{dump}: no such file or directory")
    if userfiles.is_file(dump):  # a file, or a run's file kept compressed in its place
        if not _is_hlo(dump):
            raise ValueError(f"{dump}: not an HLO text module (no `HloModule` header)")
        return [ModuleFiles(dump.stem, dump, None)]
    groups: dict[str, dict[str, Path]] = {}
    loose: list[ModuleFiles] = []
    for path in userfiles.files_in(dump):  # a run's dump kept compressed: by XLA's names
        if _PASS_FILE.search(path.name) or not _is_hlo(path):
            continue
        m = _DUMP_NAME.match(path.name)
        rest = m.group(2) if m else ""
        if m and rest.endswith("after_optimizations.txt"):
            groups.setdefault(m.group(1), {})["after"] = path
        elif m and rest == "before_optimizations.txt":
            groups.setdefault(m.group(1), {})["before"] = path
        elif not m:
            loose.append(ModuleFiles(path.stem, path, None))
    found = [
        ModuleFiles(key, files.get("after", files.get("before")), files.get("before"))
        for key, files in sorted(groups.items())
    ]
    found.extend(loose)
    if not found:
        raise ValueError(f"{dump}: no HLO modules found")
    return found


def program_number(key: str) -> int | None:
    """The XLA module number of a dump key (`module_0084.jit_f` -> 84), the profile's
    program_id; None for a loose file."""
    m = _NUMBER.match(key)
    return int(m.group(1)) if m else None


def summarize(clusters: Sequence[Cluster], cost: ModuleCost) -> dict[str, Any]:
    """The headline of one module: clusters, fusions, library calls, FLOPs and bytes."""
    calls = Counter((c.target, c.epilogue) for c in hlo_files.library_calls(clusters))
    return {
        "fusion_count": hlo_files.fusion_count(clusters),
        "cluster_count": len(clusters),
        "library_calls": [
            {"target": t, "epilogue": e, "count": n} for (t, e), n in sorted(calls.items())
        ],
        "flops": cost.flops,
        "bytes": cost.bytes,
        "arithmetic_intensity": cost.arithmetic_intensity,
        "transcendentals": cost.transcendentals,
    }


def analyze_dump(
    dump: Path, out: Path, pattern: re.Pattern[str] | None = None, finish: bool = True
) -> list[ModuleResult]:
    """Analyses every (matching) module under `dump`, writing one folder per module in `out`:
    cost.json and hlo.txt now, fusions.json once the module's reverse map is known.

    With `finish=False` the reverse map of a large module may still be computing in a child
    process; `finish_dump(results, ...)` waits for it and writes fusions.json. The default
    finishes before returning.
    """
    results: list[ModuleResult] = []
    job: _ReverseMapJob | None = None
    try:
        for files in find_modules(dump):
            if pattern is not None and not pattern.search(files.key):
                continue
            after = hlo_files.parsed(files.after)
            before = (
                hlo_files.parsed(files.before)
                if files.before and files.before != files.after
                else None
            )
            out_dir = out / files.key
            clusters = hlo_files.clusters_of(after)
            rmap, job = None, None
            if before is not None:
                size = after.instruction_count() + before.instruction_count()
                waiting = any(r.pending is not None for r in results)
                if size >= FORK_INSTRUCTIONS and _can_fork() and not waiting:
                    job = _ReverseMapJob(before, after, clusters)
                else:
                    rmap = reverse_map(before, after, clusters)
            (cost,) = hlo_files.costs_of([after])
            io.write_json(
                out_dir / "cost.json", hlo_files.cost_document([cost], None), compact=True
            )
            # Through the one reader: a run's dump is kept compressed (`<name>.gz`).
            io.write_bytes(out_dir / "hlo.txt", userfiles.read_bytes(files.after, userfiles.DUMP))
            result = ModuleResult(
                files.key,
                out_dir,
                summarize(clusters, cost),
                after.name,
                program_number(files.key),
                after,
                clusters,
                cost,
                rmap,
                before,
                job,
            )
            job = None
            if result.pending is None:
                _write_fusions(result)
            results.append(result)
    except BaseException:
        cancel_dump(results)
        if job is not None:  # started for a module whose result was not made yet
            job.cancel()
        raise
    if not results:
        raise ValueError(
            f"{dump}: no module matches --module={pattern.pattern if pattern else ''!r}"
        )
    return finish_dump(results) if finish else results


def finish_dump(results: list[ModuleResult]) -> list[ModuleResult]:
    """Returns the results with every reverse map computed, their fusions.json written."""
    out = []
    for r in results:
        if r.pending is not None:
            r = replace(r, reverse=r.pending.result(), pending=None)
            _write_fusions(r)
        out.append(r)
    return out


def cancel_dump(results: Sequence[ModuleResult]) -> None:
    """Stops every reverse map still computing in a child (on an error or interrupt)."""
    for r in results:
        if r.pending is not None:
            r.pending.cancel()


def _write_fusions(r: ModuleResult) -> None:
    """fusions.json: the clusters and, with a before-optimizations module, the reverse map."""
    assert r.hlo is not None
    entry: dict[str, Any] = {
        "module": r.hlo.name,
        "path": r.hlo.path,
        "clusters": [c.to_json() for c in r.clusters],
    }
    if r.reverse is not None:
        entry.update(r.reverse.to_json())
    io.write_json(r.out_dir / "fusions.json", {"modules": [entry]}, compact=True)


def bind_programs(
    results: Sequence[ModuleResult], programs: Collection[ProgramKey]
) -> tuple[dict[str, int | None], list[str]]:
    """Returns each module's program id in the profile, and notes.

    `programs` are the (module, program id) pairs the profile's events name. A dumped module's
    id is its XLA module number. A loose HLO file has none: it is bound to the one program of
    its name in the profile, and to none when the profile holds several (the file cannot say
    which it is), so no event is attributed across programs.
    """
    seen: dict[str, set[int | None]] = defaultdict(set)
    for module, pid in programs:
        seen[module].add(pid)
    bound: dict[str, int | None] = {}
    notes: list[str] = []
    for r in results:
        if r.program_id is not None:
            bound[r.key] = r.program_id
            continue
        ids = seen.get(r.module, set())
        if len(ids) == 1:
            bound[r.key] = next(iter(ids))
            notes.append(
                f"{r.key} is a loose HLO file (no module number): bound by name to the only "
                f"program {r.module} in the profile (program_id {bound[r.key]})"
            )
        elif ids:
            notes.append(
                f"{r.key} is a loose HLO file (no module number) and the profile holds "
                f"{len(ids)} programs named {r.module} ({sorted(map(str, ids))}): none of their "
                "events is attributed to it; analyse the dump folder instead"
            )
    return bound, notes


@dataclass(frozen=True, eq=False)
class _SteadyWindow:
    """What attribution reads of a profile: the steady window's rows, and what was learned of
    the whole event table on the way. The whole table is not among them: it dies when the step
    that read it returns, so a long profile's rows are never held twice (issue 57: a gigabyte
    profile's analysis stays under 1.5x the xplane + 1 GB)."""

    rows: EventTable  # the analysed programs' events; only those of marked steps when marked
    program: np.ndarray  # each row's index into `keys`
    keys: list[ProgramKey | None]  # the profile's programs, sorted (None: outside any program)
    bound: dict[str, int | None]  # module key -> the program id its events carry
    times: dict[ProgramKey, float]  # each program's self time in the window (ns)
    marked: bool  # the profile's step markers hold events of the analysed programs
    left_out: int  # events of the analysed programs outside the marked steps
    outside: tuple[OutsideProgram, ...]
    notes: tuple[str, ...]
    markers: tuple[StepMarker, ...]


def attach_profile(
    results: list[ModuleResult],
    xplane: Path,
    out: Path,
    steps: int | None,
    mode: str,
    events: Path | None = None,
    kernels: bool = True,
) -> ProfileResult:
    """Attributes the profile's device events to the clusters of the analysed modules.

    Events of programs that are not analysed (another module, or the same name with another
    program id) are left out of the steady window and returned as `outside`. The step count
    comes from the step markers, else `steps`, else the executions of the main program; with
    none of those this raises StepsUnknown (never a guess). Writes `events` (default
    events.parquet: every event of the window and its attribution) and, unless `kernels` is
    False (a host of a session, harness.program.hosts), kernels.json (the match's totals).
    """
    if steps is not None and steps <= 0:
        raise ValueError(f"--steps must be a positive integer, got {steps}")
    path = find_xplane(xplane) if xplane.is_dir() else xplane
    eager = mode == "eager"
    # The whole event table is freed by now: the window is all the match reads.
    window = _steady_window(path, results, eager)
    main, label = _main_program(results, window.bound, window.times, eager)
    found, notes = _window_steps(window, main, label, steps)
    report = match_table(
        window.rows,
        _clusters_by_key(results, window.bound),
        steps=None if window.marked or found is None else found.count,
        mode=mode,  # type: ignore[arg-type]
        command_buffers=command_buffers(results, window.bound),
        left_out=window.left_out,
    )
    events_file.write(events or out / EVENTS_FILE, arrow_slices(report))
    profile = ProfileResult(
        path, report, found, window.outside, window.bound, window.notes + notes, window.markers
    )
    if kernels:
        write_kernels(out, profile)
    return profile


def _steady_window(path: Path, results: Sequence[ModuleResult], eager: bool) -> _SteadyWindow:
    """The steady window of the profile at `path` for the analysed modules: their events (in
    eager mode every program's), only those of marked steps when the markers hold any.

    The event table read here is referenced by this frame alone: only the window (a copy of
    its rows, unless it is every row) and small results leave, so the table is freed on return.
    """
    table, markers = read_table(path)
    keys, program = table.programs()
    bound, notes = bind_programs(results, [k for k in keys if k is not None])
    selected = _selected_programs(results, bound)
    inside = _rows_of(program, [eager or k is None or k in selected for k in keys])
    own = self_ns(table)
    outside = _outside_programs(keys, program, inside, own)
    if not eager and len(table) and not _selection_ran(keys, program, inside, selected):
        # Nothing of the analysed programs ran: runtime copies alone make no steps.
        notes.extend(_runtime_copies_note(table, inside))
        inside[:] = False
    has_step = table.ints["step"] != NULL
    marked = bool((inside & has_step).any())
    in_window = inside & has_step if marked else inside
    window = table.subset(in_window)
    window_program = program[in_window]
    window_own = self_ns(window) if window is not table else own
    return _SteadyWindow(
        window,
        window_program,
        keys,
        bound,
        _program_times(keys, window_program, window_own),
        marked,
        int(inside.sum()) - len(window),
        outside,
        tuple(notes),
        markers,
    )


def _selected_programs(
    results: Sequence[ModuleResult], bound: dict[str, int | None]
) -> set[ProgramKey]:
    """The (module, program id) of each analysed module bound to a program of the profile."""
    return {(r.module, bound[r.key]) for r in results if r.key in bound}


def _rows_of(program: np.ndarray, chosen: list[bool]) -> np.ndarray:
    """Each row's `chosen` value, by its program (`program`: each row's index into them)."""
    return np.array(chosen, dtype=bool)[program] if len(program) else np.zeros(0, dtype=bool)


def _outside_programs(
    keys: list[ProgramKey | None], program: np.ndarray, inside: np.ndarray, own: np.ndarray
) -> tuple[OutsideProgram, ...]:
    """Each program with rows outside the analysed ones: its events and self time (s)."""
    outside = []
    for g in sorted(np.unique(program[~inside]).tolist(), key=lambda g: str(keys[g])):
        key = keys[g]
        assert key is not None
        rows = program == g
        outside.append(
            OutsideProgram(key[0], key[1], int(rows.sum()), float(own[rows].sum()) * 1e-9)
        )
    return tuple(outside)


def _selection_ran(
    keys: list[ProgramKey | None],
    program: np.ndarray,
    inside: np.ndarray,
    selected: Collection[ProgramKey],
) -> bool:
    """Whether any row inside belongs to an analysed program (not only to none)."""
    in_selection = np.array([k is not None and k in selected for k in keys], dtype=bool)
    return bool(in_selection[program][inside].any())


def _runtime_copies_note(table: EventTable, inside: np.ndarray) -> tuple[str, ...]:
    """The note on the rows inside that belong to no program (runtime copies), if any."""
    loose = int((inside & (table.codes["hlo_module"] == 0)).sum())
    if not loose:
        return ()
    return (f"{loose} device events outside any program (runtime copies) ignored",)


def _program_times(
    keys: list[ProgramKey | None], program: np.ndarray, own: np.ndarray
) -> dict[ProgramKey, float]:
    """Each program's self time (ns) over the rows (`program`: each row's index into `keys`),
    for the programs with rows."""
    sums = np.bincount(program, weights=own, minlength=len(keys))
    present = np.bincount(program, minlength=len(keys)) > 0
    return {k: float(sums[g]) for g, k in enumerate(keys) if k is not None and present[g]}


def _main_program(
    results: Sequence[ModuleResult],
    bound: dict[str, int | None],
    times: dict[ProgramKey, float],
    eager: bool,
) -> tuple[ProgramKey, str]:
    """The program one execution of which is a step, and its label for the step notes."""
    inputs = [r.as_input(bound.get(r.key)) for r in results]
    if eager and times:
        # Eager: one small module per primitive, most without HLO; a step is one execution of
        # the program that takes the most device time, analysed or not.
        key = max(times, key=lambda k: (times[k], str(k)))
        return key, f"{key[0]} (program {key[1]})"
    main, _ = choose_main(inputs, times)
    top = next(m for m in inputs if m.key == main[0])
    return top.program, f"{top.name} (program {top.program_id})"


def _window_steps(
    window: _SteadyWindow, main: ProgramKey, label: str, steps: int | None
) -> tuple[Steps | None, tuple[str, ...]]:
    """The window's steps (none for an empty window) and a note when the profile's step
    markers hold none of its events. Raises ValueError when `steps` contradicts the markers."""
    if not len(window.rows):
        return None, ()
    marked_steps = int(np.unique(window.rows.ints["step"]).size) if window.marked else 0
    if window.marked and steps is not None and marked_steps != steps:
        raise ValueError(
            f"--steps={steps} but the profile marks {marked_steps} steps with device "
            "events of the analysed modules"
        )
    notes: tuple[str, ...] = ()
    if not window.marked and window.markers:
        notes = (
            f"the profile has {len(window.markers)} step markers but none holds an event of "
            "the analysed modules",
        )
    main_rows = np.isin(window.program, [g for g, k in enumerate(window.keys) if k == main])
    return count_steps(_one_per_run(window.rows, main_rows), label, marked_steps, steps), notes


def _clusters_by_key(
    results: Sequence[ModuleResult], bound: dict[str, int | None]
) -> dict[Any, tuple[Cluster, ...]]:
    """Each bound module's clusters, keyed as the matcher reads them: (name, program id), or
    the name alone for a loose file bound to a program without an id."""
    clusters = {(r.module, bound[r.key]): r.clusters for r in results if r.key in bound}
    by_key: dict[Any, tuple[Cluster, ...]] = {
        (name, pid): cs for (name, pid), cs in clusters.items() if pid is not None
    }
    for (name, pid), cs in clusters.items():
        if pid is None:
            by_key[name] = cs
    return by_key


def write_kernels(out: Path, profile: ProfileResult, session: str = "") -> None:
    """kernels.json: the match's totals; for a session of several hosts (`session`, its
    folder), each host's and theirs merged beside the first host's match."""
    found, hosts = profile.steps, profile.hosts
    data: dict[str, Any] = {
        "profile": session or str(profile.path),
        "steps": None if found is None else {"count": found.count, "how": found.how},
        "outside_selection": [o.__dict__ for o in profile.outside],
        "events_file": EVENTS_DIR if hosts else EVENTS_FILE,
        "match": profile.report.to_json(events=False),
    }
    if hosts:
        data["match_host"] = hosts[0].host
        data["hosts"] = [to_json(h) for h in hosts]
        data["merged"] = to_json(merged_hosts(hosts))
    io.write_json(out / "kernels.json", data, compact=True)


ANALYZE_WORDS = hlo_files.LoopWords(
    "a call",
    "its FLOPs and bytes a run rest on them",
    "its FLOPs and bytes a run count that loop's body once per entry, which is no count",
)


def recost(results: Sequence[ModuleResult], profile: ProfileResult) -> list[ModuleResult]:
    """The results with each module's costs counted again from what the profile saw run, by
    the study's one function (harness.program.modules.costs_of): a loop whose trip count the
    HLO does not hold by the iterations its body's clusters launched a call, a conditional by
    the branch whose clusters launched. A module's cost.json is written again where it moved."""
    report = profile.report
    calls = calls_per_step(report)
    out = []
    for r in results:
        if r.hlo is None or r.cost is None or not report.launches_per_cluster:
            out.append(r)
            continue
        # Launches are counted a step; the cost model counts a call.
        per_call = 1.0 / calls.get(r.module, 1.0)
        launches = {
            k: n * per_call
            for k, n in hlo_files.launches_of(r.hlo, report.launches_per_cluster).items()
        }
        (cost,) = hlo_files.costs_of([r.hlo], launches)
        if cost != r.cost:
            io.write_json(
                r.out_dir / "cost.json", hlo_files.cost_document([cost], None), compact=True
            )
            r = replace(r, cost=cost, summary=summarize(r.clusters, cost))
        out.append(r)
    return out


def calls_per_step(report: MatchReport) -> dict[str, float]:
    """Module name -> its executions a step (distinct run ids of its events over the steps),
    for each module all of whose events carry a run id."""
    attributed = getattr(report.attributions, "attributed", None)
    if attributed is None or not report.steps:
        return {}
    table = attributed.table
    modules, runs = table.codes["hlo_module"], table.ints["run_id"]
    out: dict[str, float] = {}
    for code in np.unique(modules).tolist():
        mine = runs[modules == code]
        if code and len(mine) and not (mine == NULL).any():
            out[table.strings["hlo_module"][code]] = np.unique(mine).size / report.steps
    return out


def loop_notes(results: Sequence[ModuleResult]) -> tuple[str, ...]:
    """For each module whose costs rest on loop counts the HLO does not hold, the sentence
    saying so (the study's, in this analysis's words), once."""
    out = []
    for r in results:
        said = hlo_files.loop_counts_said([r.cost], ANALYZE_WORDS) if r.cost else None
        if said:
            out.append(f"`{r.key}`: {said}")
    return tuple(out)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The rows of an events.parquet, or of a session's events dataset (`events/`, each row
    with its `host`), each a dict of its columns, through their one reader."""
    return events_file.read_table(path).to_pylist()


def _one_per_run(window: EventTable, rows: np.ndarray) -> list[DeviceEvent]:
    """One event of each distinct run id among the rows (what count_steps reads of them)."""
    runs = window.ints["run_id"][rows]
    where = np.flatnonzero(rows)
    _, first = np.unique(runs, return_index=True)
    return [window.event(int(where[i])) for i in first]


def command_buffers(
    results: Sequence[ModuleResult], bound: dict[str, int | None]
) -> dict[Any, tuple[CommandBuffer, ...]]:
    """Each bound module's command buffers, from the thunk files beside its optimized HLO in
    the dump folder (keyed as the matcher's clusters); a module without them has none."""
    out: dict[Any, tuple[CommandBuffer, ...]] = {}
    for r in results:
        if r.key not in bound or r.hlo is None:
            continue
        sequence, metadata = thunk_files(Path(r.hlo.path), r.key)
        if sequence is not None:
            pid = bound[r.key]
            key = (r.module, pid) if pid is not None else r.module
            out[key] = read_command_buffers(sequence, metadata)
    return out


def format_table(results: list[ModuleResult]) -> str:
    """A short text table: module, cluster count, fusions, library calls (counted)."""
    rows = [f"{'module':48} {'clusters':>8} {'fusions':>7}  library calls"]
    for r in results:
        calls = ", ".join(
            c["target"]
            + (f" ({c['epilogue']})" if c["epilogue"] else "")
            + (f" x{c['count']}" if c.get("count", 1) > 1 else "")
            for c in r.summary["library_calls"]
        )
        rows.append(
            f"{r.key[:48]:48} {r.summary['cluster_count']:>8} {r.summary['fusion_count']:>7}  "
            f"{calls or '-'}"
        )
    return "\n".join(rows)
