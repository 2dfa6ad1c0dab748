"""Our cost model against the HLO fixtures and XLA's own CPU cost analysis.

Where XLA counts the same thing, the numbers must be equal; where the conventions differ
(documented in harness.hlo.cost: fused gathers, sort rows, converts), the test says how.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest
from hlo_helpers import gpu_file, require_fixtures
from jax import lax

from harness.hlo.cost import ModuleCost, module_cost
from harness.hlo.parser import parse_file, parse_module
from harness.hlo.xla_compare import compare_with_xla

AFTER = "sm_9.0a_gpu_after_optimizations.txt"
N = 8192
BIG = jnp.ones((1024, 1024))  # 4 MiB of f32


def _xla(cost: object) -> dict:
    return cost[0] if isinstance(cost, list) else cost  # type: ignore[return-value]


def _compiled(fn, *args) -> tuple[ModuleCost, dict]:
    """Our cost of the optimized CPU module of `fn`, and XLA's cost analysis of it."""
    compiled = jax.jit(fn).lower(*args).compile()
    return module_cost(parse_module(compiled.as_text())), _xla(compiled.cost_analysis())


def _lowered(fn, *args) -> tuple[ModuleCost, dict]:
    """The same for the module before optimization (it keeps ops the CPU pipeline rewrites)."""
    lowered = jax.jit(fn).lower(*args)
    text = lowered.as_text(dialect="hlo")
    return module_cost(parse_module(text)), _xla(lowered.cost_analysis())


# -- H200 fixtures -------------------------------------------------------------------------


def test_default_counts_the_cublas_gemm_and_the_gelu() -> None:
    cost = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    gemm, loop = cost.clusters
    assert gemm.flops == 2 * N**3 + N * N  # GEMM plus BIAS epilogue
    assert gemm.library_flops == gemm.flops
    assert loop.transcendentals == N * N  # one tanh per element
    assert loop.flops == 8 * N * N  # 6 multiplies + 2 adds per element
    assert cost.flops >= 2 * N**3
    # x, w, b read and y written by the GEMM (workspace excluded), y read + written by GELU
    assert gemm.bytes == (N * N * 2) * 3 + N * 2
    assert loop.bytes == 2 * N * N * 2
    assert cost.arithmetic_intensity == pytest.approx(cost.flops / cost.bytes)
    assert cost.uncosted == ()


def test_notriton_epilogue_costs_match_the_unfused_default() -> None:
    fused = module_cost(parse_file(gpu_file("jit_bf16_tanh_large_notriton", AFTER)))
    split = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    assert fused.flops == split.flops
    assert fused.transcendentals == split.transcendentals == N * N
    assert fused.bytes < split.bytes


def test_fused_dynamic_slice_of_the_bias_charges_only_its_shard() -> None:
    # 2 H200s, W sharded on N: each GPU's GELU fusion dynamic-slices its half of the bias.
    path = (
        require_fixtures().parent
        / "h200x2-jax0.11.2/n_sharded_replicated_out/dump"
        / "module_6634.jit_gelu_linear.sm_9.0a_gpu_after_optimizations.txt"
    )
    if not path.is_file():
        pytest.skip(f"{path} not found")
    cost = module_cost(parse_file(path))
    loop = next(c for c in cost.clusters if c.name == "loop_multiply_fusion")
    gemm_out, partition_id = N * (N // 2) * 2, 4
    assert loop.bytes == gemm_out + (N // 2) * 2 + partition_id + gemm_out  # not the whole b


# -- live CPU compiles against XLA ---------------------------------------------------------


def test_gemm_alone_is_exactly_two_n_cubed() -> None:
    m, k, n = 8, 16, 32
    cost, xla = _compiled(lambda x, w: x @ w, jnp.ones((m, k)), jnp.ones((k, n)))
    assert cost.flops == 2 * m * n * k == xla["flops"]
    assert compare_with_xla(cost, xla) == []


def test_live_cpu_cost_agrees_with_xla_cost_analysis() -> None:
    def f(x, w, b):
        return jax.nn.gelu(x @ w + b)

    ours, xla = _compiled(f, jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)))
    assert ours.flops == xla["flops"]
    assert ours.transcendentals == xla["transcendentals"]
    assert compare_with_xla(ours, xla) == []


def test_slices_charge_what_they_read_not_their_operand() -> None:
    one, xla = _compiled(lambda a: a[3:4, 5:6], BIG)
    assert one.bytes == xla["bytes accessed"] == 2 * 4
    dyn, xla = _compiled(lambda a, i: lax.dynamic_slice(a, (i, 0), (2, 1024)), BIG, 3)
    assert dyn.bytes == xla["bytes accessed"] == 2 * 2 * 1024 * 4 + 4
    # Slices inside fusions whose operand is the big array: each fusion reads its slice.
    fused, xla = _compiled(lambda a: (a[3:4, 5:6] * 2, a[7:9, :] + 1), BIG)
    assert fused.bytes == 2 * 4 + 2 * 2 * 1024 * 4
    assert xla["bytes accessed"] - fused.bytes == 16  # XLA adds the root tuple's pointer table
    # In place: the buffer is neither read nor rewritten; the update is (XLA reads one index).
    dus, xla = _compiled(
        lambda a, u: lax.dynamic_update_slice(a, u, (3, 0)), BIG, jnp.ones((2, 1024))
    )
    copy = 2 * BIG.size * 4  # XLA's copy of the donated-less parameter
    assert dus.bytes == copy + 2 * 2 * 1024 * 4 + 2 * 4
    assert dus.bytes - xla["bytes accessed"] == 4


def test_gather_charges_its_output_and_indices_where_xla_charges_the_operand() -> None:
    ours, xla = _compiled(lambda a, i: a[i], BIG, jnp.array([1, 5, 7]))
    rows = 3 * 1024 * 4
    assert ours.bytes < 10 * rows
    assert xla["bytes accessed"] > BIG.size * 4  # XLA: a fused gather reads all of `a`
    assert ours.flops == xla["flops"]


def test_reduce_and_reduce_window_count_combines_like_xla() -> None:
    for fn in (
        lambda a: a.sum(axis=1),
        lambda a: a.sum(),
        lambda a: lax.reduce_window(a, 0.0, lax.add, (3, 3), (1, 1), "VALID"),
        lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"),
    ):
        ours, xla = _compiled(fn, jnp.ones((64, 64)))
        assert ours.flops == xla["flops"] > 0
        assert ours.bytes == xla["bytes accessed"]
    ours, _ = _compiled(
        lambda a: lax.reduce_window(a, 0.0, lax.add, (3, 3), (1, 1), "VALID"), jnp.ones((64, 64))
    )
    assert ours.flops == 62 * 62 * (9 - 1)


@pytest.mark.parametrize(
    "lhs, rhs, kwargs",
    [
        ((2, 3, 16, 16), (8, 3, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
        (
            (2, 16, 16, 3),
            (3, 3, 3, 8),
            dict(
                window_strides=(1, 1),
                padding="SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC"),
            ),
        ),
        (
            (2, 4, 16, 16),
            (8, 2, 3, 3),
            dict(window_strides=(1, 1), padding="SAME", feature_group_count=2),
        ),
        (
            (2, 3, 16, 16),
            (4, 3, 3, 3),
            dict(window_strides=(2, 2), padding=((1, 2), (0, 1)), rhs_dilation=(2, 1)),
        ),
        (
            (2, 3, 16, 16),
            (4, 3, 3, 3),
            dict(
                window_strides=(3, 1),
                padding=((2, 2), (1, 1)),
                lhs_dilation=(2, 3),
                rhs_dilation=(1, 2),
            ),
        ),
        ((1, 2, 32), (4, 2, 5), dict(window_strides=(2,), padding="VALID")),
    ],
)
def test_convolution_flops_equal_xla_for_every_layout_and_window(lhs, rhs, kwargs) -> None:
    fn = lambda x, w: lax.conv_general_dilated(x, w, **kwargs)  # noqa: E731
    ours, xla = _compiled(fn, jnp.ones(lhs), jnp.ones(rhs))
    assert ours.flops == xla["flops"] > 0
    assert ours.uncosted == ()


def test_batch_grouped_convolution_before_optimization_equals_xla() -> None:
    def fn(x: jax.Array, w: jax.Array) -> jax.Array:
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", batch_group_count=2)

    ours, xla = _lowered(fn, jnp.ones((4, 3, 8, 8)), jnp.ones((4, 3, 3, 3)))
    assert ours.flops == xla["flops"] > 0


def test_scatter_counts_its_update_computation() -> None:
    ours, xla = _compiled(
        lambda a, i, u: a.at[i].add(u), jnp.ones((100, 8)), jnp.array([1, 5, 7]), jnp.ones((3, 8))
    )
    assert ours.flops == xla["flops"]  # 3*8 adds plus the index clamping
    assert ours.bytes == xla["bytes accessed"]


def test_select_and_scatter_before_optimization_equals_xla() -> None:
    # The CPU pipeline rewrites select-and-scatter into reduce-window + scatter, so it is
    # costed in the module before optimization, where XLA still sees it.
    grad = jax.grad(
        lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID").sum()
    )
    ours, xla = _lowered(grad, jnp.ones((64, 64)))
    assert ours.flops == xla["flops"] > 0
    assert ours.bytes == xla["bytes accessed"]
    optimized, xla = _compiled(grad, jnp.ones((64, 64)))
    assert optimized.flops == xla["flops"]


def test_sort_counts_comparisons_per_row_times_the_comparator() -> None:
    flat, xla = _compiled(
        lambda a, b: lax.sort((a, b), num_keys=1), jnp.ones((1024,)), jnp.ones((1024,))
    )
    comparisons = 1024 * 10
    assert xla["flops"] == comparisons  # XLA: n log2 n, one flop per comparison
    per = flat.flops / comparisons
    assert per == int(per) and per >= 1  # ours: times the ops of jax's total-order comparator
    rows, _ = _compiled(jnp.sort, jnp.ones((16, 128)))
    assert rows.flops == 16 * 128 * math.ceil(math.log2(128)) * per


def test_unknown_custom_call_is_listed_never_silently_zero() -> None:
    def f(x):
        return jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    ours, xla = _compiled(f, jnp.ones((4,)))
    ((what, count),) = ours.uncosted
    assert what.startswith("custom-call:") and "callback" in what and count == 1
    assert ours.to_json()["uncosted"] == {what: 1}
    flags = compare_with_xla(ours, xla)
    assert flags[-1] == f"ours leaves out instructions it cannot cost: {what} x1"


# -- the comparison's sentences -----------------------------------------------------------


def test_disagreements_name_the_side_that_left_something_out() -> None:
    ours = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    flags = compare_with_xla(ours, {"flops": 6.7e8, "transcendentals": float(N * N)})
    assert flags == [
        "flops: ours 1.1e+12 vs XLA 6.7e+08 (ours/XLA = 1.64e+03); "
        "XLA leaves out library GEMM work (1.1e+12 flops in ours)"
    ]
    unknown = compare_with_xla(ours, {"flops": -1.0})
    assert unknown == [
        "XLA reports flops=-1 (unknown): XLA left out an instruction it cannot cost; "
        "ours counts 1.1e+12"
    ]
    assert compare_with_xla(ours, None) == ["XLA cost analysis unavailable"]


def test_an_unbounded_dimension_leaves_the_op_uncosted_never_negative() -> None:
    """`?` parses as -1: a dot contracting over it counted -2 x 32 x 32 FLOPs, and one whose
    output has it counted 0, silently. Both are listed as uncosted; a transpose costs 0."""
    text = """HloModule dynamic

ENTRY main {
  x = f32[?,64]{1,0} parameter(0)
  w = f32[64,32]{1,0} parameter(1)
  d = f32[?,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[64,?]{1,0} transpose(x), dimensions={1,0}
  k = f32[32,32]{1,0} dot(t, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT e = f32[?,32]{1,0} exponential(d)
}
"""
    cost = module_cost(parse_module(text))
    assert cost.flops >= 0 and cost.transcendentals >= 0
    assert cost.flops == 0
    assert dict(cost.uncosted) == {
        "dot (unbounded dimension)": 2,
        "exponential (unbounded dimension)": 1,
    }


def test_a_parameter_number_too_long_for_int_is_no_parameter_number() -> None:
    """Found by the parser fuzz: a 4,301-digit parameter number made int() raise in the
    fusion's byte count. Numbers from HLO text go through shapes.decimal."""
    huge = "9" * 4301
    text = f"""HloModule huge

fused {{
  p = f32[4]{{0}} parameter({huge})
  ROOT n = f32[4]{{0}} negate(p)
}}

ENTRY main {{
  x = f32[4]{{0}} parameter(0)
  ROOT f = f32[4]{{0}} fusion(x), kind=kLoop, calls=fused
}}
"""
    cost = module_cost(parse_module(text))
    assert cost.flops == 4
