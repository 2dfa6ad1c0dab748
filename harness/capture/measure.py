"""Clocks for compile pauses and steps: jax.monitoring events and block_until_ready timings."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_EVENT = "/jax/core/compile/backend_compile_duration"

_sinks: list[list[tuple[str, float]]] = []
_registered = False


def _listener(event: str, duration: float, **kwargs: Any) -> None:
    del kwargs
    for sink in _sinks:
        sink.append((event, float(duration)))


@contextlib.contextmanager
def compile_events() -> Iterator[list[tuple[str, float]]]:
    """Yields a list that fills with (event, seconds) from jax.monitoring while the block runs."""
    global _registered
    if not _registered:
        jax.monitoring.register_event_duration_secs_listener(_listener)
        _registered = True
    sink: list[tuple[str, float]] = []
    _sinks.append(sink)
    try:
        yield sink
    finally:
        _sinks.remove(sink)


def summarize_events(events: list[tuple[str, float]]) -> dict[str, float | int]:
    """Returns trace, lower and XLA compile seconds, and how many backend compiles ran."""

    def total(name: str) -> float:
        return sum(d for e, d in events if e == name)

    return {
        "trace_s": total(TRACE_EVENT),
        "lower_s": total(LOWER_EVENT),
        "xla_compile_s": total(BACKEND_EVENT),
        "backend_compiles": sum(1 for e, _ in events if e == BACKEND_EVENT),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Returns fn()'s result, made ready, and the wall seconds it took."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - start


def step_times(fn: Callable[[], Any], warmup: int, steps: int) -> list[float]:
    """Returns the wall seconds of `steps` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    return [timed(fn)[1] for _ in range(steps)]


def pipelined_step_time(fn: Callable[[], Any], steps: int) -> float:
    """Returns wall seconds per call when `steps` calls are issued back to back, blocking once.

    Blocking after every step (step_times) leaves the device idle while the host dispatches
    the next call; this is the time per step when dispatch overlaps the device's work.
    """
    start = time.perf_counter()
    out = None
    for _ in range(steps):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / steps


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def explained_cache_misses() -> Iterator[list[str]]:
    """Yields a list of JAX's cache-miss explanations logged while the block runs."""
    handler = _Collect()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False  # kept in recompile.txt, not on stderr
    previous = jax.config.jax_explain_cache_misses
    jax.config.update("jax_explain_cache_misses", True)
    try:
        yield handler.messages
    finally:
        jax.config.update("jax_explain_cache_misses", previous)
        logger.propagate = propagate
        logger.removeHandler(handler)
