"""Clusters and the reverse map, with expectations read off the H200 HLO fixtures and real
CPU compiles (fused, no-fusion, mixed dtype, metadata stripped)."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hlo_helpers import FIXTURES, gpu_file

from harness.hlo.clusters import Cluster, GemmShape, find_clusters, members
from harness.hlo.parser import HloModule, parse_file, parse_module
from harness.hlo.reverse_map import REWRITES, ReverseMap, name_ancestors, reverse_map

AFTER = "sm_9.0a_gpu_after_optimizations.txt"
BEFORE = "before_optimizations.txt"
NO_FUSION = "fusion,priority-fusion,multi_output_fusion"


def _pair(variant: str) -> tuple[HloModule, HloModule]:
    return parse_file(gpu_file(variant, BEFORE)), parse_file(gpu_file(variant, AFTER))


def _gelu_linear(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    return jax.nn.gelu(x @ w + b)


def _cpu_pair(out: Path, fn, *args, options: dict | None = None) -> tuple[HloModule, HloModule]:
    """Compile `fn` on the CPU, dumping into `out`; returns the parsed (before, after) pair."""
    dump = {"xla_dump_to": str(out), "xla_dump_hlo_as_text": True, **(options or {})}
    jax.jit(fn, compiler_options=dump).lower(*args).compile()
    before = parse_file(next(out.glob("*before_optimizations.txt")))
    after = parse_file(next(out.glob("*cpu_after_optimizations.txt")))
    return before, after


@pytest.fixture(scope="module")
def nofusion_cpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[HloModule, HloModule]:
    out = tmp_path_factory.mktemp("nofusion")
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)))
    return _cpu_pair(out, _gelu_linear, *args, options={"xla_disable_hlo_passes": NO_FUSION})


@pytest.fixture(scope="module")
def mixed_cpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[HloModule, HloModule]:
    out = tmp_path_factory.mktemp("mixed")
    args = (jnp.ones((8, 16), jnp.bfloat16), jnp.ones((16, 32)), jnp.ones((32,)))
    return _cpu_pair(out, _gelu_linear, *args)


def _ops(before: HloModule) -> dict[str, object]:
    return {
        (f"{i.name} ({i.op_name})" if i.op_name else i.name): i
        for _, i in before.instructions()
        if i.opcode != "parameter"
    }


def _held(after: HloModule, clusters: tuple[Cluster, ...]) -> dict[str, tuple]:
    by_name = {i.name: i for _, i in after.instructions() if i.opcode != "parameter"}
    return {c.name: members(after, by_name[c.name]) for c in clusters}


def _derived(op, inst, how: str, cluster: Cluster) -> bool:
    """Whether `inst` (a member of `cluster`) is evidence that the cluster holds `op`."""
    same_opcode = inst.opcode == op.opcode or inst.opcode in REWRITES.get(op.opcode, ())
    if op.opcode == "constant" and inst.opcode == "constant":
        same_opcode = inst.literal == op.literal
    if op.name in name_ancestors(inst.name) and same_opcode:
        return True
    # XLA's call inliner prefixes an inlined op's op_name with the call's.
    if op.op_name and inst.op_name.endswith(("/" + op.op_name, op.op_name)) and same_opcode:
        return True
    if how == "inlined":  # a call: its body's ops are checked one by one
        return True
    # An algebraic rewrite keeps op_name and frame on an instruction of another opcode.
    if how == "rewrite" and op.op_name and inst.op_name.endswith(op.op_name):
        return True
    if how == "structure" and same_opcode:
        return True
    return how == "library" and cluster.is_library


def assert_mapped_by_construction(before: HloModule, after: HloModule, rmap: ReverseMap) -> None:
    """Every (op, cluster) pair of the map is backed by a member derived from the op."""
    clusters = find_clusters(after)
    by_name = {c.name: c for c in clusters}
    held = _held(after, clusters)
    ops = _ops(before)
    entry = {k for k, i in ops.items() if i in before.entry.instructions}
    assert entry <= set(rmap.mapping) <= set(ops)
    for key, names in rmap.mapping.items():
        for name in names:
            how = rmap.placed_by[key]
            assert any(_derived(ops[key], m, how, by_name[name]) for m in held[name]), (key, name)


# -- clusters ----------------------------------------------------------------------------


def test_notriton_is_one_cublaslt_call_with_bias_gelu_that_holds_every_op() -> None:
    before, after = _pair("jit_bf16_tanh_large_notriton")
    (gemm,) = find_clusters(after)
    assert (gemm.kind, gemm.target, gemm.epilogue) == ("library", "__cublas$lt$matmul", "BIAS_GELU")
    assert gemm.gemm == GemmShape(8192, 8192, 8192, 1, "bf16", "bf16", "bf16")
    assert not gemm.is_fusion
    assert gemm.source_ops == ("jit(gelu_linear)/dot_general",)
    assert gemm.source_locations == ("/work/steering/lab/gpu_probe.py:50",)
    rmap = reverse_map(before, after)
    assert set(rmap.mapping.values()) == {(gemm.name,)}
    assert rmap.placed_by["dot_general.1 (jit(gelu_linear)/dot_general)"] == "rewrite"
    assert rmap.placed_by["tanh.1 (jit(gelu_linear)/tanh)"] == "library"
    assert rmap.folded_away == ()
    assert_mapped_by_construction(before, after, rmap)


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
    assert loop.is_fusion and loop.gemm is None
    assert dict(loop.member_opcodes)["tanh"] == 1
    assert loop.output_bytes == 8192 * 8192 * 2
    rmap = reverse_map(before, after)
    assert rmap.method == "op_name+opcode+frame+name"
    m = rmap.mapping
    assert m["tanh.1 (jit(gelu_linear)/tanh)"] == ("loop_multiply_fusion",)
    assert m["dot_general.1 (jit(gelu_linear)/dot_general)"] == (gemm.name,)
    assert m["add.11 (jit(gelu_linear)/add)"] == (gemm.name,)  # the BIAS epilogue
    assert m["add.12 (jit(gelu_linear)/add)"] == ("loop_multiply_fusion",)
    assert m["mul.13 (jit(gelu_linear)/mul)"] == ("loop_multiply_fusion",)
    assert m["constant.7"] == ("loop_multiply_fusion",)  # cloned in as constant_7_1
    assert_mapped_by_construction(before, after, rmap)


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
    assert gemm.is_fusion and not gemm.is_library
    # Triton's split-K dot: 4 slices of k=128 each, summed by the loop fusion's reduce.
    assert gemm.gemm == GemmShape(256, 128, 1024, 4, "bf16", "bf16", "f32")
    assert dict(gemm.member_opcodes) == {"dot": 1}
    assert (loop.name, loop.backend_kind) == ("loop_multiply_fusion", "__triton")
    assert dict(loop.member_opcodes)["reduce"] == 1  # split-K reduction lives in the epilogue
    assert not any(c.target for c in (gemm, loop))
    rmap = reverse_map(before, after)
    assert rmap.mapping["dot_general.1 (jit(gelu_linear)/dot_general)"] == (
        "gemm_fusion_dot",
        "loop_multiply_fusion",
    )
    assert rmap.mapping["tanh.1 (jit(gelu_linear)/tanh)"] == ("loop_multiply_fusion",)
    assert_mapped_by_construction(before, after, rmap)


def test_nofusion_command_buffer_maps_each_op_to_its_own_wrapped_kernel() -> None:
    before, after = _pair("jit_bf16_tanh_large_nofusion")
    clusters = find_clusters(after)
    entry_exec = [
        i for i in after.entry if i.opcode not in ("parameter", "constant", "get-tuple-element")
    ]
    assert [c.name for c in clusters] == [i.name for i in entry_exec]
    assert sum(c.kind == "library" for c in clusters) == 1
    assert all(c.name.startswith("wrapped_") for c in clusters[1:])
    rmap = reverse_map(before, after, clusters)
    m = rmap.mapping
    assert m["tanh.1 (jit(gelu_linear)/tanh)"] == ("wrapped_tanh",)
    assert m["add.12 (jit(gelu_linear)/add)"] == ("wrapped_add",)
    assert m["add.13 (jit(gelu_linear)/add)"] == ("wrapped_add.1",)
    assert m["integer_pow.3 (jit(gelu_linear)/integer_pow)"] == ("wrapped_multiply.1",)
    # Each wrapped kernel holds exactly one op, except the GEMM with its bias epilogue.
    claims = [c for cs in m.values() for c in cs if c.startswith("wrapped_")]
    assert len(claims) == len(set(claims)) == len(clusters) - 3  # 2 converts hold no op
    assert m["constant.7"] == ()  # an ENTRY constant executes nowhere on its own
    assert any("do not execute on their own" in n for n in rmap.notes)
    assert_mapped_by_construction(before, after, rmap)


def _before_of(after_path: Path) -> Path:
    return after_path.with_name(after_path.name.split(".sm_9.0a")[0] + ".before_optimizations.txt")


def _fixture_pairs() -> list[Path]:
    """Every dump holding both sides of a module (some program fixtures keep only the
    optimized HLO and the thunk files)."""
    found = FIXTURES.glob("*/*/dump/*gpu_after_optimizations.txt")
    return sorted(p for p in found if _before_of(p).is_file())


@pytest.mark.parametrize(
    "after_path", _fixture_pairs(), ids=lambda p: f"{p.parts[-4]}-{p.name[:11]}"
)
def test_every_fixture_pair_maps_only_to_clusters_that_hold_the_op(after_path: Path) -> None:
    before, after = parse_file(_before_of(after_path)), parse_file(after_path)
    rmap = reverse_map(before, after)
    assert sum(bool(v) for v in rmap.mapping.values()) > len(rmap.mapping) // 2
    assert_mapped_by_construction(before, after, rmap)


# -- the reverse map on real CPU compiles -------------------------------------------------


def test_cpu_nofusion_gives_each_op_its_own_wrapped_cluster(nofusion_cpu) -> None:
    before, after = nofusion_cpu
    rmap = reverse_map(before, after)
    ops = _ops(before)
    adds = {k: v for k, v in rmap.mapping.items() if ops[k].opcode == "add"}
    assert len(adds) == 3 and all(len(v) == 1 for v in adds.values())
    assert len({v[0] for v in adds.values()}) == 3  # no wrapped_add claims another's add
    for k, held in rmap.mapping.items():
        assert len(held) <= 1, (k, held)  # nothing fused, nothing duplicated
    pows = [rmap.mapping[k] for k in ops if k.startswith("integer_pow")]
    assert len(set(pows)) == 2  # x*x and (x*x)*x told apart by their operands
    assert_mapped_by_construction(before, after, rmap)


def test_cpu_mixed_dtype_convert_and_dot_map_to_their_own_clusters(mixed_cpu) -> None:
    before, after = mixed_cpu
    rmap = reverse_map(before, after)
    ops = _ops(before)
    (convert,) = [k for k, i in ops.items() if i.opcode == "convert"]
    (dot,) = [k for k, i in ops.items() if i.opcode == "dot"]
    clusters = {c.name: c for c in find_clusters(after)}
    assert [clusters[c].kind for c in rmap.mapping[dot]] == ["library"]
    assert rmap.mapping[convert] != rmap.mapping[dot]
    assert (
        len(rmap.mapping[convert]) == 1
        and "dot" not in clusters[rmap.mapping[convert][0]].member_opcodes[0]
    )
    assert_mapped_by_construction(before, after, rmap)


def test_cpu_gemm_is_a_ynnpack_library_call_with_its_shape(mixed_cpu) -> None:
    _, after = mixed_cpu
    (gemm,) = [c for c in find_clusters(after) if c.gemm is not None]
    assert (gemm.kind, gemm.target, gemm.backend_kind) == (
        "library",
        "__ynn_fusion",
        "__ynn_fusion",
    )
    assert gemm.is_library and not gemm.is_fusion
    assert gemm.gemm == GemmShape(
        m=8, k=16, n=32, batch=1, lhs_dtype="f32", rhs_dtype="f32", out_dtype="f32"
    )
    assert gemm.to_json()["gemm"]["flops"] == 2 * 8 * 16 * 32


def _scan_cond_sort(x: jax.Array, w: jax.Array) -> jax.Array:
    def body(c: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
        c = jnp.tanh(c @ w) + 1
        return c, c.sum()

    c, ys = jax.lax.scan(body, x, None, length=3)
    y = jax.lax.cond(ys.sum() > 0, lambda v: v * 2, lambda v: v - 1, c)
    return jnp.sort(y, axis=-1)


def test_cpu_loops_branches_and_inlined_calls(tmp_path: Path) -> None:
    before, after = _cpu_pair(tmp_path, _scan_cond_sort, jnp.ones((8, 8)), jnp.ones((8, 8)))
    rmap = reverse_map(before, after)
    ops = _ops(before)
    clusters = {c.name: c for c in find_clusters(after)}

    def only(opcode: str, op_name_end: str = "") -> str:
        (key,) = [k for k, i in ops.items() if i.opcode == opcode and k.endswith(op_name_end)]
        return key

    # Ops in a called function carry op_names relative to it until XLA inlines the call.
    tanh, sort, call = only("tanh"), only("sort"), only("call", "jit(sort))")
    assert [dict(clusters[c].member_opcodes).get("tanh") for c in rmap.mapping[tanh]] == [1]
    assert rmap.mapping[call] == rmap.mapping[sort] and rmap.placed_by[call] == "inlined"
    assert [clusters[c].kind for c in rmap.mapping[only("while")]] == ["while"]
    # x - 1 in a branch became x + (-1): same op_name and frame, another opcode.
    sub = only("subtract")
    assert rmap.placed_by[sub] == "rewrite" and len(rmap.mapping[sub]) == 1
    assert_mapped_by_construction(before, after, rmap)


def test_stripped_metadata_still_maps_by_name_and_says_so() -> None:
    before_path = gpu_file("jit_bf16_tanh_large", BEFORE)
    stripped = re.sub(r", metadata=\{[^}]*\}", "", before_path.read_text())
    before = parse_module(stripped, "stripped")
    after = parse_file(gpu_file("jit_bf16_tanh_large", AFTER))
    rmap = reverse_map(before, after)
    assert rmap.method == "name+opcode"
    assert any("carries no op_name metadata" in n for n in rmap.notes)
    assert rmap.mapping["tanh.1"] == ("loop_multiply_fusion",)
    assert rmap.mapping["mul.13"] == ("loop_multiply_fusion",)
    assert sum(bool(v) for v in rmap.mapping.values()) >= 15
    doc = rmap.to_json()
    assert doc["reverse_map"]["tanh.1"] == ["loop_multiply_fusion"]
    assert doc["notes"] == list(rmap.notes) and "folded_away" in doc
    assert_mapped_by_construction(before, after, rmap)


def test_name_ancestors_follow_xla_clone_and_rename_conventions() -> None:
    assert list(name_ancestors("tanh.1.9")) == ["tanh.1.9", "tanh.1", "tanh"]
    assert "constant.7" in name_ancestors("constant_7_1")
    assert list(name_ancestors("add.3.clone")) == ["add.3.clone", "add.3", "add"]
    assert list(name_ancestors("wrapped_add")) == ["wrapped_add"]


def test_onednn_matmul_custom_call_is_a_library_gemm() -> None:
    # The CPU build here never emits oneDNN, so this one module is written by hand in the
    # form XLA's oneDNN rewriter produces.
    text = """HloModule m
ENTRY %e (a: f32[4,8,16], b: f32[4,32,16]) -> f32[4,8,32] {
  %a = f32[4,8,16]{2,1,0} parameter(0)
  %b = f32[4,32,16]{2,1,0} parameter(1)
  ROOT %mm = f32[4,8,32]{2,1,0} custom-call(%a, %b), custom_call_target="__onednn$matmul", backend_config={"onednn_matmul_config":{"transpose_a":false,"transpose_b":true}}
}
"""
    (call,) = find_clusters(parse_module(text))
    assert (call.kind, call.target) == ("library", "__onednn$matmul")
    assert call.gemm == GemmShape(8, 16, 32, 4, "f32", "f32", "f32")


def test_cpu_small_call_is_one_cluster_matching_its_one_profile_event(tmp_path: Path) -> None:
    """XLA:CPU compiles threefry's loop into one `call` thunk (xla_cpu_small_call): the profile
    shows one `call` event and nothing for the fusions inside it."""
    from jax.profiler import ProfileData

    split = jax.jit(lambda k: jax.random.split(k, 3))
    key = jax.random.key(0)
    compiled = split.lower(key).compile()
    module = parse_module(compiled.as_text())
    clusters = {c.name: c for c in find_clusters(module)}
    calls = [c for c in clusters.values() if c.kind == "call"]
    assert len(calls) == 1, sorted(clusters)
    assert dict(calls[0].member_opcodes).get("while") == 1
    jax.block_until_ready(split(key))
    with jax.profiler.trace(str(tmp_path)):
        jax.block_until_ready(split(key))
    (xplane,) = tmp_path.rglob("*.xplane.pb")
    thunks = {
        e.name
        for plane in ProfileData.from_file(str(xplane)).planes
        for line in plane.lines
        for e in line.events
        if not e.name.startswith(("$", "end: "))
    }
    # Every cluster is one thunk of the profile, so each launch has its cluster and back.
    assert set(clusters) <= thunks, sorted(set(clusters) - thunks)
