"""Attribution inside CUDA-graph command buffers, from the dump's thunk files (issue 23).

The H200 fixture pairs (`h200-jax0.11.2-programs/`) run the same MLP-Mixer train step with and
without command buffers; the run without them says each event's real instruction
(`truth.json`), which the command-buffer run's placement must reproduce.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES, read_summary

from harness.hlo.thunks import parse_metadata, parse_sequence, read_command_buffers, thunk_files
from harness.match.match import MatchReport, is_library_kernel, match_events
from harness.profile.events import DeviceEvent, find_xplane
from harness.profile.reader import read_events_and_markers
from harness.program import modules as hlo_files
from harness.records import events_file, ladder
from harness.records.gaps import AttributionGaps
from harness.report.doc import Table, to_markdown
from harness.report.gaps import gap_blocks
from harness.store.runfolder import VariantFolder

PROGRAMS = FIXTURES / "h200-jax0.11.2-programs"
PAIRS = ("mixer_cmdbuf", "mixer_cmdbuf_cudnn", "mixer_cmdbuf_xla")
needs_programs = pytest.mark.skipif(
    not PROGRAMS.exists(), reason=f"H200 program fixtures not found at {PROGRAMS}"
)


@functools.cache
def fixture_match(run: str, with_thunks: bool = True) -> MatchReport:
    dump = PROGRAMS / run / "dump"
    after = next(dump.glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    key = after.name.split(".sm_")[0]
    module = hlo_files.parsed(after)
    buffers = read_command_buffers(*thunk_files(after, key)) if with_thunks else ()
    events, _ = read_events_and_markers(find_xplane(PROGRAMS / run / "trace"))
    return match_events(
        events,
        {module.name: hlo_files.clusters_of(module)},
        command_buffers={module.name: buffers} if with_thunks else None,
    )


@needs_programs
@pytest.mark.parametrize("run", PAIRS)
def test_every_command_buffer_event_is_attributed_as_the_paired_run_says(run: str) -> None:
    report = fixture_match(run)
    assert report.matched_fraction == 1.0, [a.reason for a in report.unmatched[:3]]
    assert report.gaps.complete
    truth = json.loads((PROGRAMS / run.replace("cmdbuf", "nocmdbuf") / "truth.json").read_text())
    want = Counter(e["hlo_op"] for e in truth["events"] if not e["name"].startswith("Memset"))
    got = Counter(a.cluster for a in report.attributions if a.event.kind != "memset")
    assert got == want
    assert {a.rule for a in report.attributions} <= {
        "thunk_kernel",
        "thunk_library",
        "thunk_memset",
    }


@needs_programs
@pytest.mark.parametrize("run", PAIRS)
def test_every_memset_goes_to_the_call_it_precedes(run: str) -> None:
    ordered = sorted(fixture_match(run).attributions, key=lambda a: a.event.start_ns)
    memsets = [i for i, a in enumerate(ordered) if a.event.kind == "memset"]
    assert memsets
    for i in memsets:
        following = next(a for a in ordered[i + 1 :] if a.event.kind != "memset")
        assert ordered[i].cluster == following.cluster
        assert ordered[i].rule == "thunk_memset"


@needs_programs
def test_a_cudnn_backward_call_owns_all_its_kernels() -> None:
    report = fixture_match("mixer_cmdbuf_cudnn")
    bwd = Counter(
        a.event.name.split("(")[0]
        for a in report.attributions
        if a.cluster == "dot_product_attention_bwd.24" and a.event.kind == "kernel"
    )
    assert len(bwd) == 3 and set(bwd.values()) == {report.steps}
    assert any("cudnn::fusion::convert_dq_to_16bits" in name for name in bwd)


@needs_programs
def test_interchangeable_commands_are_matched_and_counted_apart() -> None:
    report = fixture_match("mixer_cmdbuf")
    ambiguous = [a for a in report.attributions if a.ambiguous]
    assert 0 < report.ambiguous_fraction == len(ambiguous) / report.events_in_window < 0.1
    assert all(a.matched for a in ambiguous)
    # The Adam updates of three same-shaped parameters: one kernel, three sinks of the DAG.
    assert any(
        "loop_add_multiply_fusion.1 (command 135" in a.reason and "ambiguous" in a.reason
        for a in ambiguous
    )
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["ambiguous_fraction"] == report.ambiguous_fraction


@needs_programs
def test_without_the_thunk_files_the_report_shows_what_is_missing() -> None:
    report = fixture_match("mixer_cmdbuf", with_thunks=False)
    gaps = report.gaps
    assert not gaps.complete and gaps.unattributed_time_per_step_s > 0
    assert any(k.name.startswith("nvjet_") for k in gaps.unattributed)
    # Triton GEMM fusions are matched by name, not taken for library kernels.
    triton = [a for a in report.attributions if a.event.name.startswith("gemm_fusion_dot")]
    assert triton and all(a.matched for a in triton)
    text = to_markdown(tuple(gap_blocks(gaps)))
    assert "Not attributed" in text and "nvjet_" in text
    assert any(isinstance(b, Table) for b in gap_blocks(gaps))
    assert gap_blocks(fixture_match("mixer_cmdbuf").gaps)[0].__class__.__name__ == "Para"


def test_library_kernels_are_told_from_xla_kernels() -> None:
    assert not is_library_kernel("gemm_fusion_dot_13")
    assert is_library_kernel("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT")
    assert is_library_kernel("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(...)")
    assert is_library_kernel("gemm_kernel_xyz")


SEQUENCE = """000: kCommandBuffer [source | sink]
    001: kCustomKernel   [source        | next=003 (2) ] fusion_1 grid: [4, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes
    002: kCustomKernel   [source        | next=004 (2) ] fusion_2 grid: [4, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes
    003: kCublasLtMatmul [prev=001 (2)  | next=004 (1) ] kCublasLtMatmul
    004: kCustomKernel   [prev=003 (1)  | sink         ] loop_add grid: [8, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes
    005: kCustomKernel   [prev=002 (3)  | sink         ] loop_add grid: [8, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes
"""
METADATA = "".join(
    f'thunk_metadata {{\n  thunk_info {{\n    profile_annotation: "{a}"\n{t}  }}\n'
    f'  thunk_kind: "{k}"\n}}\n'
    for a, t, k in (
        ("command_buffer_1", "", "kCommandBuffer"),
        ("fusion.1", "    thunk_id: 1\n", "kCustomKernel"),
        ("fusion.2", "    thunk_id: 2\n", "kCustomKernel"),
        ("custom-call.3", "    thunk_id: 3\n", "kCublasLtMatmul"),
        ("loop_add.4", "    thunk_id: 4\n", "kCustomKernel"),
        ("loop_add.5", "    thunk_id: 5\n", "kCustomKernel"),
    )
)


def test_the_thunk_files_give_each_command_its_instruction_and_edges() -> None:
    (buffer,) = parse_sequence(SEQUENCE, "seq.txt", parse_metadata(METADATA, "meta.txt"))
    assert buffer.name == "command_buffer_1" and not buffer.has_control_flow
    gemm = buffer.commands[2]
    assert (gemm.index, gemm.kind, gemm.kernel, gemm.instruction) == (
        3,
        "kCublasLtMatmul",
        None,
        "custom-call.3",
    )
    assert gemm.prev == (1,) and gemm.next == (4,)
    assert buffer.commands[4].kernel == "loop_add" and buffer.commands[4].grid == (8, 1, 1)
    # A line the reader does not know is skipped and counted, never a stop.
    (lone,) = parse_sequence("000: kCommandBuffer [source | sink]\n    garbage\n", "seq.txt")
    assert lone.commands == ()
    with pytest.raises(ValueError, match=r"meta\.txt: thunk_metadata entry 0 has no thunk_kind"):
        parse_metadata("thunk_metadata {\n  thunk_info {\n  }\n}\n", "meta.txt")


def _event(name: str, start: float, kind: str = "kernel") -> DeviceEvent:
    return DeviceEvent(
        step=0,
        name=name,
        kind=kind,  # type: ignore[arg-type]
        direction=None,
        bytes=None,
        hlo_module="jit_f",
        hlo_op="command_buffer_1",
        program_id=None,
        correlation_id=None,
        device="/device:GPU:0",
        stream="Stream #1",
        start_ns=start,
        duration_ns=1.0,
    )


class _Cluster:
    def __init__(self, name: str) -> None:
        self.name, self.kind, self.target, self.epilogue, self.parent = (
            name,
            "fusion",
            None,
            None,
            None,
        )
        self.source_ops: tuple[str, ...] = ()


def test_events_in_another_order_the_dag_allows_are_placed_on_it() -> None:
    buffers = parse_sequence(SEQUENCE, "seq.txt", parse_metadata(METADATA, "meta.txt"))
    clusters = [
        _Cluster(n) for n in ("fusion.1", "fusion.2", "custom-call.3", "loop_add.4", "loop_add.5")
    ]
    # fusion_2 runs first and its loop_add before the GEMM's: the DAG allows it.
    names = ("fusion_2", "loop_add", "fusion_1", "Memset 0", "nvjet_x", "loop_add")
    events = [
        _event(n, i * 10.0, "memset" if n.startswith("Memset") else "kernel")
        for i, n in enumerate(names)
    ]
    report = match_events(events, {"jit_f": clusters}, steps=1, command_buffers={"jit_f": buffers})
    got = [a.cluster for a in report.attributions]
    assert got == [
        "fusion.2",
        "loop_add.5",
        "fusion.1",
        "custom-call.3",
        "custom-call.3",
        "loop_add.4",
    ]
    assert not any(a.ambiguous for a in report.attributions)
    # Both loop_adds ready at once (their predecessors placed): the match is made, counted apart.
    names = ("fusion_1", "fusion_2", "nvjet_x", "loop_add", "loop_add")
    events = [_event(n, i * 10.0) for i, n in enumerate(names)]
    report = match_events(events, {"jit_f": clusters}, steps=1, command_buffers={"jit_f": buffers})
    assert [a.ambiguous for a in report.attributions] == [False, False, False, True, True]
    assert "loop_add.5 (command 005" in report.attributions[3].reason
    assert report.ambiguous_fraction == pytest.approx(0.4)


def test_the_ladder_keeps_both_thunk_files() -> None:
    assert ladder.classify("thunk_metadata.txt") == ("thunk_metadata", "")
    assert ladder.classify("thunk_sequence_after_thunk_passes.txt") == ("thunks_after_passes", "")


def test_the_cpu_study_has_no_command_buffers_and_nothing_unattributed(cpu_run: Path) -> None:
    xla = read_summary(cpu_run)["xla"]
    assert xla.profile.matched_fraction == 1.0
    assert xla.profile.gaps == AttributionGaps()
    lad = ladder.read_ladder(cpu_run / "variants" / "xla" / "ir")
    assert not lad.has("thunks_after_passes") and not lad.has("thunk_metadata")
    kernels = json.loads((cpu_run / "variants" / "xla" / "kernels.json").read_text())
    assert kernels["match"]["ambiguous_fraction"] == 0.0
    events = events_file.read(VariantFolder(cpu_run / "variants" / "xla"))
    assert {e.rule for e in events} == {"hlo_op"}


@needs_programs
def test_thunk_files_kept_gzipped_read_as_they_were(tmp_path: Path) -> None:
    """A study gzips its ir/ in place once captured (51-thunk-metadata.txt as .txt.gz); the
    command buffers read by the plain names are the same (on an H100 the scanned stack's
    profile read "cannot open 51-thunk-metadata.txt" before the thunk reader took gzip)."""
    import gzip
    import shutil

    dump = PROGRAMS / "mixer_cmdbuf" / "dump"
    after = next(dump.glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    key = after.name.split(".sm_")[0]
    plain = thunk_files(after, key)
    assert all(p is not None for p in plain)
    for p in [after, *plain]:
        assert p is not None
        with p.open("rb") as src, gzip.open(tmp_path / (p.name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    kept = thunk_files(tmp_path / after.name, key)
    assert [p.name for p in kept if p] == [p.name for p in plain if p]
    assert read_command_buffers(*kept) == read_command_buffers(*plain)
