"""Every process a worker's user code starts ends with the worker.

Each worker runs in a session of its own (harness.study.workerproc), so its process group holds
what it forks; but a program may `setsid` or fork twice, and its process then belongs to no
group the supervisor knows. What no such call sheds is the environment: each worker is started
with a marker of its own (`MARK`, a random value) that every process it starts inherits. When a
worker has ended, `end_marked` finds each process of this user whose environment holds the
worker's marker (the kernel's /proc/<pid>/environ) and ends it: all of them stopped first,
then killed, round after round until none is left, so a process forking meanwhile cannot
outrun it. A program that clears its own environment escapes it; nothing here claims more.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

MARK = "HARNESS_WORKER_MARK"
PROC = "/proc"
ENVIRON_BYTES = 1 << 20  # an environment is at most a few hundred kB (ARG_MAX)
# Rounds of stop-then-kill before giving up: each round ends every process found, so only a
# process forking faster than a round takes (milliseconds) needs a second.
ROUNDS = 200


def _environ(pid: int) -> bytes:
    """The environment of process `pid`, as the kernel keeps it; b"" when it is gone, a
    zombie, or another user's."""
    try:
        fd = os.open(f"{PROC}/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        parts: list[bytes] = []
        total = 0
        while total < ENVIRON_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
        return b"".join(parts)
    except OSError:
        return b""
    finally:
        os.close(fd)


def marked(mark: str, spare: tuple[int, ...] = ()) -> list[int]:
    """The processes of this user whose environment holds `MARK=mark`, apart from `spare`
    (and this process)."""
    entry = f"{MARK}={mark}".encode()
    me, uid = os.getpid(), os.getuid()
    found = []
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me or pid in spare:
            continue
        try:
            if os.stat(f"{PROC}/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        if entry in _environ(pid).split(b"\0"):
            found.append(pid)
    return found


def end_marked(mark: str, spare: tuple[int, ...] = ()) -> int:
    """Ends every process `marked(mark, spare)` finds, stopping them all before killing
    them, until a scan finds none; returns how many it ended."""
    ended: set[int] = set()
    for _ in range(ROUNDS):
        pids = marked(mark, spare)
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        ended.update(pids)
        time.sleep(0.005)  # a killed process leaves /proc's environ once the kernel reaps it
    return len(ended)


def end_group(pgid: int) -> None:
    """Kills the process group `pgid` (a worker's session), whatever is left of it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
