"""Runs one variant and records what it cost: compile pauses, steps, recompile, work, numerics.

Writes into the variant's folder:
    dump/                 XLA's own dump, names as XLA wrote them
    ir/                   the IR ladder (see harness.capture.ladder)
    profile/first_call/   jax.profiler traces, kept exactly as jax writes them
    profile/steady/
    profile/recompile/
    timings.json          every step time and every jax.monitoring compile event
    recompile.txt         JAX's explanation of the new-shape cache miss
    callback_output.txt   what a host callback printed
and returns the variant's measurements for summary.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io as stdio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax

from harness import io
from harness.capture import ladder, timing
from harness.config.schema import Dump, Experiment, Variant
from harness.variants import expression


@dataclasses.dataclass(frozen=True)
class Context:
    """What a variant run needs besides its config: where to write and the process dump."""

    variant_dir: Path
    platform: str
    process_dump: Path | None


def dump_options(dump_dir: Path, module: str, dump: Dump, platform: str) -> dict[str, Any]:
    """Returns the XLA debug options that dump this variant's module, and only it."""
    opts: dict[str, Any] = {
        "xla_dump_to": str(dump_dir),
        "xla_dump_hlo_as_text": True,
        "xla_dump_hlo_module_re": f"^{module}$",
    }
    if dump.passes:
        opts["xla_dump_hlo_pass_re"] = ".*"
    if dump.emitters and platform == "gpu":
        opts["xla_dump_emitter_re"] = ".*"
    return opts


@contextlib.contextmanager
def profiled(directory: Path, enabled: bool) -> Iterator[None]:
    """Runs the block inside jax.profiler.trace(directory) when enabled."""
    if not enabled:
        yield
        return
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # the Python tracer floods the trace and slows the steps
    with jax.profiler.trace(str(directory), profiler_options=options):
        yield


@contextlib.contextmanager
def _window(exp: Experiment, ctx: Context, name: str) -> Iterator[list[tuple[str, float]]]:
    """Profiles one named call into profile/<name>/ and yields its jax.monitoring compile events."""
    with (
        timing.compile_events() as events,
        profiled(ctx.variant_dir / "profile" / name, exp.profile.enabled),
        jax.profiler.StepTraceAnnotation(name, step_num=0),
    ):
        yield events


def cost_analysis(compiled: Any) -> dict[str, float]:
    """Returns XLA's cost analysis as a flat dict (older jax returned a list of dicts)."""
    try:
        cost = compiled.cost_analysis()
    except Exception as e:  # some backends do not implement it
        return {"error": str(e)}
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return {str(k): float(v) for k, v in (cost or {}).items()}


def analytic_flops(variant: Variant) -> float:
    """Returns 2·rows·k·n: the GEMM's FLOPs, which dominate the expression."""
    p = variant.problem
    return 2.0 * p.rows * p.k * p.n


def _work(variant: Variant, cost: dict[str, float], median_s: float | None) -> dict[str, Any]:
    flops = analytic_flops(variant)
    flops_xla = cost.get("flops")
    bytes_xla = cost.get("bytes accessed")
    flags = []
    if flops_xla is None or flops_xla < 0:
        flags.append(
            f"XLA's cost_analysis reports flops={flops_xla}: it does not see this program's work"
        )
    elif flops_xla < 0.5 * flops:
        flags.append(
            f"XLA counts {flops_xla:.3g} FLOPs, under half the GEMM's {flops:.3g}: library calls are left out"
        )
    return {
        "flops_analytic": flops,
        "flops_xla": flops_xla,
        "bytes_xla": bytes_xla,
        "transcendentals_xla": cost.get("transcendentals"),
        "flops_disagreement": flags,
        "achieved_flops_per_s": flops / median_s if median_s else None,
        "achieved_bytes_per_s": (bytes_xla / median_s)
        if (median_s and bytes_xla and bytes_xla > 0)
        else None,
    }


def run_variant(exp: Experiment, variant: Variant, ctx: Context) -> dict[str, Any]:
    """Measures one variant; returns its summary entry (status "ok"). Raises on failure."""
    jax.clear_caches()  # every variant pays its own compiles, whatever ran before it
    fn = expression.build_function(variant)
    inputs = expression.make_inputs(variant.problem, exp.seed)
    buffer = stdio.StringIO()
    with contextlib.redirect_stdout(buffer):
        if variant.mode == "eager":
            record = _run_eager(exp, variant, fn, inputs, ctx)
        else:
            record = _run_jit(exp, variant, fn, inputs, ctx)
    printed = buffer.getvalue()
    if printed:
        io.write_text(ctx.variant_dir / "callback_output.txt", printed)
    record["callback_lines"] = len(printed.splitlines())
    return record


def _measure_steps(
    exp: Experiment, ctx: Context, call: Callable[[], Any]
) -> tuple[dict[str, float], list[float]]:
    times = timing.step_times(call, exp.measure.warmup, exp.measure.steps)
    pipelined = timing.pipelined_step_time(call, exp.measure.steps)
    with profiled(ctx.variant_dir / "profile" / "steady", exp.profile.enabled):
        for i in range(exp.profile.steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                jax.block_until_ready(call())
    return {**timing.step_stats(times), "step_time_pipelined_s": pipelined}, times


def _numerics(
    exp: Experiment, variant: Variant, y: jax.Array, inputs: expression.Inputs
) -> dict[str, Any]:
    rows = expression.sample_rows(variant.problem.m, exp.measure.numerics_rows)
    ref = expression.reference(variant.problem, variant.mode, inputs, rows)
    return expression.numerics(y, ref, rows, expression.tolerance(variant.problem))


def _run_jit(
    exp: Experiment,
    variant: Variant,
    fn: Callable[..., Any],
    inputs: expression.Inputs,
    ctx: Context,
) -> dict[str, Any]:
    module = "jit_" + fn.__name__
    dump_dir = ctx.variant_dir / "dump"
    options = {**dump_options(dump_dir, module, exp.dump, ctx.platform), **variant.xla_options}
    jitted = jax.jit(fn, compiler_options=options)
    args = (inputs.x, inputs.w, inputs.b)

    if variant.mode == "jit_python_branch":
        return _expected_trace_error(jitted, args, ctx)

    with _window(exp, ctx, "first_call") as events:
        traced, trace_s = timing.timed(lambda: jitted.trace(*args))
        lowered, lower_s = timing.timed(traced.lower)
        compiled, xla_compile_s = timing.timed(lowered.compile)
        y, execute_s = timing.timed(lambda: compiled(*args))
    first = {
        "first_call_s": trace_s + lower_s + xla_compile_s + execute_s,
        "compile_s": trace_s + lower_s + xla_compile_s,
        "trace_s": trace_s,
        "lower_s": lower_s,
        "xla_compile_s": xla_compile_s,
        "first_execute_s": execute_s,
    }
    stats, times = _measure_steps(exp, ctx, lambda: compiled(*args))
    record: dict[str, Any] = {"module": module, **first, **stats}
    record.update(_numerics(exp, variant, y, inputs))
    # The half-size input is made before the timed window: slicing is itself an eager op
    # that would otherwise add its own compile to the recompile pause.
    x_half = jax.block_until_ready(expression.halve_rows(inputs.x))
    record.update(_recompile(exp, ctx, lambda: jitted(x_half, inputs.w, inputs.b)))
    record.update(_work(variant, cost_analysis(compiled), stats["step_time_median_s"]))

    modules = (
        [m for m in ladder.dump_modules(dump_dir.iterdir()) if m.name == module]
        if dump_dir.exists()
        else []
    )
    ladder.write_ladder(
        ctx.variant_dir / "ir",
        modules[0] if modules else None,
        jaxpr=str(traced.jaxpr),
        stablehlo=lowered.as_text(),
        recompile=modules[1] if len(modules) > 1 else None,
    )
    io.write_json(
        ctx.variant_dir / "timings.json",
        {"step_times_s": times, "first_call_events": events, **first},
    )
    return record


def _recompile(exp: Experiment, ctx: Context, call: Callable[[], Any]) -> dict[str, Any]:
    """Calls with m halved and returns the pause and JAX's explanation of the cache miss."""
    if not exp.measure.recompile:
        return {"recompile_s": None, "recompile_explanation": None}
    with timing.explained_cache_misses() as messages, _window(exp, ctx, "recompile") as events:
        _, seconds = timing.timed(call)
    explanation = "\n\n".join(m for m in messages if "CACHE MISS" in m) or None
    if explanation:
        io.write_text(ctx.variant_dir / "recompile.txt", explanation + "\n")
    summary = timing.summarize_events(events)
    return {
        "recompile_s": seconds,
        "recompile_explanation": explanation,
        "recompile_backend_compiles": summary["backend_compiles"],
        "recompile_xla_compile_s": summary["xla_compile_s"],
    }


def _expected_trace_error(jitted: Any, args: tuple[Any, ...], ctx: Context) -> dict[str, Any]:
    """Traces a function that branches in Python on a traced value; JAX must refuse it."""
    try:
        jitted.trace(*args)
    except jax.errors.ConcretizationTypeError as e:
        message = str(e)
        io.write_text(ctx.variant_dir / "expected_error.txt", message + "\n")
        return {
            "expected_error": {"type": type(e).__name__, "message": message.splitlines()[0]},
            "reason": "expected: JAX cannot branch in Python on a traced value inside jit",
        }
    raise RuntimeError("a Python branch on a traced value compiled; JAX was expected to refuse it")


def _run_eager(
    exp: Experiment,
    variant: Variant,
    fn: Callable[..., Any],
    inputs: expression.Inputs,
    ctx: Context,
) -> dict[str, Any]:
    args = (inputs.x, inputs.w, inputs.b)
    before = _listing(ctx.process_dump)
    with _window(exp, ctx, "first_call") as events:
        y, first_call_s = timing.timed(lambda: fn(*args))
    compiles = timing.summarize_events(events)
    stats, times = _measure_steps(exp, ctx, lambda: fn(*args))
    record: dict[str, Any] = {
        "module": None,
        "first_call_s": first_call_s,
        "compile_s": compiles["trace_s"] + compiles["lower_s"] + compiles["xla_compile_s"],
        **compiles,
        **stats,
    }
    record.update(_numerics(exp, variant, y, inputs))
    first_modules = _new_modules(ctx.process_dump, before)
    record["eager_modules"] = [m.name for m in first_modules]
    x_half = jax.block_until_ready(expression.halve_rows(inputs.x))
    rec = _recompile(exp, ctx, lambda: fn(x_half, inputs.w, inputs.b))
    if rec["recompile_s"] is not None:
        rec["recompile_explanation"] = (
            f"eager dispatch compiled {rec['recompile_backend_compiles']} primitive modules for the new shape; "
            "each primitive has its own cache, so JAX logs no tracing-cache miss"
        )
    record.update(rec)
    record.update(_work(variant, {}, stats["step_time_median_s"]))
    record["flops_disagreement"] = []
    jaxpr = str(jax.make_jaxpr(fn)(*args))
    ladder.write_eager_ladder(ctx.variant_dir / "ir", first_modules, jaxpr)
    if ctx.process_dump is None:
        record["reason"] = (
            "eager modules not dumped: XLA_FLAGS already set --xla_dump_to for this process"
        )
    io.write_json(
        ctx.variant_dir / "timings.json", {"step_times_s": times, "first_call_events": events}
    )
    return record


def _listing(directory: Path | None) -> set[str]:
    return set(os.listdir(directory)) if directory and directory.exists() else set()


def _new_modules(directory: Path | None, before: set[str]) -> tuple[ladder.DumpModule, ...]:
    if directory is None:
        return ()
    fresh = [directory / n for n in _listing(directory) - before]
    return ladder.dump_modules(fresh)
