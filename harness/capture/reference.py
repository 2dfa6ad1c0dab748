"""A variant's float64 reference: computed once per distinct reference in a run, kept on disk
for the run's other variants (each may be captured in a process of its own), and, where the
machine has the cores for it, computed while the first compile runs.

The key (harness.variants.expression.reference_key, harness.variants.program.reference_key)
is what the reference is made from; variants with equal keys have bit-identical references.
The folder is the run's own `.references` (harness.study.session makes it, mode 0700, and
removes it when the study ends), not the results root's `.cache`: a program's key names its
function, not its code, so a reference holds within one run only. Files are keyed NumPy
archives (harness.store.npz: written atomically, read through the one reader); a file whose
key or leaves are not what was asked for is a miss, computed again with a one-line note on
stderr. A reference whose computation fails is never kept: its failure is the `numerics`
probe's, as before. One process at a time computes a key's reference (its lock file beside
the archive): a variant asking while another computes it waits and reads it. (On the H200 two
variants of a scanned encoder, captured together with two compile slots, each computed it:
9.7 s and 9.1 s, beside the study's recompiles; with the lock, one did, in 8.7 s.)

Concurrency: the GELU expression's reference is NumPy (its matmul releases the GIL), so on a
machine with more than CONCURRENT_CORES cores it runs in a thread started when the first
compile starts, and the capture waits for it after the compile, outside the timed pause and
before the first execution (so no timed call shares the CPU with it). At or under that
count it runs serially where it always did: on 2 cores the reference and XLA's compile share
them and the compile pause grows (measured on 2 shared cores, gelu.yaml's `xla` at m=512,
k=n=4096 with the erf GELU, 4 runs each: XLA compile 0.090 s median serial against 0.269 s
beside the reference, whose 0.9 s the capture then waited for anyway). On a GPU host the
compile's CPU work is XLA's and LLVM's, beside one NumPy matmul (its BLAS threads). A program's
reference is a float64 jit on the CPU device: its compile would land in the first call's
jax.monitoring events and its profile, so it always runs serially, after the first call.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from harness.capture import turn
from harness.store import npz

# More cores than this: the expression's reference runs while the first compile does.
CONCURRENT_CORES = 4

Leaves = tuple[np.ndarray, ...]
Made = tuple[Leaves, str | None]  # the reference's leaves and, where it is not its own, why


def cores() -> int:
    """Returns the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def may_overlap(count: int | None = None) -> bool:
    """True when a reference may run beside the first compile: more than CONCURRENT_CORES."""
    return (cores() if count is None else count) > CONCURRENT_CORES


@dataclasses.dataclass(frozen=True)
class Spent:
    """What a variant's reference cost: seconds computing it (None: reused or never made),
    whether it was read from the run's cache, and whether it ran beside the first compile."""

    compute_s: float | None
    reused: bool
    overlapped: bool


class Pending:
    """One variant's reference: read from the run's cache, or computed once (in a thread
    where `use` allows it and `start` is called). `overlappable`: the computation touches no
    JAX, so nothing of it lands in a measured window's events or profile."""

    def __init__(
        self,
        key: str,
        compute: Callable[[], Made],
        overlappable: bool = False,
    ) -> None:
        self.key, self._compute, self.overlappable = key, compute, overlappable
        self.folder: Path | None = None
        self.overlap = False
        self._future: concurrent.futures.Future[Made] | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._made: Made | None = None
        self.compute_s: float | None = None
        self.reused = False
        self.overlapped = False

    def use(self, folder: Path | None, overlap: bool) -> None:
        """Sets the run's cache folder (None: none) and whether it may run in a thread."""
        self.folder, self.overlap = folder, overlap and self.overlappable

    def start(self) -> None:
        """Where it may overlap: reads the cache and, on a miss, starts computing it in a
        thread. Otherwise nothing: `result` reads or computes it when asked."""
        if not self.overlap or self._made is not None or self._future is not None:
            return
        found = read(self.folder, self.key) if self.folder is not None else None
        if found is not None:
            self._made, self.reused = found, True
            return
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "float64-reference")
        self._future = self._pool.submit(self._timed)
        self.overlapped = True

    def wait(self) -> float:
        """Waits for a reference started in a thread (its failure is raised by `result`);
        returns the seconds waited."""
        started = time.perf_counter()
        if self._future is not None:
            concurrent.futures.wait([self._future])
            self._close()
            # Kept in the run's cache now, not when judged: the next variant's worker, whose
            # turn on the device may begin before this one judges, then reads it.
            if self._future.exception() is None:
                self._keep(self._future.result())
        return time.perf_counter() - started

    def result(self) -> Made:
        """Returns the reference: kept, read from the run's cache, or computed (then kept in
        the cache). Raises what its computation raised; a failure is never kept."""
        if self._made is not None:
            return self._made
        if self._future is not None:
            try:
                made = self._future.result()
            finally:
                self._close()
            self._keep(made)
            return made
        # One process computes a key's reference; another asking meanwhile waits and reads it
        # (on the H200 two variants of one program computed it together, 9.7 s and 9.1 s
        # beside the study's recompiles, 6 s alone).
        with _computing(self.folder, self.key):
            found = read(self.folder, self.key) if self.folder is not None else None
            if found is not None:
                self._made, self.reused = found, True
                return found
            made = self._timed()
            self._keep(made)  # inside the lock: whoever waits for it reads it
        return made

    def _keep(self, made: Made) -> None:
        """Keeps a computed reference here and in the run's cache (never a failure)."""
        if self._made is None and self.folder is not None:
            write(self.folder, self.key, made)
        self._made = made

    def spent(self) -> Spent | None:
        """What it cost, or None when it was never asked for."""
        if self._made is None and self._future is None and self.compute_s is None:
            return None
        return Spent(self.compute_s, self.reused, self.overlapped)

    def _timed(self) -> Made:
        started = time.perf_counter()
        try:
            return self._compute()
        finally:
            self.compute_s = time.perf_counter() - started

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@contextlib.contextmanager
def _computing(folder: Path | None, key: str) -> Iterator[None]:
    """Holds the key's lock file in the run's folder (the kernel lets go of it when a process
    dies). Without a folder, or where the file cannot be made, nothing is held: the reference
    is computed as before."""
    fd = None
    if folder is not None:
        with contextlib.suppress(OSError):
            fd = turn.open_lock(folder / (file_name(key) + ".lock"))
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process holds it: say so, then wait
                print(
                    f"note: waiting for {folder / (file_name(key) + '.lock')}: another process "
                    "is computing this float64 reference (or holds its lock)",
                    file=sys.stderr,
                    flush=True,
                )
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def file_name(key: str) -> str:
    return f"reference-{hashlib.sha256(key.encode()).hexdigest()[:24]}.npz"


def write(folder: Path, key: str, made: Made) -> bool:
    """Keeps a reference for the run's other variants; False (nothing kept) when it cannot."""
    leaves, note = made
    parts: dict[str, np.ndarray] = {"count": np.array(len(leaves))}
    parts["note"] = np.array(note if note is not None else "")
    parts["has_note"] = np.array(note is not None)
    for i, leaf in enumerate(leaves):
        a = np.asarray(leaf)
        if a.dtype.hasobject:
            return False
        parts[f"leaf{i}"] = a
    return npz.write_keyed(folder, file_name(key), key, parts)


def read(folder: Path, key: str) -> Made | None:
    """Returns the reference kept for `key`, or None: absent (silently), or a file that is not
    one this module wrote for exactly this key (a note on stderr; computed again)."""
    name = file_name(key)
    if not (folder / name).exists() and not (folder / name).is_symlink():
        return None
    made = _parsed(npz.read_keyed(folder, name, key))
    if made is None:
        print(
            f"note: the float64 reference kept at {folder / name} is not readable or not this "
            "variant's; computed again",
            file=sys.stderr,
            flush=True,
        )
    return made


def _parsed(found: dict[str, np.ndarray] | None) -> Made | None:
    """The leaves and note of an archive this module wrote, or None for anything else."""
    if found is None:
        return None
    try:
        count = int(found["count"])
        if set(found) != {"count", "note", "has_note"} | {f"leaf{i}" for i in range(count)}:
            return None
        leaves = tuple(found[f"leaf{i}"] for i in range(count))
        note = str(found["note"]) if bool(found["has_note"]) else None
    except (KeyError, TypeError, ValueError):
        return None
    return leaves, note
