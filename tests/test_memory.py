"""Memory (issue 28): the live-range peak, the buffers live at it and why, for every variant.

The fixture tests read XLA's own files from an H200 (../shared/fixtures) and check each figure
against the file it comes from; the run tests read the session's tiny CPU study.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.analyze import memory
from harness.findings import memory as memory_rule
from harness.hlo import memory as xm
from harness.records.memory import MemoryFile
from harness.records.summary import SCHEMA_VERSION, load_summary, parse_summary
from harness.store.records import from_json
from tests.conftest import FIXTURES

PROGRAMS = FIXTURES / "h200-jax0.11.2-programs"
MIXERS = ("mixer_cmdbuf", "mixer_cmdbuf_cudnn", "mixer_cmdbuf_xla")


def _after(folder: Path) -> Path:
    """The first (full-size) module's optimized HLO in a fixture's dump."""
    found = sorted(
        folder.glob("dump/*gpu_after_optimizations.txt"),
        key=lambda p: int(p.name.split(".")[0].removeprefix("module_")),
    )
    if not found:
        pytest.skip(f"H200 fixtures not found at {folder}")
    return found[0]


def _mixer(run: str) -> tuple[memory.ModuleMemory, Path]:
    after = _after(PROGRAMS / run)
    found = memory.module_memory(memory.dump_files(after))
    assert found is not None
    return found, after


@pytest.mark.parametrize("run", MIXERS)
def test_mixer_peak_and_total_are_xlas_own(run: str) -> None:
    m, after = _mixer(run)
    stem = after.name.removesuffix(".txt")
    live = after.with_name(f"{stem}-live-range.txt").read_text()
    report = after.with_name(f"{stem}-memory-usage-report.txt").read_text()
    said = re.search(r"Stack trace breakdown for peak usage: ([\d ]+) bytes", live)
    total = re.search(r"^Total bytes: (\d+)", report, re.M)
    assert said and total
    assert m.peak_bytes == int(said[1].replace(" ", ""))
    assert m.total_bytes == int(total[1])
    assert m.total_bytes != m.peak_bytes  # the allocation is not the peak
    assert sum(b.bytes for b in m.buffers) == m.peak_bytes
    assert m.live_bytes[m.peak_at] == m.peak_bytes


def test_xla_attention_peak_difference_is_the_score_buffers() -> None:
    cudnn, _ = _mixer("mixer_cmdbuf_cudnn")
    xla, _ = _mixer("mixer_cmdbuf_xla")
    assert xla.peak_bytes - cudnn.peak_bytes > 256 << 20
    found = memory_rule.differences(cudnn.buffers, xla.buffers)
    top = found[0]
    assert top.bytes_a == 0 and top.bytes_b >= 3 * 64 << 20  # absent with cuDNN's attention
    assert "attention" in (top.scope or "")
    assert top.source_line and top.source_line.endswith("mixer_train.py:32")
    assert all("f32[256,256,256]" in b for b in top.buffers)  # batch·heads × T × S scores
    assert sum(d.delta for d in found if "attention" in (d.scope or "")) > 300 << 20


def test_nofusion_largest_buffer_is_the_inserted_upcast() -> None:
    after = _after(FIXTURES / "h200-jax0.11.2" / "jit_bf16_tanh_large_nofusion")
    m = memory.module_memory(memory.dump_files(after))
    assert m is not None
    largest = m.buffers[0]
    assert (largest.instruction, largest.shape, largest.bytes) == (
        "wrapped_convert",
        "f32[8192,8192]",
        268_435_456,
    )
    assert largest.inserted_by and largest.inserted_by.startswith("float-normalization-bf16")
    assert "fusion-wrapper" in largest.inserted_by
    assert largest.feeds == "wrapped_tanh (tanh)"


def test_a_broken_live_range_file_is_named_with_its_line() -> None:
    text = "HloLiveRange (max 3):\n  InstructionSequence:\n    0:x\n  BufferLiveRange:\n    junk\n"
    with pytest.raises(ValueError, match=r"^f\.txt:5: unreadable line in BufferLiveRange"):
        xm.parse_live_range(text, "f.txt")
    with pytest.raises(ValueError, match=r"^g\.txt:1: not an XLA live-range file"):
        xm.parse_live_range("hello\n", "g.txt")


def test_every_compiled_cpu_variant_has_its_peak_and_buffers(cpu_run: Path) -> None:
    summary = load_summary(cpu_run / "summary.json")
    compiled = {
        n: s
        for n, s in summary.variants.items()
        if s.ok and s.identity.framework == "jax" and s.hlo.fusion_count is not None
    }
    assert {"xla", "eager", "xla_no_fusion", "matmul_only"} <= set(compiled)
    for name, s in compiled.items():
        m = s.memory
        assert m is not None and m.peak_bytes, name
        path = cpu_run / "variants" / name / "memory.json"
        found = from_json(MemoryFile, json.loads(path.read_text()), str(path))
        # The buffers live at the peak add up to the peak (within 1%).
        assert abs(sum(b.bytes for b in found.buffers) - m.peak_bytes) <= 0.01 * m.peak_bytes
        assert any("CPU" in n for n in m.notes), name  # no device peak on the CPU, said so
        if name == "eager":
            assert len(m.modules) > 1 and m.peak_bytes == max(p.peak_bytes for p in m.modules)
        else:
            assert m.compiler is not None and m.compiler.output_bytes
    # The no-fusion variant keeps its intermediates: a higher peak than the default jit.
    assert compiled["xla_no_fusion"].memory.peak_bytes > compiled["xla"].memory.peak_bytes
    assert "## Memory" in (cpu_run / "details.md").read_text()  # the run's details page
    assert "| peak memory |" in (cpu_run / "report.md").read_text()  # a column of the summary
    assert (cpu_run / "plots" / "memory.png").is_file()


def test_a_version_4_summary_reads_without_memory() -> None:
    assert SCHEMA_VERSION >= 5
    read = parse_summary(
        {
            "schema_version": 4,
            "experiment": "e",
            "run_id": "r",
            "platform": "cpu",
            "baseline": "xla",
            "noise": None,
            "variants": {},
        },
        "old.json",
    )
    assert read.schema_version == SCHEMA_VERSION and read.variants == {} and read.findings is None


def test_the_memory_thresholds_are_the_runs_config(cpu_run: Path) -> None:
    """memory.min_ratio and memory.min_bytes decide the finding; a run saved before the keys
    existed reads the defaults."""
    from harness.config import load
    from harness.findings import facts
    from harness.findings import memory as rule
    from harness.records.saved_config import SavedConfig
    from harness.saved import read, run

    assert load("gelu.yaml", ["--config.memory.min_bytes=0"]).experiment.memory.min_bytes == 0
    config = json.loads((cpu_run / "manifest.json").read_text())["config"]
    config.pop("memory", None)
    assert read.thresholds(SavedConfig(config)) == (run.MIN_RATIO, run.MIN_BYTES)
    zero = {**config, "memory": {"min_ratio": 0.0, "min_bytes": 0}}
    assert read.thresholds(SavedConfig(zero)) == (0.0, 0)
    # With no threshold, any two compiled variants whose peaks differ at all make a finding.
    summary = load_summary(cpu_run / "summary.json")
    loose = facts.read_facts(cpu_run, summary, min_ratio=0.0, min_bytes=0)
    peaks = {v.name: rule.peak(v.summary) for v in loose.variants}
    base = peaks[loose.baseline]
    differ = {n for n, p in peaks.items() if p is not None and base is not None and p != base}
    found = {f.variant for f in rule.MemoryPeak().conclude(loose)}
    assert found <= differ and (found or not differ)
    # The run's own findings used its config's thresholds (the defaults here): fewer or equal.
    assert {f.variant for f in summary.findings.memory} <= found
