"""Clusters and the reverse map, with expectations read off the H200 HLO fixtures."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
from hlo_helpers import cpu_dump, gpu_file

from harness.hlo.clusters import find_clusters, reverse_map
from harness.hlo.parser import parse_file

AFTER = "sm_9.0a_gpu_after_optimizations.txt"
BEFORE = "before_optimizations.txt"


def _pair(variant: str) -> tuple:
    return parse_file(gpu_file(variant, BEFORE)), parse_file(gpu_file(variant, AFTER))


def test_notriton_is_one_cublaslt_call_with_bias_gelu_that_holds_every_op() -> None:
    before, after = _pair("jit_bf16_tanh_large_notriton")
    (gemm,) = find_clusters(after)
    assert (gemm.kind, gemm.target, gemm.epilogue) == ("library", "__cublas$lt$matmul", "BIAS_GELU")
    assert gemm.source_ops == ("jit(gelu_linear)/dot_general",)
    assert gemm.source_locations == ("/work/steering/lab/gpu_probe.py:50",)
    rmap = reverse_map(before, after)
    for key in ("dot_general.1", "add.11", "tanh.1", "integer_pow.2", "mul.13"):
        (full,) = [k for k in rmap if k.startswith(key + " ")]
        assert rmap[full] == [gemm.name], full
    assert all(v == [gemm.name] for v in rmap.values())


def test_default_splits_into_bias_gemm_and_one_gelu_loop_fusion() -> None:
    before, after = _pair("jit_bf16_tanh_large")
    gemm, loop = find_clusters(after)
    assert (gemm.target, gemm.epilogue) == ("__cublas$lt$matmul", "BIAS")
    assert gemm.output_shape.startswith("(bf16[8192,8192]{1,0}, s8[")
    assert (loop.name, loop.kind, loop.computation) == (
        "loop_multiply_fusion",
        "kLoop",
        "fused_multiply",
    )
    assert dict(loop.member_opcodes)["tanh"] == 1
    assert loop.output_bytes == 8192 * 8192 * 2
    rmap = reverse_map(before, after)
    assert rmap["tanh.1 (jit(gelu_linear)/tanh)"] == ["loop_multiply_fusion"]
    assert rmap["dot_general.1 (jit(gelu_linear)/dot_general)"] == [gemm.name]
    assert rmap["add.11 (jit(gelu_linear)/add)"] == [gemm.name]  # the BIAS epilogue
    assert rmap["mul.13 (jit(gelu_linear)/mul)"] == ["loop_multiply_fusion"]


def test_erf_variant_keeps_bias_epilogue_and_fuses_erf_polynomial() -> None:
    _, after = _pair("jit_bf16_erf_large")
    gemm, loop = find_clusters(after)
    assert gemm.epilogue == "BIAS"
    ops = dict(loop.member_opcodes)
    assert "tanh" not in ops and ops["exponential"] == 1
    assert "jit(gelu_linear)/erfc" in loop.source_ops


def test_emitters_variant_is_triton_gemm_plus_triton_loop_fusion_with_split_k() -> None:
    before, after = _pair("jit_bf16_tanh_large_emitters")
    gemm, loop = find_clusters(after)
    assert (gemm.name, gemm.kind, gemm.backend_kind) == (
        "gemm_fusion_dot",
        "kCustom",
        "__triton_nested_gemm_fusion",
    )
    assert dict(gemm.member_opcodes) == {"dot": 1}
    assert (loop.name, loop.backend_kind) == ("loop_multiply_fusion", "__triton")
    assert dict(loop.member_opcodes)["reduce"] == 1  # split-K reduction lives in the epilogue
    assert not any(c.target for c in (gemm, loop))
    rmap = reverse_map(before, after)
    assert rmap["dot_general.1 (jit(gelu_linear)/dot_general)"] == [
        "gemm_fusion_dot",
        "loop_multiply_fusion",
    ]
    assert rmap["tanh.1 (jit(gelu_linear)/tanh)"] == ["loop_multiply_fusion"]


def test_nofusion_runs_every_op_as_its_own_wrapped_kernel() -> None:
    before, after = _pair("jit_bf16_tanh_large_nofusion")
    clusters = find_clusters(after)
    entry_exec = [
        i for i in after.entry if i.opcode not in ("parameter", "constant", "get-tuple-element")
    ]
    assert [c.name for c in clusters] == [i.name for i in entry_exec]
    assert sum(c.kind == "library" for c in clusters) == 1
    assert all(c.name.startswith("wrapped_") for c in clusters[1:])
    rmap = reverse_map(before, after, clusters)
    assert rmap["tanh.1 (jit(gelu_linear)/tanh)"] == ["wrapped_tanh"]


def test_live_cpu_clusters_and_reverse_map(tmp_path: Path) -> None:
    def f(x, w, b):
        return jax.nn.gelu(x @ w + b)

    dump, _ = cpu_dump(tmp_path, f, jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)))
    after = parse_file(next(dump.glob("*cpu_after_optimizations.txt")))
    before = parse_file(next(dump.glob("*before_optimizations.txt")))
    clusters = find_clusters(after)
    kinds = {(c.kind, c.backend_kind) for c in clusters}
    dots = [c for c in clusters if "dot" in dict(c.member_opcodes)]
    assert len(dots) == 1 and kinds
    rmap = reverse_map(before, after, clusters)
    tanh = [k for k in rmap if k.startswith("tanh")]
    assert tanh and all(rmap[k] for k in tanh)
    assert all(rmap[k] == [dots[0].name] for k in rmap if "dot_general" in k)
