"""Captures one PyTorch variant (the torch_* modes) in the JAX worker, beside the JAX variants.

Eager (`torch_eager`) runs the expression op by op; the other modes run it through
`torch.compile` with the variant's `torch:` options. Each compiled variant is captured inside
`env.torch_capture_env`: Inductor's and Triton's caches, Inductor's debug folder and the
TORCH_TRACE log all live in the variant folder, and the caches are off, so the first call
compiles everything and every artifact is written. Writes into the variant's folder:

    torch/inductor_cache/, torch/triton_cache/   Inductor's and Triton's caches
    torch/debug/                                 Inductor's debug folder, one model__* per graph
    torch/trace/*.log                            the TORCH_TRACE log (tlparse reads it)
    torch.json                                   explain(), Dynamo's compilation metrics, the
                                                 compile ids of the first and new-shape calls
    ir/                                          the IR ladder (harness.records.ladder)
    profile/steady/torch_trace.json              torch.profiler's Chrome trace, as torch wrote it
    timings.json                                 the blocked per-call times
    callback_output.txt                          what a print() inside the function printed

The timing stage times the same callables as JAX's, in the same rounds, with a wait of their
own: `torch.cuda.synchronize()` for CUDA tensors, nothing on a CPU, where torch returns only
when the work is done. A compiled function that saw the new shape is not kept for timing:
Dynamo would run the graph it compiled for the new shape (automatic dynamic shapes make it
shape-polymorphic), not the one captured, so the timing stage compiles the variant again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io as stdio
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.common.bounded import BoundedText
from harness.config.experiment import Experiment, Variant
from harness.frontends.contract import Captured, Context, analytic_flops
from harness.frontends.modes import Mode
from harness.frontends.torch import env
from harness.frontends.torch import expression as tx
from harness.frontends.torch import memory as torch_memory
from harness.frontends.torch.inductor.artifacts import (
    FX_READABLE,
    FX_TRANSFORMED,
    IR_POST,
    IR_PRE,
    OUTPUT_CODE,
    InductorGraph,
)
from harness.frontends.torch.inductor.captured import read_captured
from harness.frontends.torch.inductor.trace_log import FrameCompile
from harness.records import ladder, run_files
from harness.records.summary import (
    CaptureRecord,
    ExpectedError,
    Failure,
    Numerics,
    Pauses,
    Recompile,
)
from harness.records.torch_facts import TorchFacts
from harness.store import io
from harness.store.runfolder import (
    EXPECTED_ERROR_FILE,
    RECOMPILE_FILE,
    TORCH_TRACE_FILE,
    VariantFolder,
)
from harness.variants import accuracy

PROFILE_FILE = TORCH_TRACE_FILE
# Triton's per-kernel files, by ladder stage.
TRITON_FILES = {".ttir": "triton", ".ttgir": "triton", ".llir": "llvm", ".ptx": "ptx"}


def breaks_the_graph(mode: Mode) -> bool:
    """True when the mode's function breaks Dynamo's graph on purpose (a print, a Python
    branch on a tensor's value): with fullgraph=True Dynamo must refuse it."""
    return mode.host_print or mode.python_branch


def waiter(device: str) -> Callable[[Any], Any]:
    """Returns the wait for one call's result: synchronize CUDA, nothing on a CPU."""
    if device != "cuda":
        return _returned

    import torch

    def wait(out: Any) -> Any:
        torch.cuda.synchronize()
        return out

    return wait


def _returned(out: Any) -> Any:
    return out


def _timed(call: Callable[[], Any], wait: Callable[[Any], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = wait(call())
    return out, time.perf_counter() - start


def _step_times(
    call: Callable[[], Any], wait: Callable[[Any], Any], warmup: int, steps: int
) -> list[float]:
    for _ in range(warmup):
        wait(call())
    return [_timed(call, wait)[1] for _ in range(steps)]


def skipped_or_failed(variant: Variant, why: str) -> CaptureRecord:
    """Returns the record of a torch variant that cannot run: skipped without torch, failed
    when torch is there but broken."""
    missing = why == "torch not installed"
    return CaptureRecord(
        status="skipped" if missing else "failed",
        reason=why,
        mode=variant.mode,
        module=None,
        failure=None if missing else Failure(kind="exception", signal=None, exit_code=None),
    )


def capture_torch_variant(exp: Experiment, variant: Variant, ctx: Context) -> Captured:
    """Measures one torch variant; returns its record, its call and its wait. Raises on failure."""
    started = time.perf_counter()
    why = tx.torch_missing()
    if why is not None:
        return Captured(skipped_or_failed(variant, why))
    tx.set_threads(exp.capture.torch_threads)
    device = tx.device_for(ctx.platform)
    inputs = tx.torch_inputs(variant.problem, exp.seed, device)
    fn = tx.build_torch_function(variant)
    wait = waiter(device)
    buffer = BoundedText()  # kept to a bound: a callback may print without end
    allocated = torch_memory.before(device)
    with contextlib.redirect_stdout(buffer):
        if variant.mode_spec.op_by_op:
            record, call = _capture_eager(exp, variant, fn, inputs, wait, ctx)
        else:
            record, call = _capture_compiled(exp, variant, fn, inputs, wait, ctx)
    record = dataclasses.replace(
        record,
        callback_lines=io.write_callback_output(ctx.variant_dir, buffer),
        wall_s=time.perf_counter() - started,
        memory=torch_memory.measured(device, allocated) if record.status == "ok" else None,
    )
    return Captured(record, call, wait if call is not None else None)


# --- steady state, profile and numerics (both modes) ------------------------------------------


def _steady(
    exp: Experiment,
    ctx: Context,
    call: Callable[[], Any],
    wait: Callable[[Any], Any],
    device: str,
    notes: list[str],
) -> list[float]:
    """Returns blocked per-call times, then profiles `profile.steps` steps with torch.profiler
    (a profiler this torch lacks, or one that fails, is a note: the variant still counts)."""
    times = _step_times(call, wait, exp.measure.warmup, exp.measure.steps)
    if exp.profile.enabled:
        try:
            profile_steps(
                ctx.variant_dir / "profile" / "steady" / PROFILE_FILE,
                call,
                wait,
                device,
                exp.profile.steps,
            )
        except Exception as e:
            notes.append(f"torch.profiler not available: {type(e).__name__}: {e}"[:300])
    return times


def profile_steps(
    path: Path, call: Callable[[], Any], wait: Callable[[Any], Any], device: str, steps: int
) -> None:
    """Writes torch.profiler's Chrome trace of `steps` calls, each marked `ProfilerStep#N`,
    after one unrecorded warm-up step; the file is exactly what torch exports."""
    from torch import profiler

    activities = [profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(profiler.ProfilerActivity.CUDA)
    schedule = profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    io.check_inside(path)
    with profiler.profile(activities=activities, schedule=schedule) as prof:
        for _ in range(steps + 1):
            wait(call())
            prof.step()
    prof.export_chrome_trace(str(path))


def _numerics(exp: Experiment, variant: Variant, y: Any) -> Any:
    rows = accuracy.sample_rows(variant.problem.m, exp.measure.numerics_rows)
    ref = tx.reference(variant, exp.seed, rows)
    return accuracy.numerics(tx.to_numpy(y), ref, rows, accuracy.tolerance(variant.problem))


# --- eager ------------------------------------------------------------------------------------


def _capture_eager(
    exp: Experiment,
    variant: Variant,
    fn: tx.TorchFn,
    inputs: tx.TorchInputs,
    wait: Callable[[Any], Any],
    ctx: Context,
) -> tuple[CaptureRecord, Callable[[], Any]]:
    args = (inputs.x, inputs.w, inputs.b)

    def call() -> Any:
        return fn(*args)

    y, first_call_s = _timed(call, wait)
    numerics = _numerics(exp, variant, y)
    notes: list[str] = []
    times = _steady(exp, ctx, call, wait, inputs.device, notes)
    recompile = None
    if exp.measure.recompile:
        x_half = wait(tx.halve_rows(inputs.x))
        _, seconds = _timed(lambda: fn(x_half, inputs.w, inputs.b), wait)
        recompile = Recompile(
            seconds,
            "torch eager compiles nothing: the new shape runs the same ATen kernels",
            0,
            None,
        )
    notes += _eager_ladder(ctx.variant_dir / "ir", fn, args)
    run_files.write_timings(ctx.variant_dir, times)
    run_files.write_torch_facts(
        ctx.variant_dir,
        TorchFacts(torch_version=str(env.torch_version()), device=inputs.device, eager=True),
    )
    pauses = Pauses(
        first_call_s=first_call_s,
        compile_s=0.0,
        first_execute_s=first_call_s,
        backend_compiles=0,
        fresh_process=ctx.fresh_process,
    )
    return _ran(variant, pauses, recompile, times, numerics, notes), call


def _ran(
    variant: Variant,
    pauses: Pauses,
    recompile: Recompile | None,
    times: list[float],
    numerics: Numerics | None,
    notes: list[str],
) -> CaptureRecord:
    """The record of a torch variant that ran, eager or compiled: no XLA module, and pauses
    with no tracing, lowering or XLA compile of JAX's (torch.compile's phases are its
    compile.json's)."""
    return CaptureRecord(
        status="ok",
        mode=variant.mode,
        pauses=pauses,
        recompile=recompile,
        latency_blocked_s=tuple(times),
        numerics=numerics,
        flops_analytic=analytic_flops(variant),
        notes=tuple(notes),
    )


def _eager_ladder(ir_dir: Path, fn: tx.TorchFn, args: tuple[Any, ...]) -> list[str]:
    """Writes the eager variant's ladder: the program as torch.fx traces it, with the shapes
    it ran at (eager compiles nothing, so that is all of it)."""
    writer = ladder.LadderWriter(ir_dir)
    notes = []
    try:
        import torch.fx
        from torch.fx.passes.shape_prop import ShapeProp

        traced = torch.fx.symbolic_trace(fn)
        ShapeProp(traced).propagate(*args)
        writer.text("fx_graph", traced.print_readable(print_output=False))
    except Exception as e:  # tracing is a courtesy here; eager itself ran
        notes.append(f"torch.fx could not trace the eager function: {type(e).__name__}: {e}"[:300])
    writer.finish()
    return notes


# --- torch.compile ----------------------------------------------------------------------------


def _compile_ids(metrics: Any) -> list[str]:
    if isinstance(metrics, env.NotAvailable):
        return []
    return list(dict.fromkeys(m.compile_id for m in metrics if m.compile_id and not m.empty))


def _new_ids(before: Iterable[str]) -> list[str]:
    seen = set(before)
    return [c for c in _compile_ids(env.compilation_metrics()) if c not in seen]


def _capture_compiled(
    exp: Experiment,
    variant: Variant,
    fn: tx.TorchFn,
    inputs: tx.TorchInputs,
    wait: Callable[[Any], Any],
    ctx: Context,
) -> tuple[CaptureRecord, Callable[[], Any] | None]:
    import torch

    args = (inputs.x, inputs.w, inputs.b)
    kwargs = tx.compile_kwargs(variant)
    known = _compile_ids(env.compilation_metrics())
    facts: dict[str, Any] = {
        "torch_version": str(env.torch_version()),
        "device": inputs.device,
        "compile_kwargs": kwargs,
    }
    x_half = wait(tx.halve_rows(inputs.x))
    with env.torch_capture_env(ctx.variant_dir) as state:
        facts["capture_env"] = state.to_json()
        compiled = torch.compile(fn, **kwargs)

        def call() -> Any:
            return compiled(*args)

        try:
            y, first_call_s = _timed(call, wait)
        except Exception as e:
            if variant.torch.fullgraph and breaks_the_graph(variant.mode_spec):
                return _refused(variant, e, ctx, facts), None
            raise
        first_ids = _new_ids(known)
        # Checked before any other call: under mode="reduce-overhead" a CUDA graph's replay
        # reuses its output buffers, so a later call would overwrite y.
        numerics = _numerics(exp, variant, y)
        notes: list[str] = []
        times = _steady(exp, ctx, call, wait, inputs.device, notes)
        seen = [*known, *first_ids]
        steady_ids = _new_ids(seen)  # none expected: the steady calls hit the first graphs
        recompile_ids: list[str] = []
        recompile_s = None
        facts["recompile_started"] = time.time()
        if exp.measure.recompile:
            _, recompile_s = _timed(lambda: compiled(x_half, inputs.w, inputs.b), wait)
            recompile_ids = _new_ids([*seen, *steady_ids])
        metrics = env.compilation_metrics()
        facts["compile_times"] = str(env.compile_times())
    # explain() on a copy nothing compiled: its Dynamo run stays out of the captured log (the
    # trace handler is back where it was) and, with its resets suspended, costs no recompile.
    explained = env.explain(tx.fresh(fn), *args, keep_caches=True)
    mine = {*first_ids, *recompile_ids}
    facts.update(
        compile_ids={"first_call": first_ids, "steady": steady_ids, "recompile": recompile_ids},
        explain=explained.to_json(),
        metrics=metrics.to_json()
        if isinstance(metrics, env.NotAvailable)
        else [m.to_json() for m in metrics if m.compile_id in mine],
        features=env.feature_report(),
        first_call_s=first_call_s,
        recompile_s=recompile_s,
    )
    written = _write_facts(ctx, facts)
    run_files.write_timings(ctx.variant_dir, times)
    notes += write_compiled_ladder(ctx.variant_dir, first_ids, written.recompile_started)
    notes += [str(u) for u in state.unavailable]
    if steady_ids:
        notes.append(f"Dynamo compiled again during the steady calls: {', '.join(steady_ids)}")
    compile_s = _metric_total(metrics, first_ids, "entire_frame_compile_time_s")
    reasons = (
        env.recompile_reasons(tuple(m for m in metrics if m.compile_id in set(recompile_ids)))
        if not isinstance(metrics, env.NotAvailable)
        else ()
    )
    recompile = None
    if recompile_s is not None:
        explanation = (
            "\n".join(dict.fromkeys(reasons))
            if reasons
            else (
                f"{len(recompile_ids)} Dynamo compiles, reason not recorded"
                if recompile_ids
                else "no recompile: the first compile's guards held for the new shape"
            )
        )
        recompile = Recompile(recompile_s, explanation, len(recompile_ids), None)
        if reasons:
            io.write_text(ctx.variant_dir / RECOMPILE_FILE, explanation + "\n")
    pauses = Pauses(
        first_call_s=first_call_s,
        compile_s=compile_s,
        backend_compiles=len(first_ids),
        fresh_process=ctx.fresh_process,
    )
    record = _ran(variant, pauses, recompile, times, numerics, notes)
    # After a recompile Dynamo runs the newer graph for the captured shape too: time afresh.
    return record, (call if not recompile_ids else None)


def _metric_total(metrics: Any, ids: list[str], field: str) -> float | None:
    if isinstance(metrics, env.NotAvailable):
        return None
    values = []
    for m in metrics:
        if m.compile_id in ids and not m.empty:
            try:
                values.append(float(m.fields.get(field)))
            except (TypeError, ValueError):
                continue
    return sum(values) if values else None


def _write_facts(ctx: Context, document: dict[str, Any]) -> TorchFacts:
    """Writes torch.json from the capture's plain facts (the env's own JSON views of explain(),
    the metrics, the capture state), read through its record first: a key or a value the
    record does not know fails here, at the writer, not in the analysis later."""
    source = str(VariantFolder(ctx.variant_dir).torch)
    facts: TorchFacts = run_files.from_document(run_files.TORCH_FACTS, document, source)
    run_files.write_torch_facts(ctx.variant_dir, facts)
    return facts


def _refused(
    variant: Variant, error: Exception, ctx: Context, facts: dict[str, Any]
) -> CaptureRecord:
    """The record of a graph-breaking function under fullgraph=True: Dynamo must refuse it."""
    message = str(error).strip()
    io.write_text(ctx.variant_dir / EXPECTED_ERROR_FILE, message + "\n")
    _write_facts(ctx, {**facts, "expected_error": message[:2000]})
    first = message.splitlines()[0] if message else type(error).__name__
    return CaptureRecord(
        status="ok",
        reason="expected: fullgraph=True makes a graph break an error",
        mode=variant.mode,
        module=None,
        expected_error=ExpectedError(type(error).__name__, first[:500]),
    )


# --- the ladder -------------------------------------------------------------------------------


def _header(graph: str, compile_id: str | None) -> str:
    return (
        f"# ===== graph {graph}" + (f" (compile {compile_id})" if compile_id else "") + " =====\n"
    )


# The ladder's stages of each graph: (stage, file of Inductor's debug folder, the TORCH_TRACE
# artifact that holds the same text where the debug folder lacks it).
GRAPH_STAGES = (
    ("aot_forward", FX_READABLE, None),
    ("post_grad", FX_TRANSFORMED, "inductor_post_grad_graph"),
    ("inductor_pre_fusion", IR_PRE, None),
    ("inductor_post_fusion", IR_POST, None),
    ("output_code", OUTPUT_CODE, None),
)


def write_compiled_ladder(
    variant_dir: Path, first_ids: list[str], recompile_started: float | None
) -> list[str]:
    """Writes the IR ladder of the first call's graphs; returns notes on stages it lacks.

    Stages: Dynamo's FX graph (TORCH_TRACE), the AOT forward graph before and after the
    post-grad passes, Inductor's IR before and after fusion, output_code.py, and per kernel
    its Triton source and whatever Triton left in its cache (TTIR, LLVM IR, PTX). A stage of
    a function split by graph breaks holds every graph, each under a header.
    """
    dirs = env.capture_dirs(variant_dir)
    captured = read_captured(dirs.debug, dirs.trace)
    notes = list(captured.notes)
    graphs = captured.graphs_of(first_ids)
    writer = ladder.LadderWriter(variant_dir / "ir")
    frames = captured.frames(first_ids)
    dynamo = [
        _header(f.function or "?", f.compile_id) + f.artifacts["dynamo_output_graph"]
        for f in frames
        if "dynamo_output_graph" in f.artifacts
    ]
    if dynamo:
        writer.text("fx_graph", "\n".join(dynamo))
    else:
        notes.append("no Dynamo graph in the TORCH_TRACE log")
    by_id = {f.compile_id: f for f in frames}
    for stage, file, artifact in GRAPH_STAGES:
        parts = [
            _header(g.key, g.compile_id) + text
            for g in graphs
            if (text := _stage_text(g, file, by_id.get(g.compile_id or ""), artifact)) is not None
        ]
        if parts:
            writer.text(stage, "\n".join(parts))
        else:
            notes.append(f"no {file} for stage {stage}")
    triton = [k for g in graphs for k in g.kernels if k.kind == "triton"]
    for k in triton:
        writer.text("triton", k.source + "\n", f"{k.name}.py")
    kernels = {k.name for k in triton}
    for stage, name, path in _triton_cache_files(variant_dir, kernels, recompile_started):
        writer.copy(stage, path, name)
    writer.finish()
    return notes


def _stage_text(
    g: InductorGraph, file: str, frame: FrameCompile | None, artifact: str | None
) -> str | None:
    """One graph's text of a stage: the debug folder's file, else the TORCH_TRACE artifact of
    its compile (`frame`), else None."""
    path = Path(g.path) / file
    if path.is_file():
        return userfiles.read_text(path, userfiles.IR_TEXT, errors="replace")
    if artifact and frame is not None and artifact in frame.artifacts:
        return frame.artifacts[artifact]
    return None


def _triton_cache_files(
    variant_dir: Path, kernels: set[str], before: float | None
) -> Iterator[tuple[str, str, Path]]:
    """Yields (stage, file name, path) of Triton's cached IR for the first call's kernels:
    files named after a kernel, written before the new-shape call started."""
    cache = env.capture_dirs(variant_dir).triton_cache
    if not kernels or not cache.is_dir():
        return
    for path in sorted(cache.rglob("*")):
        stage = TRITON_FILES.get(path.suffix)
        if stage is None or not path.is_file() or path.is_symlink() or path.stem not in kernels:
            continue
        if before is not None and path.stat().st_mtime > before:
            continue
        yield stage, f"{path.stem}.{path.parent.name[:8]}{path.suffix}", path


# --- timing a variant another worker captured (or one that recompiled) ------------------------


def compile_for_timing(
    exp: Experiment, variant: Variant, workdir: Path, platform: str
) -> tuple[Callable[[], Any], Callable[[Any], Any], str]:
    """Returns a steady-state call of a torch variant, its wait, and a note.

    The function is compiled afresh at the captured shape, its caches in the variant folder
    (on, this time: nothing is captured), and called once so the compile is not timed.
    """
    import torch

    tx.set_threads(exp.capture.torch_threads)
    device = tx.device_for(platform)
    inputs = tx.torch_inputs(variant.problem, exp.seed, device)
    fn = tx.build_torch_function(variant)
    wait = waiter(device)
    args = (inputs.x, inputs.w, inputs.b)
    if variant.mode_spec.op_by_op:
        return (lambda: fn(*args)), wait, "eager: called again in the timing process"
    with env.torch_cache_env(workdir / "variants" / variant.name):
        compiled = torch.compile(fn, **tx.compile_kwargs(variant))
        with contextlib.redirect_stdout(stdio.StringIO()):
            wait(compiled(*args))
    return (
        (lambda: compiled(*args)),
        wait,
        "compiled again for timing at the captured shape (after the new-shape call Dynamo "
        "would run the graph it compiled for that shape)",
    )
