"""The branch the profile saw (issue 58): inside a command buffer, a kernel XLA deduplicated
across the branches of one conditional goes to the command in the branch that ran, by the
branch's own kernels in the buffer's order; with no evidence, the first branch, marked
ambiguous. Thunk sequences written as XLA prints them, events as the profile reads them."""

from __future__ import annotations

from harness.hlo.thunks import parse_sequence
from harness.match.command_buffers import place_events
from harness.profile.events import DeviceEvent

GRID = "grid: [16, 1, 1] threads: [128, 1, 1]  shared_memory: 0 bytes"
# A greedy branch (0) and a sampling branch (1) that share the argmax kernel
# `input_reduce_fusion`, ready at once in either; each launches one kernel of its own.
(BUFFER,) = parse_sequence(
    "000: kCommandBuffer [source | sink]\n"
    f"    001: kCustomKernel [source | next=002 (1)] loop_broadcast_fusion {GRID}\n"
    "    002: kConditional [prev=001 (1) | sink]\n"
    "      branch_0:\n"
    f"        003: kCustomKernel [source | next=004 (1)] input_reduce_fusion {GRID}\n"
    f"        004: kCustomKernel [prev=003 (1) | sink] loop_select_fusion {GRID}\n"
    "      branch_1:\n"
    f"        005: kCustomKernel [source | sink] loop_divide_fusion {GRID}\n"
    f"        006: kCustomKernel [source | sink] input_reduce_fusion {GRID}\n",
    "seq.txt",
)


def _events(*names: str) -> list[DeviceEvent]:
    return [
        DeviceEvent(
            step=0,
            name=n,
            kind="kernel",
            direction=None,
            bytes=None,
            hlo_module="jit_f",
            hlo_op="command_buffer_1",
            program_id=None,
            correlation_id=None,
            device="/device:GPU:0",
            stream="Stream #1",
            start_ns=10.0 * i,
            duration_ns=1.0,
            grid=(16, 1, 1),
            block=(128, 1, 1),
        )
        for i, n in enumerate(names)
    ]


def _commands(*names: str) -> list[int]:
    window = _events(*names)
    placed = place_events(window, dict.fromkeys(range(len(window)), BUFFER))
    return [placed[i].command for i in range(len(window))]


def test_a_shared_kernel_goes_to_the_branch_whose_own_kernel_follows_it() -> None:
    names = ("loop_broadcast_fusion", "set_case_condition", "input_reduce_fusion")
    # Command order alone would give branch 0's (003): the sampling kernel after it says 1.
    assert _commands(*names, "loop_divide_fusion") == [1, 2, 6, 5]
    assert _commands(*names, "loop_select_fusion") == [1, 2, 3, 4]


def test_a_shared_kernel_goes_to_the_branch_whose_own_kernel_ran_before_it() -> None:
    names = ("loop_broadcast_fusion", "set_case_condition", "loop_divide_fusion")
    assert _commands(*names, "input_reduce_fusion") == [1, 2, 5, 6]


def test_each_execution_of_the_conditional_is_judged_on_its_own() -> None:
    greedy = (
        "loop_broadcast_fusion",
        "set_case_condition",
        "input_reduce_fusion",
        "loop_select_fusion",
    )
    sampled = (
        "loop_broadcast_fusion",
        "set_case_condition",
        "loop_divide_fusion",
        "input_reduce_fusion",
    )
    assert _commands(*greedy, *sampled) == [1, 2, 3, 4, 1, 2, 5, 6]


def test_without_evidence_the_first_branch_is_taken_and_marked_ambiguous() -> None:
    window = _events("loop_broadcast_fusion", "set_case_condition", "input_reduce_fusion")
    placed = place_events(window, dict.fromkeys(range(3), BUFFER))
    assert placed[2].command == 3 and placed[2].ambiguous
    assert "the first branch in command order is taken" in placed[2].reason
