"""One optional probe's failure, as a capture records it and the summary keeps it (kept apart
from harness.records.summary, which is over its size limit).

A variant's optional probes are the new-shape call (`recompile`), the profiler traces
(`profile`), the dump compile (`dump`), the emitters' dumps (`emitter_dumps`) and the float64
reference (`numerics`). One
that fails records its own failure here; the variant's other results stand.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.store.records import doc


@dataclass(frozen=True)
class ProbeFailure:
    probe: str = doc("`recompile`, `profile`, `dump`, `emitter_dumps` or `numerics`")
    reason: str = doc("the exception's type and first line")


@dataclass(frozen=True)
class ProbeCosts:
    """What each of a variant's capture probes cost, in wall seconds (harness.capture.reuse)."""

    first_call_s: float | None = doc(
        "the first call: trace, lower, compile (a user's: not dumped) and run"
    )
    steady_s: float | None = doc("the warm-up and blocked per-call steps")
    profile_s: float | None = doc("the profiled steady steps (the first call's executable)")
    reference_s: float | None = doc(
        "the float64 reference and the kept outputs: what the capture waited for them"
    )
    recompile_s: float | None = doc(
        "the new-shape call: a real compile, not dumped (its optimized HLO from the executable)"
    )
    ir_s: float | None = doc("the IR ladder, from the dump compile's files (dumped once)")
    keep_s: float | None = doc("the executable kept for the timing worker (not compiled again)")
    # Added after the first result.json with probe_s: absent in older files (null).
    reference_compute_s: float | None = doc(
        "seconds computing the float64 reference itself (null: reused, or not recorded)"
    )
    reference_reused: bool | None = doc(
        "the float64 reference was read from the run's cache, made by an earlier variant with "
        "the same reference key (null: no reference, or not recorded)"
    )
    reference_overlapped: bool | None = doc(
        "the float64 reference was computed in a thread while the first compile ran "
        "(harness.capture.reference.CONCURRENT_CORES)"
    )
    # Added with the device turns (harness.capture.turn): absent in older files (null).
    turn_wait_s: float | None = doc(
        "seconds the compiled variant waited for its turn to measure: the variant before it, "
        "and another's compile running (null: not recorded; harness.capture.turn)"
    )
    compile_wait_s: float | None = doc(
        "seconds it waited for the device before its compile phases (inputs, compile, "
        "recompile) while another variant compiled or measured"
    )
    turn_began: float | None = doc(
        "when its turn to measure began, Unix seconds: its first execution, steady steps, "
        "profile and memory run in the turn, in config order and beside no other device work"
    )
    turn_ended: float | None = doc("when its turn to measure ended, Unix seconds")
    turn_shared: bool | None = doc(
        "other variants' workers were started beside it and took the device in turns "
        "(capture.ahead); false: it had the device alone"
    )
    compiles: tuple[tuple[float, float], ...] | None = doc(
        "each compile phase it held the device's one compile slot for, (began, ended) Unix "
        "seconds: its compile, its new-shape recompile (null: the device was its alone)"
    )
    # Added with the worker timeline: absent in older files (null).
    worker_started: float | None = doc(
        "when the variant's worker process started, Unix seconds (null: the device was its alone)"
    )
    worker_ready: float | None = doc(
        "when that worker's device client was up (JAX imported, the device queried), Unix seconds"
    )
    preparations: tuple[tuple[float, float], ...] | None = doc(
        "each preparation it held the device shared for, (began, ended) Unix seconds: inputs, "
        "parameters, traces and lowerings, which a measurement waits for (null: the device "
        "was its alone)"
    )
    turn_asked: float | None = doc(
        "when it asked for its turn, Unix seconds (a compiled variant: after its first compile "
        "and its float64 reference; an eager one: its first call is in the turn)"
    )
    turn_go: float | None = doc(
        "when the supervisor's go came, Unix seconds (the turn began once every compile and "
        "preparation holding the device had ended)"
    )
    compiles_asked: tuple[float, ...] | None = doc(
        "when it asked for each compile phase in `compiles`, Unix seconds: the slot's idle "
        "time with nobody asking is the capture's, not the contention's"
    )
    # Added with the dump compile (harness.capture.dumping): absent in older files (null).
    dump_s: float | None = doc(
        "the dump compile: the first call's lowering compiled again with the dump options, "
        "reading its autotune results on a GPU (null: not a jit, or not recorded)"
    )
    # Added with the host work that fills a wait for a slot: absent in older files (null).
    capture_ended: float | None = doc(
        "when its capture ended, Unix seconds: every probe done and its files written, "
        "result.json next (null: the device was its alone); after the last compile, a study's "
        "tail"
    )
