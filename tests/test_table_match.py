"""The match over the event table (harness.match.table_match) is the match over event rows.

A property over every H200 fixture profile with its dump (the expression's variants, eager
included; the Mixer and the scan/cond/fori_loop train step, with and without command buffers)
and a live CPU profile: each event's attribution and every per-step figure agree. Then the
property that lets a long profile be read at all: the same program profiled over more steps
(a real profile made longer) gives the same counts a step.
"""

from __future__ import annotations

import functools
from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES
from test_match_events import FIXTURE_STEPS, JIT_VARIANTS, fixture_clusters

from benchmarks.longer_profile import lengthen
from harness.hlo.clusters import find_clusters
from harness.hlo.parser import parse_module
from harness.hlo.thunks import read_command_buffers, thunk_files
from harness.match.match import MatchReport, match_events
from harness.match.table_match import match_table
from harness.profile import xspace
from harness.profile.events import find_xplane
from harness.profile.reader import read_table
from harness.program import modules as hlo_files
from harness.program.analysis import analyse_program
from harness.program.record import ModuleInput
from harness.records.program import Steps

LOOPS = FIXTURES / "h200-jax0.11.2-loops"
PROGRAMS = FIXTURES / "h200-jax0.11.2-programs"


def _same(a: MatchReport, b: MatchReport) -> None:
    assert len(a.attributions) == len(b.attributions)
    for x, y in zip(a.attributions, b.attributions, strict=True):
        assert astuple(x) == astuple(y), (x, y)
    for field in (
        "steps",
        "marked_steps",
        "events_in_window",
        "outside_window",
        "kernels_per_step",
        "memsets_per_step",
        "device_ops_per_step",
        "transfers_per_step",
        "notes",
        "gaps",
        "device_time_by_step_s",
    ):
        assert getattr(a, field) == getattr(b, field), field
    assert a.matched_fraction == pytest.approx(b.matched_fraction)
    assert a.device_time_per_step_s == pytest.approx(b.device_time_per_step_s, rel=1e-12)
    assert dict(a.launches_per_cluster) == pytest.approx(dict(b.launches_per_cluster))


@pytest.mark.parametrize("variant", [*JIT_VARIANTS, "matmul_only_bf16_large"])
def test_the_expression_fixtures_match_alike(variant: str) -> None:
    path = FIXTURES / "h200-jax0.11.2" / variant / "profile.xplane.pb"
    if not path.is_file():
        pytest.skip(f"H200 fixture absent: {path}")
    table, _ = read_table(path)
    clusters = fixture_clusters(f"h200-jax0.11.2/{variant}")
    _same(
        match_table(table, clusters, steps=FIXTURE_STEPS),
        match_events(table.events(), clusters, steps=FIXTURE_STEPS),
    )


def test_eager_fixture_matches_alike_with_its_host_uploads() -> None:
    path = FIXTURES / "h200-jax0.11.2" / "eager_bf16_tanh_large" / "profile.xplane.pb"
    if not path.is_file():
        pytest.skip(f"H200 fixture absent: {path}")
    table, _ = read_table(path)
    for mode in ("eager", "jit"):
        _same(
            match_table(table, {}, steps=FIXTURE_STEPS, mode=mode),
            match_events(table.events(), {}, steps=FIXTURE_STEPS, mode=mode),
        )


@functools.cache
def _train_step(run: Path) -> tuple[dict, dict]:
    after = next((run / "dump").glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    module = hlo_files.parsed(after)
    sequence, metadata = thunk_files(after, after.name.split(".sm_")[0])
    buffers = {} if sequence is None else {module.name: read_command_buffers(sequence, metadata)}
    return {module.name: hlo_files.clusters_of(module)}, buffers


TRAIN_STEPS = [
    (LOOPS / "loops_cmdbuf", "trace_marked"),
    (LOOPS / "loops_nocmdbuf", "trace_marked"),
    (PROGRAMS / "mixer_cmdbuf", "trace"),
    (PROGRAMS / "mixer_nocmdbuf", "trace"),
    (PROGRAMS / "mixer_cmdbuf_cudnn", "trace"),
    (PROGRAMS / "mixer_cmdbuf_xla", "trace"),
]


@pytest.mark.parametrize(("run", "trace"), TRAIN_STEPS, ids=lambda v: getattr(v, "name", v))
def test_train_steps_in_command_buffers_match_alike(run: Path, trace: str) -> None:
    if not run.exists():
        pytest.skip(f"H200 fixture absent: {run}")
    clusters, buffers = _train_step(run)
    table, _ = read_table(find_xplane(run / trace))
    _same(
        match_table(table, clusters, command_buffers=buffers),
        match_events(table.events(), clusters, command_buffers=buffers),
    )


def test_a_cpu_profile_matches_alike(tmp_path: Path) -> None:
    import jax
    import jax.numpy as jnp

    def layers(x: jax.Array, w: jax.Array) -> jax.Array:
        for _ in range(4):
            x = jnp.tanh(x @ w) + jnp.sin(x) * 0.5
        return x

    fn = jax.jit(layers)
    x = jnp.ones((32, 32))
    compiled = fn.lower(x, x).compile()
    fn(x, x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                fn(x, x).block_until_ready()
    clusters = {"jit_layers": find_clusters(parse_module(compiled.as_text()))}
    table, _ = read_table(find_xplane(tmp_path))
    report = match_table(table, clusters)
    assert report.steps == 3 and report.matched_fraction == 1.0
    _same(report, match_events(table.events(), clusters))


@pytest.mark.parametrize(("run", "trace"), TRAIN_STEPS[:1] + TRAIN_STEPS[2:3], ids=str)
def test_a_longer_profile_counts_the_same_a_step(tmp_path: Path, run: Path, trace: str) -> None:
    if not run.exists():
        pytest.skip(f"H200 fixture absent: {run}")
    clusters, buffers = _train_step(run)
    original = find_xplane(run / trace)
    longer = tmp_path / "longer.xplane.pb"
    longer.write_bytes(lengthen(xspace.parse(original.read_bytes()), 7).SerializeToString())
    short, _ = read_table(original)
    long, _ = read_table(longer)
    assert len(long) == 7 * len(short)
    a = match_table(short, clusters, command_buffers=buffers)
    b = match_table(long, clusters, command_buffers=buffers)
    assert b.steps == 7 * a.steps
    assert b.matched_fraction == a.matched_fraction
    assert dict(b.launches_per_cluster) == pytest.approx(dict(a.launches_per_cluster))
    assert b.kernels_per_step == a.kernels_per_step
    assert b.device_time_per_step_s == pytest.approx(a.device_time_per_step_s)
    per_cluster = [np.bincount(r.attributions.attributed.codes["cluster"]) for r in (a, b)]
    assert per_cluster[1].sum() == 7 * per_cluster[0].sum()


def _close(a: object, b: object, where: str = "") -> None:
    """Equal, floats to 1e-9 relative (sums taken in another order)."""
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15), where
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize(("run", "trace"), TRAIN_STEPS, ids=lambda v: getattr(v, "name", v))
def test_the_program_analysis_of_the_table_is_that_of_the_pairs(run: Path, trace: str) -> None:
    if not run.exists():
        pytest.skip(f"H200 fixture absent: {run}")
    clusters, buffers = _train_step(run)
    after = next((run / "dump").glob("*.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    module = hlo_files.parsed(after)
    key = after.name.split(".sm_")[0]
    table, markers = read_table(find_xplane(run / trace))
    pid = int(table.ints["program_id"][0])
    inputs = [
        ModuleInput(
            key, module.name, pid, module, clusters[module.name], hlo_files.costs_of([module])[0]
        )
    ]
    steps = Steps(int(np.unique(table.ints["step"]).size), "markers", "marked")
    by_table = match_table(table, clusters, command_buffers=buffers)
    by_pairs = match_events(table.events(), clusters, command_buffers=buffers)
    a = analyse_program(inputs, by_table, steps, markers=markers)
    b = analyse_program(inputs, by_pairs, steps, markers=markers)
    _close(a.to_json(), b.to_json())
    assert a.modules[0].kernels and a.step_rows


def test_events_parquet_keeps_every_column_of_the_table(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from harness.profile.table import from_arrow

    run, trace = TRAIN_STEPS[0]
    if not run.exists():
        pytest.skip(f"H200 fixture absent: {run}")
    table, _ = read_table(find_xplane(run / trace))
    pq.write_table(table.to_arrow(), tmp_path / "events.parquet")
    back = from_arrow(pq.read_table(tmp_path / "events.parquet"))
    assert [astuple(e) for e in back.events()] == [astuple(e) for e in table.events()]
