"""One run lifecycle for every command that fills a folder of its own: the study
(harness.study.run), the search (harness.search) and `python -m harness.analyze` (harness.program).

    with lifecycle.running(folder, manifest, latest=True, stop=session.kill, faults=...) as run:
        ...                      # the command's stages
        run.settle("complete")   # the final status, before a report reads it
    if run.stopped is not None:  # interrupted, or a fault in `faults`: recorded, not raised
        ...                      # the command's own message and exit status

`running` takes the folder's lock (io.run_lock: a second command on the same folder gets
io.Locked before anything is written), confines every write to the folder, writes the manifest
with status `running`, points the experiment's `latest` at the folder (a study's and a
search's), and turns SIGINT and SIGTERM into Interrupted. However the block ends, the manifest
says how: `complete` (or what `settle` said), `interrupted` with the signal, or `failed` with
the reason (a full disk's "No space left on device", a worker that died). A fault the command
expects (`faults`) and an interrupt are recorded and end the block; anything else is recorded
and raised. Nothing here deletes or overwrites a file the command did not make: the manifest
is the command's own, and `latest` only ever replaces a link (harness.store.ownership's rule).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common.terminal import one_line
from harness.records import run_files
from harness.store import io
from harness.store.runfolder import MANIFEST_FILE

# The manifest's name. Kept here alone, so the run-folder object (issue 26, part A) can own it.
MANIFEST = MANIFEST_FILE  # the run folder's (harness.store.runfolder)
INTERRUPTED_EXIT = 130
FAILED_EXIT = 1  # a fault the run could not go past: a disk full, a read-only folder


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; what is finished is kept and the run is marked interrupted."""


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turns SIGINT and SIGTERM into Interrupted for the block. From the first signal on, both
    are ignored for the rest of the process, so a double Ctrl-C still ends cleanly."""
    fired = FIRED
    fired.clear()
    ACTIVE[:] = [True]

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
        # The handler's raise can be lost: Python prints and drops an exception raised while
        # a weakref callback or a __del__ runs ("Exception ignored"). The signal still counts.
        check_interrupted()
    finally:
        ACTIVE[:] = []
        if not fired:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])


ACTIVE: list[bool] = []  # [True] while an `interruptible` block runs
# The signals `interruptible` has seen in this process (its handler ignores any later one).
FIRED: list[int] = []


def check_interrupted() -> None:
    """Raises Interrupted when SIGINT or SIGTERM arrived inside `interruptible` and its raise
    was lost; the supervisor calls it while it waits (harness.study.workerproc) and each
    block ends with it, so a signal always stops the run as Ctrl-C does."""
    if ACTIVE and FIRED:
        raise Interrupted(signal.Signals(FIRED[0]).name)


@dataclass(frozen=True)
class Stop:
    """Why a run's block ended early, as its manifest records it."""

    status: str  # "interrupted" or "failed"
    reason: str
    error: BaseException
    recorded: bool  # False when even the manifest could not be written (the disk is full)

    @property
    def exit_code(self) -> int:
        return INTERRUPTED_EXIT if self.status == "interrupted" else FAILED_EXIT

    def then(self, hint: str) -> str:
        """`hint` (how to go on) when the stop was recorded, else that it could not be."""
        return hint if self.recorded else "; the run's state could not be recorded"


@dataclass
class Run:
    """A run in progress: its folder, its manifest (kept in memory, written whole) and, after
    the block, why it stopped early (None when it did not)."""

    folder: Path
    manifest: dict[str, Any]
    stopped: Stop | None = None

    def write(self) -> None:
        """Writes the manifest as it is now, through its record (harness.records.run_files.Manifest)."""
        run_files.write_document(run_files.MANIFEST, self.folder / MANIFEST, self.manifest)

    def settle(self, status: str, **fields: Any) -> None:
        """Writes the run's final status (and `fields`), before a report or an index reads it."""
        self.manifest.update(status=status, finished=io.utc_now(), **fields)
        self.write()

    def end(self, status: str, reason: str, error: BaseException) -> Stop:
        """Records an early end; returns it (recorded=False when the write failed too)."""
        self.manifest.update(status=status, finished=io.utc_now(), reason=reason)
        try:
            self.write()
        except OSError:
            return Stop(status, reason, error, recorded=False)
        return Stop(status, reason, error, recorded=True)


def reason_of(error: BaseException) -> str:
    """The manifest's one-line reason for a fault: an OSError's own words (its file apart)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return one_line(error)


def _previous_start(folder: Path) -> str | None:
    """When an earlier attempt at this run started, from its manifest (None when unreadable)."""
    with contextlib.suppress(ValueError):  # SchemaError: unreadable, not JSON, not a manifest
        return run_files.load(run_files.MANIFEST, folder / MANIFEST).started
    return None


@contextlib.contextmanager
def running(
    folder: Path,
    manifest: Mapping[str, Any],
    *,
    latest: bool = False,
    resumed: bool = False,
    stop: Callable[[], None] = lambda: None,
    faults: tuple[type[BaseException], ...] = (OSError,),
) -> Iterator[Run]:
    """Runs the block as the run in `folder` (the module's docstring says what it does).

    `manifest` is what the command records (its config, its inputs); `started` and `status`
    are added. `resumed`: the run goes on from an interrupted attempt, whose start is kept.
    `stop` ends what the command started (its workers) before the end is recorded. A folder
    whose manifest cannot even be written (read-only, full) raises that OSError here, before
    the block runs; so does io.Locked, before anything is written.
    """
    folder = Path(folder)
    with io.writes_confined_to(folder), io.run_lock(folder):
        run = Run(folder, {**manifest, "started": io.utc_now(), "status": "running"})
        if resumed:
            run.manifest["started"] = _previous_start(folder) or run.manifest["started"]
            run.manifest["resumed"] = io.utc_now()
        entered = False
        try:
            with interruptible():
                run.write()
                note = io.point_latest(folder) if latest else None
                if note:
                    print(f"note: {note}", file=sys.stderr)
                entered = True
                yield run
        except (KeyboardInterrupt, Interrupted) as e:
            stop()
            run.stopped = run.end("interrupted", str(e) or "SIGINT", e)
            if not entered:  # before the block: the CLI's own interrupt (cli.guarded)
                raise KeyboardInterrupt(run.stopped.reason) from None
        except faults as e:
            stop()
            run.stopped = run.end("failed", reason_of(e), e)
            if not entered:  # the manifest itself cannot be written: no block to run
                raise
        except BaseException as e:  # not a fault the command expects: recorded, then raised
            stop()
            run.end("failed", reason_of(e), e)
            raise
