"""The mechanism behind "nothing lost" (issue 32, classes 1-4): an output folder is a tool's
own only when everything in it is what the tool recorded writing; a command's inputs are never
inside what it claims; the results cache is used only when it is no link and what its key
says; a finished run is not resumed."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from harness.capture import ceilings
from harness.store import io, ownership
from harness.study import runs


def fill(folder: Path, tool: str = "export") -> Path:
    """A folder made by `tool`: claimed, two files written, sealed."""
    with io.own_output(folder, tool) as out:
        io.write_text(out / "report.md", "# report\n")
        io.write_json(out / "deep" / "a.json", {"a": 1})
    return folder


def test_a_tool_replaces_exactly_what_it_recorded(tmp_path: Path) -> None:
    out = fill(tmp_path / "out")
    record = json.loads((out / io.MARKER).read_text())
    assert set(record["files"]) == {"report.md", "deep/a.json"}
    io.claim_output(out, "export")
    assert sorted(p.name for p in out.iterdir()) == [io.MARKER]


@pytest.mark.parametrize(
    "plant",
    ["user_file", "changed", "run_six_deep", "dump", "link", "fifo", "other_tool", "no_record"],
)
def test_anything_the_tool_did_not_write_makes_the_folder_someone_elses(
    tmp_path: Path, plant: str
) -> None:
    out = fill(tmp_path / "out")
    (tmp_path / "keep.txt").write_text("mine\n")
    if plant == "user_file":
        (out / "deep" / "notes.txt").write_text("mine\n")
    elif plant == "changed":
        (out / "report.md").write_text("# my own edit\n")
    elif plant == "run_six_deep":
        (out / "a/b/c/d/e/f").mkdir(parents=True)
        (out / "a/b/c/d/e/f/summary.json").write_text("{}")
    elif plant == "dump":
        (out / "module_0001.jit_f.before_optimizations.txt").write_text("HloModule f\n")
    elif plant == "link":
        (out / "deep" / "keep.txt").symlink_to(tmp_path / "keep.txt")
    elif plant == "fifo":
        os.mkfifo(out / "pipe")
    elif plant == "other_tool":
        fill(tmp_path / "other", "compare")
        shutil.copyfile(tmp_path / "other" / io.MARKER, out / io.MARKER)
    elif plant == "no_record":
        (out / io.MARKER).write_text(json.dumps({"tool": "export", "made": "x"}))
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(io.NotOurs, match="only replaces an empty folder or one it made itself"):
        io.claim_output(out, "export")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "keep.txt").read_text() == "mine\n"


def test_the_refusal_names_a_run_or_a_dump_first(tmp_path: Path) -> None:
    out = fill(tmp_path / "out")
    (out / "notes.txt").write_text("x")
    (out / "g" / "20990101-000000").mkdir(parents=True)
    (out / "g" / "20990101-000000" / "manifest.json").write_text("{}")
    with pytest.raises(io.NotOurs, match=r"holds a run or runs \(g/20990101-000000/manifest"):
        io.claim_output(out, "export")


@pytest.mark.parametrize("where", ["inside", "same", "above"])
def test_an_input_is_never_inside_what_is_claimed(tmp_path: Path, where: str) -> None:
    out = fill(tmp_path / "out", "analyze")
    dump = {"inside": out / "deep" / "a.json", "same": out, "above": tmp_path}[where]
    with pytest.raises(io.NotOurs, match="input"):
        io.claim_output(out, "analyze", inputs=(dump,))
    assert (out / "deep" / "a.json").is_file()


def test_a_failed_command_still_records_what_it_wrote(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), io.own_output(tmp_path / "out", "compare") as out:
        io.write_text(out / "compare.md", "half\n")
        raise RuntimeError("failed half-way")
    io.claim_output(tmp_path / "out", "compare")  # its own: replaced
    assert not (tmp_path / "out" / "compare.md").exists()


def test_files_older_than_the_claim_are_not_recorded(tmp_path: Path) -> None:
    with io.own_output(tmp_path / "out", "analyze") as out:
        (out / "copied.txt").write_text("a user's copy, its old time kept\n")
        os.utime(out / "copied.txt", ns=(0, 0))
    with pytest.raises(io.NotOurs, match=r"copied\.txt"):
        io.claim_output(out, "analyze")


@pytest.mark.parametrize("plant", ["cache_link", "file_link", "subfolder_link", "a_file"])
def test_a_linked_results_cache_is_neither_read_nor_written(tmp_path: Path, plant: str) -> None:
    root, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "ceilings.json").write_text('{"x": 1}')
    cache = root / ".cache"
    if plant == "cache_link":
        cache.symlink_to(elsewhere)
    elif plant == "a_file":
        cache.write_text("x")
    else:
        cache.mkdir()
        link = cache / ("ceilings.json" if plant == "file_link" else "sub")
        link.symlink_to(elsewhere / "ceilings.json" if plant == "file_link" else elsewhere)
    workdir = root / "gelu" / "run"
    assert io.cache_dir(workdir) is None and "is not used" in (io.cache_note(workdir) or "")
    assert io.read_cache_file(cache, "ceilings.json") is None
    assert io.write_cache_file(cache, "inputs-x.npz", b"data") is False
    assert sorted(p.name for p in elsewhere.iterdir()) == ["ceilings.json"]
    assert (elsewhere / "ceilings.json").read_text() == '{"x": 1}'


def test_a_plain_results_cache_is_used(tmp_path: Path) -> None:
    workdir = tmp_path / "results" / "gelu" / "run"
    cache = io.cache_dir(workdir)
    assert cache == tmp_path / "results" / ".cache" and io.cache_note(workdir) is None
    assert io.write_cache_file(cache, "a.bin", b"123")
    assert io.read_cache_file(cache, "a.bin") == b"123"


def test_cached_inputs_are_used_only_for_their_own_key(tmp_path: Path) -> None:
    import numpy as np

    from harness.variants import expression

    small = ((8, 4), "float32", "float32", 4, 4, 0)
    other = ((16, 4), "float32", "float32", 4, 4, 0)
    reseeded = ((8, 4), "float32", "float32", 4, 4, 1)
    made = {}
    for key in (small, other):
        x = np.arange(np.prod(key[0]), dtype=np.float32).reshape(key[0])
        w, b = np.ones((4, 4), np.float32), np.zeros(4, np.float32)
        made[key] = expression.Inputs(x, w, b)
        expression._write_cached(tmp_path, key, made[key])
    found = expression._read_cached(tmp_path, small)
    assert found is not None and np.array_equal(np.asarray(found.x), made[small].x)
    # Another problem's file under this key's name, or under another seed's: a miss.
    name = expression._cache_name
    shutil.copyfile(tmp_path / name(other), tmp_path / name(small))
    assert expression._read_cached(tmp_path, small) is None
    shutil.copyfile(tmp_path / name(other), tmp_path / name(reseeded))
    assert expression._read_cached(tmp_path, reseeded) is None
    # The right key with another problem's x in it: a miss.
    expression._write_cached(tmp_path, small, made[small])
    with np.load(tmp_path / name(small)) as f, np.load(tmp_path / name(other)) as g:
        parts = {k: f[k] for k in f.files} | {"x": g["x"], "x_shape": g["x_shape"]}
    with open(tmp_path / name(small), "wb") as out:
        np.savez(out, **parts)
    assert expression._read_cached(tmp_path, small) is None


def test_damaged_ceilings_entries_are_measured_again(tmp_path: Path) -> None:
    now = time.time()
    good = {"flops_per_s": 1e9, "at": now, "key": "8x4x4:float32:float32"}
    entries = {
        "8x4x4:float32:float32": good,
        "16x4x4:float32:float32": dict(good),  # recorded under another key
        "copy": {"bytes_per_s": "fast", "at": now, "key": "copy"},
        "32x4x4:float32:float32": {**good, "key": "32x4x4:float32:float32", "at": [1]},
        "64x4x4:float32:float32": {**good, "key": "64x4x4:float32:float32", "flops_per_s": -1},
        "link:2": {"bytes_per_s": 1e9, "at": now + 3600, "key": "link:2", "source": "x"},
    }
    (tmp_path / "ceilings.json").write_text(json.dumps({"host": "h", "entries": entries}))
    assert ceilings.read_cache(tmp_path / "ceilings.json", "h", now) == {
        "8x4x4:float32:float32": good
    }
    assert ceilings.read_cache(tmp_path / "ceilings.json", "another jax", now) == {}
    (tmp_path / "ceilings.json").write_text('{"host": ' + "[" * 100_000)
    assert ceilings.read_cache(tmp_path / "ceilings.json", "h", now) == {}


@pytest.mark.parametrize(
    ("manifest", "finished"),
    [
        ({"status": "complete"}, "complete"),
        ({"status": "failed"}, "finished (with failed variants)"),
        ({"status": "failed", "reason": "No space left on device"}, None),
        ({"status": "interrupted"}, None),
        ({"status": "running"}, None),
    ],
)
def test_only_an_unfinished_run_is_resumable(
    tmp_path: Path, manifest: dict[str, str], finished: str | None
) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert runs.finished_status(tmp_path) == finished


def test_ownership_walk_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ownership, "MAX_ENTRIES", 3)
    out = fill(tmp_path / "out")
    (out / "x").write_text("1")
    with pytest.raises(io.NotOurs, match="more than 3 entries"):
        io.claim_output(out, "export")
