"""run(config, workdir, session): the study, supervised, from capture to report.

Data flows one way: config -> variants -> capture -> timing -> analysis -> report. This process
never runs JAX itself: a worker process (harness.study.worker) captures the variants in turn and
then times them all together; this supervisor reads its events, and when a worker dies (an
XLA CHECK failure, SIGABRT, SIGSEGV) records the variant it was on as failed, with the signal
and the last lines of its stderr, and starts another worker for the rest. On a GPU each
variant is captured in a process of its own (`capture.isolation: auto`), so its compile
pause includes its own autotuning and no cache another variant left; on a CPU, where XLA
does not autotune, one worker captures every variant, and a process per variant would only
cost start-ups.

After the workers, the analysis reads the saved files into summary.json and the report
renders it. Each stage reads and writes plain files, so `--resume`, `python -m
harness.commands.reanalyze` and `make report` can redo the later stages from a saved run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import analyze
from harness.analyze import numerics as numerics_analysis
from harness.common import stats, terminal, userfiles
from harness.common.terminal import one_line as cli_line
from harness.config import ConfigError, LoadedConfig
from harness.config.experiment import Experiment
from harness.config.program import gpu_only_note
from harness.config.timing import max_budget_s
from harness.records import invocations, numerics_effect, run_files
from harness.records.summary import (
    SUMMARY_FILE,
    CaptureRecord,
    TimingRecord,
    load_capture,
    summary_json,
)
from harness.report import write_report as render
from harness.report.conclusion import conclusion
from harness.store import io, runfolder
from harness.store.records import SchemaError, from_json, to_json
from harness.store.runfolder import ERROR_FILE, RunFolder, VariantFolder
from harness.study import group, lifecycle
from harness.study.pipeline import EachInItsOwn, crash_record, fresh_variant_dir
from harness.study.runs import finished_status
from harness.study.session import Session, hello
from harness.study.workerproc import REPO, WorkerDied, WorkerProcess
from harness.timing.rounds import AA_SUFFIX

# --- the run ----------------------------------------------------------------------------------


def counted(numbers: dict[str, int], total: int) -> Callable[[str], str]:
    """The study's progress prefix: `[3/13]`, the variant's place in the config."""
    return lambda name: f"[{numbers[name]}/{total}]"


class InOrder:
    """Prints the study's progress lines in config order: a line decided before the capture
    (a variant skipped on this platform, one kept from an interrupted run) waits for the
    lines above it, so `[12/13] ... skipped` never comes before `[1/13]`."""

    def __init__(self, names: list[str], kept_from: str = "the interrupted run") -> None:
        self.names = names
        self.kept_from = kept_from
        self.ready: dict[str, tuple[CaptureRecord | None, bool]] = {}
        self.printed = 0

    def add(self, name: str, record: CaptureRecord | None, kept: bool = False) -> None:
        self.ready[name] = (record, kept)
        while self.printed < len(self.names) and self.names[self.printed] in self.ready:
            first = self.names[self.printed]
            self.printed += 1
            at, was_kept = self.ready.pop(first)
            _progress(
                f"[{self.printed}/{len(self.names)}]",
                first,
                at,
                kept_from=self.kept_from if was_kept else None,
            )


def kept_from(ended: str | None) -> str:
    """Where a resumed run's kept variants come from, by how the run ended before
    (runs.finished_status): a re-time of a finished run was never interrupted."""
    return "the interrupted run" if ended is None else f"the earlier run ({ended})"


def _progress(
    where: str, name: str, record: CaptureRecord | None, kept_from: str | None = None
) -> None:
    if record is None:
        print(f"{where} {terminal.shown(name):<24} failed", flush=True)
        return
    if kept_from is not None:
        print(
            f"{where} {terminal.shown(name):<24} kept from {kept_from} "
            f"({terminal.shown(record.status)})",
            flush=True,
        )
        return
    line = f"{where} {terminal.shown(name):<24} {terminal.shown(record.status):<7}"
    if record.status == "ok" and record.latency_blocked_s:
        latency = stats.median(record.latency_blocked_s)
        line += f" call {latency * 1e3:8.3f} ms"
        if record.pauses and record.pauses.first_call_s is not None:
            line += f"  first call {record.pauses.first_call_s:.3f} s"
        if record.recompile and record.recompile.seconds is not None:
            line += f"  recompile {record.recompile.seconds:.3f} s"
        if record.numerics is not None and record.numerics.rel_fro_err is not None:
            # Accuracy only: whether a compiler choice moved the result is the analysis's
            # verdict against the baseline, printed with the conclusion.
            line += f"  vs float64 {record.numerics.rel_fro_err:.1e}"
        if record.probe_failures:
            probes = ", ".join(dict.fromkeys(f.probe for f in record.probe_failures))
            line += f"  probe failed: {probes} (see summary)"
    elif record.reason:  # an exception's message from the user's program: escaped
        line += f" {terminal.shown(record.reason)}"
    print(line, flush=True)


def kept_record(workdir: Path, name: str) -> CaptureRecord | None:
    """Returns a finished variant's record on resume, or None when it must be redone."""
    vdir = RunFolder(workdir).variant(name)
    if vdir.root.is_symlink() or not vdir.result.is_file():
        return None
    try:
        return load_capture(vdir.result)
    except SchemaError:
        return None  # corrupt: the variant is captured again


def _timing_fault(last: dict[str, Any]) -> tuple[str | None, str]:
    """Returns the variant a timing worker was on when it died, and what it was doing."""

    event = last.get("event")
    name = last.get("variant") if event in ("timing_compile", "timing_call") else None
    if isinstance(name, str):
        name = name.removesuffix(AA_SUFFIX)  # the baseline's second slot is the baseline
    if event == "timing_compile":
        return name, "loading or compiling it for timing"
    return name, "timing it"


@dataclass
class Supervisor:
    """Runs the capture and timing jobs over workers, replacing a worker that dies."""

    session: Session
    workdir: Path
    exp: Experiment

    def _replace_worker(self) -> None:
        """Keeps the dead current worker's log in the run folder and starts a new one."""
        self.session.worker.save_log(self.workdir)
        self.session.worker = self._new_worker()

    def _expect_or_replace(self, done: str, within: float, lost: str, doing: str) -> str | None:
        """Waits for the current worker's `done` of a stage the run can go on without;
        returns None, or why it has nothing (`lost`: the worker died while `doing`), the
        worker replaced."""
        try:
            self.session.worker.expect(done, within=within)
        except WorkerDied as died:
            note = f"{lost}: the worker {died.how()} while {doing}"
            print(f"    {note}; a new worker times the variants", file=sys.stderr, flush=True)
            self._replace_worker()
            return note
        return None

    def _new_worker(self) -> WorkerProcess:
        """Returns a worker ready for jobs, started now. In a
        group of processes, a new group: a jax.distributed group cannot go on after a member
        died, and with an external launcher the run cannot start one (WorkerDied stops it)."""
        p = self.exp.processes
        if p.enabled:
            return self._new_group()
        worker = self.session.spawn((), self.exp.limits.stopped_s)
        hello(worker, self.exp, str(self.session.config.path), checks=False)
        return worker

    def _new_group(self) -> WorkerProcess:
        worker, peers = group.restart(
            self.session.worker, self.session.peers, self.workdir, self.exp,
            str(self.session.config.path), self.session.workers + 1, hello,
        )  # fmt: skip
        self.session.workers += 1 + len(peers)
        self.session.peers = peers
        return worker

    def capture(
        self,
        names: list[str],
        per_variant: bool,
        position: Callable[[str], str],
        in_order: InOrder | None = None,
    ) -> dict[str, CaptureRecord]:
        """Captures `names`; returns their records (a crash is recorded, never raised).
        `position` says where each one is in the whole, for its progress line; with
        `in_order`, the study's lines go through it, in config order. `per_variant`: each in
        a worker of its own (harness.study.pipeline), else all in the current worker."""

        def progress(name: str, record: CaptureRecord) -> None:
            if in_order is not None:
                in_order.add(name, record)
            else:
                _progress(position(name), name, record)

        if per_variant:
            each = EachInItsOwn(self.session, self.exp, self.workdir, self._new_worker)
            return each.run(names, progress)
        records: dict[str, CaptureRecord] = {}
        todo = list(names)
        while todo:
            worker = self.session.worker
            for name in todo:
                fresh_variant_dir(self.workdir, name)
            worker.send(
                "capture",
                workdir=str(self.workdir),
                variants=list(todo),
                fresh_process=False,
                executables=None,
                # Every variant reads and keeps the float64 references there.
                references=str(self.session.reference_folder(self.workdir)),
            )
            try:
                while todo:
                    worker.expect("start", within=self.exp.limits.call_s)
                    done = worker.expect("done", within=self.exp.limits.call_s)
                    name = done["variant"]
                    if name not in todo:  # said twice (a copy of the worker a fork made)
                        continue
                    records[name] = load_capture(RunFolder(self.workdir).variant(name).result)
                    todo.remove(name)
                    progress(name, records[name])
            except WorkerDied as died:
                # A group's other members may still be writing: none outlives its fault.
                self.session.kill_group()
                name = died.last.get("variant")
                if name is None or name not in todo:
                    raise
                record = crash_record(self.exp, name, died)
                io.write_json(RunFolder(self.workdir).variant(name).result, to_json(record))
                if self.exp.processes.enabled:
                    group.record_fault(self.workdir, self.exp, name, "capture", died)
                records[name] = record
                todo.remove(name)
                progress(name, record)
                print(f"    {died.how()}; {group.successor(self.exp)}", file=sys.stderr, flush=True)
                self._replace_worker()
        return records

    def configure(self, exp: Experiment) -> None:
        """Hands the worker a new experiment (a search adds candidates as it goes)."""
        self.exp = exp
        self.session.worker.send("config", config=to_json(exp))
        self.session.worker.expect("configured", within=exp.limits.call_s)

    def ceilings(self) -> str | None:
        """Measures the device's ceilings into ceilings.json, in the current worker; they
        are kept for later runs in the results root's cache (harness.capture.ceilings).
        Returns None, or why there are no ceilings: a worker that dies measuring them is
        replaced, and the run goes on without them."""
        if self.session.ceilings is not None:
            return self._ceilings_measured_beside()
        refused = io.cache_note(self.workdir)  # a link or outside the root: not used
        if refused:
            print(f"note: {refused}", file=sys.stderr, flush=True)
        self.session.worker.send(
            "ceilings", workdir=str(self.workdir), cache=self.session.ceilings_cache(self.workdir)
        )
        return self._expect_or_replace(
            "ceilings_done", self.exp.limits.call_s, "no ceilings", "measuring them"
        )

    def _ceilings_measured_beside(self) -> str | None:
        """Waits for the ceilings a capture worker measured beside the captures
        (harness.study.pipeline); returns None, or why there are none. That worker then times
        the variants instead of the last one where what it captured is called op by op:
        nothing of an eager variant's is kept to load, and a timing worker that did not
        capture it compiled its primitives again (1.0 s of the H200 study's timing stage)."""
        worker, self.session.ceilings = self.session.ceilings, None
        captured, self.session.ceilings_captured = self.session.ceilings_captured, None
        assert worker is not None  # the caller checked
        try:
            worker.expect("ceilings_done", within=self.exp.limits.call_s)
        except WorkerDied as died:
            note = f"no ceilings: the worker {died.how()} while measuring them"
            print(f"    {note}", file=sys.stderr, flush=True)
            worker.end()
            self.session.finished.append(worker)
            return note
        done = worker
        if captured is not None and self.exp.variant(captured).mode_spec.op_by_op:
            done, self.session.worker = self.session.worker, worker
        done.end()
        self.session.finished.append(done)
        return None

    def numerics_pass(self) -> str | None:
        """Finds, for each variant whose result moved from the baseline's beyond the estimate
        (harness.analyze.numerics), the first pass after which it moves, in the current
        worker (`measure.numerics_pass_compiles`). Returns None, or why it could not: a worker
        that dies searching is replaced, and the run goes on."""

        exp = self.exp
        roles = {v.name: v.resolved_roles for v in exp.selected_variants}
        found = numerics_analysis.distances_of(self.workdir, roles, exp.baseline)
        moved = {
            name: d
            for name, d in found.items()
            if d.comparable and any(numerics_effect.moved(leaf) for leaf in d.leaves)
        }
        if not moved:
            return None
        _stage(f"numerics: the pass that moved {', '.join(moved)}")
        self.session.worker.send(
            "numerics_pass",
            workdir=str(self.workdir),
            searches=[{"variant": n, "distances": to_json(d)} for n, d in moved.items()],
        )
        within = exp.limits.call_s * (1 + exp.measure.numerics_pass_compiles) * len(moved)
        return self._expect_or_replace(
            "numerics_pass_done", within, "no numerics pass search", "searching"
        )

    def time(self, timed: list[str], file: str = runfolder.TIMING_FILE) -> TimingRecord:
        """Times `timed` together in the current worker; a variant whose compile or calls for
        timing kill the worker (or raise, or hang past the time limit) is excluded with the
        reason and the others are timed again, in a new worker."""
        excluded: dict[str, str] = {}
        todo = list(timed)
        # The rounds may run on past budget_s while intervals are wide, up to max_budget_s.
        within = self.exp.limits.call_s + max_budget_s(self.exp.timing)
        # Each failed attempt removes one variant; a fault no variant owns ends the stage.
        for _attempt in range(len(timed) + 1):
            worker = self.session.worker
            worker.send(
                "time",
                workdir=str(self.workdir),
                variants=todo,
                excluded=excluded,
                file=file,
                executables=str(self.session.executables) if self.session.executables else None,
            )
            try:
                worker.expect("timed", within=within)
                path = RunFolder(self.workdir).timing_named(file)
                return from_json(TimingRecord, io.read_json(path), file)
            except WorkerDied as died:
                self.session.kill_group()  # a group's others, before anything is rewritten
                name, doing = _timing_fault(died.last)
                print(
                    f"    timing: {name or 'the worker'} {died.how()}", file=sys.stderr, flush=True
                )
                if self.exp.processes.enabled:
                    group.record_fault(self.workdir, self.exp, name, "timing", died)
                if name in todo:
                    excluded[name] = f"{died.how()} while {doing}"
                    todo.remove(name)
                else:
                    excluded.update({n: f"timing failed: {died.how()}" for n in todo})
                    todo = []
                self._replace_worker()
                if not todo:
                    break
        empty = TimingRecord(
            rounds=0, target_batch_s=0.0, wall_s=0.0, baseline=None, repeat=None, excluded=excluded
        )
        io.write_json(RunFolder(self.workdir).timing_named(file), to_json(empty))
        return empty


def git_commit() -> str | None:
    """Returns the harness checkout's commit (with '+dirty' for local changes), when git knows it."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def manifest_for(
    config: LoadedConfig, workdir: Path, environment: dict[str, Any]
) -> dict[str, Any]:
    exp = config.experiment
    return {
        "experiment": exp.experiment,
        "run_id": workdir.name,
        "config_file": str(config.path),
        "config": to_json(exp),
        "overrides": [
            {"key": o.key, "value": o.value, "previous": o.previous} for o in config.overrides
        ],
        "environment": {**environment, "git_commit": git_commit()},
        "compiler_options": {v.name: dict(v.xla_options) for v in exp.selected_variants},
        "invocation": to_json(invocations.invocation_here()),
    }


def _stage(name: str) -> None:
    """Says which stage the run is in, so a user (and a test) sees where time goes."""
    print(f"-- {terminal.shown(name)}", flush=True)


def _capture_plan(
    exp: Experiment, workdir: Path, platform: str, resume: bool, in_order: InOrder
) -> tuple[dict[str, CaptureRecord], list[str]]:
    """Returns the records already decided (skipped here, kept from an interrupted run) and the
    variants still to capture, in config order; skipped variants get their result.json now."""
    records: dict[str, CaptureRecord] = {}
    todo = []
    selected = exp.selected_variants
    for v in selected:
        if platform not in v.platforms:
            vdir = fresh_variant_dir(workdir, v.name)
            record = CaptureRecord(
                status="skipped",
                reason=f"applies to {', '.join(v.platforms)}; this run is on {platform}"
                + gpu_only_note(v.program.kwargs),
                mode=v.mode,
                module=None,
            )
            io.write_json(VariantFolder(vdir).result, to_json(record))
            records[v.name] = record
            in_order.add(v.name, record)
            continue
        kept = kept_record(workdir, v.name) if resume else None
        if kept is not None:
            records[v.name] = kept
            in_order.add(v.name, kept, kept=True)
            continue
        todo.append(v.name)
    return records, todo


def _stages(
    config: LoadedConfig,
    workdir: Path,
    session: Session,
    resume: bool,
    seconds: dict[str, float],
    manifest_notes: list[str],
    settle: Callable[[Any], None],
    ended: str | None = None,
) -> Any:
    """Runs capture, timing, analysis and report; records each stage's seconds, and in
    `manifest_notes` what the run goes without (ceilings a dead worker did not measure);
    `settle(summary)` records the run's final status between the analysis and the report,
    which reads it. Returns the summary."""

    exp = config.experiment
    platform = session.platform
    clock = time.perf_counter()
    seconds["start_s"] = clock - harness.STARTED
    if exp.processes.enabled:
        _stage(group.describe(exp, session.environment))
    in_order = InOrder([v.name for v in exp.selected_variants], kept_from(ended))
    records, todo = _capture_plan(exp, workdir, platform, resume, in_order)
    # A group of processes captures every variant in turn: a group per variant would pay
    # every member's start for each one.
    per_variant = not exp.processes.enabled and (
        exp.capture.isolation == "per_variant"
        or (exp.capture.isolation == "auto" and platform == "gpu")
    )
    supervisor = Supervisor(session, workdir, exp)
    numbers = {v.name: i for i, v in enumerate(exp.selected_variants, 1)}
    records.update(supervisor.capture(todo, per_variant, counted(numbers, len(numbers)), in_order))
    seconds["capture_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    timed = [
        v.name
        for v in exp.selected_variants
        if v.name in records
        and records[v.name].status == "ok"
        and not records[v.name].expected_error
    ]
    _stage(f"timing {len(timed)} variants together")
    missing = supervisor.ceilings()
    if missing:
        manifest_notes.append(missing)
    # A stage of its own: measured here (a CPU, or a capture of one worker) the ceilings took
    # 4.7 s of a first default study's 7.6 s "timing" on the 2-core VM, and cached none later;
    # measured beside the captures (a GPU), this is the wait for them.
    seconds["ceilings_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if exp.measure.numerics_pass_compiles:
        unsearched = supervisor.numerics_pass()
        if unsearched:
            manifest_notes.append(unsearched)
    supervisor.time(timed)
    # It exits while the analysis runs (a group's others with it); its log is kept after the
    # report.
    session.worker.end()
    seconds["timing_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    _stage("analysis")
    summary = finalize(workdir, exp)
    seconds["analysis_s"] = time.perf_counter() - clock
    # No process a variant started outlives the run's status: none writes into it afterwards.
    session.contain()
    settle(summary)

    clock = time.perf_counter()
    _stage("report")
    write_report(workdir, workdir.parent.parent)  # a study's: its results root's index too
    session.close(workdir)
    seconds["report_s"] = time.perf_counter() - clock
    return summary


def run(config: LoadedConfig, workdir: Path, session: Session, resume: bool = False) -> int:
    """Runs the study into `workdir`; returns 0 when every variant is ok or skipped, 1 when
    one failed or a fault stopped the run (a disk full, a worker no variant owns), 130 when
    interrupted. The lock, the manifest, `latest`, signals and faults are harness.study.lifecycle's."""
    exp = config.experiment
    seconds: dict[str, float] = {}
    # How the run ended before, read before the lifecycle marks it running again.
    ended = finished_status(workdir) if resume else None
    with lifecycle.running(
        workdir,
        manifest_for(config, workdir, session.environment),
        latest=True,
        resumed=resume and RunFolder(workdir).manifest.exists(),
        stop=session.kill,
        faults=(WorkerDied, ConfigError, OSError),  # a worker no variant owns died, a disk fault
    ) as study:
        notes: list[str] = []
        if resume and exp.timing.only:
            notes.append(keep_earlier_timing(workdir))

        def settle(summary: Any) -> None:
            """The run's final status, written before the report and the results index read
            it; the report's own seconds are added after it."""
            if notes:
                study.manifest["notes"] = notes
            failed = [n for n, v in summary.variants.items() if v.identity.status == "failed"]
            study.settle(
                "failed" if failed else "complete",
                stages_s=seconds,
                workers=session.workers,
                sizes=runfolder.sizes_by_kind(workdir),
            )

        summary = _stages(config, workdir, session, resume, seconds, notes, settle, ended)
        study.manifest["sizes"] = runfolder.sizes_by_kind(workdir)  # the pages and logs too
        study.write()  # with report_s
    if study.stopped is not None:
        return _stopped(study.stopped, exp, workdir, session, study.manifest)
    failed = [n for n, v in summary.variants.items() if v.identity.status == "failed"]
    print(
        "time: "
        + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in seconds.items())
        + f" (total {sum(seconds.values()):.1f} s)",
        flush=True,
    )
    print(f"report: {terminal.shown(workdir / 'report.md')}", flush=True)

    for line in conclusion(workdir):
        print(terminal.shown(line), flush=True)
    if failed:
        print(
            f"failed variants: {', '.join(failed)} (see variants/<name>/{ERROR_FILE})",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def keep_earlier_timing(workdir: Path) -> str:
    """Before a re-time (timing.only), keeps the run's timing.json, summary.json and
    manifest.json under names of their own, so nothing the earlier timing found (nor the
    config it ran with) is lost; returns a note."""
    stamp = io.utc_now().split("+")[0].replace(":", "").replace("-", "")
    kept = []
    for name in (runfolder.TIMING_FILE, runfolder.SUMMARY_FILE, runfolder.MANIFEST_FILE):
        if (workdir / name).is_file():
            target = runfolder.set_aside(name, stamp)
            io.write_text(workdir / target, userfiles.read_text(workdir / name, userfiles.SUMMARY))
            kept.append(target)
    return "re-timed (timing.only); the earlier timing is kept as " + (", ".join(kept) or "none")


def finish_command(manifest: dict[str, Any], workdir: Path) -> str:
    """The command that finishes the run in `workdir`, resumed as it was started (a second
    form after `, or: `; harness.records.invocations), so that it pastes as printed."""
    record = run_files.from_document(run_files.MANIFEST, manifest, str(workdir))
    return ", or: ".join(invocations.resume_commands(record, workdir))


def _stopped(
    stop: lifecycle.Stop,
    exp: Experiment,
    workdir: Path,
    session: Session,
    manifest: dict[str, Any],
) -> int:
    """Says why the study stopped early and how to finish it; returns the exit status."""
    finish = finish_command(manifest, workdir)
    if stop.status == "interrupted":
        kept = sum(
            1
            for v in exp.selected_variants
            if session.platform in v.platforms and kept_record(workdir, v.name) is not None
        )
        print(
            f"interrupted ({stop.reason}): {kept} of {len(exp.selected_variants)} variants kept"
            + stop.then(f"; finish it with: {finish}"),
            file=sys.stderr,
            flush=True,
        )
        return stop.exit_code
    e = stop.error
    if isinstance(e, OSError):  # disk full, a read-only folder, a name too long
        where = f"{e.filename}: " if e.filename else ""
        what = f"{where}{e.strerror or e}"
        hint = f"; finished variants are kept: fix it, then finish it with: {finish}"
    else:
        what = cli_line(e)
        hint = f"; finished variants are kept: finish it with: {finish}"
    print(f"error: {what}{stop.then(hint)}", file=sys.stderr, flush=True)
    return stop.exit_code


def finalize(workdir: Path, exp: Experiment) -> Any:
    """Analyzes the saved run and writes summary.json; returns the summary."""

    summary = analyze.analyze_run(workdir, exp)
    io.write_json(workdir / SUMMARY_FILE, summary_json(summary))
    return summary


def write_report(workdir: Path, results_root: Path | None = None) -> None:
    """Renders the run's report; a study names its results root, whose index it rewrites."""

    render(workdir, results_root)
