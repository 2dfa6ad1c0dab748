"""The nested thunk sequence read as a tree (issue 40).

The shapes below are written from XLA's thunk printers, read in openxla/xla:
- `xla/backends/gpu/runtime/while_thunk.cc`, `WhileThunk::ToString`: a newline, then
  `condition:` at the while's own indent and its thunks one level (two spaces) deeper, then
  `body:` and its thunks;
- `xla/backends/gpu/runtime/conditional_thunk.cc`, `ConditionalThunk::ToString`: a newline,
  then `false_branch:`/`true_branch:` for a predicate, `branch_N:` for an index, each followed
  by its thunks one level deeper;
- the command buffer, async-start and dynamic-slice printers list their thunks indented below
  their own line, as the H200 loops fixture shows (`thunk_sequence_after_thunk_passes.txt`).
Every thunk file of ../shared/fixtures is read too: none may lose a line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES

from harness.hlo.thunks import parse_metadata, parse_sequence, parse_tree

LOOPS = FIXTURES / "h200-jax0.11.2-loops"
THUNK_FILES = sorted(FIXTURES.rglob("*thunk_sequence*.txt")) if FIXTURES.exists() else []

WHILE_IN_BUFFER = """\
000: kCommandBuffer [source | sink]
    001: kCustomKernel [source | next=002 (1)] fusion_1 grid: [4, 1, 1] threads: [128, 1, 1]
    002: kWhile        [prev=001 (1) | sink]

    condition:
        003: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1] threads: [1, 1, 1]
    body:
        004: kCopy [source | next=005 (1)] kCopy
        005: kConditional [prev=004 (1) | sink]

        false_branch:
            006: kCustomKernel [source | sink] wrapped_negate grid: [2, 1, 1] threads: [64, 1, 1]
        true_branch:
            007: kCublasLtMatmul [source | next=008 (1)] kCublasLtMatmul
            008: kCustomKernel [prev=007 (1) | sink] loop_add_fusion grid: [2, 1, 1] threads: [64, 1, 1]
"""

ASYNC_AND_WRAPPERS = """\
010: kAsyncStart [source | next=014 (2)] stream=computation_stream[3], async_id=10
    012: kDynamicSliceFusion [source | sink] params=1, results=1
        011: kCopy [source | sink] kCopy
013: kConditional [source | sink]
  branch_0:
    015: kCustomKernel [source | sink] wrapped_add grid: [1, 1, 1] threads: [1, 1, 1]
  branch_1:
  branch_2:
    016: kCuDnn [source | sink] kCuDnn
014: kAsyncDone [prev=010 (2) | sink] async_id=10
017: kSomethingNew printed by a later XLA
this line is no thunk at all
"""


def _shape(node) -> tuple:  # type: ignore[no-untyped-def]
    return (
        node.thunk_id,
        node.kind,
        tuple((b.label, tuple(_shape(t) for t in b.thunks)) for b in node.blocks),
    )


def test_a_while_in_a_command_buffer_holds_its_condition_body_and_branches() -> None:
    tree = parse_tree(WHILE_IN_BUFFER, "seq.txt")
    assert tree.skipped == ()
    (buffer,) = tree.thunks
    assert _shape(buffer) == (
        0,
        "kCommandBuffer",
        (
            (
                "",
                (
                    (1, "kCustomKernel", ()),
                    (
                        2,
                        "kWhile",
                        (
                            ("condition", ((3, "kCustomKernel", ()),)),
                            (
                                "body",
                                (
                                    (4, "kCopy", ()),
                                    (
                                        5,
                                        "kConditional",
                                        (
                                            ("false_branch", ((6, "kCustomKernel", ()),)),
                                            (
                                                "true_branch",
                                                (
                                                    (7, "kCublasLtMatmul", ()),
                                                    (8, "kCustomKernel", ()),
                                                ),
                                            ),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    (cb,) = parse_sequence(WHILE_IN_BUFFER, "seq.txt")
    by_id = {c.index: c for c in cb.commands}
    assert (by_id[3].owner, by_id[3].branch) == (2, "condition")
    assert (by_id[7].owner, by_id[7].branch, by_id[7].kernel) == (5, "true_branch", None)
    assert (by_id[6].kernel, by_id[6].grid) == ("wrapped_negate", (2, 1, 1))
    assert by_id[1].owner is None and not by_id[1].nested and by_id[8].nested
    assert cb.has_control_flow


def test_async_starts_wrappers_and_empty_branches_nest_and_unknown_lines_are_counted() -> None:
    tree = parse_tree(ASYNC_AND_WRAPPERS, "seq.txt")
    start, cond, done, new = tree.thunks
    assert start.stream == 3 and start.kernel is None
    assert [(n.thunk_id, n.kind) for n in start.walk()] == [
        (10, "kAsyncStart"),
        (12, "kDynamicSliceFusion"),
        (11, "kCopy"),
    ]
    assert [(b.label, len(b.thunks)) for b in cond.blocks] == [
        ("branch_0", 1),
        ("branch_1", 0),
        ("branch_2", 1),
    ]
    assert done.prev == (10,) and new.kind == "kSomethingNew"
    assert tree.skipped == ("line 12: 'this line is no thunk at all'",)


@pytest.mark.skipif(not THUNK_FILES, reason=f"no fixtures at {FIXTURES}")
@pytest.mark.parametrize("path", THUNK_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_thunk_file_is_read_whole(path: Path) -> None:
    text = path.read_text()
    tree = parse_tree(text, str(path))
    assert tree.skipped == ()
    thunk_lines = sum(1 for line in text.splitlines() if line.strip()[:3].isdigit())
    assert sum(1 for _ in tree.walk()) == thunk_lines
    # Thunk ids are unique but for command buffers (each printed as 000).
    ids = Counter(n.thunk_id for n in tree.walk() if n.kind != "kCommandBuffer")
    assert max(ids.values()) == 1


@pytest.mark.skipif(not LOOPS.exists(), reason=f"no fixture at {LOOPS}")
def test_the_loops_fixture_nests_whiles_conditionals_and_buffers() -> None:
    dump = LOOPS / "loops_cmdbuf" / "dump"
    seq = next(dump.glob("*.thunk_sequence_after_thunk_passes.txt")).read_text()
    meta = parse_metadata(next(dump.glob("*.thunk_metadata.txt")).read_text(), "meta")
    tree = parse_tree(seq)
    kinds = Counter(n.kind for n in tree.walk())
    assert kinds["kWhile"] == 4 and kinds["kConditional"] == 1 and kinds["kCommandBuffer"] == 4
    whiles = [n for n in tree.thunks if n.kind == "kWhile"]
    assert [[b.label for b in w.blocks] for w in whiles] == [["condition", "body"]] * 4
    assert {n.stream for n in tree.walk() if n.kind == "kAsyncStart"} == {0, 1, 2, 3}
    buffers = parse_sequence(seq, "seq", meta)
    assert [b.name for b in buffers] == [
        "command_buffer_1",
        "command_buffer_14",
        "command_buffer_60",
        "command_buffer_128",
    ]
    cond = next(c for c in buffers[2].commands if c.kind == "kConditional")
    assert cond.instruction == "cond.23"
    branches = Counter(c.branch for c in buffers[2].commands if c.owner == cond.index)
    assert branches == {"branch_0": 1, "branch_1": 3}
