"""Reading a file a user names on the command line (a config, a flag file): only a regular file
on disk, and only so much of it.

A FIFO blocks its reader until someone writes, `/dev/zero` never ends, and `/proc/kmsg` looks
like an empty regular file but blocks until the kernel logs something. So the file is opened
without blocking (a FIFO's open then returns at once), refused unless it is a regular file
outside the kernel's pseudo file systems, and read to at most `limit` bytes.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

MAX_BYTES = 1 << 20
# Kernel views that pass for regular files (st_size 0, contents made on read, some reads block).
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
_CHUNK = 1 << 16


class Unreadable(ValueError):
    """A user's file refused or unreadable; the message is one line naming why."""


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


def read_bytes(path: Path | str, limit: int = MAX_BYTES) -> bytes:
    """Returns the bytes of the regular file `path`; raises Unreadable when it is anything
    else (a FIFO, a device, a folder, a file under /proc, /sys or /dev), larger than `limit`,
    or cannot be read. Never blocks on the file."""
    path = Path(path)
    if _pseudo(path):
        raise Unreadable(f"{path}: is a kernel file, not a file on disk; name a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Unreadable(f"{path}: cannot open: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(f"{path}: is {_kind(mode)}; name a regular file")
        if os.fstat(fd).st_size > limit:
            raise Unreadable(f"{path}: is larger than {limit} bytes")
        return _bounded(fd, path, limit)
    finally:
        os.close(fd)


def _bounded(fd: int, path: Path, limit: int) -> bytes:
    """Reads `fd` to its end, refusing more than `limit` bytes (a file that grows meanwhile)."""
    parts: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise Unreadable(f"{path}: reading it would block; name a regular file") from None
            raise Unreadable(f"{path}: cannot read: {e.strerror or e}") from None
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise Unreadable(f"{path}: is larger than {limit} bytes")


def read_text(path: Path | str, limit: int = MAX_BYTES) -> str:
    """Returns the UTF-8 text of the regular file `path` (see read_bytes)."""
    data = read_bytes(path, limit)
    try:
        return data.decode()
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


def check_flagfiles(argv: list[str], limit: int = MAX_BYTES) -> None:
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
