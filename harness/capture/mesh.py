"""Devices for sharded variants: forcing host devices on a CPU, and skipping what cannot run.

jax reads its CPU device count once, when its backends initialize, so the count must be set
before the first device query of the process: the worker calls `request_host_devices` first
thing in its `hello` job, with the largest mesh the config asks for on a CPU. On a GPU the
devices present are used (the setting only affects the CPU backend). A variant whose mesh
needs more devices than the process has is skipped, with the reason, by `unavailable`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from harness.config.experiment import Variant

_FORCE_FLAG = re.compile(r"--xla_force_host_platform_device_count=\d+")


def request_host_devices(count: int) -> str:
    """Asks jax for `count` CPU devices before any backend exists; returns how it did it.

    Uses the `jax_num_cpu_devices` option; a jax without it gets
    `--xla_force_host_platform_device_count` in XLA_FLAGS, which XLA reads at the same moment.
    Does nothing for count <= 1. Raises RuntimeError when a backend is already running.
    """
    if count <= 1:
        return "one device: nothing forced"
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", count)
        return f"jax_num_cpu_devices={count}"
    except AttributeError:
        flags = _FORCE_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
        flag = f"--xla_force_host_platform_device_count={count}"
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
        return f"XLA_FLAGS {flag}"


def unavailable(variant: Variant) -> str | None:
    """Returns why a sharded variant cannot run in this process (too few devices), or None."""
    import jax

    need = variant.sharding.devices
    have = jax.device_count()
    if need <= have:
        return None
    return (
        f"its mesh {list(variant.sharding.mesh)} needs {need} devices; "
        f"this {jax.default_backend()} process has {have}"
    )


BLOCKING_NOTE = (
    "blocked per call: on a CPU with several devices XLA deadlocks at a collective's "
    "rendezvous when many multi-device executions are in flight at once, so in such a "
    "process every call waits for the one before"
)


def blocks_every_call() -> bool:
    """True in a CPU process with several devices, where each call must finish before the next
    starts (BLOCKING_NOTE); the timing rounds then time blocked calls for every variant alike."""
    import jax

    return jax.default_backend() == "cpu" and jax.device_count() > 1


def blocking(call: Callable[[], Any]) -> Callable[[], Any]:
    """Returns `call` made to wait for its own result."""
    import jax

    def blocked() -> Any:
        return jax.block_until_ready(call())

    return blocked
