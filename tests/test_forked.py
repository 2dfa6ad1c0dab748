"""harness.common.forked: a map shared with forked children gives what the plain loop gives, and a
process with a threaded runtime (JAX, torch) loaded is never forked.

The forking cases run in a fresh interpreter that imports harness.common.forked alone: the test
process itself has JAX loaded (other tests compile), and forking it is what the module refuses.
"""

from __future__ import annotations

import os

import pytest
from fresh_process import in_fresh_process

from harness.common import forked

pytestmark = pytest.mark.slow  # each test starts a fresh interpreter


def test_results_come_back_in_order_from_every_child() -> None:
    in_fresh_process(
        """
        from harness.common import forked
        assert forked.fork_safe()
        pids = forked.fork_map(lambda i: (i * i, os.getpid()), list(range(7)), decode=tuple, children=2)
        assert pids == [(i * i, p) for i, (_, p) in enumerate(pids)]
        assert len({p for _, p in pids}) == 3, pids  # the parent and two children each took a share
        """
    )


def test_a_map_inside_a_maps_worker_forks_no_more() -> None:
    """The hosts of a session are read by a map's workers, each reading its profile's chunks
    with a map of its own: that inner map runs in-process, the cores being taken."""
    in_fresh_process(
        """
        from harness.common import forked
        assert forked.children_for(8) > 0 or (os.cpu_count() or 1) < 2
        inner = lambda _: [p for p in forked.fork_map(lambda j: os.getpid(), range(4), children=3)]
        found = forked.fork_map(lambda i: (os.getpid(), inner(i)), range(2), decode=tuple, children=1)
        for worker, pids in found:
            assert set(pids) == {worker}, (worker, pids)
        assert len({w for w, _ in found}) == 2  # the outer map did fork
        """
    )


def test_an_item_that_raises_in_a_child_raises_in_the_parent() -> None:
    in_fresh_process(
        """
        from harness.common import forked
        def fn(i):
            if i == 1:
                raise ValueError(f"item {i} (raised in {os.getpid()})")
            return i
        try:
            forked.fork_map(fn, [0, 1, 2], children=1)
        except ValueError as e:
            assert "item 1" in str(e) and str(os.getpid()) in str(e), e  # computed again here
        else:
            raise AssertionError("no error")
        """
    )


def test_a_child_that_dies_is_made_up_for_by_the_parent() -> None:
    in_fresh_process(
        """
        from harness.common import forked
        parent = os.getpid()
        def fn(i):
            if os.getpid() != parent:
                os._exit(9)  # a child killed mid-share sends nothing
            return -i
        assert forked.fork_map(fn, [1, 2, 3, 4], children=1) == [-1, -2, -3, -4]
        """
    )


@pytest.mark.parametrize("runtime", ["jax", "torch"])
def test_a_process_with_a_threaded_runtime_is_never_forked(runtime: str) -> None:
    """Asked for children or not, the items are computed in the process itself."""
    out = in_fresh_process(
        f"""
        from harness.common import forked
        import {runtime}
        assert not forked.fork_safe() and forked.children_for(100) == 0
        pids = forked.fork_map(lambda i: os.getpid(), list(range(6)), children=3)
        assert pids == [os.getpid()] * 6, pids
        print("in-process")
        """
    )
    assert out.strip() == "in-process"


def test_this_test_process_has_jax_and_computes_in_process() -> None:
    import jax  # noqa: F401

    assert not forked.fork_safe()
    assert forked.fork_map(lambda i: (i, os.getpid()), [1, 2, 3], children=2) == [
        (i, os.getpid()) for i in (1, 2, 3)
    ]


def test_no_children_for_a_single_item() -> None:
    assert forked.children_for(1) == 0 and forked.fork_map(str, [5]) == ["5"]
