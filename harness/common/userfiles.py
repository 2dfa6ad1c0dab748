"""The one reader of every file the harness did not write in the same process: a config, a flag
file, ceilings, a sibling run's manifest, summary or index row, a variant's records and IR,
caches, dumps, profiles, user modules. Only a regular file on disk, and only so much of it.

A FIFO blocks its reader until someone writes, `/dev/zero` never ends, and `/proc/kmsg` looks
like an empty regular file but blocks until the kernel logs something. So the file is opened
without blocking (a FIFO's open then returns at once), refused unless it is a regular file
outside the kernel's pseudo file systems, and read to at most the bound of its kind (`Kind`:
a sparse 6 GB summary is refused by its size before a byte is read). A reader that names the
tree it was pointed at (`within`: a run folder, a dump, a cache) refuses a link out of it.

Archives are read here too, bounded by what they inflate to, not only by their bytes on
disk: a NumPy archive (`read_npz`: never unpickled, each member's uncompressed size in the zip's
directory checked before a byte is inflated, shapes checked against what the caller's record
says) and a gzip stream (`read_gzip`: inflated to at most a stated number of bytes). A run's
dumps and IR are kept gzip-compressed once captured (`X.txt` as `X.txt.gz`): a reader asks
for `X.txt` and gets its text (`files_in` lists the folder by those names, `stored` and
`is_file` find the file on disk), so old runs and new ones read alike.

tests/test_one_reader.py fails any `open(`, `read_text`, `read_bytes`, `json.load(s)`, `np.load`,
`gzip`, `zipfile` or `yaml` use in harness/ that does not come through here, apart from a stated
allowlist.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import stat
import sys
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

MAX_BYTES = 1 << 20
# Kernel views that pass for regular files (st_size 0, contents made on read, some reads block).
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_CHUNK = 1 << 16


class Unreadable(ValueError):
    """A user's file refused or unreadable; the message is one line naming why."""


@dataclass(frozen=True)
class Kind:
    """A kind of file the harness reads, and the most bytes one may hold (said in the error)."""

    name: str
    bound: int
    # A file of this kind may be kept gzip-compressed as `<name>.gz` (a run's dumps and IR,
    # compressed once its capture is done): asked for by its own name, it reads inflated.
    gzipped_beside: bool = False


_MIB = 1 << 20
# Bounds tied to what each file holds: far above any the harness writes (a 48-block train
# step's fusions.json is ~40 MB, its largest dump ~200 MB), far below what exhausts memory.
FILE = Kind("file", MAX_BYTES)
CONFIG = Kind("config file", MAX_BYTES)
FLAG_FILE = Kind("flag file", MAX_BYTES)
INDEX_ROW = Kind("index row", 64 << 10)
MANIFEST = Kind("manifest", 16 * _MIB)
MARKER = Kind("output marker", 64 * _MIB)
SUMMARY = Kind("summary", 256 * _MIB)
RECORD = Kind("run record", 256 * _MIB)
IR_TEXT = Kind("IR text", 512 * _MIB, gzipped_beside=True)
DUMP = Kind("dump file", 1024 * _MIB, gzipped_beside=True)
PROFILE = Kind("profile", 2048 * _MIB)
CACHE = Kind("cache file", 256 * _MIB)
PYTHON = Kind("Python file", 16 * _MIB)
EXECUTABLE = Kind("serialized executable", 4096 * _MIB)  # a large model's compiled program
DOC = Kind("document", 16 * _MIB)
# timing.json: 1000 rounds of 40 variants' batches is ~10 MB; its parse holds ~6 times its bytes.
TIMING = Kind("timing record", 64 * _MIB)
ARRAYS = Kind("array archive", 256 * _MIB)  # a variant's kept outputs (outputs.npz)
GZIP_TRACE = Kind("gzipped trace", 512 * _MIB)
# What an archive may inflate to: the bytes its parsing then holds in memory.
INFLATED_ARRAYS = 512 * _MIB
INFLATED_TRACE = 512 * _MIB  # a torch.profiler trace of a few steps is tens of MB


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _pseudo(path: Path) -> bool:
    try:
        real = str(path.resolve())
    except (OSError, RuntimeError):  # a link loop: open says so
        return False
    return any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS)


def _outside(path: Path, within: Path | str | None) -> bool:
    """True when `path`, its links followed, lies outside the folder `within` (followed too)."""
    if within is None:
        return False
    try:
        real, base = path.resolve(), Path(within).resolve()
    except (OSError, RuntimeError):
        return True  # a link loop: nothing to read inside
    return real != base and base not in real.parents


def _open(path: Path, kind: Kind, within: Path | str | None) -> int:
    """An fd of the regular file `path`, opened without blocking; raises Unreadable otherwise."""
    if _pseudo(path):
        raise Unreadable(f"{path}: is a kernel file, not a file on disk; name a regular file")
    if _outside(path, within):
        raise Unreadable(f"{path}: is a link out of {within}; a {kind.name} is read only inside it")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Unreadable(f"{path}: cannot open: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unreadable(f"{path}: is {_kind(mode)}; name a regular file")
    if within is not None and _opened_outside(fd, within):  # a link swapped in meanwhile
        os.close(fd)
        raise Unreadable(f"{path}: is a link out of {within}; a {kind.name} is read only inside it")
    return fd


def _opened_outside(fd: int, within: Path | str) -> bool:
    """True when the file open at `fd` lies outside `within`, by what the kernel says it opened
    (/proc/self/fd); False where the kernel does not say."""
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
        base = Path(within).resolve()
    except (OSError, RuntimeError):
        return False
    return real != base and base not in real.parents


def _bound(limit: int | Kind) -> Kind:
    return limit if isinstance(limit, Kind) else Kind(FILE.name, limit)


def read_bytes(
    path: Path | str, limit: int | Kind = MAX_BYTES, within: Path | str | None = None
) -> bytes:
    """Returns the bytes of the regular file `path`; raises Unreadable when it is anything
    else (a FIFO, a device, a folder, a file under /proc, /sys or /dev), larger than the
    bound of its kind (`limit`: a Kind, or a number of bytes), a link out of the folder
    `within`, or cannot be read. Never blocks on the file."""
    path, kind = Path(path), _bound(limit)
    if kind.gzipped_beside and _gzipped(path):
        raw = read_bytes(gz_of(path), Kind(kind.name, kind.bound), within)
        return gunzip(raw, str(gz_of(path)), kind.bound)
    fd = _open(path, kind, within)
    try:
        size = os.fstat(fd).st_size
        if size > kind.bound:
            raise Unreadable(_too_large(path, kind))
        return _bounded(fd, path, kind, size)
    finally:
        os.close(fd)


def read_head(path: Path | str, size: int, within: Path | str | None = None) -> bytes:
    """The first `size` bytes of the regular file `path` (fewer when it is shorter): a dump's
    first line, to tell what it holds, or the part of a long IR file a reader quotes. Raises
    Unreadable as read_bytes does; never blocks. A dump kept as `<path>.gz` is read inflated."""
    path = Path(path)
    if _gzipped(path):
        return _gunzip_head(read_bytes(gz_of(path), DUMP.bound, within), str(gz_of(path)), size)
    fd = _open(path, DUMP, within)
    parts: list[bytes] = []
    total = 0
    try:
        while total < size:
            chunk = os.read(fd, min(_CHUNK, size - total))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise Unreadable(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    return b"".join(parts)


# --- files kept gzip-compressed beside their own name (a run's dumps and IR) -----------------

GZ = ".gz"


def gz_of(path: Path | str) -> Path:
    """The name `path` is kept under once compressed: `<path>.gz`."""
    path = Path(path)
    return path.with_name(path.name + GZ)


def _gzipped(path: Path) -> bool:
    """True when `path` is absent (not even a link) and its compressed copy is there."""
    return not os.path.lexists(path) and os.path.lexists(gz_of(path))


def stored(path: Path | str) -> Path:
    """The file on disk that holds `path`: itself, or `<path>.gz` where only that is kept."""
    path = Path(path)
    return gz_of(path) if _gzipped(path) else path


def is_file(path: Path | str) -> bool:
    """True when `path`, or its compressed copy in its place, is a regular file (no link)."""
    found = stored(path)
    return found.is_file() and not found.is_symlink()


def files_in(folder: Path | str) -> list[Path]:
    """The regular files (no links) in `folder` by the names their readers ask for, sorted: a
    file kept compressed (`X.gz`) listed as `X`, which read_text and read_bytes of a kind
    kept compressed (DUMP, IR_TEXT) and read_head read inflated. [] for no folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = {
        p.with_name(p.name.removesuffix(GZ)) if p.name.endswith(GZ) else p
        for p in folder.iterdir()
        if p.is_file() and not p.is_symlink()
    }
    return sorted(found)


def _gunzip_head(raw: bytes, source: str, size: int) -> bytes:
    """The first `size` inflated bytes of the gzip data `raw`, inflating no more than that."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return inflater.decompress(raw, size) if size > 0 else b""
    except zlib.error as e:
        raise Unreadable(f"{source}: not a readable gzip file ({e})") from None


def _too_large(path: Path, kind: Kind) -> str:
    return f"{path}: is larger than {kind.bound} bytes, the bound for a {kind.name}"


def _bounded(fd: int, path: Path, kind: Kind, expected: int = 0) -> bytes:
    """Reads `fd` to its end, refusing more than `limit` bytes (a file that grows meanwhile).
    The `expected` size is read in one call: a file of hundreds of megabytes (a long profile)
    is then one bytes object, never its pieces and their join at once (twice its size)."""
    limit = kind.bound
    parts: list[bytes] = []
    total = 0
    want = expected + 1
    while True:
        try:
            chunk = os.read(fd, min(max(want, _CHUNK), limit + 1 - total))
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise Unreadable(f"{path}: reading it would block; name a regular file") from None
            raise Unreadable(f"{path}: cannot read: {e.strerror or e}") from None
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        want = 0
        if total > limit:
            raise Unreadable(_too_large(path, kind))


def read_text(
    path: Path | str,
    limit: int | Kind = MAX_BYTES,
    within: Path | str | None = None,
    errors: str = "strict",
) -> str:
    """Returns the UTF-8 text of the regular file `path` (see read_bytes); `errors="replace"`
    for text such as a dump, whose stray bytes must not stop its reader."""
    data = read_bytes(path, limit, within)
    try:
        return data.decode(errors=errors)
    except UnicodeDecodeError as e:
        raise Unreadable(f"{path}: is not UTF-8 text (byte {e.start})") from None


# --- absl flag files --------------------------------------------------------------------------

MAX_FLAGFILES = 64  # nested --flagfile directives followed, in all


def flagfile_names(args: list[str]) -> Iterator[str]:
    """Yields the file of each `--flagfile` directive in `args` as absl reads them: `--flagfile=F`,
    `-flagfile=F`, or the name in the next argument; none after a `--`."""
    i = 0
    while i < len(args):
        arg = args[i].strip()
        if arg == "--":
            return
        if arg in ("--flagfile", "-flagfile"):
            if i + 1 < len(args):
                yield os.path.expanduser(args[i + 1].strip())
            i += 2
            continue
        for prefix in ("--flagfile=", "-flagfile="):
            if arg.startswith(prefix):
                yield os.path.expanduser(arg[len(prefix) :].strip())
        i += 1


def check_flagfiles(argv: list[str], limit: int | Kind = FLAG_FILE) -> None:
    """Reads every flag file `argv` names, and those they name in turn, through read_text;
    raises Unreadable for the first that is not a regular file under `limit` bytes. absl then
    reads only files that passed (it would block on a FIFO and read /dev/zero for ever)."""
    todo = [name for name in flagfile_names(argv[1:]) if name]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue  # absl ignores a circular directive
        seen.add(name)
        if len(seen) > MAX_FLAGFILES:
            raise Unreadable(f"--flagfile: more than {MAX_FLAGFILES} nested flag files")
        try:
            text = read_text(name, limit)
        except Unreadable as e:
            raise Unreadable(f"--flagfile={e}") from None
        lines = [line.strip() for line in text.splitlines()]
        todo += [n for n in flagfile_names([ln for ln in lines if ln.startswith("-")]) if n]


def import_python_file(path: Path, prefix: str) -> ModuleType:
    """Imports a Python file a user names as a module of its own, `<prefix>_<stem>_<digest of
    its path>` (two files of one name never collide), registered in sys.modules as dataclasses
    and pickling need; a second call returns the same module. A file whose import raised is
    not left half-loaded. Raises ModuleNotFoundError for a missing or non-Python file."""
    if not path.is_file():
        raise ModuleNotFoundError(f"file {path} not found")
    try:  # the import reads it again; this refuses a device, a FIFO or a huge file first
        read_bytes(path, PYTHON)
    except Unreadable as e:
        raise ModuleNotFoundError(str(e)) from None
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"{prefix}_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# --- archives: bounded by what they inflate to ------------------------------------------------


def read_gzip(
    path: Path | str,
    kind: Kind = GZIP_TRACE,
    inflated: int = INFLATED_TRACE,
    within: Path | str | None = None,
) -> bytes:
    """Returns the inflated bytes of the gzip file `path` (read as read_bytes reads it);
    raises Unreadable, in one line, for a file that is not gzip, is cut short, or inflates to
    more than `inflated` bytes (inflation stops there: a 1.5 MB bomb never takes gigabytes)."""
    path = Path(path)
    return gunzip(read_bytes(path, kind, within), str(path), inflated)


def gunzip(raw: bytes, source: str, inflated: int = INFLATED_TRACE) -> bytes:
    """Returns the inflated bytes of the gzip data `raw` (from `source`): every member, as
    gzip reads them, at most `inflated` bytes in all; raises Unreadable naming `source`.
    What it inflates to is counted first, in chunks that are dropped, so a bomb is refused
    holding one chunk, never its bound, in memory."""
    size = sum(len(chunk) for chunk in _inflating(raw, source, inflated))
    parts = list(_inflating(raw, source, size))
    return b"".join(parts)


def _inflating(raw: bytes, source: str, inflated: int) -> Iterator[bytes]:
    """The inflated chunks of every gzip member of `raw`; Unreadable past `inflated` bytes."""
    total, rest = 0, raw
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while True:
            try:
                chunk = inflater.decompress(rest, _INFLATE_CHUNK)
            except zlib.error as e:
                raise Unreadable(f"{source}: not a readable gzip file ({e})") from None
            rest = inflater.unconsumed_tail
            total += len(chunk)
            if total > inflated:
                raise Unreadable(f"{source}: inflates to more than {inflated} bytes, not read")
            yield chunk
            if inflater.eof or (not chunk and not rest):
                break
        if not inflater.eof:
            raise Unreadable(f"{source}: not a readable gzip file (cut short)")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):  # gzip ignores trailing zeros
            return


_INFLATE_CHUNK = 4 * _MIB


def read_npz(
    path: Path | str,
    kind: Kind = ARRAYS,
    inflated: int = INFLATED_ARRAYS,
    within: Path | str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, object]:
    """Returns the arrays (numpy.ndarray) of the NumPy archive `path`, by name.

    Raises Unreadable, in one line, for a file read_bytes refuses, one that is not a zip
    archive (empty, cut short), a member whose uncompressed size, as the zip's directory
    states it, would take the archive past `inflated` bytes (checked before a byte is
    inflated; zipfile itself stops a member that inflates past its stated size), an object
    array (never unpickled), or an array missing from `shapes` or of another shape than it
    says (the caller's record: each array's name and shape)."""
    path = Path(path)
    return parse_npz(read_bytes(path, kind, within), str(path), inflated, shapes)


def parse_npz(
    raw: bytes,
    path: str,
    inflated: int = INFLATED_ARRAYS,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, object]:
    """The arrays of the NumPy archive bytes `raw` (read from `path`), checked as read_npz
    says; for an archive read_bytes or a cache's reader already returned."""
    import io as stdio

    import numpy as np  # here, not at the top: most readers of user files hold no arrays

    try:
        archive = zipfile.ZipFile(stdio.BytesIO(raw))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise Unreadable(f"{path}: not a NumPy archive ({e or 'empty'})") from None
    with archive:
        members = archive.infolist()
        total = 0
        for member in members:
            total += member.file_size
            if total > inflated:
                raise Unreadable(
                    f"{path}: its arrays would inflate to more than {inflated} bytes "
                    f"({member.filename} states {member.file_size}), not read"
                )
        arrays: dict[str, object] = {}
        for member in members:
            name = member.filename.removesuffix(".npy")
            try:
                with archive.open(member) as f:
                    data = f.read(member.file_size + 1)
                arrays[name] = _npy_array(np, data)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as e:
                raise Unreadable(f"{path}: array {name!r} unreadable ({e})") from None
    for name, shape in (shapes or {}).items():
        got = arrays.get(name)
        if got is None:
            raise Unreadable(f"{path}: holds no array {name!r}, which its record names")
        if tuple(got.shape) != tuple(shape):  # type: ignore[attr-defined]
            raise Unreadable(
                f"{path}: array {name!r} has shape {tuple(got.shape)}, "  # type: ignore[attr-defined]
                f"its record says {tuple(shape)}"
            )
    return arrays


def _npy_array(np: ModuleType, data: bytes) -> object:
    """The array of one `.npy` member's bytes; ValueError for an object array (never
    unpickled) or a header whose shape needs more bytes than the member holds (numpy would
    allocate the shape it states before reading a byte)."""
    import io as stdio

    f = stdio.BytesIO(data)
    major, _ = np.lib.format.read_magic(f)
    read_header = (
        np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    )
    shape, fortran, dtype = read_header(f)
    if dtype.hasobject:
        raise ValueError("holds Python objects, never unpickled")
    count = 1
    for n in shape:
        count *= int(n)
    body = memoryview(data)[f.tell() :]
    if count * dtype.itemsize != len(body):
        raise ValueError(f"its header states {count} values, its data holds {len(body)} bytes")
    flat = np.frombuffer(body, dtype=dtype, count=count).copy()
    return flat.reshape(shape, order="F" if fortran else "C")
