"""The branch the profile saw (issue 58): inside a command buffer, a kernel XLA deduplicated
across the branches of one conditional goes to the command in the branch that ran, by the
branch's own kernels in the buffer's order; with no evidence, the first branch, marked
ambiguous. Thunk sequences written as XLA prints them, events as the profile reads them."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from harness.hlo.thunks import parse_sequence
from harness.match.command_buffers import place_events
from harness.match.match import match_events
from harness.match.table_match import match_table
from harness.profile.events import DeviceEvent
from harness.profile.table import (
    FLOAT_COLUMNS,
    INT_COLUMNS,
    STRING_COLUMNS,
    EventTable,
    from_arrow,
)

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


@dataclass(frozen=True)
class _Cluster:
    name: str
    kind: str = "fusion"
    target: str | None = None
    epilogue: str | None = None
    parent: str | None = None
    source_ops: tuple[str, ...] = ()


# The buffer as XLA's thunk metadata names its commands: the argmax kernel is one, its
# fusions two, `input_reduce_fusion` in the greedy branch and `input_reduce_fusion.3` in the
# sampling one (as on the H100 decoder of issue 58).
NAMED = replace(
    BUFFER,
    name="command_buffer_1",
    commands=tuple(
        replace(c, instruction=c.kernel + (".3" if c.index == 6 else "") if c.kernel else None)
        for c in BUFFER.commands
    ),
)
CLUSTERS = {"jit_f": [_Cluster(c.instruction) for c in NAMED.commands if c.instruction]}


def _table(events: list[DeviceEvent]) -> EventTable:
    columns = {f: [getattr(e, f) for e in events] for f in INT_COLUMNS + FLOAT_COLUMNS}
    for f in STRING_COLUMNS:
        columns[f] = [
            ",".join(map(str, v)) if isinstance(v := getattr(e, f), tuple) else v for e in events
        ]
    return from_arrow(pa.table(columns))


def test_the_table_match_gives_a_shared_kernel_to_the_fusion_in_the_branch_that_ran() -> None:
    head = ("loop_broadcast_fusion", "set_case_condition", "input_reduce_fusion")
    # Two executions a step, the first greedy, the second sampling, over two steps.
    names = (*head, "loop_select_fusion", *head, "loop_divide_fusion") * 2
    events = [replace(e, step=i // 8, start_ns=10.0 * i) for i, e in enumerate(_events(*names))]
    buffers = {"jit_f": (NAMED,)}
    by_table = match_table(_table(events), CLUSTERS, command_buffers=buffers)
    by_events = match_events(events, CLUSTERS, command_buffers=buffers)
    clusters = [a.cluster for a in by_table.attributions]
    assert clusters == [a.cluster for a in by_events.attributions]
    argmax = [c for n, c in zip(names, clusters, strict=True) if n == "input_reduce_fusion"]
    assert argmax == ["input_reduce_fusion", "input_reduce_fusion.3"] * 2
    assert by_table.launches_per_cluster["jit_f:input_reduce_fusion.3"] == 1.0
