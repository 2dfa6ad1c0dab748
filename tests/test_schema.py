"""The results contract: summary.json has one schema (harness.records.summary), documented from it.

The key table in results/README.md is generated from the schema's classes; a key the tiny real
run emits must be documented, and a documented key must be emitted. The loader validates,
names the file and key of a bad value, refuses a newer schema, and migrates older summaries.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import REPO

from harness.records.keytables import README_BEGIN, README_END, key_table
from harness.records.summary import SCHEMA_VERSION, RunSummary, load_summary, parse_summary
from harness.store import io, records
from harness.store.records import SchemaError

README = REPO / "results" / "README.md"


def documented_table(text: str) -> str:
    start, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    return text[start:end].strip()


def documented(text: str) -> set[str]:
    return {
        line.split("`")[1] for line in documented_table(text).splitlines() if line.startswith("| `")
    }


def test_the_readme_key_table_is_the_generated_one() -> None:
    # `python -m harness.records.keytables results/README.md` regenerates it
    assert documented_table(README.read_text()) == key_table()


def test_every_emitted_key_is_documented_and_every_documented_key_emitted(cpu_run: Path) -> None:
    data = json.loads((cpu_run / "summary.json").read_text())
    emitted = records.emitted_keys(RunSummary, data)
    assert emitted == documented(README.read_text())


def test_a_key_the_schema_lacks_would_fail_the_check(cpu_run: Path) -> None:
    data = json.loads((cpu_run / "summary.json").read_text())
    data["variants"]["xla"]["timing"]["step_time_median_s"] = 0.1
    emitted = records.emitted_keys(RunSummary, data)
    assert emitted - documented(README.read_text()) == {"variants.<name>.timing.step_time_median_s"}
    with pytest.raises(
        SchemaError, match=r"variants\.xla\.timing\.step_time_median_s: unknown key"
    ):
        parse_summary(data, "summary.json")


def test_a_value_of_the_wrong_type_names_the_file_and_key(cpu_run: Path, tmp_path: Path) -> None:
    data = json.loads((cpu_run / "summary.json").read_text())
    data["variants"]["eager"]["profile"]["kernels_per_step"] = "many"
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SchemaError) as e:
        load_summary(bad)
    assert str(e.value).startswith(f"{bad}: variants.eager.profile.kernels_per_step: expected")
    assert len(str(e.value).splitlines()) == 1


def test_a_newer_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "variants": {}}))
    with pytest.raises(SchemaError, match=f"{SCHEMA_VERSION + 1} is newer than this harness reads"):
        load_summary(path)


@pytest.mark.parametrize("value", ["[1, 2]", "3", '"text"', "null"])
def test_a_summary_that_is_not_an_object_is_a_schema_error(tmp_path: Path, value: str) -> None:
    path = tmp_path / "summary.json"
    path.write_text(value)
    with pytest.raises(SchemaError, match="expected a JSON object"):
        load_summary(path)


VERSION_1 = {
    "experiment": "gelu",
    "baseline": "xla",
    "variants": {
        "xla": {
            "status": "ok",
            "reason": None,
            "mode": "jit",
            "step_time_median_s": 0.0017,
            "step_time_pipelined_s": 0.0015,
            "xla_compile_top_passes": [
                {"name": "config-assigner", "count": 1, "total_s": 0.9, "self_s": 0.9}
            ],
            "library_calls": [{"target": "__cublas$lt$matmul", "epilogue": "BIAS"}],
            "transfers_per_step": [],
            "first_divergence": None,
        },
        "matmul_only": {
            "status": "ok",
            "mode": "matmul_only",
            "first_divergence": {"stage": "jaxpr", "detail": "d"},
        },
    },
}


def test_a_version_1_summary_is_migrated_with_passes_and_roles() -> None:
    s = parse_summary(VERSION_1, "old/summary.json")
    xla = s.variants["xla"]
    assert xla.timing.latency_blocked_median_s == 0.0017 and xla.timing.step_s == 0.0015
    assert xla.timing.interleaved is False
    (top,) = xla.compile.top_passes
    assert (top.name, top.pipeline, top.total_s) == ("config-assigner", None, 0.9)
    assert "pipelines unknown" in xla.compile.notes[0]
    assert xla.identity.roles == ("baseline", "compiled")
    assert s.variants["matmul_only"].identity.roles == ("lower_bound", "compiled")
    assert s.variants["matmul_only"].comparison.first_divergence.against == "xla"


def test_an_unknown_version_1_key_is_named() -> None:
    bad = json.loads(json.dumps(VERSION_1))
    bad["variants"]["xla"]["mystery"] = 1
    with pytest.raises(SchemaError, match=r"variants\.xla\.mystery: unknown version-1 key"):
        parse_summary(bad, "old/summary.json")


def test_run_files_are_written_with_the_users_umask(cpu_run: Path, tmp_path: Path) -> None:
    expected = 0o666 & ~io._umask()
    for name in ("summary.json", "manifest.json", "report.md", "report.html", "timing.json"):
        assert stat.S_IMODE(os.stat(cpu_run / name).st_mode) == expected, name
    path = io.write_json(tmp_path / "x.json", {})
    assert stat.S_IMODE(os.stat(path).st_mode) == expected


def test_the_readme_search_table_is_the_generated_one() -> None:
    from harness.records.keytables import SEARCH_BEGIN, SEARCH_END, search_table

    text = README.read_text()
    start, end = text.index(SEARCH_BEGIN) + len(SEARCH_BEGIN), text.index(SEARCH_END)
    assert text[start:end].strip() == search_table()


def test_a_timings_file_of_either_frontend_written_before_its_version_reads(
    tmp_path: Path,
) -> None:
    """timings.json had no version: JAX's held the first call's events, PyTorch's did not."""
    from harness.records import run_files

    jax_file, torch_file = tmp_path / "jax.json", tmp_path / "torch.json"
    jax_file.write_text(
        json.dumps({"latency_blocked_s": [0.5, 0.25], "first_call_events": [["/jax/x", 0.1]]})
    )
    torch_file.write_text(json.dumps({"latency_blocked_s": [0.5]}))
    jax_timings = run_files.load(run_files.TIMINGS, jax_file)
    assert jax_timings.latency_blocked_s == (0.5, 0.25)
    assert jax_timings.first_call_events == (("/jax/x", 0.1),)
    assert run_files.load(run_files.TIMINGS, torch_file).first_call_events == ()
    torch_file.write_text(json.dumps({"latency_blocked_s": ["fast"]}))
    with pytest.raises(SchemaError, match=r"torch\.json: latency_blocked_s\[0\]"):
        run_files.load(run_files.TIMINGS, torch_file)
    written = run_files.write_timings(tmp_path / "v", (0.5,), (("/jax/x", 0.1),))
    assert written.name == "timings.json"
    assert run_files.load(run_files.TIMINGS, written).first_call_events == (("/jax/x", 0.1),)


def test_the_committed_torch_json_files_read_as_version_0_and_write_back_unchanged(
    tmp_path: Path,
) -> None:
    """torch.json had no version: each committed one (eager, compiled, refused) reads through
    its record, and the record written again holds every key and value it read."""
    from harness.records import run_files
    from harness.records.torch_facts import Explain

    found = sorted((REPO / "results" / "reference").glob("*/variants/torch_*/torch.json"))
    assert found, "the h200 reference has its PyTorch row"
    for path in found:
        raw = json.loads(path.read_text())
        facts = run_files.load(run_files.TORCH_FACTS, path)
        written = run_files.write_torch_facts(tmp_path / path.parent.name, facts)
        again = json.loads(written.read_text())
        assert again["schema_version"] == run_files.TORCH_FACTS.version
        assert {k: v for k, v in again.items() if k in raw} == raw, path
        if "compile_ids" in raw:
            assert isinstance(facts.explain, Explain) and facts.ids("first_call")
    damaged = tmp_path / "torch.json"
    damaged.write_text(json.dumps({"compile_ids": {"first_call": [0]}}))
    with pytest.raises(SchemaError, match=r"torch\.json: compile_ids\.first_call\[0\]"):
        run_files.load(run_files.TORCH_FACTS, damaged)


def test_a_manifests_config_reads_typed_and_a_mistyped_value_as_absent() -> None:
    """Readers take the saved config's values through Manifest.saved_config; a key a run saved
    before it existed, or a value of another type, reads as None and the reader's default."""
    from harness.records.run_files import Manifest

    config = {
        "timing": {"max_noise": 0.05, "target_width": "wide", "only": True},
        "report": {"svg": True},
        "program": {"function": ""},
        "problem": {"m": 64},
    }
    saved = Manifest(config=config).saved_config
    assert saved.number("timing", "max_noise") == 0.05
    assert saved.number("timing", "target_width") is None
    assert saved.number("timing", "only") is None  # a bool is not a number
    assert saved.flag("report", "svg") is True and saved.flag("memory", "x") is None
    assert saved.section("memory") is None
    assert saved.studied() == ("problem", {"m": 64})
    assert Manifest().saved_config.studied() is None
