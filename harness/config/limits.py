"""Time limits on the worker processes that run JAX: no call into a user's program may hang
the study (harness.study.workerproc enforces them)."""

from __future__ import annotations

import dataclasses

from harness.config.fields import ranged


@dataclasses.dataclass(frozen=True)
class Limits:
    """How long the supervisor waits for a worker before it kills it and records why."""

    preflight_s: float = ranged(
        600.0,
        1.0,
        86400.0,
        "seconds for a worker's start and the preflight (imports, tracing "
        "the program, compiling each option set)",
    )
    call_s: float = ranged(
        3600.0,
        1.0,
        86400.0,
        "seconds for each worker call: one variant's capture, the "
        "ceilings, the timing stage (which gets its budget on top)",
    )
    stopped_s: float = ranged(
        10.0, 0.5, 3600.0, "seconds a worker may stay stopped (SIGSTOP) before it is killed"
    )
