"""What a frontend's capture is given and returns: `Context`, `Captured`, `analytic_flops`.

The protocol (harness.frontends.registry.Frontend) is typed with these, so they live beside
it, below every stage and every framework: a frontend of its own (tests/toy_frontend.py,
plain NumPy) imports them without importing JAX, and no frontend imports another's capture.
The records they carry (the capture record, a probe's failure, the variant, the device's
turn) are named for the type checker only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the records the contract carries: layers above this one
    from harness.capture.turn import DeviceTurn
    from harness.config.experiment import Variant
    from harness.records.probes import ProbeFailure
    from harness.records.summary import CaptureRecord


@dataclasses.dataclass(frozen=True)
class Context:
    """Where a variant is captured and how: its folder, the platform, a fresh process or not."""

    variant_dir: Path
    platform: str
    fresh_process: bool = False
    # A private folder of the supervisor's where the compiled program is kept for the
    # timing worker (a variant captured in a process of its own): None keeps nothing.
    executables: Path | None = None
    # The optional probes that failed while capturing (filled in place by the capture; a
    # fresh list per variant): the recompile, the profile, the emitter dumps, the reference.
    failures: list[ProbeFailure] = dataclasses.field(default_factory=list)
    # Each probe's wall seconds (harness.capture.reuse.spent; a fresh dict per variant).
    costs: dict[str, float] = dataclasses.field(default_factory=dict)
    # In a group of processes, the group's barrier: every process starts its steady profile
    # together, so a collective's time in one process's profile is not its wait for another
    # still timing its blocked calls (harness.capture.distributed).
    barrier: Callable[[str], None] | None = None
    # The run's folder of float64 references, shared by its variants' processes (the
    # supervisor's private one; harness.capture.reference): None computes each variant's own.
    references: Path | None = None
    # The variant's turn on the device (harness.capture.turn), begun by the worker before the
    # inputs; the capture ends it when its device work is over. None: the device is this
    # process's alone (a capture that shares it takes `harness.capture.turn.free()` then).
    turn: DeviceTurn | None = None


@dataclasses.dataclass(frozen=True)
class Captured:
    """A captured variant: its record and, when it ran, one steady-state call to time and the
    function that waits for a call's result (None: `jax.block_until_ready`)."""

    record: CaptureRecord
    call: Callable[[], Any] | None = None
    wait: Callable[[Any], Any] | None = None


def analytic_flops(variant: Variant) -> float:
    """Returns 2·rows·k·n: the GEMM's FLOPs, which dominate the expression (whichever
    framework computes it)."""
    p = variant.problem
    return 2.0 * p.rows * p.k * p.n
