"""Loop costs from what ran (issue 58): a while loop's body counts its trip count, XLA's or
the pattern's, else the iterations the profile measured, else no count at all; nested loops
multiply; a conditional counts the branch the profile saw run.

Properties over programs written for them, compiled and profiled on the CPU (each thunk of
a CPU program is a profile event named for its HLO instruction, so the launches a call of
each cluster are real): the same computation as `lax.scan`, `fori_loop`, a Python loop and a
data-dependent `while_loop` costs the same FLOPs and bytes within 1%.
"""

from __future__ import annotations

import collections
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.profiler import ProfileData

from harness.hlo.clusters import find_clusters
from harness.hlo.control_flow import measured_trips, taken_branches
from harness.hlo.cost import ModuleCost, module_cost
from harness.hlo.parser import HloModule, parse_module
from harness.profile.events import find_xplane
from harness.program import dump as dump_analysis
from harness.program import modules as hlo_files
from harness.program.standalone import analyse_modules

N, B, D = 32, 8, 64


def _step(h: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(h @ w) * 0.5 + h


def _scan(h: jax.Array, w: jax.Array) -> jax.Array:
    return lax.scan(lambda h, _: (_step(h, w), None), h, None, length=N)[0]


def _fori(h: jax.Array, w: jax.Array) -> jax.Array:
    return lax.fori_loop(0, N, lambda i, h: _step(h, w), h)


def _python(h: jax.Array, w: jax.Array) -> jax.Array:
    for _ in range(N):
        h = _step(h, w)
    return h


def _while(h: jax.Array, w: jax.Array) -> jax.Array:
    # The stop is data: N while h[0, 0] is finite, which the HLO cannot know.
    stop = jnp.where(jnp.isfinite(h[0, 0]), N, 0).astype(jnp.int32)
    out = lax.while_loop(
        lambda c: c[0] < c[2], lambda c: (c[0] + 1, _step(c[1], w), c[2]), (0, h, stop)
    )
    return out[1]


def _profiled(fn: Callable[..., jax.Array], *args: jax.Array) -> tuple[HloModule, dict[str, float]]:
    """The optimized module of `fn` and its clusters' launches in one profiled call: the
    host-plane events (CPU thunks) whose `hlo_module` is it, counted by their `hlo_op`."""
    jitted = jax.jit(fn)
    module = parse_module(jitted.lower(*args).compile().as_text())
    jitted(*args).block_until_ready()
    launches: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d):
            jitted(*args).block_until_ready()
        profile = ProfileData.from_file(str(find_xplane(d)))
        for plane in profile.planes:
            for line in plane.lines if plane.name == "/host:CPU" else ():
                for event in line.events:
                    stats = {str(k): v for k, v in event.stats}
                    if stats.get("hlo_module") == module.name and stats.get("hlo_op"):
                        launches[str(stats["hlo_op"])] += 1
    return module, dict(launches)


def _cost(module: HloModule, launches: dict[str, float] | None = None) -> ModuleCost:
    (cost,) = hlo_files.costs_of([module], launches)
    return cost


def test_scan_fori_python_and_a_data_dependent_while_cost_the_same_flops_and_bytes() -> None:
    h, w = jnp.ones((B, D)), jnp.full((D, D), 0.01)
    costs = {f.__name__: _cost(*_profiled(f, h, w)) for f in (_scan, _fori, _python, _while)}
    hand = N * (2 * B * D * D + 3 * B * D)  # the GEMM and tanh's multiply and add, per step
    for name, cost in costs.items():
        assert cost.flops == pytest.approx(hand, rel=0.01), name
        assert cost.bytes == pytest.approx(costs["_python"].bytes, rel=0.01), name
    assert costs["_while"].loops_counted("measured") and not costs["_scan"].loops_counted(
        "measured"
    )


def test_a_while_loop_nobody_measured_has_no_count_and_is_never_read_as_one() -> None:
    h, w = jnp.ones((B, D)), jnp.full((D, D), 0.01)
    module = parse_module(jax.jit(_while).lower(h, w).compile().as_text())
    cost = _cost(module)
    (loop,) = cost.loops_counted("unknown")
    body = [c for c in cost.clusters if c.loop == loop]
    assert body and all(c.count_source == "unknown" and c.trip_count is None for c in body)
    assert any("trip count unknown" in n for c in body for n in c.notes)


def _nested(x: jax.Array, ws: jax.Array) -> jax.Array:
    def body(c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        i, x = c
        x, _ = lax.scan(lambda x, wl: (jnp.tanh(x @ wl), None), x, ws)
        return i + 1, x

    stop = jnp.where(jnp.isfinite(x[0, 0]), 10, 0)
    return lax.while_loop(lambda c: c[0] < stop, body, (0, x))[1]


def test_a_scan_inside_a_measured_while_multiplies_its_trip_count_by_the_parents_iterations() -> (
    None
):
    layers = 3
    x, ws = jnp.ones((B, D)), jnp.full((layers, D, D), 0.01)
    module, launches = _profiled(_nested, x, ws)
    assert list(measured_trips(module, launches).values()) == [10]
    cost = _cost(module, launches)
    gemms = [c for c in cost.clusters if c.flops >= 2 * B * D * D]
    assert gemms and all(c.executions == 10 * layers for c in gemms)
    assert all(c.trip_count == layers and c.entries == 10 for c in gemms)
    assert all(c.count_source == "measured" for c in gemms)
    assert cost.flops == pytest.approx(10 * layers * (2 * B * D * D + B * D), rel=0.01)


def _dear(x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ x) @ x


def _cheap(x: jax.Array) -> jax.Array:
    return x + 1.0


def _conditional(x: jax.Array) -> jax.Array:
    # The predicate is constant at run time (x is finite) but not in the HLO.
    return lax.cond(jnp.isfinite(x[0, 0]), _cheap, _dear, x) * 2.0


def _inlined(x: jax.Array) -> jax.Array:
    return _cheap(x) * 2.0


def test_a_conditional_whose_predicate_never_changes_costs_as_its_taken_branch_inlined() -> None:
    x = jnp.ones((D, D))
    module, launches = _profiled(_conditional, x)
    assert list(taken_branches(module, launches).values()) == [1]  # index 1: the true branch
    blind = _cost(module)
    seen = _cost(module, launches)
    inlined = _cost(parse_module(jax.jit(_inlined).lower(x).compile().as_text()))
    assert blind.flops > 10 * inlined.flops  # the dearest branch, as the fallback
    assert any("not known" in n for c in blind.clusters for n in c.notes)
    assert seen.flops == pytest.approx(inlined.flops, rel=0.01)
    # Bytes differ by what fusion cannot cross: the branch's add and the multiply after the
    # conditional are two kernels, one fusion inlined; the dear branch moves more than both.
    assert inlined.bytes <= seen.bytes <= 2 * inlined.bytes + 64 < blind.bytes


def test_the_hlo_before_optimization_counts_its_loops_as_their_namesakes_ran() -> None:
    h, w = jnp.ones((B, D)), jnp.full((D, D), 0.01)
    lowered = jax.jit(_while).lower(h, w)
    before = parse_module(lowered.as_text(dialect="hlo"))
    module, launches = _profiled(_while, h, w)
    (blind,) = hlo_files.costs_before([before], [module], None)
    (pre,) = hlo_files.costs_before([before], [module], launches)
    assert blind.loops_counted("unknown") and not pre.loops_counted("unknown")
    assert pre.flops == pytest.approx(N * (2 * B * D * D + 3 * B * D), rel=0.01)
    assert hlo_files.gemm_flops(before, pre) == N * 2 * B * D * D  # what a GEMM ceiling bounds
    assert module_cost(before, find_clusters(before)).loops_counted("unknown")


def _alternating(x: jax.Array) -> jax.Array:
    # 6 iterations, the dear branch on every third: 2 dear and 4 cheap executions a call.
    def body(i: jax.Array, x: jax.Array) -> jax.Array:
        return lax.cond(i % 3 == 0, _dear, _cheap, x) * 0.5

    return lax.fori_loop(0, 6, body, x)


def test_a_conditional_whose_executions_take_both_branches_counts_each_branch_as_it_ran() -> None:
    x = jnp.ones((D, D))
    module, launches = _profiled(_alternating, x)
    (runs,) = taken_branches(module, launches).values()
    assert sorted(runs) == [2.0, 4.0]
    seen = _cost(module, launches)
    dear = _cost(parse_module(jax.jit(_dear).lower(x).compile().as_text())).flops
    cheap = _cost(parse_module(jax.jit(_cheap).lower(x).compile().as_text())).flops
    blind = _cost(module)
    assert blind.flops == pytest.approx(6 * (dear + D * D), rel=0.02)  # the dearest, 6 times
    assert seen.flops == pytest.approx(2 * dear + 4 * cheap + 6 * D * D, rel=0.02)
    assert any("measured by the profile" in n for c in seen.clusters for n in c.notes)


def test_the_standalone_analysis_counts_a_measured_loop_by_the_study_s_function(
    tmp_path: Path,
) -> None:
    """`python -m harness.analyze` on a dump and a profile of the same compile: the loop the
    HLO does not count is costed by the iterations a call measured (each marked step makes two
    calls), as the study's costs_of counts it, and its report says so once."""
    h, w = jnp.ones((B, D)), jnp.full((D, D), 0.01)
    dump, trace = tmp_path / "dump", tmp_path / "trace"
    options = {"xla_dump_to": str(dump), "xla_dump_hlo_as_text": True}
    compiled = jax.jit(_while).lower(h, w).compile(compiler_options=options)
    compiled(h, w).block_until_ready()
    with jax.profiler.trace(str(trace)):
        for i in range(2):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                compiled(h, w).block_until_ready()
                compiled(h, w).block_until_ready()
    results = dump_analysis.analyze_dump(dump, tmp_path / "out")
    (blind,) = results
    assert blind.cost is not None and blind.cost.loops_counted("unknown")
    profile = dump_analysis.attach_profile(results, trace, tmp_path / "out", None, "jit")
    assert dump_analysis.calls_per_step(profile.report) == {blind.module: 2.0}
    (seen,) = dump_analysis.recost(results, profile)
    assert seen.cost is not None and not seen.cost.loops_counted("unknown")
    hand = N * (2 * B * D * D + 3 * B * D)
    assert seen.cost.flops == pytest.approx(hand, rel=0.01)
    assert seen.cost == _cost(*_profiled(_while, h, w))  # one function, one count
    written = json.loads((seen.out_dir / "cost.json").read_text())
    assert written["modules"][0]["flops"] == seen.cost.flops
    program = analyse_modules(results := [seen], profile, None)
    (note,) = [n for n in program.notes if "measured" in n]
    assert "the profile measured a call (while." in note and f" {N}): its FLOPs" in note
    assert program.modules[0].flops == seen.cost.flops
    assert dump_analysis.loop_notes(results) == (note,)
