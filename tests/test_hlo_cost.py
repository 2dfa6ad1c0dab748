"""Our cost model against the HLO fixtures and XLA's own CPU cost analysis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from hlo_helpers import gpu_file

from harness.hlo.cost import compare_with_xla, module_cost
from harness.hlo.parser import parse_file, parse_module

AFTER = "sm_9.0a_gpu_after_optimizations.txt"
N = 8192


def test_default_counts_the_cublas_gemm_and_the_gelu() -> None:
    cost = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    gemm, loop = cost.clusters
    assert gemm.flops == 2 * N**3 + N * N  # GEMM plus BIAS epilogue
    assert loop.transcendentals == N * N  # one tanh per element
    assert loop.flops == 8 * N * N  # 6 multiplies + 2 adds per element
    assert cost.flops >= 2 * N**3
    # x, w, b read and y written by the GEMM (workspace excluded), y read + written by GELU
    assert gemm.bytes == (N * N * 2) * 3 + N * 2
    assert loop.bytes == 2 * N * N * 2
    assert cost.arithmetic_intensity == pytest.approx(cost.flops / cost.bytes)


def test_notriton_epilogue_costs_match_the_unfused_default() -> None:
    fused = module_cost(parse_file(gpu_file("jit_bf16_tanh_large_notriton", AFTER)))
    split = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    assert fused.flops == split.flops
    assert fused.transcendentals == split.transcendentals == N * N
    assert fused.bytes < split.bytes


def test_gemm_alone_is_exactly_two_n_cubed() -> None:
    # matmul_only_bf16_large's dump holds no HLO text, so a bare dot is checked live.
    m, k, n = 8, 16, 32
    compiled = jax.jit(lambda x, w: x @ w).lower(jnp.ones((m, k)), jnp.ones((k, n))).compile()
    cost = module_cost(parse_module(compiled.as_text()))
    assert cost.flops == 2 * m * n * k
    assert compare_with_xla(cost, compiled.cost_analysis()) == []


def test_live_cpu_cost_agrees_with_xla_cost_analysis() -> None:
    def f(x, w, b):
        return jax.nn.gelu(x @ w + b)

    compiled = jax.jit(f).lower(jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,))).compile()
    ours = module_cost(parse_module(compiled.as_text()))
    xla = compiled.cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    assert ours.flops == xla["flops"]
    assert ours.transcendentals == xla["transcendentals"]
    assert compare_with_xla(ours, xla) == []


def test_disagreements_are_flagged_like_the_gpu_cost_analysis() -> None:
    ours = module_cost(parse_file(gpu_file("jit_bf16_tanh_large", AFTER)))
    flags = compare_with_xla(ours, {"flops": 6.7e8, "transcendentals": float(N * N)})
    assert any(f.startswith("flops: ours 1.1e+12 vs XLA 6.7e+08") for f in flags)
    assert any("leave out library GEMM" in f for f in flags)
    unknown = compare_with_xla(ours, {"flops": -1.0})
    assert unknown[0] == "XLA reports flops=-1 (unknown); ours counts 1.1e+12"
