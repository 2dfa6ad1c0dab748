"""Collectives in HLO: replica groups in every syntax, bytes per device, source op, and which
pass made each one; on the 2xH200 fixtures and on live 4-device CPU compiles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mesh_helpers import (
    SCRIPT,
    X2_VARIANTS,
    MeshCapture,
    mesh_capture,
    reference,
    x2,
    x2_dump,
    x2_module,
)

from harness.hlo.clusters import find_clusters
from harness.hlo.collectives import (
    Collective,
    CollectiveError,
    collective_origins,
    find_collectives,
    parse_replica_groups,
    stages_from_dump,
)
from harness.hlo.parser import parse_file, parse_module

MIB = 1 << 20


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> MeshCapture:
    return mesh_capture(tmp_path_factory)


def only(collectives: tuple[Collective, ...]) -> Collective:
    assert len(collectives) == 1, [c.name for c in collectives]
    return collectives[0]


# --- replica-group syntaxes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "groups", "syntax"),
    [
        ("{{0,1},{2,3}}", ((0, 1), (2, 3)), "explicit"),
        ("{{0,2},{1,3}}", ((0, 2), (1, 3)), "explicit"),
        ("{}", ((0, 1, 2, 3),), "all"),
        ("[2,2]<=[4]", ((0, 1), (2, 3)), "iota"),
        ("[2,2]<=[2,2]T(1,0)", ((0, 2), (1, 3)), "iota"),
        ("[1,4]<=[4]", ((0, 1, 2, 3),), "iota"),
        ("[4,2]<=[2,4]T(1,0)", ((0, 4), (1, 5), (2, 6), (3, 7)), "iota"),
        ("mesh['axis_0'=2] {'axis_0'}", ((0, 1),), "mesh"),
        ("mesh['a'=2,'b'=2] {'b'}", ((0, 1), (2, 3)), "mesh"),
        ("mesh['a'=2,'b'=2] {'a'}", ((0, 2), (1, 3)), "mesh"),
        ("mesh['a'=2,'b'=2] {'b','a'}", ((0, 2, 1, 3),), "mesh"),
        ("mesh['a'=2,'b'=2] {}", ((0,), (1,), (2,), (3,)), "mesh"),
        ("mesh[a=2,b=2] {b}", ((0, 1), (2, 3)), "mesh"),
        # What XLA writes when the mesh's devices are not in id order (seen live below).
        ("mesh['a'=1,'b'=2,'c'=2], device_ids=([2,2]T(1,0)) {'b'}", ((0, 1), (2, 3)), "mesh"),
        ("mesh['a'=1,'b'=4], device_ids=([2,2]T(1,0)) {'b'}", ((0, 2, 1, 3),), "mesh"),
        ("mesh['a'=2,'b'=2], device_ids=(0,2,1,3) {'b'}", ((0, 2), (1, 3)), "mesh"),
        # Sub-axes `name:(pre)size`: the major and the minor factor of an axis of 4.
        ("mesh['a'=4] {'a':(1)2}", ((0, 2), (1, 3)), "mesh"),
        ("mesh['a'=4] {'a':(2)2}", ((0, 1), (2, 3)), "mesh"),
    ],
)
def test_every_replica_group_syntax_gives_the_groups_xla_means(
    text: str, groups: tuple[tuple[int, ...], ...], syntax: str
) -> None:
    parsed = parse_replica_groups(text, num_devices=4, where="m.txt: all-reduce.1")
    assert (parsed.groups, parsed.syntax) == (groups, syntax)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{{0,1},{1,2}}", "overlapping"),
        ("{{0,1},{a}}", "integers"),
        ("[2,3]<=[4]", "as many ids"),
        ("[2,2]<=[2,2]T(0,0)", "not a permutation"),
        ("mesh['a'=2] {'z'}", "not a mesh axis"),
        ("mesh['a'=2]", "expected {axes}"),
        ("mesh['a'=2,'a'=2] {'a'}", "repeats"),
        ("mesh['a'=2,'b'=2], device_ids=(0,1,1,3) {'b'}", "not a permutation"),
        ("mesh['a'=4] {'a':(1)3}", "does not divide"),
        ("devices=[2]0,1", "unknown replica-group syntax"),
    ],
)
def test_malformed_replica_groups_raise_one_line_naming_the_instruction(
    text: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint) as err:
        parse_replica_groups(text, num_devices=4, where="m.txt: all-reduce.1")
    assert str(err.value).startswith("m.txt: all-reduce.1:")
    assert "\n" not in str(err.value)


def test_a_malformed_group_in_a_real_module_names_the_file_and_instruction() -> None:
    path = next((x2("k_sharded_replicated_out") / "dump").glob("*gpu_after_optimizations.txt"))
    text = path.read_text().replace("{'axis_0'}, use_global", "{'axis_9'}, use_global")
    module = parse_module(text, str(path))
    with pytest.raises(
        CollectiveError, match=r"all-reduce\.3: group axis 'axis_9' is not a mesh axis"
    ) as err:
        find_collectives(module)
    assert str(err.value).startswith(str(path))


# --- async forms (no backend we can run makes them: CPU collectives are synchronous and the
# H200 fixtures' are `is_sync`), written in XLA's syntax and checked by XLA's own parser -------

ASYNC_HLO = """
HloModule async_collectives, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%wrapped_reduce_scatter (p: f32[64,48]) -> f32[16,48] {
  %p = f32[64,48]{1,0} parameter(0)
  ROOT %reduce-scatter.1 = f32[16,48]{1,0} reduce-scatter(%p), channel_id=3, replica_groups=[1,4]<=[4], use_global_device_ids=true, dimensions={0}, to_apply=%add
}

ENTRY %main (x: f32[64,48]) -> (f32[64,48], f32[256,48], f32[16,48], f32[64,48], f32[64,48]) {
  %x = f32[64,48]{1,0} parameter(0)
  %all-reduce-start = f32[64,48]{1,0} all-reduce-start(%x), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, to_apply=%add
  %all-reduce-done = f32[64,48]{1,0} all-reduce-done(%all-reduce-start)
  %all-gather-start = (f32[64,48]{1,0}, f32[256,48]{1,0}) all-gather-start(%x), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %all-gather-done = f32[256,48]{1,0} all-gather-done(%all-gather-start)
  %async-start = ((f32[64,48]{1,0}), f32[16,48]{1,0}, s32[]) async-start(%x), calls=%wrapped_reduce_scatter
  %async-done = f32[16,48]{1,0} async-done(%async-start)
  %collective-permute-start = (f32[64,48]{1,0}, f32[64,48]{1,0}) collective-permute-start(%x), channel_id=4, source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
  %collective-permute-done = f32[64,48]{1,0} collective-permute-done(%collective-permute-start)
  %collective-broadcast = f32[64,48]{1,0} collective-broadcast(%x), channel_id=5, replica_groups={{0,1},{2,3}}
  ROOT %t = (f32[64,48]{1,0}, f32[256,48]{1,0}, f32[16,48]{1,0}, f32[64,48]{1,0}, f32[64,48]{1,0}) tuple(%all-reduce-done, %all-gather-done, %async-done, %collective-permute-done, %collective-broadcast)
}
"""
F32 = 64 * 48 * 4


def xla_printed(text: str) -> str:
    """The module as XLA's own parser reads and its printer writes it."""
    hlo = pytest.importorskip("jaxlib._hlo")
    return hlo.hlo_module_from_text(text).to_string()


def by_opcode(text: str) -> dict[str, Collective]:
    return {c.opcode: c for c in find_collectives(parse_module(text, "async.hlo"))}


def test_async_pairs_and_wrapped_collectives_count_once_with_the_done_result() -> None:
    found = by_opcode(ASYNC_HLO)
    assert list(found) == [
        "reduce-scatter",
        "all-reduce",
        "all-gather",
        "collective-permute",
        "collective-broadcast",
    ]
    ar, ag, rs = found["all-reduce"], found["all-gather"], found["reduce-scatter"]
    assert (ar.name, ar.is_async, ar.replica_groups, ar.group_syntax) == (
        "all-reduce-start",
        True,
        ((0, 2), (1, 3)),
        "iota",
    )
    assert ar.sent_bytes == 2 * 1 * F32 // 2
    assert (ag.out_shape, ag.out_bytes, ag.sent_bytes) == ("f32[256,48]{1,0}", 4 * F32, 3 * F32)
    assert (rs.name, rs.wrapper, rs.hlo_ops, rs.computation) == (
        "reduce-scatter.1",
        "async-start",
        ("reduce-scatter.1", "async-start"),
        "main",
    )
    assert (rs.in_bytes, rs.out_bytes, rs.sent_bytes, rs.reduction) == (
        F32,
        F32 // 4,
        3 * F32 // 4,
        "sum",
    )
    cp, cb = found["collective-permute"], found["collective-broadcast"]
    assert (cp.is_async, cp.participants, cp.sent_bytes, cp.out_shape) == (
        True,
        4,
        F32,
        "f32[64,48]{1,0}",
    )
    assert (cb.participants, cb.sent_bytes) == (2, F32)


def test_xla_prints_the_wrapped_collective_as_a_start_done_pair_with_the_same_bytes() -> None:
    printed = xla_printed(ASYNC_HLO)
    assert "reduce-scatter-start(" in printed  # XLA's sugar for the async-start wrapper
    ours, xla = by_opcode(ASYNC_HLO), by_opcode(printed)
    rs = xla["reduce-scatter"]
    assert (rs.name, rs.hlo_opcode, rs.is_async, rs.out_shape) == (
        "async-start",
        "reduce-scatter-start",
        True,
        "f32[16,48]{1,0}",
    )
    fields = ("opcode", "replica_groups", "participants", "in_bytes", "out_bytes", "sent_bytes")
    for opcode in ours:
        assert [getattr(xla[opcode], f) for f in fields] == [
            getattr(ours[opcode], f) for f in fields
        ]


# --- the 2xH200 fixtures --------------------------------------------------------------------------


def test_k_sharded_replicated_out_all_reduces_the_whole_product_over_both_gpus() -> None:
    c = only(find_collectives(x2_module("k_sharded_replicated_out")))
    assert (c.name, c.opcode, c.is_async, c.reduction) == (
        "all-reduce.3",
        "all-reduce",
        False,
        "sum",
    )
    assert (c.replica_groups, c.group_syntax, c.group_text) == (
        ((0, 1),),
        "mesh",
        "mesh['axis_0'=2] {'axis_0'}",
    )
    assert (c.participants, c.dtype, c.in_shape, c.out_shape) == (
        2,
        "bf16",
        "bf16[8192,8192]{1,0}",
        "bf16[8192,8192]{1,0}",
    )
    # Ring all-reduce over 2 GPUs: each sends 2(P-1)/P * N = N = the 128 MiB bf16 product.
    assert (c.payload_bytes, c.sent_bytes, c.received_bytes) == (128 * MIB, 128 * MIB, 128 * MIB)
    assert (c.channel_id, c.use_global_device_ids, c.spmd_generated) == (1, True, True)
    assert c.op_name == "jit(gelu_linear)/dot_general"
    assert c.source == "/work/steering/tools/x2_probe.py:56"


def test_k_sharded_scattered_out_reduce_scatters_half_of_the_product_to_each_gpu() -> None:
    c = only(find_collectives(x2_module("k_sharded_scattered_out")))
    assert (c.name, c.opcode, c.dimensions) == ("reduce-scatter.3", "reduce-scatter", (0,))
    assert (c.in_bytes, c.out_bytes, c.sent_bytes) == (128 * MIB, 64 * MIB, 64 * MIB)


def test_n_sharded_replicated_out_all_gathers_the_column_halves() -> None:
    c = only(find_collectives(x2_module("n_sharded_replicated_out")))
    assert (c.name, c.opcode, c.dimensions, c.group_text) == (
        "all-gather.3",
        "all-gather",
        (1,),
        "mesh['d'=2] {'d'}",
    )
    assert (c.in_shape, c.out_shape) == ("bf16[8192,4096]{0,1}", "bf16[8192,8192]{0,1}")
    assert (c.payload_bytes, c.sent_bytes) == (128 * MIB, 64 * MIB)


@pytest.mark.parametrize("variant", X2_VARIANTS)
def test_collectives_agree_with_what_the_probe_saw_in_the_hlo(variant: str) -> None:
    probe = {p["name"]: p for p in json.loads((x2(variant).parent / "probe.json").read_text())}
    found = [c.opcode for c in find_collectives(x2_module(variant))]
    assert found == probe[variant]["collectives_in_hlo"]


@pytest.mark.parametrize("variant", X2_VARIANTS)
def test_every_collective_is_one_cluster_of_its_module(variant: str) -> None:
    module = x2_module(variant)
    names = {c.name for c in find_clusters(module)}
    assert all(c.name in names for c in find_collectives(module))


def test_the_gpu_all_reduce_and_all_gather_come_from_the_spmd_partitioner() -> None:
    for variant in ("k_sharded_replicated_out", "n_sharded_replicated_out"):
        module = x2_module(variant)
        (origin,) = collective_origins(find_collectives(module), stages_from_dump(x2_dump(variant)))
        assert (origin.made_by, origin.stage) == ("spmd-partitioner", "after_spmd_partitioner")


def test_the_gpu_reduce_scatter_is_made_after_partitioning_from_all_reduce_and_slice() -> None:
    variant = "k_sharded_scattered_out"
    (origin,) = collective_origins(
        find_collectives(x2_module(variant)), stages_from_dump(x2_dump(variant))
    )
    assert (origin.made_by, origin.stage) == ("later-pass", "after_optimizations")
    # What the partitioner wrote instead: the full all-reduce, then each GPU's slice.
    spmd = parse_file(next(p for p in x2_dump(variant) if "after_spmd_partitioner" in p.name))
    assert {"all-reduce", "dynamic-slice"} <= {i.opcode for _, i in spmd.instructions()}


def test_stages_refuse_dump_files_of_two_modules(tmp_path: Path) -> None:
    files = [tmp_path / "module_0001.a.before_optimizations.txt"]
    files.append(tmp_path / "module_0002.a.before_optimizations.txt")
    with pytest.raises(ValueError, match="several modules"):
        stages_from_dump(files)


# --- live: 4 forced CPU devices --------------------------------------------------------------------


def collectives_of(mesh: MeshCapture, variant: str) -> tuple[Collective, ...]:
    return find_collectives(parse_file(mesh.after_optimizations(variant)))


def origins_of(mesh: MeshCapture, variant: str) -> list[tuple[str, str]]:
    found = collective_origins(
        collectives_of(mesh, variant), stages_from_dump(mesh.dump_files(variant))
    )
    return [(o.made_by, o.pass_name) for o in found]


def test_data_parallel_needs_no_collective(mesh: MeshCapture) -> None:
    assert collectives_of(mesh, "dp") == ()


def test_contraction_sharded_with_replicated_output_all_reduces_the_full_product(
    mesh: MeshCapture,
) -> None:
    c = only(collectives_of(mesh, "k_sharded"))
    assert (c.opcode, c.replica_groups, c.participants, c.reduction) == (
        "all-reduce",
        ((0, 1, 2, 3),),
        4,
        "sum",
    )
    # f32[64,48] = 12288 bytes on each device; ring: 2 * 3/4 * 12288.
    assert (c.in_bytes, c.payload_bytes, c.sent_bytes) == (12288, 12288, 18432)
    assert origins_of(mesh, "k_sharded") == [("spmd-partitioner", "spmd-partitioning")]


def test_column_parallel_with_replicated_output_all_gathers_the_columns(
    mesh: MeshCapture,
) -> None:
    c = only(collectives_of(mesh, "column"))
    assert (c.opcode, c.dimensions, c.replica_groups) == ("all-gather", (1,), ((0, 1, 2, 3),))
    assert (c.in_bytes, c.out_bytes, c.sent_bytes) == (64 * 12 * 4, 12288, 9216)
    assert origins_of(mesh, "column") == [("spmd-partitioner", "spmd-partitioning")]


def test_a_2x2_mesh_gathers_columns_within_each_row_of_devices(mesh: MeshCapture) -> None:
    c = only(collectives_of(mesh, "mesh_2d"))
    assert (c.opcode, c.group_text) == ("all-gather", "mesh['axis_0'=2,'axis_1'=2] {'axis_1'}")
    assert (c.replica_groups, c.participants) == (((0, 1), (2, 3)), 2)
    # Each device gathers its row block [32,48] from 2 halves of [32,24]: (2-1)/2 * 6144.
    assert (c.out_bytes, c.sent_bytes) == (6144, 3072)


def test_a_mesh_out_of_device_order_writes_device_ids_and_groups_map_to_devices(
    mesh: MeshCapture,
) -> None:
    module = parse_file(mesh.after_optimizations("k_2d"))
    c = only(find_collectives(module))
    assert (
        c.group_text
        == "mesh['axis_0'=1,'axis_1'=2,'axis_2'=2], device_ids=([2,2]T(1,0)) {'axis_1'}"
    )
    assert c.replica_groups == ((0, 1), (2, 3))
    # jax runs partition p on mesh.devices.flat[p] = [0, 2, 1, 3][p]: the 'n' axis pairs
    # devices 0 with 2 and 1 with 3, the columns of [[0, 2], [1, 3]].
    assert mesh.assignment("k_2d") == [0, 2, 1, 3]
    assert c.device_groups(mesh.assignment("k_2d")) == ((0, 2), (1, 3))
    assert (c.in_bytes, c.sent_bytes) == (32 * 48 * 4, 32 * 48 * 4)


def test_the_parser_keeps_the_device_ids_form_in_one_attribute(mesh: MeshCapture) -> None:
    module = parse_file(mesh.after_optimizations("k_2d"))
    inst = next(i for _, i in module.instructions() if i.opcode == "all-reduce")
    # `replica_groups=mesh[...], device_ids=(...) {...}` has a top-level comma inside it.
    assert inst.attrs["replica_groups"] == (
        "mesh['axis_0'=1,'axis_1'=2,'axis_2'=2], device_ids=([2,2]T(1,0)) {'axis_1'}"
    )
    assert "device_ids" not in inst.attrs


def test_mismatched_shardings_permute_shards_before_the_all_reduce(mesh: MeshCapture) -> None:
    reduce, permute = sorted(collectives_of(mesh, "k_mixed"), key=lambda c: c.opcode)
    assert permute.opcode == "collective-permute"
    assert permute.source_target_pairs == ((0, 0), (2, 1), (1, 2), (3, 3))
    # A shard f32[8,48] = 1536 bytes goes 2->1 and 1->2; 0 and 3 keep theirs.
    assert (permute.payload_bytes, permute.sent_bytes, permute.received_bytes) == (1536, 1536, 1536)
    assert (reduce.opcode, reduce.replica_groups) == ("all-reduce", ((0, 1, 2, 3),))


def test_a_hand_written_psum_scatter_is_the_programs_own_reduce_scatter(mesh: MeshCapture) -> None:
    c = only(collectives_of(mesh, "psum_scatter"))
    assert (c.opcode, c.group_syntax, c.replica_groups) == (
        "reduce-scatter",
        "explicit",
        ((0, 1, 2, 3),),
    )
    assert (c.in_bytes, c.out_bytes, c.sent_bytes, c.dimensions) == (12288, 3072, 9216, (0,))
    assert c.op_name.endswith("shard_map/reduce_scatter")
    line = next(i for i, t in enumerate(SCRIPT.split("\n"), 1) if "lax.psum_scatter(" in t)
    assert c.source == f"{mesh.root / 'capture_script.py'}:{line}"
    assert origins_of(mesh, "psum_scatter") == [("program", "")]


def test_two_psums_become_one_tuple_all_reduce_made_by_the_combiner(mesh: MeshCapture) -> None:
    c = only(collectives_of(mesh, "psum_pair"))
    assert (c.opcode, c.out_shape) == ("all-reduce", "(f32[64,48]{1,0}, f32[])")
    assert (c.payload_bytes, c.sent_bytes) == (12292, 2 * 3 * 12292 // 4)
    assert origins_of(mesh, "psum_pair") == [("later-pass", "cpu-all-reduce-combiner")]


@pytest.mark.parametrize(
    "variant", ["dp", "k_sharded", "column", "mesh_2d", "k_2d", "k_mixed", "psum_scatter"]
)
def test_the_sharded_result_matches_float64_numpy(mesh: MeshCapture, variant: str) -> None:
    x, w, b = mesh.inputs()
    expected = reference(x, w, b)
    (y,) = mesh.outputs(variant)
    # np.asarray gathers the global array, whatever the output's sharding.
    assert y.shape == expected.shape == (64, 48)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_the_combined_psums_still_give_both_results(mesh: MeshCapture) -> None:
    x, w, b = mesh.inputs()
    y, total = mesh.outputs("psum_pair")
    np.testing.assert_allclose(y, reference(x, w, b), rtol=1e-5, atol=1e-5)
    assert total == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-5)
