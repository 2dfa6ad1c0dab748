"""File I/O at the edges: atomic writes, run folders, and the `latest` link.

Every JSON and report file is written to a temporary file in the same folder and renamed, so a
crash never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import gzip
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.common.bounded import BoundedText
from harness.store import ownership, records, runfolder


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=str)  # sorted, so the same data always writes the same file
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def _clean(obj: Any) -> Any:
    """Returns obj with NaN and infinities as None, so the JSON stays standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _umask() -> int:
    """Returns the process's umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Files are created as a plain open() would create them: 0666 less the user's umask. mkstemp
# alone would leave them 0600, unreadable to anyone serving or sharing the results folder.
FILE_MODE = 0o666 & ~_umask()


class OutsideOutput(ValueError):
    """A write that would land outside the folder the running command declared as its output."""


_ALLOWED: list[Path] = []


@contextlib.contextmanager
def writes_confined_to(*roots: Path) -> Iterator[None]:
    """Within the block, every write through this module must land inside one of `roots`.

    Each entry point declares its output folder this way; a link planted inside it that points
    elsewhere (a `plots` link, a variant folder replaced by a link, `latest` redirected) then
    makes the write fail with OutsideOutput instead of following the link out.
    """
    resolved = [Path(r).resolve() for r in roots]
    _ALLOWED.extend(resolved)
    try:
        yield
    finally:
        for r in resolved:
            _ALLOWED.remove(r)


def check_inside(path: Path) -> Path:
    """Returns `path` resolved; raises OutsideOutput when writes are confined and it is outside."""
    real = Path(path).resolve()
    if _ALLOWED and not any(real == r or r in real.parents for r in _ALLOWED):
        raise OutsideOutput(f"{path} resolves to {real}, outside the output folder")
    return real


_SOLE_WRITER: list[int] = []  # the one process that may write, once a worker says so


def sole_writer() -> None:
    """Makes this process the only one that writes through this module: a copy of it that a
    user's `fork` made (in a callback of the program a worker runs) and that runs on into the
    harness's code exits at its first write, before it changes a file of the run."""
    _SOLE_WRITER[:] = [os.getpid()]


def check_writer() -> None:
    """Exits at once (status 0, nothing flushed) in a process forked from the sole writer."""
    if _SOLE_WRITER and os.getpid() != _SOLE_WRITER[0]:
        os._exit(0)


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """Yields a temporary path beside `target`; when the block succeeds it is synced to disk
    and renamed over `target`, otherwise removed, so `target` is never half-written."""
    check_writer()
    check_inside(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    check_inside(target.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> Path:
    """Writes `text` to `path` atomically; returns the path."""
    with _replacing(path) as tmp:
        tmp.write_text(text)
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    """Writes `data` to `path` atomically; returns the path."""
    with _replacing(path) as tmp:
        tmp.write_bytes(data)
    return path


def write_by(path: Path, writer: Callable[[Path], None]) -> Path:
    """Writes `path` atomically through `writer`, which fills the temporary path it is given
    (a library's own file writer, such as Parquet's); returns the path."""
    with _replacing(path) as tmp:
        writer(tmp)
    return path


def write_json(path: Path, data: Any, compact: bool = False) -> Path:
    """Writes `data` as JSON to `path` atomically, NaN and infinities as null; returns the path.

    `compact` writes one line through the C encoder, several times faster than the indented
    (pure-Python) one on files of megabytes, such as a 48-block train step's fusions.json.
    """
    if compact:
        try:
            text = json.dumps(data, allow_nan=False, default=_json_default)
        except ValueError:  # a NaN or an infinity somewhere: clean it, then encode
            text = json.dumps(_clean(data), default=_json_default)
        return write_text(path, text + "\n")
    return write_text(path, json.dumps(_clean(data), indent=2, default=_json_default) + "\n")


def dumps(data: Any) -> str:
    """`data` as the indented JSON write_json writes, NaN and infinities as null."""
    return json.dumps(_clean(data), indent=2, default=_json_default) + "\n"


def copy_file(source: Path, target: Path) -> Path:
    """Copies `source` to `target` atomically; returns the target."""
    with _replacing(target) as tmp:
        shutil.copyfile(source, tmp)
    return target


def link_file(source: Path, target: Path) -> Path:
    """Makes `target` the same file as `source` (a hard link, renamed into place), or a copy
    where the file system cannot link; returns the target. For files never written again,
    such as XLA's dumps that the IR ladder names by stage."""
    check_inside(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.link")
    try:
        tmp.unlink(missing_ok=True)
        os.link(source, tmp)
    except OSError:
        return copy_file(source, target)
    os.replace(tmp, target)
    return target


def gzip_in_place(folders: tuple[Path, ...], keep: frozenset[str] = frozenset()) -> int:
    """Replaces each regular file under `folders` (no link followed, none named in `keep`, none
    already `.gz`) by its gzip-compressed copy `<name>.gz`, which userfiles reads by the old
    name. Files that are hard links of one another (the IR ladder's stages of XLA's dump
    files) are compressed once and stay links of one another. Returns the bytes saved.

    For a variant's dumps and IR once its capture is done: nothing writes them again."""
    by_inode: dict[tuple[int, int], list[Path]] = {}
    for folder in folders:
        if folder.is_symlink() or not folder.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(check_inside(folder), followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                st = path.lstat()
                if name in keep or name.endswith(userfiles.GZ) or name.startswith("."):
                    continue
                if stat.S_ISREG(st.st_mode):
                    by_inode.setdefault((st.st_dev, st.st_ino), []).append(path)
    saved = 0
    for paths in by_inode.values():
        first, *others = paths
        data = userfiles.read_bytes(first, userfiles.DUMP)
        packed = write_bytes(userfiles.gz_of(first), gzip.compress(data, compresslevel=6, mtime=0))
        for other in others:
            link_file(packed, userfiles.gz_of(other))
        for path in paths:
            path.unlink()
        saved += len(data) - packed.stat().st_size
    return saved


def remove_tree(root: Path, path: Path, ours: Callable[[str], bool]) -> tuple[str, ...]:
    """Deletes what the harness made in the folder `path` (inside `root`, not a link): each
    entry whose name `ours` accepts, then the folder if that left it empty. Returns the names
    of the entries left untouched (a user's notes beside a variant's files); no-op if absent.

    A folder entry is first renamed to a hidden name, so a crash half-way through the delete
    never leaves a half-deleted folder under its real name.
    """
    if not path.exists() and not path.is_symlink():
        return ()
    if path.is_symlink() or not path.is_dir():
        raise ValueError(f"{path} is not a folder; refusing to delete it")
    inside = confined(root, str(path.relative_to(root)))
    kept = []
    for entry in sorted(inside.iterdir()):
        if not ours(entry.name):
            kept.append(entry.name)
        elif entry.is_dir() and not entry.is_symlink():
            doomed = entry.with_name(f".{entry.name}.deleting.{os.getpid()}")
            os.replace(entry, doomed)
            shutil.rmtree(doomed)
        else:
            entry.unlink()
    if not kept:
        inside.rmdir()
    return tuple(kept)


def read_json(
    path: Path, kind: userfiles.Kind = userfiles.RECORD, within: Path | None = None
) -> Any:
    """Returns the JSON data at `path`, read through the one reader (userfiles: a regular file
    within the bound of its `kind`, no link out of `within`); Unreadable or SchemaError (both
    ValueErrors) when it cannot be read or is not JSON a harness writes (records.loads:
    bounded depth, no NaN, no number too large for a float)."""
    return records.loads(userfiles.read_text(path, kind, within), str(path))


def confined(root: Path, *parts: str) -> Path:
    """Returns root/parts resolved, refusing any path that escapes `root`."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"path {'/'.join(parts)!r} escapes {base}")
    return path


def cache_dir(workdir: Path) -> Path | None:
    """Returns the results root's `.cache` folder of run `workdir` (results_root/<experiment>/
    <run_id>): what runs on this host share, the device's ceilings and the inputs. None when it
    cannot be trusted (cache_note says why): then nothing is read from it or written to it."""
    cache = workdir.parent.parent / ".cache"
    return None if cache_refusal(cache) else cache


def cache_note(workdir: Path) -> str | None:
    """Why run `workdir`'s results cache is not used, or None when it is."""
    return cache_refusal(workdir.parent.parent / ".cache")


# A cache holds a few inputs files and ceilings.json; a folder past this is not walked on.
_CACHE_ENTRIES = 10_000
CACHE_FILE_BYTES = 256 << 20


def cache_refusal(cache: Path) -> str | None:
    """Why the cache folder `cache` must not be used: it, or anything under it, is a link or
    not a plain file or folder, or it resolves outside its results root. None when usable
    (absent included: it is made on the first write)."""
    cache = Path(cache)
    unused = "the cache is not used (every input and ceiling is made again)"
    if cache.is_symlink():
        return f"{cache} is a link; {unused}"
    if not cache.exists():
        return None
    if not cache.is_dir():
        return f"{cache} is not a folder; {unused}"
    if cache.resolve().parent != cache.parent.resolve():
        return f"{cache} resolves outside its results root; {unused}"
    count = 0
    for dirpath, dirnames, filenames in os.walk(cache, followlinks=False):
        for name in dirnames + filenames:
            count += 1
            path = Path(dirpath) / name
            if count > _CACHE_ENTRIES:
                return f"{cache} holds more than {_CACHE_ENTRIES} entries; {unused}"
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                return f"{path} is a link or not a plain file; {unused}"
    return None


def read_cache_file(cache: Path, name: str) -> bytes | None:
    """The bytes of `cache/name`, or None when the cache is refused (cache_refusal), the file
    is absent, a link, not a regular file, or larger than CACHE_FILE_BYTES: a cache miss."""
    if cache_refusal(cache) is not None or (cache / name).is_symlink():
        return None
    try:
        return userfiles.read_bytes(cache / name, userfiles.CACHE, within=cache)
    except userfiles.Unreadable:
        return None


def write_cache_file(cache: Path, name: str, data: bytes) -> bool:
    """Writes `cache/name` atomically (a link there is replaced, never written through);
    returns False, writing nothing, when the cache is refused or the write fails."""
    if cache_refusal(cache) is not None or len(data) > CACHE_FILE_BYTES:
        return False
    try:
        write_bytes(cache / name, data)
    except OSError:
        return False
    return cache_refusal(cache) is None  # swapped for a link while writing: not trusted


def new_run_dir(results_root: Path, experiment: str) -> Path:
    """Creates and returns a fresh `results_root/<experiment>/<run_id>`; concurrent runs never share one."""
    parent = confined(results_root, experiment)
    parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = parent / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RuntimeError(f"no free run folder under {parent}")


def point_latest(run_dir: Path) -> str | None:
    """Points `<experiment>/latest` at run_dir, atomically replacing an older link.

    Returns why it did not, when `latest` is something other than a link (a folder or file
    the tool did not make, which it never replaces).
    """
    link = run_dir.parent / runfolder.LATEST
    if link.exists() and not link.is_symlink():
        return f"{link} is not a link the harness made; left as it is"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)
    return None


class Locked(RuntimeError):
    """Another process holds the run's lock."""


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Holds an exclusive lock on the run folder for the block; raises Locked if taken.

    The lock (`fcntl.flock` on `<run>/.lock`) goes with the process: a killed run never
    leaves a stale one.
    """

    path = run_dir / ownership.LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Locked(f"{run_dir} is in use by another harness process") from None
        yield
    finally:
        os.close(fd)


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


MARKER = ".harness-output"


class NotOurs(ValueError):
    """An output folder the tool did not make, which it refuses to replace."""


def claim_output(path: Path, tool: str, inputs: tuple[Path, ...] = ()) -> Path:
    """Returns `path` as a folder this tool may fill: made now, or empty, or made by the same
    tool before and holding only what it wrote then (its marker records each file), whose
    files are then removed.

    Raises NotOurs for anything else: a link, a file, a folder holding a run, a dump, a link or
    any file the tool did not write (the results root, the source run, a user's folder, an old
    output someone has since put a run into), and a folder that holds, is or lies inside one of
    the command's `inputs` (a dump copied into --out is read, never deleted).
    """
    path = Path(path)
    if path.is_symlink():
        raise NotOurs(f"{path} is a link; name a folder of its own")
    if path.exists() and not path.is_dir():
        raise NotOurs(f"{path} exists and is not a folder")
    _refuse_inputs(path, tool, inputs)
    if path.is_dir():
        record = ownership.foreign(path, tool, MARKER)
        if record.why is not None:
            raise NotOurs(
                f"{path} {record.why}; {tool} only replaces an empty folder or one it made itself"
            )
        ownership.remove_recorded(path, record)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / MARKER, ownership.marker(tool, utc_now(), {}))
    return path


def _refuse_inputs(path: Path, tool: str, inputs: tuple[Path, ...]) -> None:
    """Raises NotOurs when the output folder is, holds or lies inside one of the inputs."""
    real = path.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if source == real or real in source.parents or source in real.parents:
            raise NotOurs(
                f"{path} is, holds or lies inside the input {given}; {tool} only replaces an "
                "empty folder or one it made itself, never its input"
            )


def seal_output(path: Path, tool: str) -> None:
    """Records in the marker every file now in `path` written since it was claimed, so a later
    claim removes exactly those and refuses anything else."""
    marker = path / MARKER
    try:
        since = marker.lstat().st_mtime_ns
    except OSError:
        return  # no marker: nothing is recorded, and a later claim refuses the folder
    files = ownership.written_since(path, since, MARKER)
    made = ownership.read_marker(marker, tool)
    write_json(marker, ownership.marker(tool, made.made if made else utc_now(), files))


@contextlib.contextmanager
def own_output(path: Path, tool: str, inputs: tuple[Path, ...] = ()) -> Iterator[Path]:
    """Claims `path` for `tool` (claim_output), confines the block's writes to it, and records
    what the block wrote (seal_output), even when the block fails half-way."""
    target = claim_output(path, tool, inputs)
    try:
        with writes_confined_to(target):
            yield target
    finally:
        with contextlib.suppress(OSError):  # unrecorded: a later claim refuses, losing nothing
            seal_output(target, tool)


def write_callback_output(variant_dir: Path, printed: BoundedText) -> int:
    """Writes what a variant's function printed to its callback_output.txt (nothing printed: no
    file); returns the lines it printed. The one writer, which the JAX and PyTorch captures call."""
    if text := printed.getvalue():
        write_text(variant_dir / runfolder.CALLBACK_OUTPUT_FILE, text)
    return printed.line_count()
