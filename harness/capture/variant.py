"""Captures one JAX variant: its compile pauses, IR ladder, profiles, recompile and numerics.

The variant runs the GELU expression, or in a program study the user's own function
(harness.variants.program); `subject_of` hides which, so both are captured alike.

Writes into the variant's folder:
    dump/                 XLA's own dump, names as XLA wrote them
    ir/                   the IR ladder (harness.records.ladder)
    profile/first_call/   jax.profiler traces, kept exactly as jax writes them
    profile/steady/
    profile/recompile/
    timings.json          the blocked per-call times and every jax.monitoring compile event
    recompile.txt         JAX's explanation of the new-shape cache miss
    callback_output.txt   what a host callback printed
and returns the CaptureRecord (result.json) plus the steady-state call the timing stage times.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from harness.capture import dumping, measure, mesh, reference, reuse
from harness.capture import memory as capture_memory
from harness.capture.turn import free as turn_free
from harness.common import userfiles
from harness.common.bounded import BoundedText
from harness.common.precision import narrowest_float
from harness.config.experiment import Experiment, Program, Variant
from harness.frontends.contract import Captured, Context, analytic_flops
from harness.hlo import fingerprint
from harness.hlo.parser import parse_file
from harness.records import ladder, numerics_effect, run_files
from harness.records.memory import MeasuredMemory
from harness.records.numerics import AccuracyFile, LeafAccuracy
from harness.records.numerics_effect import Kept
from harness.records.probes import ProbeFailure
from harness.records.summary import (
    CaptureRecord,
    ExpectedError,
    Numerics,
    Pauses,
    ProgramRecord,
    Recompile,
    XlaCost,
)
from harness.store import io
from harness.store.runfolder import (
    EXPECTED_ERROR_FILE,
    RECOMPILE_FILE,
    VariantFolder,
)
from harness.variants import accuracy, expression, program, program_mesh, references, sharded


def failed_probe(probe: str, e: BaseException) -> ProbeFailure:
    """Returns an optional probe's failure: its name, the exception's type and first line."""
    text = str(e).strip()
    first = text.splitlines()[0][:300] if text else ""
    return ProbeFailure(probe, f"{type(e).__name__}: {first}" if first else type(e).__name__)


@contextlib.contextmanager
def profiled(
    directory: Path, enabled: bool, failures: list[ProbeFailure] | None = None
) -> Iterator[None]:
    """Runs the block inside a jax.profiler trace into `directory` when enabled. With
    `failures`, a profiler that cannot start or stop is recorded there (the `profile` probe)
    and the block still runs: the profile is optional, the block's own errors are not."""
    if not enabled:
        yield
        return
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # the Python tracer floods the trace and slows the steps
    try:
        jax.profiler.start_trace(str(directory), profiler_options=options)
    except Exception as e:
        if failures is None:
            raise
        failures.append(failed_probe("profile", e))
        yield
        return
    try:
        yield
    finally:
        try:
            jax.profiler.stop_trace()
            drop_trace_json(directory)
        except Exception as e:
            if failures is None:
                raise
            failures.append(failed_probe("profile", e))


# jax's profiler writes the session twice, as `<host>.xplane.pb` and as a Chrome trace
# `<host>.trace.json.gz` beside it (jaxlib 0.10's stop_and_export has no option to skip it;
# ProfilerSession.stop() would hand back the XSpace for us to lay out as jax does). Nothing
# reads the JSON copy: the profile readers and XProf read the xplane, and the analysis writes
# its own attributed timeline (timeline.perfetto.json.gz).
TRACE_JSON_SUFFIX = ".trace.json.gz"


def drop_trace_json(directory: Path) -> None:
    """Removes the `*.trace.json.gz` jax's profiler wrote beside each `*.xplane.pb` under
    `directory` (`plugins/profile/<run>/`); a trace with no xplane beside it is left."""
    sessions = directory / "plugins" / "profile"
    for path in sorted(sessions.glob(f"*/*{TRACE_JSON_SUFFIX}")) if sessions.is_dir() else ():
        xplane = path.with_name(path.name.removesuffix(TRACE_JSON_SUFFIX) + ".xplane.pb")
        if xplane.is_file() and not path.is_symlink() and path.is_file():
            path.unlink()


@contextlib.contextmanager
def _window(exp: Experiment, ctx: Context, name: str) -> Iterator[list[tuple[str, float]]]:
    """Profiles one named call into profile/<name>/ and yields its jax.monitoring events."""
    with (
        measure.compile_events() as events,
        profiled(ctx.variant_dir / "profile" / name, exp.profile.enabled, ctx.failures),
        jax.profiler.StepTraceAnnotation(name, step_num=0),
    ):
        yield events


def xla_cost(compiled: Any) -> XlaCost:
    """Returns XLA's cost analysis of a compiled program (older jax returned a list)."""
    try:
        cost = compiled.cost_analysis()
    except Exception as e:  # some backends do not implement it
        return XlaCost(error=str(e).splitlines()[0][:300] if str(e) else type(e).__name__)
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    cost = cost or {}

    def value(key: str) -> float | None:
        v = cost.get(key)
        return float(v) if isinstance(v, int | float) else None

    return XlaCost(value("flops"), value("bytes accessed"), value("transcendentals"), None)


@dataclasses.dataclass(frozen=True)
class Subject:
    """What a variant runs, whichever study it is: the function (XLA names the module after
    it), its arguments placed on the devices with the new-shape call's, and how its result is
    judged. In a program study also the program and a `describe` of what was studied."""

    fn: Callable[..., Any]
    placed: sharded.Placed
    judge: Callable[[Any], Numerics]
    program: Program | None = None
    describe: Callable[[Any, str, float | None], ProgramRecord] | None = None
    # What the compiler-effect rules keep of a result: each leaf's values, its float64
    # reference's (same shapes) and its errors (numerics_effect.Kept).
    kept: Callable[[Any], Kept] | None = None
    # The float64 reference judge and kept compare with: computed once per run and key,
    # read from the run's cache where another variant made it (harness.capture.reference).
    reference: reference.Pending | None = None

    @property
    def module_re(self) -> str:
        """The dump filter for the module jit compiles: `jit_<name>` when the name is a plain
        identifier (jax uses it as it is), else any `jit_` module, its real name read back
        after the compile."""
        name = getattr(self.fn, "__name__", "")
        return f"^jit_{name}$" if name.isidentifier() else "^jit_.*$"


def subject_of(exp: Experiment, variant: Variant) -> Subject:
    """Returns what the variant runs: the GELU expression of its problem and frontend, or in a
    program study the user's function on its seeded parameters and inputs."""
    if not variant.program.enabled:
        fn = expression.build_function(variant)
        inputs = expression.inputs_for(variant.problem, exp.seed)
        placed = sharded.place(variant, fn, inputs)  # unsharded: fn and the inputs as they are
        rows = accuracy.sample_rows(variant.problem.m, exp.measure.numerics_rows)
        gelu_ref = reference.Pending(
            expression.reference_key(variant.problem, variant.mode_spec, exp.seed, rows),
            lambda: (
                (accuracy.reference(variant.problem, variant.mode_spec, inputs, rows),),
                None,
            ),
            overlappable=True,  # NumPy only: no JAX event or profile of its own
        )
        return Subject(
            fn,
            placed,
            lambda y: _numerics(variant, sharded.gathered(y), rows, gelu_ref),
            kept=lambda y: _gelu_kept(variant, sharded.gathered(y), rows, gelu_ref),
            reference=gelu_ref,
        )
    p, seed = variant.program, exp.seed
    fn = program.bound(p)
    args = program.args_for(p, seed)
    made: dict[str, program.ProgramArgs] = {}

    def halved() -> tuple[Any, ...]:
        if "new" not in made:
            made["new"] = program.new_shape_args(p, seed)
        return made["new"].args

    # Once per run and key: where the variant's own kwargs fail in float64, the fallback's
    # reference (and its note) is what is kept. A jit on the CPU: never beside a measurement.
    pending = reference.Pending(
        program.reference_key(p, exp.program.kwargs, seed),
        lambda: references.reference_for(
            p, exp.program.kwargs, args, seed, exp.measure.reference_max_flops
        ),
    )

    def judge(y: Any) -> Numerics:
        ref, note = pending.result()
        judged = program.numerics(y, ref, program.computed_in(args))
        return dataclasses.replace(judged, reference_note=note) if note else judged

    def describe(y: Any, flops_source: str, gemm_flops: float | None) -> ProgramRecord:
        try:
            ref, _ = pending.result()
        except Exception:  # the numerics probe recorded why; the record is made without it
            ref = None
        return program.describe(p, args, made.get("new"), y, ref, flops_source, gemm_flops)

    def kept(y: Any) -> Kept:
        ref = pending.result()[0]
        leaves = program.judged_leaves(y, ref, program.computed_in(args))
        return [program.host_leaf(leaf) for leaf in jax.tree.leaves(y)], list(ref), leaves

    placed = (
        program_mesh.place(variant, fn, args.args, halved)
        if variant.sharding.enabled
        else sharded.Placed(fn=fn, jit_kwargs={}, args=args.args, halved=halved)
    )
    return Subject(placed.fn, placed, judge, p, describe, kept, pending)


# What builds a variant's Subject (its frontend's `subject`); None: subject_of.
MakeSubject = Callable[[Experiment, Variant], Subject] | None


def _module_name(compiled: Any, fallback: str) -> str:
    """Returns the name XLA gave the compiled module (`HloModule <name>, ...`)."""
    try:
        head = compiled.as_text()[:400]
    except Exception:  # a backend that cannot print its module
        return fallback
    found = re.match(r"\s*HloModule\s+([^\s,]+)", head)
    return found.group(1) if found else fallback


def flops_of(
    subject: Subject, variant: Variant, y: Any, before_text: str | None
) -> tuple[float | None, str, ProgramRecord | None]:
    """Returns (flops_analytic, where it comes from, the program record).

    The GELU study: 2·rows·k·n (`formula`). A program study: the config's `program.flops`
    (`config`), else our cost model of `before_text`, the unoptimized HLO (`hlo_before`);
    the record also keeps the dots' and convolutions' share, which a GEMM ceiling bounds.
    """
    if subject.program is None or subject.describe is None:
        return analytic_flops(variant), "formula", None
    flops, gemm = program.hlo_flops(before_text) if before_text else (None, None)
    given = subject.program.flops
    source = "config" if given is not None else "hlo_before"
    return (given if given is not None else flops), source, subject.describe(y, source, gemm)


def _hlo_before(variant_dir: Path) -> str | None:
    """Returns the ladder's unoptimized HLO (`hlo_before`) of a jit variant, if dumped."""
    found = ladder.read_ladder(variant_dir / "ir").hlo_files("hlo_before")
    return userfiles.read_text(found[0], userfiles.DUMP) if len(found) == 1 else None


def capture_variant(
    exp: Experiment, variant: Variant, ctx: Context, make_subject: MakeSubject = None
) -> Captured:
    """Measures one variant; returns its record (status "ok") and its call. Raises on failure.

    `make_subject(exp, variant)` builds what it runs, its frontend's (harness.frontends):
    `subject_of` unless given. It is called after JAX's caches are cleared, as the capture's
    own compiles are."""
    jax.clear_caches()  # every variant pays its own compiles, whatever ran before it
    if variant.sharding.enabled:
        reason = mesh.unavailable(variant)
        if reason is not None:
            return Captured(
                CaptureRecord(status="skipped", reason=reason, mode=variant.mode, module=None)
            )
    turn = ctx.turn if ctx.turn is not None else turn_free()  # None: the device alone
    with turn.preparing():  # its inputs and parameters are made on the device
        subject = (make_subject or subject_of)(exp, variant)
    ctx = dataclasses.replace(ctx, failures=[], costs={}, turn=turn)
    if subject.reference is not None:
        subject.reference.use(ctx.references, reference.may_overlap())
    started = time.perf_counter()
    buffer = BoundedText()  # kept to a bound: a callback may print without end
    try:
        with contextlib.redirect_stdout(buffer):
            if variant.mode_spec.op_by_op:
                record, call = _capture_eager(exp, variant, subject, ctx)
            elif variant.mode_spec.expects_trace_error:
                record, call = _expected_trace_error(variant, subject, ctx), None
            else:
                record, call = _capture_jit(exp, variant, subject, ctx)
    finally:  # a reference still computing never runs beside the next variant
        if subject.reference is not None:
            subject.reference.wait()
        ctx.turn.end()  # a capture that raised hands the device on too
    record = dataclasses.replace(
        record,
        callback_lines=io.write_callback_output(ctx.variant_dir, buffer),
        wall_s=time.perf_counter() - started,
        probe_failures=tuple(ctx.failures),
        probe_s=reuse.costs(ctx.costs, subject.reference and subject.reference.spent(), ctx.turn)
        if ctx.costs
        else None,
    )
    if call is not None and mesh.blocks_every_call():
        call = mesh.blocking(call)
    return Captured(record, call)


def _steady(exp: Experiment, ctx: Context, call: Callable[[], Any]) -> list[float]:
    """Returns blocked per-call times, then profiles `profile.steps` marked steps."""
    with reuse.spent(ctx.costs, "steady"):
        times = measure.step_times(call, exp.measure.warmup, exp.measure.steps)
    if ctx.barrier is not None:
        ctx.barrier("the steady profile")
    with (
        reuse.spent(ctx.costs, "profile"),
        profiled(ctx.variant_dir / "profile" / "steady", exp.profile.enabled, ctx.failures),
    ):
        for i in range(exp.profile.steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                jax.block_until_ready(call())
    return times


def _numerics(variant: Variant, y: Any, rows: np.ndarray, ref: reference.Pending) -> Numerics:
    (expected,), _ = ref.result()
    return accuracy.numerics(y, expected, rows, accuracy.tolerance(variant.problem))


def _gelu_kept(variant: Variant, y: Any, rows: np.ndarray, ref: reference.Pending) -> Kept:
    """The GELU expression's result on the rows its numerics check, their float64 reference
    and its one leaf's errors."""
    (expected,), _ = ref.result()
    got = np.asarray(y)[..., rows, :]
    n = accuracy.numerics(y, expected, rows, accuracy.tolerance(variant.problem))
    dtype = narrowest_float((variant.problem.dtype, variant.problem.weight_dtype))
    leaf = LeafAccuracy(
        "",
        dtype,
        tuple(int(d) for d in got.shape),
        n.rel_fro_err,
        n.tolerance,
        n.ok,
        max_abs_err=n.max_abs_err,
        max_rel_err=n.max_rel_err,
    )
    return [got], [expected], [leaf]


def _judged(subject: Subject, y: Any, ctx: Context) -> Numerics | None:
    """Returns the result's numerics, and keeps its per-leaf errors and values
    (numerics.json, outputs.npz) for the compiler-effect rules; a reference that fails is the
    `numerics` probe's failure (recorded in ctx), not the variant's, and a program's outputs
    are still kept (their references not a number), so each variant is still compared with the
    baseline's."""
    try:
        with reuse.spent(ctx.costs, "reference"):
            judged = subject.judge(y)
            if subject.kept is not None:
                keep_numerics(VariantFolder(ctx.variant_dir), *subject.kept(y))
        return judged
    except Exception as e:
        ctx.failures.append(failed_probe("numerics", e))
        if subject.kept is not None and subject.program is not None:
            # The compiler-effect question needs the outputs, not a reference: kept without.
            with contextlib.suppress(Exception):
                keep_numerics(VariantFolder(ctx.variant_dir), *program.unreferenced(y))
        return None


def keep_numerics(
    folder: VariantFolder,
    values: list[np.ndarray],
    references: list[np.ndarray],
    leaves: list[LeafAccuracy],
) -> None:
    """Writes the result's kept values with their references' (outputs.npz) and its per-leaf
    errors (numerics.json)."""
    kept = numerics_effect.write_outputs(folder.outputs, values, references)
    leaves = [
        dataclasses.replace(leaf, kept=n, sampled=sampled)
        for leaf, (n, sampled) in zip(leaves, kept, strict=True)
    ]
    record = AccuracyFile(1, tuple(leaves), folder.outputs.name, numerics_effect.SAMPLE_SEED)
    run_files.write(folder.numerics, record)


def _recompile(
    exp: Experiment,
    ctx: Context,
    halved: Callable[[], Any],
    call: Callable[[Any], Any],
    meanwhile: Callable[[], object] = lambda: None,
) -> Recompile | None:
    """Calls with the new shapes; returns the pause and JAX's explanation of the cache miss.
    `call(half)` takes its own phases of the device (ctx.turn): the compile phase only for what
    compiles or runs. `halved()` makes the new inputs before, beside other variants' compiles:
    it is eager work with compiles of its own, outside the timed window, and `meanwhile()`
    runs after it, still outside. What the call waited for the device is not its pause. A
    call that fails is the `recompile` probe's failure, recorded in ctx; the variant stands."""
    if not exp.measure.recompile:
        return None
    try:
        with ctx.turn.preparing():
            half = jax.block_until_ready(halved())
        meanwhile()
        waits_before = ctx.turn.compile_wait_s
        with reuse.spent(ctx.costs, "recompile"):
            found = _recompiled(exp, ctx, lambda: call(half))
        waited = ctx.turn.compile_wait_s - waits_before
        ctx.costs["recompile"] -= waited
        return dataclasses.replace(found, seconds=found.seconds - waited)
    except Exception as e:
        ctx.failures.append(failed_probe("recompile", e))
        return None


def _fill_wait(ctx: Context, dump: Callable[[], object]) -> None:
    """Makes the dump compile before the recompile asks for a compile slot, where the wait
    would be long (`DeviceTurn.long_wait`), else nothing (it comes after the recompile: a slot
    never idles for host work). Made after the recompile, the last variant's is the study's
    tail: on the H200 a scanned encoder's last dump compile (8.3 s), decided at its turn's end,
    ran after every compile. A program's float64 reference stays after the recompile: made in
    the wait too, it outlasted one (the slot stood idle 3.9 s), and that study held the slot
    102.5 s against 85.6 s in another command (alone sums there moved 13% between commands:
    not a resolved slowdown).
    """
    if ctx.turn.long_wait():
        dump()


def _recompiled(exp: Experiment, ctx: Context, call: Callable[[], Any]) -> Recompile:
    # The profiler starts and stops outside the compile phase: the slot holds XLA's compile.
    with measure.explained_cache_misses() as messages, _window(exp, ctx, "recompile") as events:
        _, seconds = measure.timed(call)
    explanation = "\n\n".join(m for m in messages if "CACHE MISS" in m) or None
    if explanation:
        io.write_text(ctx.variant_dir / RECOMPILE_FILE, explanation + "\n")
    counted = measure.summarize_events(events)
    return Recompile(seconds, explanation, counted["backend_compiles"], counted["xla_compile_s"])


def _capture_jit(
    exp: Experiment, variant: Variant, subject: Subject, ctx: Context
) -> tuple[CaptureRecord, Callable[[], Any]]:
    with reuse.autotune_folder(ctx.platform, ctx.executables) as private:
        return _capture_compiled(exp, variant, subject, ctx, private)


def _capture_compiled(
    exp: Experiment, variant: Variant, subject: Subject, ctx: Context, private: Path | None
) -> tuple[CaptureRecord, Callable[[], Any]]:
    dump_dir = ctx.variant_dir / "dump"
    dump = dumping.dump_options(dump_dir, subject.module_re, exp.dump, ctx.platform)
    tuned = reuse.autotune_options(ctx.platform, variant.xla_options, variant.name, private)
    dump = {**reuse.dump_compile_options(dump, variant.xla_options), **tuned}
    placed = subject.placed
    # The variant's options on the jit, the dump's on its dump compile alone: the first call
    # and the new-shape recompile are a user's compiles (harness.capture.dumping).
    jitted = jax.jit(placed.fn, compiler_options=dict(variant.xla_options), **placed.jit_kwargs)
    args = placed.args
    devices = capture_memory.devices_of(args)
    memory_before = capture_memory.before(devices)
    waits_before = ctx.turn.waited_s + ctx.turn.compile_wait_s
    with reuse.spent(ctx.costs, "first_call"), _window(exp, ctx, "first_call") as events:
        # The trace and the lowering are the host's work, one core's: beside other variants'
        # compiles, as inputs are made. Only XLA's compile (its autotuner times kernels on the
        # device) runs alone among compiles.
        with ctx.turn.preparing():
            traced, trace_s = measure.timed(lambda: jitted.trace(*args))
            lowered, lower_s = measure.timed(traced.lower)
        with ctx.turn.compiling():  # never beside a measurement (capture.compiles: others)
            if subject.reference is not None:  # in a thread, where the cores allow it
                subject.reference.start()
            compiled, xla_compile_s = measure.timed(lambda: lowered.compile(compiler_options=tuned))
        # Untimed, before the first execution: no timed call shares the CPU with it. Waited
        # for outside the compile phase, so the next variant compiles meanwhile (a scanned
        # LM's float64 reference took 6 s on the H200's host, all of it held the compiles up).
        waited = subject.reference.wait() if subject.reference is not None else 0.0
        ctx.turn.begin()  # the device alone, from the first execution to the memory
        y, execute_s = measure.timed(lambda: compiled(*args))
    # What the variant waited for others (their measurements, its turn) is not its call's.
    ctx.costs["first_call"] -= ctx.turn.waited_s + ctx.turn.compile_wait_s - waits_before
    if subject.reference is not None and subject.reference.overlapped:
        ctx.costs["first_call"] -= waited  # the wait is the reference's cost, not the call's
        ctx.costs["reference"] = waited
    pauses = Pauses(
        first_call_s=trace_s + lower_s + xla_compile_s + execute_s,
        compile_s=trace_s + lower_s + xla_compile_s,
        trace_s=trace_s,
        lower_s=lower_s,
        xla_compile_s=xla_compile_s,
        first_execute_s=execute_s,
        backend_compiles=measure.summarize_events(events)["backend_compiles"],
        fresh_process=ctx.fresh_process,
        compile_slots=ctx.turn.compile_slots,
    )

    def call() -> Any:
        return compiled(*args)

    times = _steady(exp, ctx, call)
    memory = capture_memory.measured(compiled, devices, memory_before, ctx.fresh_process)
    ctx.turn.end()  # the next variant may measure; this one compiles again beside it
    choices = reuse.autotune_choices(tuned)  # the first compile's, before the dump compile's
    module = _module_name(compiled, "jit_" + getattr(subject.fn, "__name__", "unnamed"))
    again: list[Any] = []

    @functools.cache  # once: before the recompile, where it fills a wait, else after it
    def dump_once() -> str | None:
        return _dump_compile(lowered, dump, compiled, ctx, bool(tuned))

    recompile = _recompile(
        exp,
        ctx,
        placed.halved,
        lambda half: reuse.compiled_again(jitted, half, again, ctx.turn),
        lambda: _fill_wait(ctx, dump_once),
    )
    dump_note = dump_once()
    numerics = _judged(subject, y, ctx)  # CPU work: the float64 reference, beside the device
    ir_started = time.perf_counter()
    dumped = ladder.dump_modules(dump_dir.iterdir()) if dump_dir.exists() else ()
    modules = [m for m in dumped if m.name == module]
    writer = ladder.LadderWriter(ctx.variant_dir / "ir")
    writer.text("jaxpr", str(traced.jaxpr))
    writer.text("stablehlo", lowered.as_text())
    try:
        if modules:
            writer.module(modules[0])
        if again:
            writer.text("hlo_after_recompile", again[0].as_text())
    except Exception as e:  # XLA's dump, the emitters' files with it: optional
        ctx.failures.append(failed_probe("emitter_dumps", e))
    writer.finish()
    ctx.costs["ir"] = time.perf_counter() - ir_started
    run_files.write_timings(ctx.variant_dir, times, events)
    if ctx.executables is not None:
        with reuse.spent(ctx.costs, "keep"):
            reuse.keep_executable(compiled, ctx.executables / variant.name)
    before = _hlo_before(ctx.variant_dir) if subject.program is not None else None
    if subject.program is not None and before is None:
        before = lowered.as_text(dialect="hlo")  # no dump: the same module, from the lowering
    flops, flops_source, studied = flops_of(subject, variant, y, before)
    record = CaptureRecord(
        status="ok",
        reason=None,
        mode=variant.mode,
        module=module,
        pauses=pauses,
        recompile=recompile,
        latency_blocked_s=tuple(times),
        numerics=numerics,
        xla_cost=xla_cost(compiled),
        flops_analytic=flops,
        flops_analytic_source=flops_source,
        program=studied,
        autotune_choices=choices,
        notes=(() if modules else (dumping.missing_note(module, len(dumped), tuple(ctx.failures)),))
        + ((dump_note,) if dump_note else ()),
        mesh=dataclasses.replace(placed.record, output_sharding=sharded.output_sharding(y))
        if placed.record is not None
        else None,
        memory=memory,
    )
    return record, call


def _dump_compile(
    lowered: Any, options: dict[str, Any], measured: Any, ctx: Context, tuned: bool
) -> str | None:
    """The variant's dumps, from a compile of their own (harness.capture.dumping); one that
    fails is the `dump` probe's failure, recorded in ctx, and the variant stands."""
    try:
        with reuse.spent(ctx.costs, "dump"):
            return dumping.compile_dumped(lowered, options, measured, ctx.turn, tuned)
    except Exception as e:
        ctx.failures.append(failed_probe("dump", e))
        return None


def _expected_trace_error(variant: Variant, subject: Subject, ctx: Context) -> CaptureRecord:
    """Traces a function that branches in Python on a traced value; JAX must refuse it."""
    try:
        jax.jit(subject.fn).trace(*subject.placed.args)
    except jax.errors.ConcretizationTypeError as e:
        message = str(e)
        io.write_text(ctx.variant_dir / EXPECTED_ERROR_FILE, message + "\n")
        return CaptureRecord(
            status="ok",
            reason="expected: JAX cannot branch in Python on a traced value inside jit",
            mode=variant.mode,
            module=None,
            expected_error=ExpectedError(type(e).__name__, message.splitlines()[0]),
        )
    raise RuntimeError("a Python branch on a traced value compiled; JAX was expected to refuse it")


def _capture_eager(
    exp: Experiment, variant: Variant, subject: Subject, ctx: Context
) -> tuple[CaptureRecord, Callable[[], Any]]:
    fn, args = subject.fn, subject.placed.args
    dump_dir = ctx.variant_dir / "dump"
    options = dumping.dump_options(dump_dir, ".*", exp.dump, ctx.platform)
    options.pop("xla_dump_hlo_pass_re", None)  # one file per pass per primitive is noise
    devices = capture_memory.devices_of(args)
    memory_before = capture_memory.before(devices)
    # Op by op, each primitive compiles as it first runs: the whole call is the measurement.
    ctx.turn.begin()
    with (
        reuse.spent(ctx.costs, "first_call"),
        dumping.eager_compiles_dumped_to(options) as dumped,
        _window(exp, ctx, "first_call") as events,
    ):
        y, first_call_s = measure.timed(lambda: fn(*args))
    counted = measure.summarize_events(events)

    def call() -> Any:
        return fn(*args)

    times = _steady(exp, ctx, call)
    peaks, memory_note = capture_memory.device_peaks(devices, memory_before, ctx.fresh_process)
    ctx.turn.end()  # the next variant may measure; this one compiles again beside it

    def eager_again(half: Any) -> Any:
        with ctx.turn.compiling():  # each primitive compiles as it first runs
            return fn(*half)

    recompile = _recompile(exp, ctx, subject.placed.halved, eager_again)
    numerics = _judged(subject, y, ctx)  # CPU work: the float64 reference, beside the device
    if recompile is not None:
        recompile = dataclasses.replace(
            recompile,
            explanation=(
                f"eager dispatch compiled {recompile.backend_compiles} primitive modules for the "
                "new shape; each primitive has its own cache, so JAX logs no tracing-cache miss"
            ),
        )
    ir_started = time.perf_counter()
    modules = ladder.dump_modules(dump_dir.iterdir()) if dump_dir.exists() else ()
    writer = ladder.LadderWriter(ctx.variant_dir / "ir")
    writer.text("jaxpr", str(jax.make_jaxpr(fn)(*args)))
    try:
        for module in modules:
            writer.eager_module(module)
    except Exception as e:  # XLA's dumps of the primitives: optional
        ctx.failures.append(failed_probe("emitter_dumps", e))
    writer.finish()
    ctx.costs["ir"] = time.perf_counter() - ir_started
    run_files.write_timings(ctx.variant_dir, times, events)
    # Eager dispatch has no module of the whole function: its FLOPs are those of the module
    # jit would compile, lowered (not compiled) after every measurement.
    before = (
        jax.jit(fn).lower(*args).as_text(dialect="hlo") if subject.program is not None else None
    )
    flops, flops_source, studied = flops_of(subject, variant, y, before)
    record = CaptureRecord(
        status="ok",
        reason=None,
        mode=variant.mode,
        module=None,
        eager_modules=tuple(m.name for m in modules),
        pauses=Pauses(
            first_call_s=first_call_s,
            compile_s=counted["trace_s"] + counted["lower_s"] + counted["xla_compile_s"],
            trace_s=counted["trace_s"],
            lower_s=counted["lower_s"],
            xla_compile_s=counted["xla_compile_s"],
            backend_compiles=counted["backend_compiles"],
            fresh_process=ctx.fresh_process,
            compile_slots=ctx.turn.compile_slots,
        ),
        recompile=recompile,
        latency_blocked_s=tuple(times),
        numerics=numerics,
        flops_analytic=flops,
        flops_analytic_source=flops_source,
        program=studied,
        notes=()
        if dumped
        else ("eager modules not dumped: this JAX release builds compile options elsewhere",),
        memory=MeasuredMemory(devices=peaks, note=memory_note),
    )
    return record, call


def compile_for_timing(
    exp: Experiment,
    variant: Variant,
    workdir: Path,
    executables: Path | None = None,
    make_subject: MakeSubject = None,
) -> tuple[Callable[[], Any], str | None]:
    """Returns a steady-state call of a variant another worker captured, and a note.

    The program the capture compiled is loaded when it was kept in `executables` (the
    supervisor's private folder): the timing then times exactly the program captured,
    without paying its compile (and, on a GPU, its autotuning) a second time. Otherwise the
    variant is compiled again with its own options (no dumps). Either way its optimized HLO
    is compared with the captured one, and the note says whether the program timed is the
    program captured.
    """

    subject = (make_subject or subject_of)(exp, variant)
    fn, placed = subject.fn, subject.placed
    args = placed.args
    if variant.mode_spec.op_by_op:
        return (lambda: fn(*args)), "eager: called again in the timing process"
    # The variant's own autotune results, where its capture kept them (harness.capture.reuse).
    tuned = reuse.autotune_options(
        jax.default_backend(), variant.xla_options, variant.name, executables
    )
    lowered = jax.jit(
        placed.fn, compiler_options={**variant.xla_options, **tuned}, **placed.jit_kwargs
    ).lower(*args)
    compiled, note = reuse.load_executable(
        lowered, executables / variant.name if executables else None
    )
    if compiled is None:
        compiled = lowered.compile()
        if tuned:
            note += ", with the autotune results its capture kept"
    found = ladder.read_ladder(workdir / "variants" / variant.name / "ir").hlo_files("hlo_after")
    if found:
        # Folded: the dump prints a tuple element read inline, as_text() as an instruction.
        same = fingerprint.hlo_text_digest(
            compiled.as_text(), fold_tuple_reads=True
        ) == fingerprint.hlo_digest(parse_file(found[0]), fold_tuple_reads=True)
        note += (
            "; its optimized HLO equals the captured one"
            if same
            else "; its optimized HLO DIFFERS from the captured one (autotuning chose anew?)"
        )

    def call() -> Any:
        return compiled(*args)

    return (mesh.blocking(call) if mesh.blocks_every_call() else call), note
