"""Steps in analyze (harness.program.steps), honest GPU roofs (harness.program.roof) and the copy
ceiling's cache key (harness.capture.ceilings), on the H200 MLP-Mixer train step with cuDNN
attention (4 marked steps) and on a real CPU measurement."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from conftest import FIXTURES, run_analyze

from harness.capture import ceilings
from harness.match.match import Attribution
from harness.profile.events import DeviceEvent, StepMarker
from harness.program import steps as by_step
from harness.program.event_facts import facts_from_pairs
from harness.program.roof import ABOVE_CEILING, above_ceiling
from harness.records import run_files
from harness.records.program import ClusterRow, ModuleAnalysis, roofs_of
from harness.report.cluster_tables import Paths, cluster_table
from harness.report.doc import to_markdown

MIXER = FIXTURES / "h200-jax0.11.2-programs" / "mixer_cmdbuf_cudnn"
H200_CEILINGS = {  # the figures the H200 gave in one capture (bf16 GEMM, 1 GiB copy v2)
    "platform": "gpu",
    "peaks": {"bf16": {"flops_per_s": 7.64e14}},
    "peak_bytes_per_s": 4.22e12,
}


@pytest.fixture(scope="module")
def mixer(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """analysis.json and report.md of `python -m harness.analyze` on the Mixer fixture."""
    if not MIXER.is_dir():
        pytest.skip(f"mixer fixture not found at {MIXER}")
    out = tmp_path_factory.mktemp("mixer")
    roof = out / "ceilings.json"
    roof.write_text(json.dumps(H200_CEILINGS))
    proc = run_analyze(
        f"--dump={MIXER / 'dump'}",
        f"--xplane={MIXER / 'trace'}",
        f"--ceilings={roof}",
        f"--out={out / 'a'}",
    )
    assert proc.returncode == 0, proc.stderr
    return (
        json.loads((out / "a" / "analysis.json").read_text()),
        (out / "a" / "report.md").read_text(),
    )


def test_each_step_shows_wall_beside_device_time(mixer: tuple[dict, str]) -> None:
    analysis, md = mixer
    rows = analysis["step_rows"]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["wall_s"] > r["device_s"] > 0  # the host waited: the device idles in between
        assert r["idle_fraction"] == pytest.approx(1 - r["device_s"] / r["wall_s"])
        assert r["coverage"] == pytest.approx(r["attributed_s"] / r["event_s"])
    assert "| step | wall | device busy | device idle |" in md


def test_shares_are_of_the_median_step(mixer: tuple[dict, str]) -> None:
    analysis, _ = mixer
    median = statistics.median(r["event_s"] for r in analysis["step_rows"])
    main = analysis["modules"][0]
    for row in main["clusters"][:5]:
        assert row["share"] == pytest.approx(row["time_s"] / median)


def test_cudnn_attention_is_costed_and_timed(mixer: tuple[dict, str]) -> None:
    analysis, _ = mixer
    main = analysis["modules"][0]
    fwd = [r for r in main["clusters"] if r["target"] == "__cudnn$fmhaSoftmax"]
    assert len(fwd) == 3
    for r in fwd:
        assert r["flops"] == 4 * 32 * 8 * 256 * 256 * 64  # 4.29 GFLOP
        assert r["time_s"] > 0 and r["roof_fraction"] is not None
    assert main["uncosted_calls"] == []


def test_a_gpu_cluster_above_its_roof_is_marked(mixer: tuple[dict, str]) -> None:
    analysis, md = mixer
    rows = analysis["modules"][0]["clusters"]
    over = [r for r in rows if (r["roof_fraction"] or 0) > 1]
    assert all(r["above_ceiling"] for r in over)
    assert not any(r["above_ceiling"] for r in rows if (r["roof_fraction"] or 0) <= 1)
    shown = [line for line in md.splitlines() if line.startswith("| ") and "% (" in line]
    for line in shown:
        cell = line.split(" | ")[10]  # the `of roof` column
        assert float(cell.split("%")[0]) <= 100  # a figure above 100% is withheld
    names = {f"`{r['name']}`" for r in over}
    rows_over = [
        line
        for line in md.splitlines()
        if line.startswith("| ") and line.count(" | ") > 10 and line.split(" | ")[1] in names
    ]
    assert all(line.split(" | ")[10] == "withheld: " + ABOVE_CEILING for line in rows_over)


def test_above_100_percent_is_marked_on_a_gpu_only() -> None:
    gpu = roofs_of(run_files.parse(run_files.CEILINGS, H200_CEILINGS, "gpu.json"), "gpu.json")
    cpu_ceilings = run_files.parse(run_files.CEILINGS, {**H200_CEILINGS, "platform": "cpu"}, "c")
    cpu = roofs_of(cpu_ceilings, "cpu.json")
    assert gpu.platform == "gpu" and cpu.platform == "cpu"
    assert above_ceiling(1.05, gpu) and not above_ceiling(0.99, gpu)
    assert not above_ceiling(1.05, cpu)  # cached data beats the DRAM copy on a CPU


def test_analysis_json_is_one_versioned_record_and_an_unversioned_one_reads(
    mixer: tuple[dict, str],
) -> None:
    """analysis.json reads back through its kind (run_files.ANALYSIS) as written, and one
    written before it had a version (no schema_version, no hosts for one profile) migrates
    to the same record."""
    analysis, _ = mixer
    record = run_files.parse(run_files.ANALYSIS, analysis, "analysis.json")
    assert analysis["schema_version"] == run_files.ANALYSIS.version
    assert run_files.record_json(record) == analysis
    assert record.ceilings is not None and record.ceilings.peaks == {"bf16": 7.64e14}
    old = {k: v for k, v in analysis.items() if k not in ("schema_version", "hosts", "merged")}
    assert run_files.parse(run_files.ANALYSIS, old, "old.json") == record


def test_a_first_day_ceilings_json_reads_as_a_peak_of_its_dtype() -> None:
    """ceilings.json's one reader (run_files.CEILINGS) migrates the first day's single
    `peak_flops_per_s` of a `dtype` into `peaks`, as analyze --ceilings always read it."""
    first_day = {
        "device": "NVIDIA H200",
        "peak_flops_per_s": 790e12,
        "peak_bytes_per_s": 4.3e12,
        "dtype": "bfloat16",
        "source": "datasheet",
        "measured_at": "2026-11-30T04:55:22+00:00",
    }
    ceilings = run_files.parse(run_files.CEILINGS, first_day, "old.json")
    assert ceilings.peaks["bf16"].flops_per_s == 790e12
    roofs = roofs_of(ceilings, "old.json")
    assert roofs.peaks == {"bf16": 790e12} and roofs.bytes_per_s == 4.3e12
    assert roofs.peak_for("f32") == ("bf16", 790e12)


def _pair(step: int, start: float, ns: float, cluster: str | None) -> tuple[Attribution, float]:
    event = DeviceEvent(
        step=step,
        name=f"k_{cluster}",
        kind="kernel",
        direction=None,
        bytes=None,
        hlo_module="m",
        hlo_op=cluster,
        program_id=1,
        correlation_id=None,
        device="/device:GPU:0",
        stream="s",
        start_ns=start,
        duration_ns=ns,
    )
    return Attribution(event, cluster is not None, "name", "", "m", cluster), ns


def test_one_stalled_step_is_noted_and_does_not_move_the_median() -> None:
    pairs = [_pair(s, s * 1e6, 100e3 if s == 3 else 10e3, "slow") for s in range(4)]
    pairs += [_pair(s, s * 1e6 + 2e5, 20e3, "steady") for s in range(4)]
    pairs += [_pair(s, s * 1e6 + 3e5, 5e3, None) for s in range(4)]  # unattributed
    found = by_step.medians_of(facts_from_pairs(pairs, "m"), [0, 1, 2, 3])
    assert found.clusters == {"slow": 10e3, "steady": 20e3}  # the mean of "slow" is 32.5 µs
    (stall,) = found.outliers
    assert (stall.cluster, stall.step) == ("slow", 3)
    assert stall.time_s == pytest.approx(100e-6) and stall.median_s == pytest.approx(10e-6)
    markers = [StepMarker("train", s, s * 1e6 - 1e5, s * 1e6 + 4e5) for s in range(4)]
    rows = by_step.step_rows(pairs, markers)
    assert rows[0].wall_s == pytest.approx(500e-6)
    assert rows[0].event_s == pytest.approx(35e-6) and rows[0].attributed_s == pytest.approx(30e-6)
    assert rows[0].coverage == pytest.approx(30 / 35)
    assert rows[0].idle_fraction == pytest.approx(1 - 35e-6 / 500e-6)


def test_a_copy_figure_of_the_old_method_is_measured_again(tmp_path: Path) -> None:
    env = {"platform": "cpu", "device_kind": "cpu", "jax": "x", "jaxlib": "x"}
    cache = tmp_path / ".cache" / "ceilings.json"
    cache.parent.mkdir()
    first = ceilings.measure(env, [], cache, budget_s=0.02)
    stored = json.loads(cache.read_text())
    assert ceilings.COPY_KEY in stored["entries"] and "copy" not in stored["entries"]
    # An entry of the old method (one call per batch), under the old key, is never reused.
    entry = stored["entries"].pop(ceilings.COPY_KEY)
    stored["entries"]["copy"] = {**entry, "key": "copy", "bytes_per_s": 1.0}
    cache.write_text(json.dumps(stored))
    again = ceilings.measure(env, [], cache, budget_s=0.02)
    assert again["peak_bytes_per_s"] > 1.0
    assert (
        "back-to-back" in again["bytes_source"] and first["bytes_source"] == again["bytes_source"]
    )
    assert "copy" not in json.loads(cache.read_text())["entries"]


def test_ceilings_cached_under_another_device_plugin_are_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU's ceilings are cached too: an entry measured with other CUDA libraries (another
    jax-cuda plugin) is never reused."""
    env = {"platform": "cpu", "device_kind": "cpu", "jax": "x", "jaxlib": "x"}
    cache = tmp_path / ".cache" / "ceilings.json"
    cache.parent.mkdir()
    monkeypatch.setattr(ceilings, "_device_plugins", lambda: ["jax-cuda13-plugin==0.11.1"])
    first = ceilings.measure(env, [], cache, budget_s=0.02)
    assert first["cache"] is None  # measured
    again = ceilings.measure(env, [], cache, budget_s=0.02)
    assert again["cache"] == str(cache)  # the same plugin: reused
    monkeypatch.setattr(ceilings, "_device_plugins", lambda: ["jax-cuda13-plugin==0.11.2"])
    newer = ceilings.measure(env, [], cache, budget_s=0.02)
    assert newer["cache"] is None  # measured again


def test_a_cluster_above_its_gpu_roof_shows_no_figure_but_the_reason() -> None:
    rows = (
        ClusterRow("fusion.1", "kLoop", "", 1e9, 1e6, 1e-6, 0.5, 1, 1, 1e15, 1e12, 1.66, "bf16 peak", True),
        ClusterRow("fusion.2", "kLoop", "", 1e9, 1e6, 1e-6, 0.5, 1, 1, 1e14, 1e12, 0.42, "bf16 peak", False),
    )  # fmt: skip
    m = ModuleAnalysis("m", "m", None, "main", "main program", 2, 2, (), 2e9, 2e6, clusters=rows)
    table = to_markdown((cluster_table(m, True, Paths(()), 10),))
    over, under = (line for line in table.splitlines() if "`fusion." in line)
    assert "166" not in over and f"withheld: {ABOVE_CEILING}" in over
    assert "42.0% (bf16 peak)" in under
