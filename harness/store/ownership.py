"""Whose an output folder's content is: what is there, against what the tool recorded writing.

A tool that fills an output folder (export, compare, analyze) records in the folder's marker
the path, size and digest of every file it wrote. A later run of the same tool may empty the
folder only when everything in it is one of those files, unchanged: a run, a dump, a link or
any other file put there since (by a study, a copy, a user) makes the folder someone else's.

Pure reading of the tree and small helpers; io.claim_output decides and writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.store import records
from harness.store.runfolder import MANIFEST_FILE, SEARCH_FILE, SUMMARY_FILE, TIMING_FILE

# More entries than any output the tools write; a folder past it is refused, never walked on.
MAX_ENTRIES = 200_000
RUN_FILES = frozenset({MANIFEST_FILE, SUMMARY_FILE, TIMING_FILE, SEARCH_FILE})
DUMP_SUFFIXES = (".hlo", ".hlo.pb", ".pb", ".mlir", ".ll", ".ptx", ".xplane.pb")
# The run lock (io.run_lock) a command holds on its folder: an empty regular file at the top,
# opened without truncating, never written, read or removed, so it is nobody's content.
LOCK_NAME = ".lock"


@dataclass(frozen=True)
class Entry:
    """One thing under the folder: its path relative to it, what it is, and its size."""

    rel: str
    kind: str  # "file", "dir", "link" or "other" (a FIFO, a socket, a device)
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Marker:
    """What a tool's marker says: the tool, when it made the folder, and what it wrote."""

    tool: str
    made: str
    files: Mapping[str, tuple[int, str]]


@dataclass(frozen=True)
class OwnershipVerdict:
    """Why the folder is not the tool's own (None when it is), and the files it may remove."""

    why: str | None
    files: tuple[str, ...] = ()


class TooMany(ValueError):
    """The folder holds more entries than any output of the tool."""


def marker(tool: str, made: str, files: Mapping[str, tuple[int, str]]) -> dict[str, Any]:
    """The marker's JSON: the tool, when it made the folder, and {path: [size, digest]}."""
    return {
        "tool": tool,
        "made": made,
        "files": {rel: [size, digest] for rel, (size, digest) in sorted(files.items())},
    }


def read_marker(path: Path, tool: str) -> Marker | None:
    """The marker at `path` when it is a regular file of `tool`'s, well formed; else None."""
    try:
        if path.is_symlink():
            return None
        data = records.loads(userfiles.read_bytes(path, userfiles.MARKER), str(path))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("tool") != tool:
        return None
    raw = data.get("files", {})
    if not isinstance(raw, dict):
        return None
    files: dict[str, tuple[int, str]] = {}
    for rel, value in raw.items():
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not isinstance(value[0], int)
            or not isinstance(value[1], str)
        ):
            return None
        files[rel] = (value[0], value[1])
    return Marker(tool, str(data.get("made", "")), files)


def digest(path: Path) -> str:
    """The file's content digest, read without following a link."""
    h = hashlib.blake2b(digest_size=16)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def entries(root: Path) -> list[Entry]:
    """Everything under `root`, links not followed; raises TooMany past MAX_ENTRIES."""
    found: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            try:
                st = path.lstat()
            except OSError:
                continue  # gone while walking
            found.append(
                Entry(str(path.relative_to(root)), _kind(st.st_mode), st.st_size, st.st_mtime_ns)
            )
            if len(found) > MAX_ENTRIES:
                raise TooMany(f"holds more than {MAX_ENTRIES} entries")
    return found


def describe(rel: str, kind: str, tool: str) -> str:
    """What a foreign entry makes the folder: a run's, a dump's, or a file someone put there."""
    name = Path(rel).name.removesuffix(".gz")  # a run's dumps are kept gzip-compressed
    if name in RUN_FILES:
        return f"holds a run or runs ({rel})"
    if (name.startswith("module_") and name.endswith(".txt")) or name.endswith(DUMP_SUFFIXES):
        return f"holds an XLA dump or profile ({rel})"
    if kind == "link":
        return f"holds a link {rel} that {tool} did not make"
    if kind == "other":
        return f"holds {rel}, which is not a regular file"
    return f"holds {rel}, which {tool} did not write"


_RANK = ("holds a run", "holds an XLA dump", "holds a link", "holds")


def _strongest(reasons: list[str]) -> str:
    """The reason to name first: a run, then a dump, then a link, then any other file."""
    return min(reasons, key=lambda r: next(i for i, p in enumerate(_RANK) if r.startswith(p)))


def _matches(path: Path, recorded: tuple[int, str] | None, e: Entry) -> bool:
    if recorded is None or recorded[0] != e.size:
        return False
    try:
        return digest(path) == recorded[1]
    except OSError:
        return False


def _bookkeeping(e: Entry, marker_name: str) -> bool:
    """True for the marker and the run lock: the tools' own records, not a folder's content."""
    return e.rel == marker_name or (e.rel == LOCK_NAME and e.kind == "file")


def foreign(root: Path, tool: str, marker_name: str) -> OwnershipVerdict:
    """Whether everything in `root` is a file `tool` recorded writing there, unchanged.

    An empty folder is the tool's; a folder with content and no marker of the tool's (or a
    marker alone of another tool's) is not, and neither is one holding any link, special
    file, or file that is not in the record or differs from it.
    """
    try:
        listing = entries(root)
    except TooMany as e:
        return OwnershipVerdict(str(e))
    except OSError as e:
        return OwnershipVerdict(f"cannot be read ({e.strerror or e})")
    content = [e for e in listing if not _bookkeeping(e, marker_name)]
    mark = next((e for e in listing if e.rel == marker_name), None)
    if mark is None and not content:
        return OwnershipVerdict(None)
    own = read_marker(root / marker_name, tool)
    if own is None:
        return _unmarked(content, tool)
    reasons = [describe(e.rel, e.kind, tool) for e in content if not _as_recorded(root, e, own)]
    if reasons:
        return OwnershipVerdict(_strongest(reasons))
    return OwnershipVerdict(None, tuple(e.rel for e in content if e.kind == "file"))


def _unmarked(content: list[Entry], tool: str) -> OwnershipVerdict:
    """The verdict on a folder without the tool's marker: never the tool's; the reason names
    a run or a dump it holds, else says only that the tool did not make it."""
    if not content:
        return OwnershipVerdict("holds another tool's marker")
    reasons = [describe(e.rel, e.kind, tool) for e in content if e.kind != "dir"]
    strongest = _strongest(reasons) if reasons else ""
    if strongest.startswith(("holds a run", "holds an XLA dump")):
        return OwnershipVerdict(strongest)
    return OwnershipVerdict("was not made by this tool")


def _as_recorded(root: Path, e: Entry, own: Marker) -> bool:
    """True for a folder, and for a file the marker records with its size and digest."""
    return e.kind == "dir" or (e.kind == "file" and _matches(root / e.rel, own.files.get(e.rel), e))


def remove_recorded(root: Path, verdict: OwnershipVerdict) -> None:
    """Removes the tool's recorded files, then the folders left empty; never the marker."""
    for rel in verdict.files:
        path = root / rel
        if path.is_file() and not path.is_symlink():
            path.unlink()
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False, followlinks=False):
        folder = Path(dirpath)
        if folder != root and not folder.is_symlink():
            with contextlib.suppress(OSError):  # only an empty folder goes; the rest stays
                folder.rmdir()


def written_since(root: Path, since_ns: int, marker_name: str) -> dict[str, tuple[int, str]]:
    """{path: (size, digest)} of the regular files under `root` written at or after
    `since_ns`, except the marker and the lock: what the tool wrote since it claimed the folder."""
    files: dict[str, tuple[int, str]] = {}
    try:
        listing = entries(root)
    except (TooMany, OSError):
        return files  # unrecorded: a later claim refuses the folder, losing nothing
    for e in listing:
        if e.kind == "file" and not _bookkeeping(e, marker_name) and e.mtime_ns >= since_ns:
            try:
                files[e.rel] = (e.size, digest(root / e.rel))
            except OSError:
                continue
    return files


# --- files the harness writes into a folder it shares (a run, a results root) -----------------

# Beside a run's or a results root's own files, the record of those the report and the results
# index wrote there, with their digests: a file of that name that is not in it, or differs, is
# someone else's, and is never overwritten.
FILES_RECORD = ".harness-files.json"
RECORD_TOOL = "harness"


def recorded_files(root: Path) -> dict[str, tuple[int, str]] | None:
    """{path: (size, digest)} the harness recorded writing under `root`; None when there is
    no record (a folder made before records were kept, or not by the harness)."""
    if not (root / FILES_RECORD).exists():
        return None
    found = read_marker(root / FILES_RECORD, RECORD_TOOL)
    return dict(found.files) if found is not None else {}


def foreign_file(root: Path, rel: str, legacy: bool) -> str | None:
    """Why the harness must not replace `root/rel` (None when it may): it is a link or not a
    regular file, or the record does not hold it as it is now. Where there is no record at all,
    `legacy` decides (a folder the harness made before it kept records)."""
    path = root / rel
    try:
        st = path.lstat()
    except OSError:
        return None  # absent: writing it replaces nothing
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return f"{path} is a link or not a regular file the harness wrote"
    record = recorded_files(root)
    if record is None:
        return None if legacy else f"{path} was not written by the harness"
    entry = Entry(rel, "file", st.st_size, st.st_mtime_ns)
    if not _matches(path, record.get(rel), entry):
        return f"{path} was not written by the harness, or was changed since"
    return None


def record_files(root: Path, rels: list[str]) -> dict[str, object]:
    """The record's JSON with `rels` (files just written under `root`) added at their current
    size and digest; the caller writes it (io.write_json) to root/FILES_RECORD."""
    files = recorded_files(root) or {}
    for rel in rels:
        path = root / rel
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                files[rel] = (path.stat().st_size, digest(path))
    return marker(RECORD_TOOL, "", files)
