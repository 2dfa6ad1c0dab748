"""A compact run folder (issue 57, item 3): a variant's dumps and IR are kept gzip-compressed
once its capture is done, links between them kept, and read back by the names XLA wrote through
the one reader; jax's `*.trace.json.gz` copy beside each xplane is not kept."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from harness.common import userfiles
from harness.hlo.parser import parse_file
from harness.records import ladder
from harness.store import io
from harness.store.runfolder import RunFolder


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


def test_a_fresh_variant_keeps_its_dumps_and_ir_compressed_and_no_trace_json(
    cpu_run: Path,
) -> None:
    vf = RunFolder(cpu_run).variant("xla")
    kept = _files(vf.dump) + _files(vf.ir)
    assert kept and all(p.name.endswith(".gz") or p == vf.ir / ladder.INDEX for p in kept)
    profiles = _files(RunFolder(cpu_run).variants_dir)
    assert any(p.name.endswith(".xplane.pb") for p in profiles)
    assert not [p for p in profiles if p.name.endswith(".trace.json.gz")]
    # The ladder's stages are still XLA's dump files, stored once.
    after = userfiles.stored(ladder.read_ladder(vf.ir).path("hlo_after"))  # type: ignore[arg-type]
    assert os.stat(after).st_nlink == 2
    assert any(os.path.samefile(after, p) for p in _files(vf.dump))


def test_the_ladder_reads_back_by_its_names_equal_to_what_was_dumped(cpu_run: Path) -> None:
    vf = RunFolder(cpu_run).variant("xla")
    lad = ladder.read_ladder(vf.ir)
    assert {"jaxpr", "hlo_before", "passes", "hlo_after"} <= {s.name for s in lad.stages}
    for stage in ("hlo_before", "hlo_after"):
        (path,) = lad.hlo_files(stage)
        assert not path.exists() and path.name.endswith(".txt")  # asked for by its own name
        text = userfiles.read_text(path, userfiles.IR_TEXT)
        assert text.encode() == gzip.decompress(userfiles.stored(path).read_bytes())
        assert parse_file(path).instruction_count() > 0
    passes = lad.files("passes")
    assert passes and all(p.suffix == ".txt" for p in passes)
    assert all(userfiles.read_head(p, 9) == b"HloModule" for p in passes)
    # XLA's dump, by module, under the names XLA wrote.
    (module,) = [m for m in ladder.dump_modules(vf.dump.iterdir()) if m.name == "jit_gelu_linear"]
    assert all(not rest.endswith(".gz") for rest, _ in module.files)


def test_compressing_in_place_keeps_links_and_what_is_read(tmp_path: Path) -> None:
    dump, ir = tmp_path / "dump", tmp_path / "ir"
    dump.mkdir()
    (dump / "module_0001.f.txt").write_text("HloModule f\n" * 100)
    io.link_file(dump / "module_0001.f.txt", ir / "40-hlo-after-optimizations.txt")
    io.write_json(ir / ladder.INDEX, {"stages": []})
    saved = io.gzip_in_place((dump, ir), keep=frozenset({ladder.INDEX}))
    assert saved > 0
    assert sorted(p.name for p in _files(tmp_path)) == [
        "40-hlo-after-optimizations.txt.gz",
        ladder.INDEX,
        "module_0001.f.txt.gz",
    ]
    a, b = dump / "module_0001.f.txt.gz", ir / "40-hlo-after-optimizations.txt.gz"
    assert os.path.samefile(a, b)
    assert userfiles.files_in(dump) == [dump / "module_0001.f.txt"]
    assert userfiles.read_text(dump / "module_0001.f.txt", userfiles.DUMP) == "HloModule f\n" * 100
    assert userfiles.read_head(ir / "40-hlo-after-optimizations.txt", 9) == b"HloModule"
    assert io.gzip_in_place((dump, ir), keep=frozenset({ladder.INDEX})) == 0  # nothing left
    # Only the kinds kept compressed are read by the old name; a bomb stops at the bound.
    with pytest.raises(userfiles.Unreadable, match="cannot open"):
        userfiles.read_text(dump / "module_0001.f.txt", userfiles.RECORD)
    (dump / "big.txt.gz").write_bytes(gzip.compress(bytes(2 << 20)))
    with pytest.raises(userfiles.Unreadable, match="inflates to more than"):
        userfiles.read_bytes(dump / "big.txt", userfiles.Kind("IR", 1 << 20, gzipped_beside=True))
