"""Costs through control flow (issue 40): a loop body counts its trip count, a conditional the
branch that ran or its most expensive one, a shared callee at each call site.

The acceptance case is a user's GRU over 32 `lax.scan` steps, compiled here on the CPU: its
FLOPs per call must be within 2% of the hand count below, before optimization (the loop's
counter pattern gives the trip count) and after (XLA's `known_trip_count`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from conftest import FIXTURES

from harness.hlo.clusters import find_clusters
from harness.hlo.control_flow import computation_runs, trip_count
from harness.hlo.cost import module_cost
from harness.hlo.parser import parse_module
from harness.program import modules as hlo_files
from harness.variants.program import hlo_flops

STEPS, B, D, H = 32, 8, 64, 64


def _gru(wx: jax.Array, wh: jax.Array, xs: jax.Array, h0: jax.Array) -> jax.Array:
    def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        gx, gh = x @ wx, h @ wh
        r = jax.nn.sigmoid(gx[:, :H] + gh[:, :H])
        z = jax.nn.sigmoid(gx[:, H : 2 * H] + gh[:, H : 2 * H])
        n = jnp.tanh(gx[:, 2 * H :] + r * gh[:, 2 * H :])
        h = (1 - z) * n + z * h
        return h, h

    return jax.lax.scan(cell, h0, xs)[1]


# By hand, per step: the two GEMMs (2·B·D·3H and 2·B·H·3H) and 8 elementwise ops on [B, H]
# (two gate adds, n's multiply and add, and h's subtract, two multiplies and add).
HAND = STEPS * (2 * B * D * 3 * H + 2 * B * H * 3 * H + 8 * B * H)


@pytest.fixture(scope="module")
def gru_hlo() -> tuple[str, str]:
    args = (
        jnp.ones((D, 3 * H)),
        jnp.ones((H, 3 * H)),
        jnp.ones((STEPS, B, D)),
        jnp.zeros((B, H)),
    )
    lowered = jax.jit(_gru).lower(*args)
    return lowered.as_text(dialect="hlo"), lowered.compile().as_text()


def test_a_scanned_gru_costs_its_32_steps_before_and_after_optimization(
    gru_hlo: tuple[str, str],
) -> None:
    before, after = gru_hlo
    flops_before, gemm_before = hlo_flops(before)
    assert flops_before == pytest.approx(HAND, rel=0.02)
    assert gemm_before == pytest.approx(STEPS * 2 * B * 3 * H * (D + H), rel=1e-9)
    module = parse_module(after)
    cost = module_cost(module, find_clusters(module))
    assert cost.flops == pytest.approx(HAND, rel=0.02)
    loops = [(comp, inst) for comp, inst in module.instructions() if inst.opcode == "while"]
    assert [trip_count(module, c, i).count for c, i in loops] == [STEPS]
    looped = [c for c in cost.clusters if c.executions == STEPS]
    assert looped and all(any("runs 32 times" in n for n in c.notes) for c in looped)


CONDITIONAL = """\
HloModule m, entry_computation_layout={(pred[], f32[8,8]{1,0})->f32[8,8]{1,0}}

cheap {
  p = f32[8,8]{1,0} parameter(0)
  ROOT n = f32[8,8]{1,0} negate(p)
}

dear {
  p = f32[8,8]{1,0} parameter(0)
  ROOT d = f32[8,8]{1,0} dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

twice {
  p = f32[8,8]{1,0} parameter(0)
  ROOT a = f32[8,8]{1,0} add(p, p)
}

ENTRY e {
  c = pred[] parameter(0)
  x = f32[8,8]{1,0} parameter(1)
  k = f32[8,8]{1,0} conditional(c, x, x), true_computation=dear, false_computation=cheap
  s1 = f32[8,8]{1,0} call(k), to_apply=twice
  ROOT s2 = f32[8,8]{1,0} call(s1), to_apply=twice
}
"""


def test_a_conditional_costs_its_dearest_branch_unless_told_and_a_callee_counts_per_site() -> None:
    module = parse_module(CONDITIONAL)
    runs = computation_runs(module, lambda name: {"dear": 1024.0, "cheap": 64.0}.get(name, 0.0))
    assert (runs["dear"].times, runs["cheap"].times, runs["twice"].times) == (1.0, 0.0, 2.0)
    assert "most expensive branch (dear)" in runs["dear"].why[0]
    cost = module_cost(module)
    dot = 2 * 8 * 8 * 8
    assert cost.flops == dot + 2 * 64  # the dot's branch, and the add at both call sites
    told = module_cost(module, taken={"k": 1})  # the false branch ran
    assert told.flops == 64 + 2 * 64


LOOPS = FIXTURES / "h200-jax0.11.2-loops"


@pytest.mark.skipif(not LOOPS.exists(), reason=f"no fixture at {LOOPS}")
def test_the_loops_fixture_costs_its_trip_counts() -> None:
    after = next((LOOPS / "loops_cmdbuf" / "dump").glob("*after_optimizations.txt"))
    module = hlo_files.parsed(after)
    cost = module_cost(module, hlo_files.clusters_of(module))
    # By hand: 6 layers of two [4096,2048]x[2048,4096]-sized GEMMs (8·B·D² FLOPs a layer),
    # three times over for the forward pass and the two backward GEMMs of each.
    L, D, B = 6, 2048, 4096
    hand = 3 * L * 8 * B * D * D
    assert cost.flops == pytest.approx(hand, rel=0.01)
    notes = {n for c in cost.clusters for n in c.notes}
    assert "while.5 runs 6 times (known_trip_count)" in notes
    assert "while.49 runs 3 times (known_trip_count)" in notes
    assert any(n.startswith("cond.23: the branch that ran is not known") for n in notes)


def test_a_callee_shared_down_a_deep_diamond_is_counted_at_every_site_without_walking_each_path() -> (
    None
):
    # 40 levels, each calling the next at two sites: 2**40 paths, 41 computations to walk.
    depth = 40
    parts = [f"c{depth} {{\n  p = f32[4]{{0}} parameter(0)\n  ROOT a = f32[4]{{0}} add(p, p)\n}}\n"]
    for i in range(depth - 1, -1, -1):
        parts.append(
            f"c{i} {{\n  p = f32[4]{{0}} parameter(0)\n"
            f"  x = f32[4]{{0}} call(p), to_apply=c{i + 1}\n"
            f"  ROOT y = f32[4]{{0}} call(x), to_apply=c{i + 1}\n}}\n"
        )
    text = (
        "HloModule deep\n\n"
        + "\n".join(parts)
        + "\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} call(p), to_apply=c0\n}\n"
    )
    runs = computation_runs(parse_module(text))
    assert runs[f"c{depth}"].times == 2.0**depth and len(runs) == depth + 2
