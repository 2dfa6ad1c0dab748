"""A map over independent items, shared with forked children: the analysis of each variant and
the drawing of each plot are pure, CPU-bound Python, and a run waits for all of them.

Children are forked from the process that needs the results (no re-import, no arguments to
send); each computes its share and sends the results back as JSON through a pipe, encoded and
decoded by the caller's functions (plain data only, never objects). A
child that dies, or an item that raised in it, is computed again in the parent, so the result
(and any exception) is what the sequential loop would give. Children leave through `os._exit`,
so an interrupt ends them without a traceback and without running the parent's clean-ups.

A process that has loaded JAX or torch is never forked: their runtimes keep thread pools
(XLA's client starts 15 threads on a 2-core CPU; torch's intra-op pool), and a fork copies
their locks but not their threads, so a child can wait for ever on a lock no thread will
release. The study's supervisor and `python -m harness.analyze` load neither (the analyzer
imports jaxlib's profile reader alone, which starts no thread), so they fork; a caller that
has (a test process, a notebook) gets the same results computed in-process, item by item.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
_FAILED = object()


# Runtimes whose threads a fork would strand (see the module's docstring).
THREADED_RUNTIMES = ("jax", "torch")
# True while this process is one of a map's workers (the parent computing its share, or a
# child): a map inside it (a host's profile read in chunks) runs in-process, since the map
# around it has given every core a worker already.
_in_map = False


def fork_safe() -> bool:
    """True when this process may fork: the platform can, and no threaded runtime is loaded."""
    return hasattr(os, "fork") and not any(m in sys.modules for m in THREADED_RUNTIMES)


def children_for(items: int) -> int:
    """Returns how many children to fork for `items` items: one per spare CPU, at most one per
    item beyond the parent's own (none where this process may not fork: `fork_safe`)."""
    if items < 2 or _in_map or not fork_safe():
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min((cpus or 1) - 1, items - 1))


def fork_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    encode: Callable[[R], Any] = lambda r: r,
    decode: Callable[[Any], R] = lambda d: d,
    children: int | None = None,
) -> list[R]:
    """Returns [fn(x) for x in items], computed by this process and `children` forked ones
    (default `children_for(len(items))`), item i by worker i mod (children + 1). A child's
    results travel as JSON: `encode` makes one JSON data, `decode` makes it a result again."""
    global _in_map
    count = children_for(len(items)) if children is None else (children if fork_safe() else 0)
    if count <= 0 or _in_map:
        return [fn(x) for x in items]
    shares = [list(range(w, len(items), count + 1)) for w in range(count + 1)]
    _in_map = True  # the children inherit it
    try:
        started = [_start(lambda x: encode(fn(x)), items, share) for share in shares[1:]]
        results: dict[int, Any] = {i: fn(items[i]) for i in shares[0]}
        for child in started:
            if child is not None:
                for i, data in _join(child).items():
                    try:
                        results[i] = decode(data)
                    except Exception:  # made again below, where any error is the loop's own
                        continue
    finally:
        _in_map = False
    return [
        results[i] if results.get(i, _FAILED) is not _FAILED else fn(items[i])
        for i in range(len(items))
    ]


def _start(fn: Callable[[Any], Any], items: Sequence[Any], share: list[int]) -> Any:
    """Forks a child computing `share`; returns (pid, read end), or None if fork failed."""
    try:
        read, write = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: compute, send, leave without the parent's clean-ups
        code = 1
        try:
            os.close(read)
            done: dict[int, Any] = {}
            for i in share:
                try:
                    done[i] = fn(items[i])
                except Exception:  # the parent computes it again and raises it there
                    done[i] = _FAILED
            data = json.dumps({str(i): r for i, r in done.items() if r is not _FAILED}).encode()
            while data:  # a pipe, not a file: no atomic-write helper applies
                data = data[os.write(write, data) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _join(child: Any) -> dict[int, Any]:
    """Returns the results a child sent ({} if it died before sending them all)."""
    pid, read = child
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    try:
        found = json.loads(data)
        return {int(i): r for i, r in found.items()} if isinstance(found, dict) else {}
    except (ValueError, AttributeError):
        return {}
