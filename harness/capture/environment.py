"""What the process and the machine are: the eager dump folder, versions, device, preflight checks.

Eager dispatch compiles one module per primitive, and no per-call compiler options reach those
compiles. XLA reads XLA_FLAGS once, when the backend starts, so the entry point sets a process
dump folder there before jax loads; the eager variant then keeps the modules that appear in it
while it runs.
"""

from __future__ import annotations

import atexit
import os
import platform as pyplatform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

_DUMP_FLAG = re.compile(r"--xla_dump_to=(\S+)")


def prepare_process_dump() -> Path | None:
    """Adds a temporary --xla_dump_to to XLA_FLAGS unless the user set one; returns the folder."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_dump_to" in flags:
        return None
    folder = Path(tempfile.mkdtemp(prefix="harness-eager-dump-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={folder} --xla_dump_hlo_as_text".strip()
    return folder


def process_dump_dir() -> Path | None:
    """Returns the process dump folder the entry point set up, if this process has one."""
    m = _DUMP_FLAG.search(os.environ.get("XLA_FLAGS", ""))
    if not m or "harness-eager-dump-" not in m.group(1):
        return None
    return Path(m.group(1))


def platform() -> str:
    import jax

    return jax.default_backend()


def describe() -> dict[str, Any]:
    """Returns versions, platform and devices for the manifest."""
    import flax
    import jax
    import jaxlib

    devices = jax.devices()
    return {
        "python": pyplatform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "flax": getattr(flax, "__version__", "unknown"),
        "platform": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "host": pyplatform.node(),
        "cpu_count": os.cpu_count(),
        "git_commit": git_commit(),
    }


def git_commit() -> str | None:
    """Returns the harness checkout's commit (with '+dirty' for local changes), when git knows it."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def memory_bytes() -> tuple[int, str]:
    """Returns the memory a problem must fit in and where that number came from."""
    import jax

    device = jax.devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # CPU devices may not implement memory_stats
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.device_kind} bytes_limit"
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(pages), "host physical memory"
