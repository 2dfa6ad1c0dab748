"""compare's diff of two runs line by line (issue 60): per source line and kind of work, with
an interval on every line, matched across compiles by line and kind, called only past both
runs' noise. The A/A pair is two runs of one config the session already made (cpu_run and
world_run: configs/gelu.yaml, tiny); the planted slowdown on real GPU and CPU runs is
benchmarks/compare_aa_gpu.py (two more studies would cost CI a minute)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analyze import line_diff
from harness.match.step_events import step_events
from harness.program.module_analysis import self_times
from harness.records.compare import FASTER, NO_LINE_VERDICT, SLOWER, UNCHANGED
from harness.records.summary import load_summary
from harness.store.runfolder import RunFolder


def _floor(run: Path) -> float:
    noise = load_summary(RunFolder(run).summary).noise
    assert noise is not None
    return noise.floor


def test_an_aa_pair_calls_at_most_5_percent_of_lines_changed(
    cpu_run: Path, world_run: Path
) -> None:
    lines = line_diff.compare_lines(cpu_run, world_run)
    variants = {c.variant for c in lines}
    # Every jit variant of both runs pairs: the same config compiles the same lines and kinds,
    # so no line is one run's alone (pairing by instruction name would not promise this).
    assert {"xla", "xla_lax_cond", "matmul_only"} <= variants
    assert all(c.a_s > 0 and c.b_s > 0 for c in lines if c.variant != "eager")
    assert sum(c.moved for c in lines) <= 0.05 * len(lines)
    # Judged against the larger floor even where a gate failed, still no more than 5%.
    forced = line_diff.lines_between(cpu_run, world_run, max(_floor(cpu_run), _floor(world_run)))
    assert sum(c.moved for c in forced) <= 0.05 * len(forced)
    # Each interval holds its own difference; the lines that moved lead.
    for c in lines:
        assert c.ci95_s[0] - 1e-12 <= c.b_s - c.a_s <= c.ci95_s[1] + 1e-12
    assert list(lines) == sorted(lines, key=lambda c: (not c.moved, -abs(c.b_s - c.a_s)))


def test_the_lines_of_a_step_sum_to_its_device_time(cpu_run: Path) -> None:
    vf = RunFolder(cpu_run).variant("xla")
    events = step_events(vf)
    steps, table = line_diff.per_step(events, line_diff.cluster_places(vf))
    assert len(steps) >= 2 and table
    total = np.sum(list(table.values()), axis=0)
    own = sum(self_times(events)) * 1e-9  # type: ignore[arg-type]
    assert total.sum() == pytest.approx(own, rel=1e-9)


def test_a_line_is_called_only_past_the_floor_and_with_enough_steps() -> None:
    rng = np.random.default_rng(0)
    a = 1e-3 * (1 + 0.01 * rng.standard_normal(10))
    key = ("m.py:3", "loop_fusion")
    slower = line_diff.line_change("v", key, a, a * 1.2, 10, 10, floor=0.05)
    assert slower.verdict == SLOWER and slower.ci95_s[0] > 0
    assert line_diff.line_change("v", key, a * 1.2, a, 10, 10, floor=0.05).verdict == FASTER
    # Within the floor: the same 20% is not called where the runs' noise is 25%.
    assert line_diff.line_change("v", key, a, a * 1.2, 10, 10, floor=0.25).verdict == UNCHANGED
    # Two steps resample to no interval; a run without a floor resolves nothing.
    assert line_diff.line_change("v", key, a[:2], a[:2] * 2, 2, 2, 0.05).verdict == NO_LINE_VERDICT
    assert line_diff.line_change("v", key, a, a * 2, 10, 10, None).verdict == NO_LINE_VERDICT
    # A line only one run ran: new in b is slower, gone from b is faster.
    assert line_diff.line_change("v", key, None, a, 10, 10, 0.05).verdict == SLOWER
    assert line_diff.line_change("v", key, a, None, 10, 10, 0.05).verdict == FASTER
    # However narrow its interval, a move smaller than the step resolves is not called: a
    # kernel of 1 ms that doubles, or appears, in a 50 ms step whose floor is 5% (2.5 ms).
    step = 0.05 * 50e-3
    assert line_diff.line_change("v", key, a, a * 2, 10, 10, 0.05, step).verdict == UNCHANGED
    assert line_diff.line_change("v", key, None, a, 10, 10, 0.05, step).verdict == UNCHANGED
    assert line_diff.line_change("v", key, a, None, 10, 10, 0.05, step).verdict == UNCHANGED
    assert line_diff.line_change("v", key, a, a * 4, 10, 10, 0.05, step).verdict == SLOWER


def test_the_resolution_is_the_floor_of_the_larger_runs_step() -> None:
    key, other = ("m.py:3", "loop_fusion"), ("m.py:4", "library")
    small, big = np.full(10, 1e-3), np.full(10, 49e-3)
    a = ([*range(10)], {key: small, other: big})
    b = ([*range(10)], {key: small * 2, other: big * 1.02})
    lines = {c.line: c for c in line_diff.variant_lines("v", a, b, 0.05)}
    assert lines["m.py:3"].resolution_s == pytest.approx(0.05 * (2e-3 + 49.98e-3))
    assert not any(c.moved for c in lines.values())
