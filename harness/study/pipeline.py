"""Each variant captured in a worker of its own, the next ones started while one captures.

A process per variant (`capture.isolation`, a GPU's default) makes each compile pause the
variant's own: its autotuning, no cache another variant left. Its price was each process's
start, JAX's import and the device client (about 2.8 s a variant on the H200), and each
variant's IR ladder, kept outputs and executable after it measured, all in series. Here the
next `capture.ahead` variants' workers start while one is captured (one more as soon as its
turn on the device is over: it has only its recompile and its files left); each is sent its
job at once, and its work off the device runs beside the others', while the device is used by one
worker at a time (harness.capture.turn): compiles in the order they ask, measurements in
config order, the supervisor handing the turn on as soon as the worker before says its
measurement is over (`turn_over`), or ended: it reads that from a worker started ahead too,
while it waits on the current one (`WorkerProcess.peek`), so variant k+1 never waits for
variant k-1's files. The first worker done measures the device's
ceilings the same way.

A worker that dies is its own variant's crash, recorded against it wherever it was (its
inputs, its compile, its wait, its measurement); the next worker is already started and goes
on. The last worker stays up: the timing stage runs in it (a new one, if its variant failed).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.common import terminal
from harness.config.experiment import Experiment
from harness.records.summary import CaptureRecord, Failure, load_capture
from harness.store import io, runfolder
from harness.store.records import to_json
from harness.store.runfolder import RunFolder
from harness.study import group
from harness.study.session import Session, hello
from harness.study.workerproc import WorkerDied, WorkerProcess, preload_for

GPU_AHEAD = 4  # workers preparing ahead on a GPU: a process, its JAX and its CUDA client took
# about 2.8 s on the H200, and its inputs and lowering 1.5-3.7 s more, while a small variant's
# compiles and turn hold the device about 2.2 s.
LIVE_AHEAD = 2  # at most this many times `ahead` workers live behind the current one: those
# that measured keep only their recompile and their files to do


def ahead_count(exp: Experiment, platform: str) -> int:
    """How many of the next variants' workers prepare while one is measured (`capture.ahead`;
    -1: GPU_AHEAD on a GPU, none on a CPU, where they would share the timed cores)."""
    if exp.capture.ahead >= 0:
        return exp.capture.ahead
    return GPU_AHEAD if platform == "gpu" else 0


def fresh_variant_dir(workdir: Path, name: str) -> Path:
    """Returns an empty `variants/<name>/`, deleting what an interrupted attempt left there."""
    variants = RunFolder(workdir).variants_dir
    if variants.is_symlink():  # planted: replace the link, never write through it
        variants.unlink()
    variants.mkdir(exist_ok=True)
    if (variants / name).is_symlink():  # never follow a planted link out of the run folder
        (variants / name).unlink()
    vdir = io.confined(workdir, runfolder.VARIANTS_DIR, name)
    kept = io.remove_tree(variants, variants / name, runfolder.made_in_variant)
    if kept:  # a user's files beside what the interrupted attempt left: never the harness's
        print(
            f"{terminal.shown(name)}: left untouched: {terminal.shown(', '.join(kept)[:200])}",
            flush=True,
        )
    vdir.mkdir(parents=True, exist_ok=True)
    return vdir


def crash_record(exp: Experiment, name: str, died: WorkerDied) -> CaptureRecord:
    """The record of a variant whose worker died (or was killed) capturing it."""
    doing = {
        "inputs": "making its inputs",
        "turn_wait": "waiting for its turn on the device",
    }.get(str(died.last.get("event")), "capturing it")
    return CaptureRecord(
        status="failed",
        reason=f"{died.how()} while {doing}",
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
class Prepared:
    """A variant's worker; `sent` once its hello and capture job are on their way (it then
    prepares and waits for its go), `greeted` once its hello was read back."""

    name: str
    worker: WorkerProcess
    sent: bool = False
    greeted: bool = False
    shared: bool = False  # it shares the device: it measures when sent its go
    go_sent: bool = False
    turn_passed: bool = False


def _unmeasured(chain: list[Prepared]) -> int:
    """How many of `chain`'s workers have not measured yet (the one measuring among them)."""
    return sum(not p.turn_passed for p in chain)


def _holder(chain: list[Prepared]) -> Prepared | None:
    """The worker started ahead (after the current one, `chain[0]`) that holds the turn on the
    device: sent its go, its turn not yet over. At most one does."""
    return next((p for p in chain[1:] if p.go_sent and not p.turn_passed), None)


class EachInItsOwn:
    """Captures variants one per worker, `ahead` more prepared meanwhile (see the module)."""

    def __init__(
        self,
        session: Session,
        exp: Experiment,
        workdir: Path,
        new_worker: Callable[[], WorkerProcess],
    ) -> None:
        """`new_worker` starts a worker ready for jobs (the supervisor's): the timing's, when
        the last capture's worker cannot time."""
        self.session, self.exp, self.workdir = session, exp, workdir
        self.new_worker = new_worker
        self.ahead = ahead_count(exp, session.platform)
        self.source = str(session.config.path)

    def _job(self, name: str, shared: bool) -> dict[str, object]:
        return {
            "workdir": str(self.workdir),
            "variants": [name],
            "fresh_process": True,
            # Another worker times these: it loads what they compiled instead of compiling
            # (and autotuning) each again.
            "executables": str(self.session.executable_folder()),
            # Every variant's worker reads and keeps the float64 references there.
            "references": str(self.session.reference_folder(self.workdir)),
            # Shared with the workers ahead: compiles together, measurements one at a time.
            "locks": str(self.session.lock_folder()) if shared else None,
        }

    def _send(self, p: Prepared, shared: bool) -> None:
        fresh_variant_dir(self.workdir, p.name)
        if not p.greeted:
            group.send_hello(p.worker, self.exp, self.source, None, checks=False)
        p.worker.send("capture", **self._job(p.name, shared))
        p.sent, p.shared = True, shared

    def _start(self, name: str) -> Prepared:
        worker = self.session.spawn(preload_for(self.exp.variant(name)), self.exp.limits.stopped_s)
        self.session.ahead.append(worker)
        p = Prepared(name, worker)
        if self.ahead:
            self._send(p, shared=True)  # it prepares and compiles now, then waits for its go
        return p

    def _pass_turn(self, done: Prepared, chain: list[Prepared]) -> None:
        """Marks `done`'s turn on the device over and hands it on (`chain`: the current
        worker, then those started ahead, in config order)."""
        done.turn_passed = True
        self._advance(chain)

    @staticmethod
    def _advance(chain: list[Prepared]) -> None:
        """Sends the go to the first worker in `chain` whose turn is not over, once, when it
        shares the device (one that does not measures without waiting)."""
        for p in chain:
            if not p.turn_passed:
                if p.shared and not p.go_sent:
                    p.worker.send("go")
                    p.go_sent = True
                return

    def _watch_turns(
        self, chain: Callable[[], list[Prepared]], refill: Callable[[], None]
    ) -> Callable[[], None]:
        """What the supervisor checks while it waits on the current worker: whether a worker
        ahead that holds the turn said its measurement is over (or its pipe ended), so the
        next one measures at once, not when every worker before it is done. (Read only from
        the current worker, the turn of variant k+1 waited for variant k-1's recompile and
        files: 6 s between two turns on the H200.)"""

        def watch() -> None:
            while (p := _holder(chain())) is not None:
                w = p.worker
                w.peek()
                if not (w.ended or w.said("turn_over") or w.said("done")):
                    return
                self._pass_turn(p, chain())
                refill()

        return watch

    @staticmethod
    def _turn_pipes(chain: Callable[[], list[Prepared]]) -> Callable[[], list[int]]:
        """The pipe of the worker ahead that holds the turn: its events wake the watch."""

        def fds() -> list[int]:
            p = _holder(chain())
            return [p.worker.fd] if p is not None and not p.worker.ended else []

        return fds

    def run(
        self, names: list[str], progress: Callable[[str, CaptureRecord], None]
    ) -> dict[str, CaptureRecord]:
        """Captures `names` in config order; returns their records (a crash is recorded,
        never raised). The first runs in the session's worker, which said hello already."""
        records: dict[str, CaptureRecord] = {}
        todo = deque(names)
        queue: deque[Prepared] = deque()
        current: Prepared | None = None
        if todo:
            current = Prepared(todo.popleft(), self.session.worker, greeted=True)
            if self.ahead:  # its turn is recorded like the others', and comes at once
                self._send(current, shared=True)
                self._advance([current])
        while current is not None:
            worker = current.worker
            self.session.worker = worker
            if worker in self.session.ahead:
                self.session.ahead.remove(worker)

            def chain(current: Prepared = current) -> list[Prepared]:
                return [current, *queue]

            def refill() -> None:
                # Once a turn is over, the next one measures and the one before has only its
                # recompile and its files left: a worker started now is ready to compile
                # seconds sooner than one started when the current one is done. Those that
                # measured are not counted: `ahead` workers are kept preparing for the turns
                # to come. (Counted, on the H200 the device stood idle 8.8 s of a 13-variant
                # capture, the next worker not yet ready to compile.)
                while (
                    todo
                    and self.ahead
                    and _unmeasured(chain()) <= self.ahead
                    and len(queue) < LIVE_AHEAD * self.ahead
                ):
                    queue.append(self._start(todo.popleft()))
                    self._advance(chain())

            try:
                if not current.sent:
                    self._send(current, shared=False)
                # The next ones start preparing while this one captures.
                while todo and len(queue) < max(1, self.ahead):
                    queue.append(self._start(todo.popleft()))
                self._advance(chain())
                if not current.greeted:
                    hello(worker, self.exp, self.source, checks=False, sent=True)
                    current.greeted = True
                worker.watch = self._watch_turns(chain, refill)
                worker.watch_fds = self._turn_pipes(chain)
                record = self._capture(current, chain, refill)
            except WorkerDied as died:
                self._pass_turn(current, chain())  # the next one must not wait for a dead one
                worker.kill()
                record = crash_record(self.exp, current.name, died)
                io.write_json(RunFolder(self.workdir).variant(current.name).result, to_json(record))
                worker.save_log(self.workdir)
                print(f"    {died.how()}; {group.successor(self.exp)}", file=sys.stderr, flush=True)
            worker.watch, worker.watch_fds = None, list  # it may time the others next
            records[current.name] = record
            progress(current.name, record)
            self.session.reap()  # the variants before it: what their workers started ends
            nxt = queue.popleft() if queue else None
            if nxt is None and todo:  # no worker ahead (it was never started): one now
                nxt = self._start(todo.popleft())
            if nxt is None:
                # The last one times the others, unless it died, or its variant failed: a
                # CUDA error (an unspecified launch failure) leaves its context unusable, and
                # every program loaded into it would fail to time.
                if worker.proc.poll() is not None or record.status == "failed":
                    if worker.proc.poll() is None:
                        worker.end()
                        self.session.finished.append(worker)
                    self.session.worker = self.new_worker()
                break
            if record.status != "failed" and self._measures_ceilings(worker, current.name):
                pass  # it measures the device's ceilings beside the next captures
            else:  # it exits on its own while the next captures; its log is kept at the end
                worker.end()
                self.session.finished.append(worker)
            current = nxt
        return records

    def _measures_ceilings(self, worker: WorkerProcess, captured: str) -> bool:
        """Sends the first worker done with its variant the device's ceilings to measure
        beside the captures (their compiles beside its compiles, its timing with the device
        alone); the timing stage then reads them (Supervisor.ceilings). True when sent."""
        if not self.ahead or self.session.ceilings is not None or worker.proc.poll() is not None:
            return False
        self.session.ceilings, self.session.ceilings_captured = worker, captured
        worker.send(
            "ceilings",
            workdir=str(self.workdir),
            cache=self.session.ceilings_cache(self.workdir),
            locks=str(self.session.lock_folder()),
        )
        return True

    def _capture(
        self, current: Prepared, chain: Callable[[], list[Prepared]], refill: Callable[[], None]
    ) -> CaptureRecord:
        worker, limit = current.worker, self.exp.limits.call_s
        worker.expect("start", within=limit)
        while True:
            event = worker.expect("turn_over", "done", within=limit)
            if not current.turn_passed:
                self._pass_turn(current, chain())
                refill()
            if event["event"] == "done":
                return load_capture(RunFolder(self.workdir).variant(current.name).result)
