"""What control flow costs, as findings (issue 40): the `control_flow.*` rules over the
attributed events, on the H200 loops fixture (with and without command buffers) and on
constructed facts, once where each fires and once where it stays silent."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from conftest import FIXTURES
from test_rules import BASE

from harness.findings import control_flow, facts_of
from harness.hlo.thunks import read_command_buffers, thunk_files
from harness.match.match import kernels_document, match_events
from harness.profile.events import find_xplane
from harness.profile.reader import read_events_and_markers
from harness.program import modules as hlo_files
from harness.records import run_files
from harness.records.summary import RunSummary
from harness.saved.control_flow import (
    ControlFlowFacts,
    LoopFacts,
    SyncFacts,
    control_flow_facts,
)

LOOPS = FIXTURES / "h200-jax0.11.2-loops"
needs_loops = pytest.mark.skipif(not LOOPS.exists(), reason=f"no fixture at {LOOPS}")


@functools.cache
def _facts(run: str) -> ControlFlowFacts:
    """The facts the rules read, from the records the study writes for this run."""
    folder = LOOPS / run
    after = next((folder / "dump").glob("*after_optimizations.txt"))
    module = hlo_files.parsed(after)
    clusters = hlo_files.clusters_of(module)
    sequence, metadata = thunk_files(after, after.name.split(".sm_")[0])
    buffers = read_command_buffers(sequence, metadata) if sequence is not None else ()
    events, _ = read_events_and_markers(find_xplane(folder / "trace_marked"))
    report = match_events(events, {module.name: clusters}, command_buffers={module.name: buffers})
    kernels = run_files.from_document(run_files.KERNELS, kernels_document(report), "k")
    cost = run_files.from_document(
        run_files.COST, hlo_files.cost_document(hlo_files.costs_of([module]), None), "c"
    )
    return control_flow_facts(cost, kernels, kernels.events, {c.name: c.kind for c in clusters})


@needs_loops
@pytest.mark.parametrize("run", ["loops_cmdbuf", "loops_nocmdbuf"])
def test_each_loop_runs_its_trip_count_as_the_profile_measures_it(run: str) -> None:
    loops = {lf.loop: lf for lf in _facts(run).loops}
    assert {n: (lf.trip_count, lf.iterations_per_step) for n, lf in loops.items()} == {
        "while.5": (6, 6.0),
        "while.49": (3, 3.0),
        "while.54": (3, 3.0),
        "while.58": (6, 6.0),
    }
    scan = loops["while.58"]  # the backward scan: its stacked weights' slices are copies
    assert scan.copy_s_per_step > 0
    # Compute kernels an iteration: the same with command buffers and without.
    other = "loops_nocmdbuf" if run == "loops_cmdbuf" else "loops_cmdbuf"
    same = {lf.loop: lf.kernels_per_iteration for lf in _facts(other).loops}
    assert {n: lf.kernels_per_iteration for n, lf in loops.items()} == same
    assert scan.kernels_per_iteration == pytest.approx(9.0)


@needs_loops
def test_without_command_buffers_the_conditional_reads_its_predicate_back() -> None:
    syncs = _facts("loops_nocmdbuf").syncs
    assert syncs == SyncFacts(6.0, ("cond.23",))
    assert _facts("loops_cmdbuf").syncs is None  # the graph chooses on the device


def _run(flow: ControlFlowFacts) -> control_flow.SavedRun:
    summary = RunSummary(
        schema_version=8, experiment="e", run_id="r", baseline="xla", variants={"xla": BASE}
    )
    run = facts_of(summary)
    variants = tuple(dataclasses.replace(v, control_flow=flow) for v in run.variants)
    return dataclasses.replace(run, variants=variants)


def test_the_loop_rule_says_iterations_kernels_and_copies_and_a_differing_trip_count() -> None:
    quiet = _run(ControlFlowFacts())
    assert not control_flow.LoopCost().applies(quiet)
    flow = ControlFlowFacts(
        loops=(
            LoopFacts("while.58", 4, 20, 4.0, 98.0, 0.11e-3, 0.5e-3, 1e-3),
            LoopFacts("while.7", 6, 3, 5.0, 3.0, 0.0, 0.1e-3, 1e-3),
        )
    )
    run = _run(flow)
    run = dataclasses.replace(run, variants=(dataclasses.replace(run.variants[0], name="xla"),))
    (scan, other) = control_flow.LoopCost().conclude(run)
    assert scan.what == (
        "while.58 runs 4 iterations a step of 98 kernels; 11% of the step is its copies "
        "(a scan's dynamic slices)"
    )
    assert scan.verdict == "as counted" and scan.copy_share == pytest.approx(0.11)
    assert other.verdict == "differs" and "the HLO's trip count says 6" in other.what


def test_the_host_sync_rule_counts_predicates_read_back_and_is_silent_without() -> None:
    assert not control_flow.HostSync().applies(_run(ControlFlowFacts()))
    run = _run(ControlFlowFacts(syncs=SyncFacts(6.0, ("cond.23",))))
    run = dataclasses.replace(run, variants=(dataclasses.replace(run.variants[0], name="nocb"),))
    (found,) = control_flow.HostSync().conclude(run)
    assert found.syncs_per_step == 6.0 and found.where == "cond.23"
    assert found.what.startswith("nocb reads a predicate back to the host 6 times a step")


def test_a_nested_loop_is_judged_per_entry_and_differs_only_where_its_count_per_entry_does() -> (
    None
):
    def judged(lf: LoopFacts) -> tuple[str, str]:
        run = _run(ControlFlowFacts(loops=(lf,)))
        (found,) = control_flow.LoopCost().conclude(run)
        return found.verdict, found.what

    # The decoder's layer scan: 4 a decode step, 47 decode steps a call (measured).
    nested = LoopFacts("while.13", 4, 10, 188.0, 10.0, 0.0, 0.5e-3, 1e-3, 47.0, "measured")
    verdict, what = judged(nested)
    assert verdict == "as counted"
    assert "4 per entry, entered 47 times a step (a nested loop)" in what
    verdict, what = judged(dataclasses.replace(nested, iterations_per_step=235.0))
    assert verdict == "differs" and "the HLO's trip count says 4 per entry" in what
    # Its parent nobody counted: its entries are no count, so nothing is judged.
    blind = dataclasses.replace(nested, entries=1.0, count_source="unknown")
    assert judged(blind)[0] == "as counted"
