"""harness.forked: a map shared with forked children gives what the plain loop gives."""

from __future__ import annotations

import os

import pytest

from harness import forked


def test_results_come_back_in_order_from_every_child() -> None:
    pids = forked.fork_map(lambda i: (i * i, os.getpid()), list(range(7)), decode=tuple, children=2)
    assert pids == [(i * i, p) for i, (_, p) in enumerate(pids)]
    assert len({p for _, p in pids}) == 3  # the parent and two children each took a share


def test_an_item_that_raises_in_a_child_raises_in_the_parent() -> None:
    def fn(i: int) -> int:
        if i == 1:
            raise ValueError(f"item {i} (raised in {os.getpid()})")
        return i

    with pytest.raises(ValueError, match="item 1") as raised:
        forked.fork_map(fn, [0, 1, 2], children=1)
    assert str(os.getpid()) in str(raised.value)  # computed again here, so raised here


def test_a_child_that_dies_is_made_up_for_by_the_parent() -> None:
    parent = os.getpid()

    def fn(i: int) -> int:
        if os.getpid() != parent:
            os._exit(9)  # a child killed mid-share sends nothing
        return -i

    assert forked.fork_map(fn, [1, 2, 3, 4], children=1) == [-1, -2, -3, -4]


def test_no_children_for_a_single_item() -> None:
    assert forked.children_for(1) == 0 and forked.fork_map(str, [5]) == ["5"]
