"""python -m harness.study.worker EVENTS_FD: the process that runs JAX for a study.

The supervisor (harness.study.run) starts it, sends it jobs as JSON lines on stdin, and reads what
happens as JSON lines on the file descriptor EVENTS_FD (stdout is left to the program being
studied: a host callback prints there). Jobs, in the order the supervisor sends them:

  {"op": "hello", "config": {...}, "source": "...", "checks": true, "distributed": ... | null}
      imports JAX, describes the machine, and (with checks) runs the preflight: each XLA
      option set is compiled once and the problems are checked against the device's memory.
      With `distributed` it first joins a group of processes (harness.capture.distributed):
      process 0's preflight is then the group's.
  {"op": "follow"}
      a process of a group other than 0: runs the jobs process 0 publishes (capture, time)
      until process 0 ends the group, then exits.
  {"op": "capture", "workdir": "...", "variants": [...], "fresh_process": false,
   "executables": "..." | null, "references": "..." | null}
      captures the variants in turn (harness.capture), each into variants/<name>/; with
      `executables` (the supervisor's private folder) it keeps each compiled program there,
      with `references` (another) the float64 references its variants share.
  {"op": "ceilings", "workdir": "...", "cache": "..." | null, "remeasure": false}
      measures the device's ceilings into ceilings.json.
  {"op": "numerics_pass", "workdir": "...", "searches": [{"variant": "...", "distances": {}}]}
      for each variant whose result moved from the baseline's, finds the first pass after
      which it moves (harness.capture.numerics_pass); writes numerics_pass.json.
  {"op": "time", "workdir": "...", "variants": [...], "executables": "..." | null}
      times the variants together in interleaved rounds (harness.timing), loading the
      program kept for a variant another worker captured, or compiling it again; writes
      timing.json.

If the worker dies (an XLA CHECK failure, SIGABRT, SIGSEGV), the supervisor records the
variant it had announced as failed and starts another worker for the rest.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import gc
import importlib
import io as stdio
import json
import os
import resource
import secrets
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.capture import ceilings, distributed, mesh, processes, reuse
from harness.capture.distributed import RELAYED, ProcessesMissing
from harness.capture.turn import DeviceTurn
from harness.capture.turn import free as turn_free
from harness.common import userfiles
from harness.config.experiment import FRONTEND_MODULES, ConfigError
from harness.config.schema import from_plain
from harness.config.timing import max_budget_s
from harness.frontends import registry
from harness.frontends.contract import Context
from harness.records import ladder, numerics_effect, run_files
from harness.records.numerics import DistancesFile, PassSearch
from harness.records.summary import RESULT_FILE, CaptureRecord, Failure, load_capture
from harness.store import io
from harness.store.records import from_json, to_json
from harness.store.runfolder import ERROR_FILE, TIMING_FILE, RunFolder, VariantFolder
from harness.timing import stage

EVENTS: Any = None
STARTED = time.time()  # replaced by the process's own start where Linux says (main)
TOKEN = ""  # the supervisor's, read from stdin: every event carries it (harness.study.workerproc)


def send(event: str, **fields: Any) -> None:
    """Writes one event line for the supervisor; a copy of the worker that a user's fork made
    exits here instead (harness.store.io.check_writer)."""
    io.check_writer()
    EVENTS.write(json.dumps({"event": event, **fields, "token": TOKEN}, default=str) + "\n")
    EVENTS.flush()


def _private_events(fd: int) -> Any:
    """Returns the event pipe moved to a random descriptor number, closed on exec, with the
    number the supervisor passed gone from sys.argv: the program this worker imports cannot
    write to it by guessing or by reading its arguments."""

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = max(128, min(soft if soft > 0 else 1024, 4096))
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64 + secrets.randbelow(top - 64))
        os.close(fd)
    except OSError:  # too few descriptors: keep the one passed, closed on exec at least
        moved = fd
        os.set_inheritable(fd, False)
    del sys.argv[1:]
    return os.fdopen(moved, "w", buffering=1)


def _die_with_parent() -> None:
    """Asks Linux to end this process when the supervisor dies, so none is ever orphaned."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


def _quiet_exit(signum: int, frame: Any) -> None:
    del frame
    os._exit(128 + signum)


class Worker:
    """The state one worker keeps between jobs: the config and what it has compiled."""

    def __init__(self) -> None:
        self.exp: Any = None
        self.platform = ""
        self.environment: dict[str, Any] = {}
        self.calls: dict[str, Callable[[], Any]] = {}
        self.waits: dict[str, Callable[[Any], Any]] = {}  # each call's wait, its frontend's
        # The median blocked call of each variant this worker captured: warm here already
        # (harness.timing.budget skips a long one's warm-up).
        self.warm_s: dict[str, float] = {}
        self.group: Any = None  # harness.capture.distributed.Group, in a group of processes
        self.member: Any = None  # its Membership
        self.ready: float | None = None  # when its device client was up, Unix seconds

    def hello(self, job: dict[str, Any]) -> None:
        from harness.capture import (  # imports JAX: loaded only when called
            environment,
            mesh,
            preflight,
        )

        # The supervisor validated it (harness.config.load): rebuilt here, never validated again.
        self.exp = from_plain(job["config"], job.get("source", "config"))
        # Before the first device query: jax fixes its CPU device count when it starts.
        forced = mesh.request_host_devices(self.exp.cpu_devices)
        if job.get("distributed"):  # before the first device query too
            self.join(job["distributed"])
        cache = environment.cold_compiles()  # before the first compile, preflight's included
        self.environment = {
            **environment.describe(),
            "host_devices": forced,
            "compilation_cache": cache,
        }
        if self.member is not None:
            self.environment["process"] = dataclasses.asdict(self.member)
        self.platform = self.environment["platform"]
        self.ready = time.time()
        limit, where = preflight.device_memory()
        send("hello", environment=self.environment, memory=[limit, where])
        if self.group is not None:
            self.group_preflight(bool(job.get("checks")))
            return
        if job.get("checks"):
            found = self.config_problem()
            if found is not None:
                send("config_error", key=found[0], problem=found[1])
                return
            send("preflight_ok")
            # The session's first worker, after answering, while the supervisor finishes its
            # own start: the imports would otherwise fall inside the capture, between two
            # variants. (A worker for one variant preloads only its own: run.preload_for.)
            self.import_frontends()

    def config_problem(self) -> tuple[str, str] | None:
        """Checks the config on the device (the program traces, the memory fits, the XLA
        options are taken); returns the first problem (its key, what is wrong), or None."""
        from harness.capture import preflight  # imports JAX: loaded only when called

        try:
            if self.exp.program.enabled:  # a function or init that never returns ends here
                send("checking", key="program", what="tracing the program's init and function")
            preflight.check_program(self.exp)
            preflight.check_memory(self.exp, self.platform)
            preflight.check_options(
                self.exp, self.platform, lambda key, opts: send("try", key=key, options=opts)
            )
        except ConfigError as e:
            return e.key, e.problem
        return None

    def join(self, spec: dict[str, Any]) -> None:
        """Joins the jax.distributed group the supervisor (or the launcher) set up."""

        distributed.join(spec, self.exp.limits.preflight_s)
        self.member = distributed.membership(str(spec.get("launcher")))
        self.group = distributed.Group(
            self.member.rank, self.member.count, self.exp.processes.barrier_s
        )

    def group_preflight(self, checks: bool) -> None:
        """The preflight of a group: process 0 checks the config once, and every process
        answers with its verdict, so a process started by an external launcher refuses the
        same config error as process 0 instead of waiting for jobs that never come."""
        found: tuple[str, str] | None = None
        if self.member.count != self.exp.processes.count:
            found = (
                "processes.count",
                f"is {self.exp.processes.count}, but the launcher started "
                f"{self.member.count} processes",
            )
        elif self.member.rank == 0 and checks:
            found = self.config_problem()
        found = self.group.share_verdict(found, self.exp.limits.preflight_s)
        if checks:
            if found is not None:
                send("config_error", key=found[0], problem=found[1])
                return
            send("preflight_ok")
        self.import_frontends()

    def follow(self, job: dict[str, Any]) -> None:
        """Another process than 0: runs the jobs process 0 publishes until it ends the group."""
        del job

        send("following")
        while True:
            within = self.exp.limits.call_s + max_budget_s(self.exp.timing)
            relayed = self.group.next_job(within)
            if relayed.get("op") == "end":
                send("followed")
                return
            getattr(self, relayed["op"])(relayed)  # inside the follow job's scratch cache

    def import_frontends(self) -> None:
        """Imports what the frontends of this platform's variants need (flax)."""

        needed = {
            module
            for v in self.exp.selected_variants
            if self.platform in v.platforms
            for module in FRONTEND_MODULES.get(v.problem.frontend, ())
        }
        preload(sorted(needed))

    def config(self, job: dict[str, Any]) -> None:
        """Replaces the experiment (a search adds candidates as it goes); keeps what was compiled."""

        self.exp = from_plain(job["config"], job.get("source", "config"))
        send("configured")

    def capture(self, job: dict[str, Any]) -> None:
        workdir = Path(job["workdir"])
        if self.group is not None:
            processes.write_info(workdir, self.member)
        # Inputs are made once per distinct problem, before any variant clears JAX's caches,
        # so variants sharing a problem share bit-identical data and none pays for making it.
        # A program's parameters too: its init runs once per distinct inputs and seed.
        # A worker started ahead (harness.study.pipeline) shares the device with the others
        # (harness.capture.turn): its inputs are made beside other work off the measured
        # device (jax.random, a program's init), never beside another variant's measurement.
        shared = (
            _turn(job["variants"][0], Path(job["locks"]), self.exp.capture.compiles)
            if job.get("locks")
            else None
        )
        if shared is not None:  # the worker's timeline, in the variant's record
            shared.worker_started, shared.worker_ready = STARTED, self.ready
        for name in job["variants"]:
            v = self.exp.variant(name)
            send("inputs", variant=name)  # a crash or hang here is this variant's
            # Inputs kept between runs beside the ceilings, under the results root.
            with shared.preparing() if shared is not None else contextlib.nullcontext():
                registry.get(v.framework).prepare(self.exp, v, io.cache_dir(workdir))
        for name in job["variants"]:
            variant = self.exp.variant(name)
            vdir = RunFolder(workdir).variant(name).root
            send("start", variant=name)
            if self.group is not None:
                vdir = processes.capture_folder(vdir, self.member.rank)
            ctx = Context(
                vdir,
                self.platform,
                fresh_process=bool(job.get("fresh_process")),
                executables=_executables(job),
                references=_references(job),
                barrier=self.group.barrier if self.group is not None else None,
                turn=shared or turn_free(),
            )
            try:
                frontend = registry.get(variant.framework)
                if not registry.shares_device(frontend):
                    ctx.turn.begin()  # the device alone for the whole capture
                captured = frontend.capture(self.exp, variant, ctx)
                record = captured.record
                if captured.call is not None:
                    self.calls[name] = captured.call
                    self.waits[name] = captured.wait or frontend.waiter(self.platform)
                    if record.latency_blocked_s:
                        self.warm_s[name] = statistics.median(record.latency_blocked_s)
            except Exception as e:
                if isinstance(e, _group_faults()):
                    raise  # the group cannot go on: harness.study.worker.main reports it
                io.write_text(vdir / ERROR_FILE, traceback.format_exc())
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                record = CaptureRecord(
                    status="failed",
                    reason=f"{type(e).__name__}: {first}"[:500],
                    mode=variant.mode,
                    module=None,
                    failure=Failure(kind="exception", signal=None, exit_code=None),
                )
            ctx.turn.end()  # whatever the frontend did: the next variant's turn comes
            # Its dumps and IR are never written again: kept compressed, read by their names.
            kept = VariantFolder(vdir)
            io.gzip_in_place((kept.dump, kept.ir), keep=frozenset({ladder.INDEX}))
            if self.group is None or self.member.rank == 0:
                io.write_json(vdir / RESULT_FILE, to_json(record))
            if self.group is not None:
                # Its profiles into the variant's XProf session, its record beside them;
                # then every process waits for the others: a missing one is named here.
                processes.finish_capture(workdir, name, vdir, record, self.member)
                self.group.barrier(f"the end of capturing {name}")
            send("done", variant=name, status=record.status)

    def numerics_pass(self, job: dict[str, Any]) -> None:
        """Searches, for each variant given with its distances from the baseline, the first
        HLO pass after which its result moves (harness.capture.numerics_pass); writes
        numerics_pass.json. A search that fails is recorded with the reason."""
        from harness.capture import numerics_pass  # imports JAX: loaded only when called
        from harness.capture.variant import subject_of  # imports JAX: loaded only when called

        folder = RunFolder(Path(job["workdir"]))
        budget = self.exp.measure.numerics_pass_compiles
        for item in job["searches"]:
            name = item["variant"]
            send("numerics_pass", variant=name)
            vf = folder.variant(name)
            found = from_json(DistancesFile, item["distances"], "the numerics_pass job")
            try:
                variant = self.exp.variant(name)
                subject = subject_of(self.exp, variant)
                base = folder.variant(found.baseline)
                accuracy = run_files.load(run_files.NUMERICS, base.numerics)
                kept = [leaf.kept for leaf in accuracy.leaves]
                values = numerics_effect.read_outputs(base.outputs, kept)
                if values is None:
                    raise ValueError(f"{base.outputs} is missing or short")
                record = numerics_pass.run_search(
                    subject.placed.fn,
                    subject.placed.args,
                    dict(variant.xla_options),
                    userfiles.files_in(vf.dump),
                    load_capture(vf.result).module or "",
                    values,
                    found,
                    budget,
                )
            except Exception as e:  # the probe's failure: the variant stands
                record = PassSearch(
                    1,
                    leaf="",
                    distance=0.0,
                    allowed=0.0,
                    budget=budget,
                    reason=f"the search failed: {type(e).__name__}: {e}".splitlines()[0][:300],
                )
            run_files.write(vf.numerics_pass, record)
        send("numerics_pass_done")

    def ceilings(self, job: dict[str, Any]) -> None:
        from harness.variants import program  # imports JAX: loaded only when called

        shapes = []
        for v in self.exp.selected_variants:
            if self.platform in v.platforms and v.program.enabled:
                # A program's GEMMs are known only once compiled: its dtypes' ceiling is
                # measured at the square size every precision gets.
                x, w = program.gemm_dtypes(v.program, self.exp.seed)
                side = ceilings.square_side(self.platform)
                shapes.append(ceilings.ProbeGemm(side, side, side, x, w))
            elif self.platform in v.platforms and not v.mode_spec.expects_trace_error:
                p = v.problem
                shapes.append(ceilings.ProbeGemm(p.rows, p.k, p.n, p.dtype, p.weight_dtype))
        cache = Path(job["cache"]) if job.get("cache") else None
        remeasure = bool(self.exp.capture.remeasure_ceilings)
        environment = self.environment
        if self.member is not None:  # process 0 alone: its own devices' link, not the group's
            environment = {**environment, "device_count": len(self.member.local_devices)}
        # Measured beside the captures (harness.study.pipeline): its compiles beside theirs,
        # its timing with the device alone (harness.capture.turn).
        phases = (
            DeviceTurn(locks=Path(job["locks"]), compiles=self.exp.capture.compiles)
            if job.get("locks")
            else None
        )
        found = ceilings.measure(environment, shapes, cache, remeasure, phases=phases)
        # The ceilings are a typed record (harness.records.run_files.Ceilings): checked as written.
        folder = RunFolder(Path(job["workdir"]))
        run_files.write_document(run_files.CEILINGS, folder.ceilings, found)
        send("ceilings_done")

    def time(self, job: dict[str, Any]) -> None:

        workdir = Path(job["workdir"])
        notes: dict[str, str] = {}
        prepared: dict[str, float] = {}
        for name in job["variants"]:
            if name in self.calls:
                continue
            send("timing_compile", variant=name)
            variant = self.exp.variant(name)
            frontend = registry.get(variant.framework)
            with reuse.spent(prepared, name):
                call, note = frontend.compile_for_timing(
                    self.exp, variant, workdir, self.platform, _executables(job)
                )
            self.calls[name] = call
            self.waits[name] = frontend.waiter(self.platform)
            if note:
                notes[name] = note
        if mesh.blocks_every_call():
            notes = {
                n: "; ".join(filter(None, (notes.get(n), mesh.BLOCKING_NOTE)))
                for n in job["variants"]
            }
        buffer = stdio.StringIO()
        group = self.group

        def announce(name: str) -> None:
            # Before each variant's batch: a crash, exception or hang is then its own. In a
            # group every process starts the batch together, after a barrier.
            send("timing_call", variant=name)
            if group is not None:
                group.barrier(f"timing {name}")

        with contextlib.redirect_stdout(buffer):  # host callbacks print on every call
            record = stage.run(
                self.exp,
                {n: self.calls[n] for n in job["variants"]},
                self.platform,
                workdir,
                notes,
                excluded=job.get("excluded") or {},
                prepared=prepared,
                warm_s={n: self.warm_s[n] for n in job["variants"] if n in self.warm_s},
                waits={n: self.waits[n] for n in job["variants"] if n in self.waits},
                announce=announce,
                agree=group.agree if group is not None else None,
            )
        file = job.get("file", TIMING_FILE)
        if group is not None:
            processes.write_timing(workdir, file, record, self.member.rank)
        if group is None or self.member.rank == 0:
            io.write_json(RunFolder(workdir).timing_named(file), to_json(record))
        send("timed")


def _turn(variant: str, locks: Path, compiles: int) -> DeviceTurn:
    """The variant's share of a device other workers share (harness.capture.turn), over the
    session's lock files (`compiles` slots to compile in): its turn to measure begins when the
    supervisor sends `go` on the job channel, and ends with a `turn_over` event."""

    def wait() -> None:
        send("turn_wait", variant=variant)
        for line in sys.stdin:  # the same channel as the jobs: the next line is the go
            if line.strip():
                if json.loads(line).get("op") != "go":
                    raise RuntimeError(f"expected the device turn's go, got {line.strip()!r}")
                return
        raise EOFError("the supervisor ended the job channel before the device turn came")

    return DeviceTurn(wait, lambda: send("turn_over", variant=variant), locks, compiles)


def _group_faults() -> tuple[type[BaseException], ...]:
    """The exceptions that end a group of processes (a member missing from a barrier)."""

    return (ProcessesMissing,)


def preload(modules: Iterable[str]) -> None:
    """Imports `modules` ahead of the job that needs them; the job reports any failure."""

    for module in modules:
        # Inside every frontend's job scope: an import that makes a folder in $TMPDIR (a
        # frontend's compile cache) makes it in the scope's own.
        with contextlib.suppress(Exception), registry.job_scope():
            importlib.import_module(module)


def _relayed() -> frozenset[str]:

    return RELAYED


def _executables(job: dict[str, Any]) -> Path | None:
    """The supervisor's private folder of kept programs named by `job`, if any."""
    return Path(job["executables"]) if job.get("executables") else None


def _references(job: dict[str, Any]) -> Path | None:
    """The supervisor's private folder of float64 references named by `job`, where it exists
    on this host (a process of a group on another host computes its own)."""
    found = Path(job["references"]) if job.get("references") else None
    return found if found is not None and found.is_dir() else None


def process_started() -> float | None:
    """When this process started, Unix seconds, from /proc (None where Linux does not say)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, since boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def main(argv: list[str]) -> int:
    global EVENTS, STARTED, TOKEN
    STARTED = process_started() or STARTED
    # NVLink multicast (NVLS) stays off in every worker, whatever the caller's environment.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    EVENTS = _private_events(int(argv[1]))
    TOKEN = sys.stdin.readline().strip()
    io.sole_writer()  # a fork of this process sends, reads and writes nothing of the run
    _die_with_parent()
    signal.signal(signal.SIGINT, _quiet_exit)
    signal.signal(signal.SIGTERM, _quiet_exit)
    # A spare worker imports its framework while the variant before it is captured; it
    # queries no device until its first job.
    preload(filter(None, os.environ.get("HARNESS_WORKER_PRELOAD", "").split(",")))

    # The frontends, the built-ins and those HARNESS_FRONTENDS names, before the first job.
    registry.names()
    worker = Worker()
    for line in sys.stdin:
        io.check_writer()  # a fork that ran on into this loop takes no job
        if not line.strip():
            continue
        job = json.loads(line)
        op = job.get("op")
        if op == "go":
            continue  # a turn's go for a capture that needed no device (harness.capture.turn)
        if op not in ("hello", "config", "capture", "ceilings", "numerics_pass", "time", "follow"):
            send("error", message=f"unknown op {op!r}")
            return 2
        if worker.group is not None and worker.member.rank == 0 and op in _relayed():
            worker.group.publish(
                job
            )  # the other processes run it too (harness.capture.distributed)
        try:
            # Each frontend's scope around the job (a framework imported or called outside a
            # variant's block could make its cache folder in $TMPDIR).
            with registry.job_scope():
                getattr(worker, op)(job)
            io.check_writer()  # a fork made during the job, back here: it reads no next job
        except _group_faults() as e:
            # A member is gone: a jax.distributed group cannot go on, and its shutdown would
            # wait for the missing member, so this process leaves at once.
            send(
                "process_fault",
                missing=list(e.missing),
                processes=e.count,
                how=e.how(),
                message=str(e),
            )
            os._exit(3)
        except Exception as e:
            send(
                "error",
                op=op,
                message=f"{type(e).__name__}: {e}"[:2000],
                traceback=traceback.format_exc(),
            )
            return 1
        if op == "follow":
            break  # process 0 ended the group: leave with it (jax's shutdown waits for all)
    if worker.group is not None and worker.member.rank == 0:
        worker.group.publish({"op": "end"})  # the others leave their follow loop
    # It ends while the supervisor analyses the run: the interpreter's last collection over
    # everything JAX made would take a core from that analysis for nothing.
    gc.freeze()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
