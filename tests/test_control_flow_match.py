"""Attribution through while bodies, conditionals and side streams of command buffers (issue 40).

The H200 loops fixture (`h200-jax0.11.2-loops/`) runs a scanned residual MLP with a `lax.cond`
in each layer and a `lax.fori_loop`, with and without command buffers, compiled alike: the run
without them says each event's real instruction (`loops_nocmdbuf/truth.json`), which the
command-buffer run's placement must reproduce for every compute kernel.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES

from harness.hlo.thunks import parse_sequence, read_command_buffers, thunk_files
from harness.match.command_buffers import place_events
from harness.match.match import MatchReport, match_events
from harness.profile.events import DeviceEvent, find_xplane
from harness.profile.reader import read_events_and_markers
from harness.program import modules as hlo_files

LOOPS = FIXTURES / "h200-jax0.11.2-loops"
PROGRAMS = FIXTURES / "h200-jax0.11.2-programs"
needs_loops = pytest.mark.skipif(not LOOPS.exists(), reason=f"no fixture at {LOOPS}")
needs_programs = pytest.mark.skipif(not PROGRAMS.exists(), reason=f"no fixture at {PROGRAMS}")


@functools.cache
def _match(run: Path, trace: str) -> tuple[MatchReport, dict[str, str | None]]:
    """The run's match with its thunk files, and each cluster's library target."""
    after = next((run / "dump").glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    module = hlo_files.parsed(after)
    clusters = hlo_files.clusters_of(module)
    buffers = read_command_buffers(*thunk_files(after, after.name.split(".sm_")[0]))
    events, _ = read_events_and_markers(find_xplane(run / trace))
    report = match_events(events, {module.name: clusters}, command_buffers={module.name: buffers})
    return report, {c.name: c.target for c in clusters}


def _compute(name: str) -> bool:
    """A compute kernel: not a memset, a copy (a memcpy kernel inside a graph) or a branch choice."""
    return not name.lower().startswith(("memset", "memcpy")) and name != "set_case_condition"


@needs_loops
def test_every_event_of_the_loops_is_attributed_with_the_uncommanded_runs_counts() -> None:
    report, _ = _match(LOOPS / "loops_cmdbuf", "trace_marked")
    assert report.steps == 5
    assert report.matched_fraction == 1.0, [a.reason for a in report.unmatched[:3]]
    truth = json.loads((LOOPS / "loops_nocmdbuf" / "truth.json").read_text())
    want = Counter(e["hlo_op"] for e in truth["events"] if _compute(e["name"]))
    got = Counter(a.cluster for a in report.attributions if _compute(a.event.name))
    assert len(want) == 50 and sum(want.values()) == 188 * 5
    assert got == want
    # Branch kernels ran on two other streams, and were placed there.
    streams = Counter(a.event.stream for a in report.attributions if a.rule == "thunk_kernel")
    assert len(streams) == 3


@needs_loops
def test_each_branch_choice_goes_to_its_conditional_and_each_graph_copy_to_a_copy() -> None:
    report, _ = _match(LOOPS / "loops_cmdbuf", "trace_marked")
    choices = [a for a in report.attributions if a.event.name == "set_case_condition"]
    assert len(choices) == 30
    assert {(a.cluster, a.rule) for a in choices} == {("cond.23", "thunk_condition")}
    copies = [a for a in report.attributions if a.event.name.startswith("memcpy")]
    assert len(copies) == 105 * 5 and {a.rule for a in copies} == {"thunk_copy"}
    assert all("copy" in a.reason for a in copies)
    # A copy runs for the dynamic-slice fusion that wraps it, or a copy instruction.
    assert all(
        a.cluster.startswith(("loop_dynamic_slice_fusion", "loop_dynamic_update_slice", "copy"))
        for a in copies
    ), Counter(a.cluster for a in copies)


@needs_programs
@pytest.mark.parametrize("run", ["mixer_cmdbuf_cudnn", "mixer_cmdbuf", "mixer_cmdbuf_xla"])
def test_library_kernels_stay_with_a_call_of_their_own_library(run: str) -> None:
    report, targets = _match(PROGRAMS / run, "trace")
    cublas = ("nvjet_", "cublas", "gemm")
    for a in report.attributions:
        target = targets.get(a.cluster or "") or ""
        name = a.event.name.lower()
        if "cudnn" in target:
            assert not name.startswith(cublas), (a.event.name, a.cluster)
        if "cublas" in target:
            assert "cudnn" not in name, (a.event.name, a.cluster)
    if run == "mixer_cmdbuf_cudnn":
        assert any("cudnn" in (targets.get(a.cluster or "") or "") for a in report.attributions)


def test_a_cublas_kernel_never_goes_to_a_ready_cudnn_call() -> None:
    # The cuDNN call is ready first (as an attention call beside a GEMM is): the nvjet kernel
    # must still go to the GEMM, and the cudnn kernel to the attention call.
    (buffer,) = parse_sequence(
        "000: kCommandBuffer [source | sink]\n"
        "    001: kCuDnn [source | sink] kCuDnn\n"
        "    002: kCublasLtMatmul [source | sink] kCublasLtMatmul\n",
        "seq.txt",
    )

    def event(name: str, start: float) -> DeviceEvent:
        return DeviceEvent(
            step=0, name=name, kind="kernel", direction=None, bytes=None, hlo_module="jit_f",
            hlo_op="command_buffer_1", program_id=None, correlation_id=None,
            device="/device:GPU:0", stream="Stream #1", start_ns=start, duration_ns=1.0,
        )  # fmt: skip

    window = [event("nvjet_sm90_tst_128x128_NNT", 0.0), event("cudnn_generated_sdpa", 10.0)]
    placed = place_events(window, {0: buffer, 1: buffer})
    assert [placed[0].command, placed[1].command] == [2, 1]
