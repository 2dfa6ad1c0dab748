"""A study's session: its first worker, started and checked (the preflight) before any run
folder exists, and the workers it holds until the study ends (harness.study.run)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.common import terminal
from harness.config import ConfigError, LoadedConfig
from harness.config.experiment import Experiment
from harness.config.load import blame
from harness.store import io
from harness.store.runfolder import CEILINGS_FILE, REFERENCES_DIR
from harness.study import group
from harness.study.workerproc import WorkerDied, WorkerProcess

# --- preflight: a session starts before any folder exists -------------------------------------


@dataclass
class Session:
    """The live worker and what it reported about the machine."""

    config: LoadedConfig
    worker: WorkerProcess
    environment: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    workers: int = 1
    # Workers started for the next variants, each preparing and waiting for its turn on the
    # device (harness.study.pipeline), and those that finished their variant and are exiting.
    ahead: list[WorkerProcess] = field(default_factory=list)
    finished: list[WorkerProcess] = field(default_factory=list)
    # The worker measuring the device's ceilings beside the captures, when one does.
    ceilings: WorkerProcess | None = None
    ceilings_captured: str | None = None  # the variant that worker captured
    # A local group of processes (harness.study.group): processes 1.. of the group `worker` leads.
    peers: list[WorkerProcess] = field(default_factory=list)
    # Compiled programs that capture workers keep for the timing worker: a folder of this
    # process's own (mode 0700, outside the results), because loading one runs what it holds.
    executables: Path | None = None
    # The float64 references the variants share, each computed once per run and key
    # (harness.capture.reference): in each run folder (`.references`), never in $TMPDIR, so a
    # study killed with SIGKILL leaves nothing outside its own folder; deleted at the end.
    references: dict[Path, Path] = field(default_factory=dict)  # run folder -> its folder
    # What each references folder held before this session used it: clean-up deletes only
    # entries it did not hold then (a user's `.git` there stays).
    references_held: dict[Path, frozenset[str]] = field(default_factory=dict)

    # The lock files by which the workers of one session share its device
    # (harness.capture.turn): a folder of this process's own (mode 0700), deleted at the end.
    locks: Path | None = None

    def spawn(self, preload: tuple[str, ...], stopped_s: float) -> WorkerProcess:
        """Starts a worker (numbered in the session's count), importing `preload` ahead."""
        self.workers += 1
        return WorkerProcess(self.workers, preload, stopped_s)

    def ceilings_cache(self, workdir: Path) -> str | None:
        """Where the device's ceilings are kept between runs (the results root's cache), or
        None with no usable cache. A GPU's too: measured, they held the device's one compile
        slot and its turns 7-10 s of every H200 study (four GEMMs autotuned and timed, and a
        copy), work no variant needs again within a week on the same device and software."""
        cache = io.cache_dir(workdir)
        return None if cache is None else str(cache / CEILINGS_FILE)

    def lock_folder(self) -> Path:
        if self.locks is None:
            self.locks = Path(tempfile.mkdtemp(prefix="harness-device-"))
        return self.locks

    def executable_folder(self) -> Path:
        if self.executables is None:
            self.executables = Path(tempfile.mkdtemp(prefix="harness-executables-"))
        return self.executables

    def reference_folder(self, workdir: Path) -> Path:
        """The run's folder of float64 references (`.references`), made inside the run. One
        that is a link, or not a folder, is the user's: never written through; the run's
        references go to a folder of its own beside it, and a note says so."""
        if workdir not in self.references:
            found = workdir / REFERENCES_DIR
            if found.is_symlink() or (found.exists() and not found.is_dir()):
                planted = found
                found = workdir / f"{REFERENCES_DIR}-{secrets.token_hex(4)}"
                what = f"a link to {os.readlink(planted)}" if planted.is_symlink() else "a file"
                print(
                    f"note: {terminal.shown(planted)} is {what}, not a folder this run made; "
                    f"nothing is written through it: the references go to "
                    f"{terminal.shown(found)}",
                    file=sys.stderr,
                    flush=True,
                )
            io.check_inside(found)
            found.mkdir(mode=0o700, exist_ok=True)
            if found.is_symlink():  # swapped in meanwhile
                raise OSError(f"{found} became a link while it was made; refusing it")
            held = frozenset(e.name for e in found.iterdir())
            self.references[workdir] = found
            self.references_held[workdir] = held
        return self.references[workdir]

    @property
    def platform(self) -> str:
        return str(self.environment.get("platform"))

    @property
    def rank(self) -> int:
        """This process's rank in a group of processes (0 without a group)."""
        return int((self.environment.get("process") or {}).get("rank", 0))

    def kill(self) -> None:
        """Ends the worker, its group and the workers started ahead at once (an interrupt, a disk fault)."""
        for w in (self.worker, *self.peers, *self.ahead, *self.finished, self.ceilings):
            if w is not None and w.proc.poll() is None:
                w.kill()

    def kill_group(self) -> None:
        """Ends the worker and its group, not the workers started for the next variants."""
        for w in (self.worker, *self.peers):
            if w.proc.poll() is None:
                w.kill()

    def reap(self) -> None:
        """Ends what each finished worker that has exited started (harness.study.containment):
        a variant's strays end when its worker does, not at the end of the study."""
        for w in self.finished:
            w.contain()

    def contain(self) -> None:
        """Waits for every worker told to end (10 s each, then kills it) and ends every
        process they started, before the run is settled: nothing a variant started writes
        into the run after its status says it is finished."""
        for w in (*self.finished, self.worker, *self.peers):
            if w.proc.stdin is not None and not w.proc.stdin.closed:
                continue  # still has work: not told to end
            try:
                w.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
            w.contain()

    def close(self, workdir: Path | None) -> None:
        """Ends the worker and its group (the others leave when process 0 does), keeping
        their logs in the run folder."""
        for w in (*self.finished, self.worker, *self.peers):
            w.close(workdir)
        self.finished = []

    def forget_private_folders(self) -> None:
        """Deletes the private folders this session made: the executables, the device's lock
        files, the references."""
        for made in (self.executables, self.locks):
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
        self.executables = self.locks = None
        for workdir, found in self.references.items():
            held = self.references_held.get(workdir, frozenset())

            def made(name: str, held: frozenset[str] = held) -> bool:
                # The worker's archives, their locks and io's temporary files, made now.
                return name not in held and name.startswith(("reference-", ".reference-"))

            with contextlib.suppress(OSError, ValueError):  # a folder gone or replaced stays
                io.remove_tree(workdir, found, made)
        self.references = {}
        self.references_held = {}


def hello(
    worker: WorkerProcess,
    exp: Experiment,
    source: str,
    checks: bool,
    meanwhile: Callable[[], None] = lambda: None,
    distributed: dict[str, Any] | None = None,
    sent: bool = False,
) -> dict[str, Any]:
    """Starts a worker's job list; with `checks`, raises ConfigError when preflight fails.
    `meanwhile` runs here while the worker starts. The start and the preflight together have
    `limits.preflight_s`: a program's function or init that never returns ends there.
    `distributed` makes the worker join a group of processes first (harness.study.group), which
    may have `sent` the hello job already."""
    deadline = time.monotonic() + exp.limits.preflight_s
    if not sent:
        group.send_hello(worker, exp, source, distributed, checks)
    meanwhile()
    try:
        event = worker.expect("hello", within=deadline - time.monotonic())
        environment = event["environment"]
        if checks:
            done = worker.expect("preflight_ok", "config_error", within=deadline - time.monotonic())
            if done["event"] == "config_error":
                raise ConfigError("config", done["key"], done["problem"])
    except WorkerDied as e:
        last = e.last
        if last.get("event") == "checking":
            raise ConfigError(
                "config",
                str(last.get("key")),
                f"the preflight {e.how()} while {last.get('what')} "
                f"(limits.preflight_s is {exp.limits.preflight_s:g})",
            ) from None
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
        from harness.report import plots  # imports matplotlib: loaded only when called
    except ImportError:  # the stage that needs them reports it
        return
    with contextlib.suppress(Exception):  # a plot that fails is the report's to say
        plots.warm_up()


def _no_op() -> None:
    return None


@contextlib.contextmanager
def session(config: LoadedConfig) -> Iterator[Session]:
    """Starts the first worker and runs the preflight; yields the session, then ends it.

    Raises ConfigError (naming the key) for what only the installed jaxlib or the device can
    check; no folder exists yet at that point.
    """

    live: Session | None = None
    try:
        try:
            # With an external launcher most processes only follow: none imports ahead.
            ahead = _import_ahead if config.experiment.processes.launcher == "local" else _no_op
            worker, peers, env = group.start_workers(
                config.experiment, str(config.path), 1, True, hello, ahead
            )
        except ConfigError as e:
            raise blame(config.path, config.overrides, e) from None
        live = Session(config, worker, env, workers=1 + len(peers), peers=peers)
        if env.get("compilation_cache"):  # the user set it: say why compiles are slower
            print(f"note: {env['compilation_cache']}", file=sys.stderr, flush=True)
        yield live
    finally:
        if live is not None:
            live.kill()  # whichever workers are still running: the last one, those ahead
            live.forget_private_folders()
