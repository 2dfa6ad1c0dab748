"""How variants' workers share one device: one compile or measurement on it at a time.

On a GPU every variant is captured in a process of its own (`capture.isolation: auto`), and a
process's start, JAX's import and the CUDA client cost seconds that are not the variant's work
(about 2.8 s a variant on the H200), as do its IR ladder, its kept outputs and executable, and
a program's float64 reference after it measured. The supervisor starts the next
`capture.ahead` variants' workers while one is captured (harness.study.pipeline); that work
runs beside the others', and the device is shared in three kinds of phase:

- **preparing**: the inputs (jax.random), a program's parameters (its init), the trace and
  the lowering (host work, one core), and the new-shape inputs, beside compiles and other
  preparations: small kernels, no measurement of theirs.
- **compiling**: XLA's compile, and later the new-shape recompile. The float64 reference that
  started beside the compile is waited for after it, so the next variant compiles meanwhile
  (a scanned LM's took 6 s on the H200's host, all of it holding the compiles up).
  XLA's autotuner times kernels on the GPU inside a compile, so compiles run beside no
  measurement, and by default one at a time (`capture.compiles: 1`): each compile pause and
  each autotuning choice is then the variant's own, as in a process alone. (Four compiles run
  together on the H200 took 2.3× longer each, and the pauses compared were the contention's.)
  With `capture.compiles: N`, up to N compile together: the study ends sooner where compiles
  are most of it, though less than N times sooner, as one XLA compile is itself parallel (a
  scanned encoder's kept 7.8 of the H200 host's 16 cores busy alone, 5 each two together;
  two slots captured its 4-variant study in 91.0 s, one slot in 101.1 s with 4.8 s of
  ceilings measured beside it, two runs apart), and each variant records the slots it
  compiled with
  (`Pauses.compile_slots`), so that no finding compares pauses measured beside another
  compile. The other workers' work off the device still shares the CPU's cores: a scanned
  LM's new-shape recompiles took 4.1-6.1 s in its study, 4.3-4.7 s captured alone.
- **measuring** (the variant's turn): the first execution, the steady steps, the profile and
  the memory, alone on the device, in config order (the supervisor's `go`).
- **host work**, holding nothing: a GPU variant's dump compile (harness.capture.dumping: it
  reads the first compile's autotune results and times no kernel), made while the variant
  waits long for a compile slot others hold (`long_wait`), else after its recompile, and a
  program's float64 reference, after the recompile.

Lock files (fcntl.flock, released by the kernel when a process dies) keep them apart: the
device lock, shared by preparations and compiles and held alone by a measurement; the compile
slots, one lock each, held by one compile at a time and taken before the device (a compile
waiting for a slot holds nothing a measurement waits for; with several slots, the waiters
queue on one more lock and the first of them takes whichever slot frees); and a gate that a
measurement waiting for the device holds, so nothing that asks after it goes first.

Without the lock files (a worker alone on its device) every phase is free, and only the turn
is timed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

GATE_FILE = "device-gate.lock"
DEVICE_FILE = "device.lock"
COMPILE_FILE = "device-compile.lock"  # the first slot's; the others' are numbered after it
COMPILE_QUEUE_FILE = "device-compile-queue.lock"
SLOT_POLL_S = 0.005  # how often a compile first in the queue tries the slots again


class DeviceTurn:
    """One worker's share of the device (see the module). `wait` blocks until the supervisor
    says this variant may measure; `over` tells it the measurement is done; `locks` is the
    session's folder of lock files, `compiles` how many compiles it lets run together (every
    worker of a session is given the same). Without them the device is this worker's alone."""

    def __init__(
        self,
        wait: Callable[[], None] | None = None,
        over: Callable[[], None] | None = None,
        locks: Path | None = None,
        compiles: int = 1,
    ) -> None:
        self._wait, self._over = wait, over
        self._gate = _open(locks / GATE_FILE) if locks is not None else None
        self._device = _open(locks / DEVICE_FILE) if locks is not None else None
        self._slots = (
            [_open(locks / slot_file(i)) for i in range(max(1, compiles))]
            if locks is not None
            else []
        )
        self._queue = _open(locks / COMPILE_QUEUE_FILE) if len(self._slots) > 1 else None
        self.began: float | None = None  # unix seconds
        self.asked_turn: float | None = None  # when `begin` was called
        self.go: float | None = None  # when the supervisor's go came
        self.ended: float | None = None
        self.waited_s = 0.0  # for the go and the exclusive lock
        self.compile_wait_s = 0.0  # for the shared lock, before each compile phase
        self.compiles: list[tuple[float, float]] = []  # each compile phase held, unix seconds
        self.preparations: list[tuple[float, float]] = []  # each preparation held, unix seconds
        self.asked: list[float] = []  # when each compile phase was asked for, unix seconds
        self.alone_spans: list[tuple[float, float]] = []  # each `alone` held, unix seconds
        # The worker's start and its device client's (set by the worker), unix seconds.
        self.worker_started: float | None = None
        self.worker_ready: float | None = None

    @property
    def shared(self) -> bool:
        """True when other workers share the device with this one."""
        return self._device is not None

    @property
    def compile_slots(self) -> int | None:
        """How many compiles the device lets run together (this one among them); None when
        nobody shares the device with this worker."""
        return len(self._slots) if self.shared else None

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        """Holds the device shared while making inputs and parameters: beside compiles and
        other preparations, never beside a measurement (one waiting goes first)."""
        with self._shared():
            yield

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """Holds the device for a compile phase: in a compile slot (one compile at a time by
        default), beside no measurement (a measurement waiting for its turn goes first)."""
        with self._shared(slot=True):
            yield

    def slots_taken(self) -> bool:
        """True when every compile slot is held now (by other workers: this one holds none
        between its phases), so a compile asked for would wait; False when one is free, or
        nobody shares the device."""
        return self.shared and not any(_free(slot) for slot in self._slots)

    def long_wait(self) -> bool:
        """True when a compile asked for now would wait for the rest of another's: the one
        compile slot held. With several slots, never: the first to free is often soon, and
        host work made before asking outlasts the wait. On the H200 a scanned encoder's last
        variant, two slots held, made its dump compile first (21.4 s and 23.2 s beside two
        compiles, 8.2 s alone), and a slot stood free 11.8 s and 13 s, another worker queued
        for it in the second run."""
        return len(self._slots) == 1 and self.slots_taken()

    def _take_slot(self) -> int:
        """Waits for a compile slot and returns its lock, held. One slot: its lock. Several:
        the queue's lock first, then whichever slot is free, tried in turn (flock cannot wait
        for any one of several files); the queue is let go once a slot is held."""
        if self._queue is None:
            fcntl.flock(self._slots[0], fcntl.LOCK_EX)
            return self._slots[0]
        fcntl.flock(self._queue, fcntl.LOCK_EX)
        try:
            while True:
                for slot in self._slots:
                    try:
                        fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    return slot
                time.sleep(SLOT_POLL_S)
        finally:
            fcntl.flock(self._queue, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _shared(self, slot: bool = False) -> Iterator[None]:
        """The device lock shared, and a compile slot alone when `slot`.

        The slot is taken first: a compile waiting for one holds nothing of the device, so a
        measurement that asks meanwhile waits only for the phases already running. (Taken
        after the device, every compile queued behind the slot held the device shared; on the
        H200 a turn then waited for three compiles, 2.3-3.6 s.)"""
        if self._device is None or self._gate is None or self.measuring:
            yield
            return
        started = time.perf_counter()
        exclusive = None
        if slot:
            self.asked.append(time.time())
            exclusive = self._take_slot()
        try:
            fcntl.flock(self._gate, fcntl.LOCK_SH)  # a measurement waiting goes first
            try:
                fcntl.flock(self._device, fcntl.LOCK_SH)
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
            self.compile_wait_s += time.perf_counter() - started
            held = time.time()
            try:
                yield
            finally:
                # Its end, before a measurement may take the device.
                spans = self.compiles if exclusive is not None else self.preparations
                spans.append((held, time.time()))
                fcntl.flock(self._device, fcntl.LOCK_UN)
        finally:
            if exclusive is not None:
                fcntl.flock(exclusive, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Holds the device alone for a measurement outside the variants' order (the
        device's ceilings, measured beside the captures): no compile and no other
        measurement runs beside it."""
        if self.measuring:
            yield
            return
        self._take_alone()
        held = time.time()
        try:
            yield
        finally:
            self.alone_spans.append((held, time.time()))
            self._give_back()

    @property
    def measuring(self) -> bool:
        return self.began is not None and self.ended is None

    def begin(self) -> None:
        """Waits for this variant's turn to measure (once): the supervisor's go, then the
        device alone."""
        if self.began is not None:
            return
        started = time.perf_counter()
        self.asked_turn = time.time()
        if self._wait is not None:
            self._wait()
        self.go = time.time()
        self._take_alone()
        self.waited_s = time.perf_counter() - started
        self.began = time.time()

    def end(self) -> None:
        """Ends the turn (once, and only after `begin`): the next variant may measure."""
        if self.began is None or self.ended is not None:
            return
        self.ended = time.time()
        self._give_back()
        if self._over is not None:
            self._over()

    def _take_alone(self) -> None:
        """The device alone: the gate first (nothing that asks after this starts), then the
        device lock once every preparation and compile holding it has ended."""
        if self._gate is not None and self._device is not None:
            fcntl.flock(self._gate, fcntl.LOCK_EX)
            fcntl.flock(self._device, fcntl.LOCK_EX)

    def _give_back(self) -> None:
        if self._gate is not None and self._device is not None:
            fcntl.flock(self._device, fcntl.LOCK_UN)
            fcntl.flock(self._gate, fcntl.LOCK_UN)


def slot_file(index: int) -> str:
    """The lock file of compile slot `index` (the first keeps the one slot's old name)."""
    return COMPILE_FILE if index == 0 else f"device-compile-{index}.lock"


def _free(lock: int) -> bool:
    """True when nobody holds the lock now (tried, and let go at once)."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(lock, fcntl.LOCK_UN)
    return True


def open_lock(path: Path) -> int:
    """Opens (making it where absent) a lock file of a session's or a run's private folder."""
    return _open(path)


def _open(path: Path) -> int:
    # O_NOFOLLOW: the session's private folder (mode 0700) holds them; never a planted link.
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)


def free() -> DeviceTurn:
    """A device nobody else uses: a worker alone on it."""
    return DeviceTurn()
