"""run(config, workdir, session): the study, supervised, from capture to report.

Data flows one way: config -> variants -> capture -> timing -> analysis -> report. This process
never runs JAX itself: a worker process (harness.worker) captures the variants in turn and
then times them all together; this supervisor reads its events, and when a worker dies (an
XLA CHECK failure, SIGABRT, SIGSEGV) records the variant it was on as failed, with the signal
and the last lines of its stderr, and starts another worker for the rest. On a GPU each
variant is captured in a process of its own (`capture.isolation: auto`), so its compile
pause includes its own autotuning and no cache another variant left; on a CPU, where XLA
does not autotune, one worker captures every variant, and a process per variant would only
cost start-ups.

After the workers, the analysis reads the saved files into summary.json and the report
renders it. Each stage reads and writes plain files, so `--resume`, `python -m
harness.reanalyze` and `make report` can redo the later stages from a saved run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness import io
from harness.config import ConfigError, LoadedConfig
from harness.config.schema import FRONTEND_MODULES, Experiment, Variant, to_plain
from harness.records import SchemaError, from_json, to_json
from harness.summary import RESULT_FILE, CaptureRecord, Failure, TimingRecord, load_capture

REPO = Path(__file__).resolve().parents[1]
STDERR_TAIL = 12


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; finished variants are kept and the run is marked interrupted."""


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turns SIGINT and SIGTERM into Interrupted for the block. From the first signal on, both
    are ignored for the rest of the process, so a double Ctrl-C still ends cleanly."""
    fired: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        del frame
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        fired.append(signum)
        raise Interrupted(signal.Signals(signum).name)

    previous = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        if not fired:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])


# --- the worker process -----------------------------------------------------------------------


@dataclass
class WorkerDied(Exception):
    """The worker process ended without finishing its job."""

    returncode: int
    stderr_tail: tuple[str, ...]
    last: dict[str, Any] = field(default_factory=dict)

    def how(self) -> str:
        if self.returncode < 0:
            return f"crashed the process ({self.signal_name()})"
        return f"ended the process with status {self.returncode}"

    def signal_name(self) -> str | None:
        if self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def worker_env(preload: tuple[str, ...] = ()) -> dict[str, str]:
    """The worker's environment: this one, with the harness importable and JAX not grabbing
    three quarters of the GPU's memory up front (torch variants share the device).

    `preload` names modules the worker imports before its first job (harness.worker): a
    spare worker imports them while the variant before it is captured."""
    env = dict(os.environ)
    env["HARNESS_WORKER_PRELOAD"] = ",".join(preload)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def preload_for(variant: Variant) -> tuple[str, ...]:
    """Returns the modules a worker for `variant` imports before its first job."""
    if variant.framework == "torch":
        return ("jax", "torch", "harness.capture.torch_variant")
    return ("jax", "harness.capture.variant", *FRONTEND_MODULES[variant.problem.frontend])


class WorkerProcess:
    """One `python -m harness.worker`: jobs go to its stdin, events come back on a pipe."""

    def __init__(self, number: int, preload: tuple[str, ...] = ()) -> None:
        self.number = number
        read_fd, write_fd = os.pipe()
        # Unlinked at once: a killed run leaves no temporary file behind.
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.worker", str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=self.log,
            pass_fds=(write_fd,),
            env=worker_env(preload),
            cwd=REPO,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the supervisor, which ends the worker
        )
        os.close(write_fd)
        self.events = os.fdopen(read_fd, "r")
        self.last: dict[str, Any] = {}

    def send(self, op: str, **fields: Any) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died; the next read says how

    def next_event(self) -> dict[str, Any]:
        """Returns the worker's next event; raises WorkerDied when it ends without one."""
        line = self.events.readline()
        if not line:
            raise WorkerDied(self.proc.wait(), self.stderr_tail(), dict(self.last))
        event = json.loads(line)
        if event.get("event") in ("start", "try", "timing_compile"):
            self.last = event
        if event.get("event") == "error":
            self.proc.wait()
            raise WorkerDied(
                self.proc.returncode or 1,
                tuple(
                    str(event.get("traceback") or event.get("message")).splitlines()[-STDERR_TAIL:]
                ),
                dict(self.last),
            )
        return event

    def expect(self, *names: str) -> dict[str, Any]:
        """Returns the next event, which must be one of `names` (others are passed over)."""
        while True:
            event = self.next_event()
            if event["event"] in names:
                return event

    def stderr_tail(self, lines: int = STDERR_TAIL) -> tuple[str, ...]:
        self.log.flush()
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - 16384))
        text = self.log.read().decode(errors="replace")
        return tuple(line for line in text.splitlines() if line.strip())[-lines:]

    def save_log(self, workdir: Path | None) -> None:
        if workdir is None or not workdir.is_dir():
            return
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        if text.strip():
            io.write_text(workdir / "logs" / f"worker-{self.number}.log", text)

    def end(self) -> None:
        """Tells the worker there are no more jobs (it then exits on its own); returns at once,
        so its shutdown overlaps whatever comes next. `close` waits for it."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin:
                self.proc.stdin.close()

    def close(self, workdir: Path | None = None) -> None:
        """Ends the worker (politely, then firmly) and keeps its log in the run folder."""
        self.end()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.save_log(workdir)
        self.events.close()
        self.log.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


# --- preflight: a session starts before any folder exists -------------------------------------


@dataclass
class Session:
    """The live worker and what it reported about the machine."""

    config: LoadedConfig
    worker: WorkerProcess
    environment: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    workers: int = 1
    spare: WorkerProcess | None = None  # started ahead while a variant is captured
    # Compiled programs that capture workers keep for the timing worker: a folder of this
    # process's own (mode 0700, outside the results), because loading one runs what it holds.
    executables: Path | None = None

    def executable_folder(self) -> Path:
        if self.executables is None:
            self.executables = Path(tempfile.mkdtemp(prefix="harness-executables-"))
        return self.executables

    @property
    def platform(self) -> str:
        return str(self.environment.get("platform"))

    def kill(self) -> None:
        """Ends the worker and any spare at once (an interrupt, a disk fault)."""
        for w in (self.worker, self.spare):
            if w is not None and w.proc.poll() is None:
                w.kill()

    def forget_executables(self) -> None:
        if self.executables is not None:
            shutil.rmtree(self.executables, ignore_errors=True)
            self.executables = None


def hello(
    worker: WorkerProcess,
    exp: Experiment,
    source: str,
    checks: bool,
    meanwhile: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Starts a worker's job list; with `checks`, raises ConfigError when preflight fails.
    `meanwhile` runs here while the worker starts."""
    worker.send("hello", config=json.loads(json.dumps(to_plain(exp))), source=source, checks=checks)
    meanwhile()
    try:
        event = worker.expect("hello")
        environment = event["environment"]
        if checks:
            done = worker.expect("preflight_ok", "config_error")
            if done["event"] == "config_error":
                raise ConfigError("config", done["key"], done["problem"])
    except WorkerDied as e:
        last = e.last
        if last.get("event") == "try":
            shown = ", ".join(f"{k}={v!r}" for k, v in last["options"].items())
            what = (
                "another value"
                if len(last["options"]) == 1
                else "options that XLA accepts together"
            )
            raise ConfigError(
                "config", last["key"], f"XLA {e.how()} compiling with {shown}; choose {what}"
            ) from None
        tail = e.stderr_tail[-1] if e.stderr_tail else "no output"
        raise ConfigError(
            "config", "", f"the JAX worker failed to start: {e.how()}: {tail}"
        ) from None
    return environment


def _import_ahead() -> None:
    """Imports the analysis and the report (matplotlib most of it, 1.2 s on a 2-core machine)
    and warms matplotlib up while the first worker imports JAX: the supervisor is idle then,
    no measurement runs yet, and the analysis and report stages, and the children they fork,
    find them ready."""
    try:
        import harness.analyze  # noqa: F401
        from harness.report import plots
    except ImportError:  # the stage that needs them reports it
        return
    with contextlib.suppress(Exception):  # a plot that fails is the report's to say
        plots.warm_up()


@contextlib.contextmanager
def session(config: LoadedConfig) -> Iterator[Session]:
    """Starts the first worker and runs the preflight; yields the session, then ends it.

    Raises ConfigError (naming the key) for what only the installed jaxlib or the device can
    check; no folder exists yet at that point.
    """
    from harness.config.load import blame

    worker = WorkerProcess(1)
    live: Session | None = None
    try:
        try:
            env = hello(
                worker, config.experiment, str(config.path), checks=True, meanwhile=_import_ahead
            )
        except ConfigError as e:
            raise blame(config.path, config.overrides, e) from None
        live = Session(config, worker, env)
        yield live
    finally:
        if live is not None:
            live.kill()  # whichever workers are still running: the last one, a spare
            live.forget_executables()
        elif worker.proc.poll() is None:
            worker.kill()


# --- the run ----------------------------------------------------------------------------------


def _progress(
    i: int, total: int, name: str, record: CaptureRecord | None, kept: bool = False
) -> None:
    if record is None:
        print(f"[{i}/{total}] {name:<24} failed", flush=True)
        return
    if kept:
        print(
            f"[{i}/{total}] {name:<24} kept from the interrupted run ({record.status})", flush=True
        )
        return
    line = f"[{i}/{total}] {name:<24} {record.status:<7}"
    if record.status == "ok" and record.latency_blocked_s:
        from harness import stats

        latency = stats.median(record.latency_blocked_s)
        line += f" call {latency * 1e3:8.3f} ms"
        if record.pauses and record.pauses.first_call_s is not None:
            line += f"  first call {record.pauses.first_call_s:.3f} s"
        if record.recompile and record.recompile.seconds is not None:
            line += f"  recompile {record.recompile.seconds:.3f} s"
        if record.numerics is not None:
            line += "  numerics " + ("ok" if record.numerics.ok else "FAIL")
    elif record.reason:
        line += f" {record.reason}"
    print(line, flush=True)


def _fresh_variant_dir(workdir: Path, name: str) -> Path:
    """Returns an empty `variants/<name>/`, deleting what an interrupted attempt left there."""
    variants = workdir / "variants"
    if variants.is_symlink():  # planted: replace the link, never write through it
        variants.unlink()
    variants.mkdir(exist_ok=True)
    if (variants / name).is_symlink():  # never follow a planted link out of the run folder
        (variants / name).unlink()
    vdir = io.confined(workdir, "variants", name)
    io.remove_tree(variants, variants / name)
    vdir.mkdir(parents=True)
    return vdir


def kept_record(workdir: Path, name: str) -> CaptureRecord | None:
    """Returns a finished variant's record on resume, or None when it must be redone."""
    vdir = workdir / "variants" / name
    if vdir.is_symlink() or not (vdir / RESULT_FILE).is_file():
        return None
    try:
        return load_capture(vdir / RESULT_FILE)
    except SchemaError:
        return None  # corrupt: the variant is captured again


def _crash_record(exp: Experiment, name: str, died: WorkerDied) -> CaptureRecord:
    return CaptureRecord(
        status="failed",
        reason=f"{died.how()} while capturing it",
        mode=exp.variant(name).mode,
        module=None,
        failure=Failure(
            kind="crash",
            signal=died.signal_name(),
            exit_code=died.returncode if died.returncode >= 0 else None,
            stderr_tail=died.stderr_tail,
        ),
    )


@dataclass
class Supervisor:
    """Runs the capture and timing jobs over workers, replacing a worker that dies."""

    session: Session
    workdir: Path
    exp: Experiment

    def _new_worker(self) -> WorkerProcess:
        """Returns a worker ready for jobs: the spare started ahead, else a new one."""
        worker = self.session.spare or self._spawn(())
        self.session.spare = None
        hello(worker, self.exp, str(self.session.config.path), checks=False)
        return worker

    def _spawn(self, preload: tuple[str, ...]) -> WorkerProcess:
        self.session.workers += 1
        return WorkerProcess(self.session.workers, preload)

    def _start_spare(self, name: str) -> None:
        """Starts the worker for variant `name` while the current one captures, so that its
        start and imports (seconds with JAX or torch) are off the critical path. It touches no
        device until its turn: its hello comes after the current worker has ended."""
        if self.session.spare is None:
            self.session.spare = self._spawn(preload_for(self.exp.variant(name)))

    def _replace(self) -> WorkerProcess:
        self.session.worker.close(self.workdir)
        self.session.worker = self._new_worker()
        return self.session.worker

    def capture(
        self, names: list[str], per_variant: bool, numbers: dict[str, int], total: int
    ) -> dict[str, CaptureRecord]:
        """Captures `names`; returns their records (a crash is recorded, never raised)."""
        records: dict[str, CaptureRecord] = {}
        todo = list(names)
        first = True
        while todo:
            worker = self.session.worker
            if per_variant and not first:
                worker = self._replace()
            first = False
            batch = todo[:1] if per_variant else list(todo)
            for name in batch:
                _fresh_variant_dir(self.workdir, name)
            worker.send(
                "capture",
                workdir=str(self.workdir),
                variants=batch,
                fresh_process=per_variant,
                # Another worker times these: it loads what they compiled instead of
                # compiling (and autotuning) each again.
                executables=str(self.session.executable_folder()) if per_variant else None,
            )
            if per_variant and len(todo) > 1:
                self._start_spare(todo[1])
            try:
                for _ in batch:
                    worker.expect("start")
                    done = worker.expect("done")
                    name = done["variant"]
                    records[name] = load_capture(self.workdir / "variants" / name / RESULT_FILE)
                    todo.remove(name)
                    _progress(numbers[name], total, name, records[name])
            except WorkerDied as died:
                name = died.last.get("variant")
                if name is None or name not in todo:
                    raise
                record = _crash_record(self.exp, name, died)
                io.write_json(self.workdir / "variants" / name / RESULT_FILE, to_json(record))
                records[name] = record
                todo.remove(name)
                _progress(numbers[name], total, name, record)
                print(f"    {died.how()}; a new worker takes over", file=sys.stderr, flush=True)
                self.session.worker.save_log(self.workdir)
                self.session.worker = self._new_worker()
                first = True  # the new worker is fresh: capture the next variant in it
        return records

    def configure(self, exp: Experiment) -> None:
        """Hands the worker a new experiment (a search adds candidates as it goes)."""
        self.exp = exp
        self.session.worker.send("config", config=json.loads(json.dumps(to_plain(exp))))
        self.session.worker.expect("configured")

    def ceilings(self) -> None:
        """Measures the device's ceilings into ceilings.json, in the current worker; a CPU's
        are kept for later runs in the results root's cache (harness.capture.ceilings)."""
        cache = io.cache_dir(self.workdir) / "ceilings.json"
        self.session.worker.send(
            "ceilings",
            workdir=str(self.workdir),
            cache=str(cache) if self.session.platform == "cpu" else None,
        )
        self.session.worker.expect("ceilings_done")

    def time(self, timed: list[str], file: str = "timing.json") -> TimingRecord:
        """Times `timed` together in the current worker; a variant whose compile for timing
        kills the worker is excluded with the reason and the others are timed again."""
        excluded: dict[str, str] = {}
        todo = list(timed)
        for _attempt in range(3):
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
                worker.expect("timed")
                return from_json(TimingRecord, io.read_json(self.workdir / file), file)
            except WorkerDied as died:
                name = (
                    died.last.get("variant") if died.last.get("event") == "timing_compile" else None
                )
                print(f"    timing: {died.how()}", file=sys.stderr, flush=True)
                if name in todo:
                    excluded[name] = f"{died.how()} while loading or compiling it for timing"
                    todo.remove(name)
                else:
                    excluded.update({n: f"timing failed: {died.how()}" for n in todo})
                    todo = []
                self.session.worker.save_log(self.workdir)
                self.session.worker = self._new_worker()
                if not todo:
                    break
        empty = TimingRecord(
            rounds=0, target_batch_s=0.0, wall_s=0.0, baseline=None, repeat=None, excluded=excluded
        )
        io.write_json(self.workdir / file, to_json(empty))
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
        "config": to_plain(exp),
        "overrides": [
            {"key": o.key, "value": o.value, "previous": o.previous} for o in config.overrides
        ],
        "environment": {**environment, "git_commit": git_commit()},
        "compiler_options": {v.name: dict(v.xla_options) for v in exp.selected_variants},
        "started": io.utc_now(),
        "status": "running",
    }


def run(config: LoadedConfig, workdir: Path, session: Session, resume: bool = False) -> int:
    """Runs the study into `workdir`; returns 0 when every variant is ok or skipped, 1 when
    one failed, 130 when interrupted."""
    with io.writes_confined_to(workdir), io.run_lock(workdir):
        return _run(config, workdir, session, resume)


ENVIRONMENT_FAULT = 1  # disk full, a read-only folder: the run could not go on


HOLD_ENV = "HARNESS_TEST_HOLD_AT"


def _stage(name: str) -> None:
    """Says which stage the run is in, so a user (and a test) sees where time goes."""
    print(f"-- {name}", flush=True)
    # A test of interrupts holds the run at the start of a stage (HARNESS_TEST_HOLD_AT names
    # its first word), so that its signal surely lands inside that stage, however fast.
    hold = os.environ.get(HOLD_ENV)
    if hold and name.split()[0] == hold:
        time.sleep(60)


def _capture_plan(
    exp: Experiment, workdir: Path, platform: str, resume: bool
) -> tuple[dict[str, CaptureRecord], list[str]]:
    """Returns the records already decided (skipped here, kept from an interrupted run) and the
    variants still to capture, in config order; skipped variants get their result.json now."""
    records: dict[str, CaptureRecord] = {}
    todo = []
    selected = exp.selected_variants
    for i, v in enumerate(selected, 1):
        if platform not in v.platforms:
            vdir = _fresh_variant_dir(workdir, v.name)
            record = CaptureRecord(
                status="skipped",
                reason=f"applies to {', '.join(v.platforms)}; this run is on {platform}",
                mode=v.mode,
                module=None,
            )
            io.write_json(vdir / RESULT_FILE, to_json(record))
            records[v.name] = record
            _progress(i, len(selected), v.name, record)
            continue
        kept = kept_record(workdir, v.name) if resume else None
        if kept is not None:
            records[v.name] = kept
            _progress(i, len(selected), v.name, kept, kept=True)
            continue
        todo.append(v.name)
    return records, todo


def _stages(
    config: LoadedConfig, workdir: Path, session: Session, resume: bool, seconds: dict[str, float]
) -> Any:
    """Runs capture, timing, analysis and report; records each stage's seconds; returns the
    summary."""
    import harness

    exp = config.experiment
    platform = session.platform
    clock = time.perf_counter()
    seconds["start_s"] = clock - harness.STARTED
    records, todo = _capture_plan(exp, workdir, platform, resume)
    per_variant = exp.capture.isolation == "per_variant" or (
        exp.capture.isolation == "auto" and platform == "gpu"
    )
    supervisor = Supervisor(session, workdir, exp)
    numbers = {v.name: i for i, v in enumerate(exp.selected_variants, 1)}
    records.update(supervisor.capture(todo, per_variant, numbers, len(numbers)))
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
    supervisor.ceilings()
    supervisor.time(timed)
    session.worker.end()  # it exits while the analysis runs; its log is kept after the report
    seconds["timing_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    _stage("analysis")
    summary = finalize(workdir, exp)
    seconds["analysis_s"] = time.perf_counter() - clock

    clock = time.perf_counter()
    _stage("report")
    write_report(workdir)
    session.worker.close(workdir)
    seconds["report_s"] = time.perf_counter() - clock
    return summary


def _run(config: LoadedConfig, workdir: Path, session: Session, resume: bool) -> int:
    exp = config.experiment
    manifest = manifest_for(config, workdir, session.environment)
    seconds: dict[str, float] = {}
    try:
        with interruptible():
            if resume and (workdir / "manifest.json").exists():
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    before = io.read_json(workdir / "manifest.json")
                    manifest["started"] = before.get("started", manifest["started"])
                manifest["resumed"] = io.utc_now()
            io.write_json(workdir / "manifest.json", manifest)
            note = io.point_latest(workdir)
            if note:
                print(f"note: {note}", file=sys.stderr)
            summary = _stages(config, workdir, session, resume, seconds)
    except (KeyboardInterrupt, Interrupted) as e:
        session.kill()
        kept = sum(
            1
            for v in exp.selected_variants
            if session.platform in v.platforms and kept_record(workdir, v.name) is not None
        )
        recorded = _record_end(workdir, manifest, "interrupted")
        print(
            f"interrupted ({e or 'SIGINT'}): {kept} of {len(exp.selected_variants)} variants kept"
            + (
                f"; finish with --resume={workdir.name}"
                if recorded
                else "; the run's state could not be recorded"
            ),
            file=sys.stderr,
            flush=True,
        )
        return 130
    except OSError as e:  # disk full, a read-only folder, a name too long
        session.kill()
        recorded = _record_end(workdir, manifest, "failed", reason=f"{e.strerror or e}")
        where = f"{e.filename}: " if e.filename else ""
        tail = (
            f"; finished variants are kept: fix it and finish with --resume={workdir.name}"
            if recorded
            else "; the run's state could not be recorded"
        )
        print(f"error: {where}{e.strerror or e}{tail}", file=sys.stderr, flush=True)
        return ENVIRONMENT_FAULT
    failed = [n for n, v in summary.variants.items() if v.identity.status == "failed"]
    manifest.update(stages_s=seconds, workers=session.workers)
    _record_end(workdir, manifest, "failed" if failed else "complete")
    print(
        "time: "
        + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in seconds.items())
        + f" (total {sum(seconds.values()):.1f} s)",
        flush=True,
    )
    print(f"report: {workdir / 'report.md'}", flush=True)
    if failed:
        print(
            f"failed variants: {', '.join(failed)} (see variants/<name>/error.txt)",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def _record_end(workdir: Path, manifest: dict[str, Any], status: str, reason: str = "") -> bool:
    """Writes the manifest's final status; returns False when even that cannot be written."""
    manifest.update(status=status, finished=io.utc_now())
    if reason:
        manifest["reason"] = reason
    try:
        io.write_json(workdir / "manifest.json", manifest)
    except OSError:
        return False
    return True


def finalize(workdir: Path, exp: Experiment) -> Any:
    """Analyzes the saved run and writes summary.json; returns the summary."""
    from harness import analyze
    from harness.summary import SUMMARY_FILE, summary_json

    summary = analyze.analyze_run(workdir, exp)
    io.write_json(workdir / SUMMARY_FILE, summary_json(summary))
    return summary


def write_report(workdir: Path) -> None:
    from harness.report import write_report as render

    render(workdir)
