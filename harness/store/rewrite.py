"""A rewrite of a finished run as a transaction: every file the run holds is kept (as a hard
link, so nothing is copied) before a command rewrites it, and put back unless the command
commits.

The harness writes every file atomically (harness.store.io: a temporary file renamed over the
old one), so a rewritten file is a new inode and the kept link still holds the old bytes.
Restoring puts each kept file back where it was replaced or removed, and removes the files the
rewrite made, so a refused `reanalyze` leaves the run exactly as it found it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

KEPT_PREFIX = ".harness-kept-"


@dataclass
class Rewrite:
    """The files of `root` as they were (relative path -> inode), kept under `kept`."""

    root: Path
    kept: Path
    inodes: dict[str, int] = field(default_factory=dict)
    committed: bool = False

    def commit(self) -> None:
        self.committed = True


def _files(root: Path, skip: Path) -> Iterator[tuple[str, os.stat_result]]:
    for folder, dirs, names in os.walk(root):
        if Path(folder) == skip:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if Path(folder, d) != skip]
        for name in names:
            path = Path(folder, name)
            st = path.lstat()
            if path.is_symlink() or not os.path.isfile(path):
                continue
            yield str(path.relative_to(root)), st


@contextlib.contextmanager
def transaction(root: Path) -> Iterator[Rewrite]:
    """Yields a Rewrite of the run folder `root`; unless `commit()` was called when the block
    ends (normally or by an exception), every file is as it was before the block."""
    kept = root / f"{KEPT_PREFIX}{secrets.token_hex(6)}"
    kept.mkdir(mode=0o700)
    rewrite = Rewrite(root, kept)
    try:
        for rel, st in _files(root, kept):
            target = kept / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(root / rel, target)
            rewrite.inodes[rel] = st.st_ino
        yield rewrite
    finally:
        if not rewrite.committed:
            _restore(rewrite)
        shutil.rmtree(kept, ignore_errors=True)


def _restore(rewrite: Rewrite) -> None:
    """Puts each kept file back where it was replaced or removed; removes the files made."""
    root, kept = rewrite.root, rewrite.kept
    for rel, st in list(_files(root, kept)):
        if rewrite.inodes.get(rel) != st.st_ino:
            if rel in rewrite.inodes:
                os.replace(kept / rel, root / rel)
            else:
                with contextlib.suppress(OSError):
                    (root / rel).unlink()
    for rel in rewrite.inodes:
        path = root / rel
        if not path.exists() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                os.link(kept / rel, path)
