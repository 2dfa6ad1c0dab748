"""Where the tests find the H200 fixtures: `../shared/fixtures` beside the checkout, else the
copy that ships with the project, compressed, unpacked on first use.

The project carries the fixture files the tests read (FILES_LIST) as one xz-compressed tar,
split into parts under 1 MB (no committed file is larger): tests/data/fixtures.tar.xz.NN. The
first test process that needs them unpacks the parts into a git-ignored cache,
`.cache/fixtures/<digest>/fixtures`, under a lock (pytest-xdist workers wait for it), named by
the parts' digest so a new pack is unpacked afresh. A fresh clone with nothing beside it thus
runs every fixture test; a checkout with `../shared/fixtures` (developers, CI) reads that.

To remake the pack after a fixture set changed (tests/test_fixture_pack.py fails until then):

    python tests/fixture_root.py pack
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import lzma
import os
import shutil
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures"
DATA = REPO / "tests" / "data"
PARTS = "fixtures.tar.xz.[0-9][0-9]"
# The files the tests read, one path a line relative to the fixture root (how it was made:
# tests/data/README.md).
FILES_LIST = DATA / "fixtures.files"
CACHE = REPO / ".cache" / "fixtures"
PART_BYTES = 900_000  # under 1 MB a part


def parts() -> list[Path]:
    """The committed parts, in order."""
    return sorted(DATA.glob(PARTS))


def packed_digest(found: list[Path]) -> str:
    """The digest of the parts' bytes, joined: the cache folder's name."""
    h = hashlib.sha256()
    for p in found:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def unpack(found: list[Path], into: Path) -> Path:
    """Unpacks the parts into `into`/fixtures (once: an existing unpacked copy is reused);
    returns that folder."""
    root, done = into / "fixtures", into / ".unpacked"
    if done.exists():
        return root
    into.mkdir(parents=True, exist_ok=True)
    with open(into / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():  # another process may have unpacked it while we waited
            shutil.rmtree(root, ignore_errors=True)  # what an interrupted unpack left
            data = b"".join(p.read_bytes() for p in found)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
                tar.extractall(into, filter="data")
            done.touch()
    return root


def fixtures_root() -> Path:
    """The fixture root the tests read: ../shared/fixtures where it exists, else the shipped
    pack unpacked into the cache; ../shared/fixtures (absent: the tests skip) without a pack."""
    if SHARED.is_dir():
        return SHARED
    found = parts()
    if not found:
        return SHARED
    return unpack(found, CACHE / packed_digest(found))


def pack(source: Path = SHARED) -> list[Path]:
    """Writes the parts from `source`, holding the files FILES_LIST names; returns them."""
    names = [n for n in FILES_LIST.read_text().splitlines() if n.strip()]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            info = tar.gettarinfo(str(source / name), arcname=f"fixtures/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # the same files give the same bytes
            with open(source / name, "rb") as f:
                tar.addfile(info, f)
    data = lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    for old in parts():
        old.unlink()
    out = []
    for i in range(0, len(data), PART_BYTES):
        path = DATA / f"fixtures.tar.xz.{i // PART_BYTES:02d}"
        path.write_bytes(data[i : i + PART_BYTES])
        out.append(path)
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["pack"]:
        sys.exit("usage: python tests/fixture_root.py pack")
    written = pack()
    total = sum(os.path.getsize(p) for p in written)
    print(f"{len(written)} parts, {total} bytes: {', '.join(p.name for p in written)}")
