"""The supervisor's side of one `python -m harness.study.worker`: jobs go to its stdin, events come
back on a pipe that is private to the supervisor, and no wait on it is unbounded.

The worker runs the user's program in its own process, so whatever that program does must end
as a fault of the variant it was running, never as the supervisor's:
- **Its pipe is private.** The write end reaches the worker on a random high descriptor, which
  the worker moves again and hides from `sys.argv` before any program is imported; every event
  carries a token sent on stdin. A line that is not one of the worker's events (a program that
  wrote to a descriptor it found) ends the worker as a fault, never a JSONDecodeError here.
- **Every call has a time limit** (`limits` in the config): a function or init that never
  returns, or a worker that stopped answering, is killed when its call's time is up.
- **A stopped worker** (SIGSTOP, state T in /proc) is killed after `limits.stopped_s`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.common import bounded
from harness.config.experiment import Variant
from harness.frontends import registry
from harness.store import io, runfolder
from harness.study import containment, lifecycle

REPO = Path(__file__).resolve().parents[2]  # harness/study/workerproc.py -> the repository
STDERR_TAIL = 12
MAX_EVENT_BYTES = 8 << 20  # an environment or a traceback; a longer line is garbage
# The events the worker sends (harness.study.worker); anything else on the pipe is a fault.
EVENTS = frozenset(
    {
        "hello",
        "checking",
        "try",
        "preflight_ok",
        "config_error",
        "configured",
        "inputs",
        "start",
        "done",
        "ceilings_done",
        "numerics_pass",
        "numerics_pass_done",
        "timing_compile",
        "timing_call",
        "timed",
        "error",
        "process_fault",
        "following",
        "followed",
        "turn_wait",
        "turn_over",
    }
)
# Events that say what the worker is doing now: the variant a fault is recorded against.
TRACKED = frozenset({"checking", "start", "try", "inputs", "timing_compile", "timing_call"})
OOM_HINT = "the kernel's OOM killer sends it when memory runs out"


@dataclass
class WorkerDied(Exception):
    """The worker process ended, or was ended, without finishing its job."""

    returncode: int
    stderr_tail: tuple[str, ...]
    last: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # set when the supervisor killed it (a time limit, garbage) or it raised
    killed: bool = False  # by the supervisor: a SIGKILL is then no OOM kill
    # In a group of processes (harness.study.group): the rank of the process at fault, and the size.
    process: int | None = None
    processes: int = 1

    def how(self) -> str:
        said = self._how()
        if self.process is None:
            return said
        return f"process {self.process} of {self.processes} {said}"

    def _how(self) -> str:
        if self.reason:
            return self.reason
        if self.returncode < 0:
            name = self.signal_name()
            hint = f"; {OOM_HINT}" if name == "SIGKILL" and not self.killed else ""
            return f"crashed the process ({name}{hint})"
        return f"ended the process with status {self.returncode}"

    def signal_name(self) -> str | None:
        if self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def __str__(self) -> str:
        return f"the worker {self.how()}"


def worker_env(preload: tuple[str, ...] = (), mark: str = "") -> dict[str, str]:
    """The worker's environment: this one, with the harness importable and JAX not grabbing
    three quarters of the GPU's memory up front (another frontend's variants share the device).

    `preload` names modules the worker imports before its first job (harness.study.worker): a
    spare worker imports them while the variant before it is captured. `mark` is the worker's
    own marker, which every process it starts inherits (harness.study.containment)."""
    env = dict(os.environ)
    env[containment.MARK] = mark
    env["HARNESS_WORKER_PRELOAD"] = ",".join(preload)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def preload_for(variant: Variant) -> tuple[str, ...]:
    """Returns the modules a worker for `variant` imports before its first job."""
    return registry.get(variant.framework).preload(variant)


def _high_fd(fd: int) -> int:
    """Returns a duplicate of `fd` on a random descriptor number above the usual ones, so a
    program cannot write to the pipe by guessing a small number; closes `fd`."""
    soft, _ = _nofile()
    top = max(64, min(soft, 4096))
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, secrets.randbelow(max(1, top - 64)) + 64)
    except OSError:  # too few descriptors: keep the one the pipe got
        return fd
    os.close(fd)
    return moved


def _nofile() -> tuple[int, int]:
    try:
        return resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1024, 1024


def _first_line(text: Any) -> str:
    """Returns an exception's message as one line: a traceback inside it (a host callback's
    error quotes one) is cut to its last line, the exception the program raised."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return "an exception"
    head, marker, _ = lines[0].partition("Traceback (most recent call last)")
    if marker:
        return f"{head.rstrip(': ')}: {lines[-1] if len(lines) > 1 else ''}"[:300]
    return lines[0][:300]


def process_state(pid: int) -> str:
    """Returns the state letter of process `pid` in /proc (R, S, D, T, t, Z...), or "" when
    it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode(errors="replace")
    except OSError:
        return ""
    _, _, rest = text.rpartition(")")
    return rest.split()[0] if rest.split() else ""


class WorkerProcess:
    """One `python -m harness.study.worker`: jobs go to its stdin, events come back on a pipe."""

    def __init__(self, number: int, preload: tuple[str, ...] = (), stopped_s: float = 10.0) -> None:
        self.number = number
        self.stopped_s = stopped_s
        self.token = secrets.token_hex(16)
        self.mark = secrets.token_hex(8)  # in every process it starts: ended with it
        self.contained = False
        read_fd, write_fd = os.pipe()
        write_fd = _high_fd(write_fd)
        # Unlinked at once: a killed run leaves no temporary file behind.
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.study.worker", str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=self.log,
            pass_fds=(write_fd,),
            env=worker_env(preload, self.mark),
            cwd=REPO,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the supervisor, which ends the worker
        )
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        self.last: dict[str, Any] = {}
        self.killed = False
        # In a group of processes: this one's rank and the group's size (its faults name it),
        # and for process 0 the check on the others while it waits (harness.study.group).
        self.process: int | None = None
        self.processes = 1
        self.watch: Callable[[], None] | None = None
        # Other workers' pipes whose events wake `watch` while this one is waited for (the
        # pipeline hands the device's turn on from them: harness.study.pipeline).
        self.watch_fds: Callable[[], list[int]] = list
        self.ended = False  # its pipe reached its end in `peek`
        self.send_raw(self.token)  # first line: the token every event must carry

    def send_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it died; the next read says how

    def send(self, op: str, **fields: Any) -> None:
        self.send_raw(json.dumps({"op": op, **fields}))

    def _died(self, reason: str = "") -> WorkerDied:
        if reason:
            self.kill()
        return WorkerDied(
            self.proc.wait(),
            self.stderr_tail(),
            dict(self.last),
            reason,
            killed=self.killed,
            process=self.process,
            processes=self.processes,
        )

    def _line(self, within: float) -> bytes | None:
        """Returns the next line from the pipe, or None at its end; raises WorkerDied (the
        worker killed) when none comes within `within` seconds or the worker stays stopped."""
        deadline = time.monotonic() + within
        stopped_since: float | None = None
        while b"\n" not in self.buffer:
            lifecycle.check_interrupted()  # a signal whose raise was lost still stops the run
            now = time.monotonic()
            if now >= deadline:
                raise self._died(f"did not answer within {within:g} s and was killed")
            others = self.watch_fds() if self.watch is not None else []
            ready, _, _ = select.select([self.fd, *others], [], [], min(0.5, deadline - now))
            if self.fd in ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    return None
                self.buffer += chunk
                if len(self.buffer) > MAX_EVENT_BYTES and b"\n" not in self.buffer:
                    raise self._died("wrote more than an event on the harness's pipe; killed")
                continue
            if self.proc.poll() is not None:
                return None  # ended; a child it left may hold the pipe open
            if self.watch is not None:
                self.watch()  # raises WorkerDied for another process of the group
            if process_state(self.proc.pid) in ("T", "t"):
                stopped_since = stopped_since or now
                if now - stopped_since >= self.stopped_s:
                    raise self._died(f"was stopped for {self.stopped_s:g} s and was killed")
            else:
                stopped_since = None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def _event(self, line: bytes) -> dict[str, Any] | None:
        """Returns the event in `line` (its token removed), or None when it is not one of
        this worker's events."""
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if (
            not isinstance(event, dict)
            or event.get("token") != self.token
            or event.get("event") not in EVENTS
        ):
            return None
        del event["token"]
        return event

    def _parse(self, line: bytes) -> dict[str, Any]:
        """Returns the event in `line`; raises WorkerDied (killed) when it is not one."""
        event = self._event(line)
        if event is None:
            raise self._died("wrote something other than an event on the harness's pipe; killed")
        return event

    def next_event(self, within: float = 3600.0) -> dict[str, Any]:
        """Returns the worker's next event; raises WorkerDied when it ends without one, sends
        anything but an event, or sends none within `within` seconds."""
        line = self._line(within)
        if line is None:
            raise self._died()
        event = self._parse(line)
        if event["event"] in TRACKED:
            self.last = event
        if event["event"] == "error":
            self.proc.wait()
            raise WorkerDied(
                self.proc.returncode or 1,
                tuple(
                    str(event.get("traceback") or event.get("message")).splitlines()[-STDERR_TAIL:]
                ),
                dict(self.last),
                # Its first line: an exception's message may hold a whole traceback (a host
                # callback's), which belongs in the log, not on the terminal.
                f"raised {_first_line(event.get('message'))}",
                process=self.process,
                processes=self.processes,
            )
        if event["event"] == "process_fault":
            # Another process of the group missed a barrier (died or hangs): the fault is
            # that process's, recorded against what this one was doing.
            self.kill()
            missing = [int(r) for r in event.get("missing") or ()]
            raise WorkerDied(
                self.proc.returncode or 1,
                (str(event.get("message", "")),),
                dict(self.last),
                str(event.get("how") or "missed a barrier"),
                killed=True,
                process=missing[0] if missing else None,
                processes=int(event.get("processes") or self.processes),
            )
        return event

    def peek(self) -> None:
        """Reads what the pipe holds now into the buffer, without waiting and without taking
        an event: `next_event` still returns each, in order, and judges it."""
        while not self.ended and len(self.buffer) <= MAX_EVENT_BYTES:
            if not select.select([self.fd], [], [], 0)[0]:
                return
            chunk = os.read(self.fd, 1 << 16)
            self.ended = not chunk
            self.buffer += chunk

    def said(self, name: str) -> bool:
        """True when an event `name` with this worker's token is among the lines read and not
        yet taken (`peek`); a line that is not an event is judged when it is taken."""
        return any(
            (event := self._event(line)) is not None and event["event"] == name
            for line in self.buffer.split(b"\n")[:-1]
        )

    def check_alive(self) -> None:
        """Raises WorkerDied when the worker has ended (its events are left unread)."""
        if self.proc.poll() is not None:
            raise self._died()

    def drain(self) -> None:
        """Reads the events this worker has sent so far without waiting for more (a process
        of a group other than process 0, whose events the supervisor only checks); raises
        WorkerDied when it ended, raised or reported a fault."""
        self.peek()
        while b"\n" in self.buffer:  # its last events first: an error says more than the end
            self.next_event(within=1.0)  # a whole line is buffered: returns at once
        if self.ended or self.proc.poll() is not None:
            raise self._died()

    def expect(self, *names: str, within: float = 3600.0) -> dict[str, Any]:
        """Returns the next event, which must be one of `names` (others are passed over); the
        whole wait is bounded by `within` seconds."""
        deadline = time.monotonic() + within
        while True:
            event = self.next_event(max(0.0, deadline - time.monotonic()))
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
        self.log.flush()
        text = bounded.head_and_tail(self.log).decode(errors="replace")
        if text.strip():
            io.write_text(workdir / runfolder.LOGS_DIR / f"worker-{self.number}.log", text)

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
            self.kill()
        self.contain()
        with contextlib.suppress(OSError):
            self.save_log(workdir)
        if self.fd >= 0:  # never twice: the number may belong to another file by then
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        self.log.close()

    def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.contain()

    def contain(self) -> bool:
        """Once the worker has exited, ends every process it started: its session's group,
        and any that left it (a double fork, `setsid`) by the worker's marker. False while
        the worker still runs; True once done (at most once)."""
        if self.contained:
            return True
        if self.proc.poll() is None:
            return False
        containment.end_group(self.proc.pid)
        containment.end_marked(self.mark)
        self.contained = True
        return True
