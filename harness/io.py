"""File I/O at the edges: atomic writes, run folders, and the `latest` link.

Every JSON and report file is written to a temporary file in the same folder and renamed, so a
crash never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
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


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """Yields a temporary path beside `target`; when the block succeeds it is synced to disk
    and renamed over `target`, otherwise removed, so `target` is never half-written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> Path:
    """Writes `text` to `path` atomically; returns the path."""
    with _replacing(path) as tmp:
        tmp.write_text(text)
    return path


def write_json(path: Path, data: Any) -> Path:
    """Writes `data` as indented JSON to `path` atomically; returns the path."""
    return write_text(path, json.dumps(_clean(data), indent=2, default=_json_default) + "\n")


def copy_file(source: Path, target: Path) -> Path:
    """Copies `source` to `target` atomically; returns the target."""
    with _replacing(target) as tmp:
        shutil.copyfile(source, tmp)
    return target


def remove_tree(root: Path, path: Path) -> None:
    """Deletes the folder `path`, which must lie inside `root` and not be a link; no-op if absent.

    The folder is first renamed to a hidden name, so a crash half-way through the delete never
    leaves a half-deleted folder under its real name.
    """
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_dir():
        raise ValueError(f"{path} is not a folder; refusing to delete it")
    inside = confined(root, str(path.relative_to(root)))
    doomed = inside.with_name(f".{inside.name}.deleting.{os.getpid()}")
    os.replace(inside, doomed)
    shutil.rmtree(doomed)


def append_jsonl(path: Path, record: Any) -> None:
    """Appends one JSON object as a line; one short write, so lines never interleave."""
    line = json.dumps(_clean(record), default=_json_default) + "\n"
    with open(path, "a") as f:
        f.write(line)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def confined(root: Path, *parts: str) -> Path:
    """Returns root/parts resolved, refusing any path that escapes `root`."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if path != base and base not in path.parents:
        raise ValueError(f"path {'/'.join(parts)!r} escapes {base}")
    return path


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


def point_latest(run_dir: Path) -> None:
    """Points `<experiment>/latest` at run_dir, atomically replacing any older link."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
