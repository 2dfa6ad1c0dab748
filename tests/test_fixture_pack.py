"""The clone tests everything (issue 61): the H200 fixture files the tests read ship with the
project, compressed in parts under 1 MB, and unpack on first use where ../shared/fixtures is
absent (tests/fixture_root.py)."""

from __future__ import annotations

from pathlib import Path

import fixture_root
import pytest

LIMIT = 1 << 20  # no committed file over 1 MB


def test_every_part_is_under_a_megabyte_and_the_list_is_non_empty() -> None:
    parts = fixture_root.parts()
    assert parts and all(p.stat().st_size < LIMIT for p in parts)
    names = fixture_root.FILES_LIST.read_text().split()
    assert len(names) == len(set(names)) > 100


def test_the_pack_unpacks_to_the_listed_files_and_equals_the_shared_fixtures(
    tmp_path: Path,
) -> None:
    root = fixture_root.unpack(fixture_root.parts(), tmp_path)
    names = sorted(fixture_root.FILES_LIST.read_text().split())
    unpacked = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert unpacked == names
    # unpacked once: a second call reuses the folder
    assert fixture_root.unpack(fixture_root.parts(), tmp_path) == root
    if not fixture_root.SHARED.is_dir():
        pytest.skip("no ../shared/fixtures to compare the pack with")
    stale = [n for n in names if (root / n).read_bytes() != (fixture_root.SHARED / n).read_bytes()]
    assert stale == [], (
        f"the pack is older than ../shared/fixtures: python tests/fixture_root.py pack ({stale[:3]})"
    )


def test_without_shared_fixtures_the_root_is_the_unpacked_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fixture_root, "SHARED", tmp_path / "no-shared" / "fixtures")
    monkeypatch.setattr(fixture_root, "CACHE", tmp_path / "cache")
    root = fixture_root.fixtures_root()
    assert root.is_relative_to(tmp_path / "cache") and (root / "h200-jax0.11.2").is_dir()
