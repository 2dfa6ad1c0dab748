"""How much host memory this process may still take: the least of physical memory, its
rlimits (RLIMIT_AS, RLIMIT_DATA) less what it already uses, and its cgroup's memory.max less
the cgroup's usage.

A problem that fits physical memory but not the process's address-space limit ends in XLA's
RESOURCE_EXHAUSTED, and one over the cgroup's limit in the kernel's OOM kill: the preflight
(harness.capture.preflight) checks the estimate against this number instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = 1 << 60  # cgroups print "max" or a page-rounded 2**63 for no limit
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Bound:
    """One limit on the memory still available: bytes left, and what sets it."""

    left: int
    where: str


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def tightest(
    physical: int, rlimits: dict[str, int], used: dict[str, int], cgroup: tuple[int, int] | None
) -> Bound:
    """Returns the smallest of the bounds: physical memory; each finite rlimit (RLIMIT_AS
    against the address space already mapped, RLIMIT_DATA against the data segment); the
    cgroup's (limit, usage). Pure: the readers below supply the numbers."""
    bounds = [Bound(physical, "host physical memory")]
    for name, what, usage in (
        ("RLIMIT_AS", "address-space limit", used.get("VmSize", 0)),
        ("RLIMIT_DATA", "data-segment limit", used.get("VmData", 0)),
    ):
        limit = rlimits.get(name)
        if limit is not None and 0 <= limit < UNLIMITED:
            bounds.append(
                Bound(
                    max(0, limit - usage),
                    f"what is left of the process's {what} ({name} {gib(limit)}, "
                    f"{gib(usage)} in use)",
                )
            )
    if cgroup is not None and cgroup[0] < UNLIMITED:
        limit, usage = cgroup
        bounds.append(
            Bound(
                max(0, limit - usage),
                f"what is left of the cgroup's memory limit ({gib(limit)}, {gib(usage)} in use)",
            )
        )
    return min(bounds, key=lambda b: b.left)


def rlimits() -> dict[str, int]:
    """Returns the soft RLIMIT_AS and RLIMIT_DATA that are set (none where unknown)."""
    try:
        import resource  # POSIX only: elsewhere no rlimits are read
    except ImportError:
        return {}
    out = {}
    for name in ("RLIMIT_AS", "RLIMIT_DATA"):
        try:
            soft, _ = resource.getrlimit(getattr(resource, name))
        except (AttributeError, OSError, ValueError):
            continue
        if soft != resource.RLIM_INFINITY:
            out[name] = int(soft)
    return out


def usage() -> dict[str, int]:
    """Returns this process's VmSize and VmData in bytes, from /proc/self/status."""
    out: dict[str, int] = {}
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmSize", "VmData") and value.split():
            try:
                out[key] = int(value.split()[0]) * 1024
            except ValueError:
                continue
    return out


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def cgroup_memory(root: Path = CGROUP_ROOT) -> tuple[int, int] | None:
    """Returns this process's cgroup (memory limit, usage) where readable: cgroup v2's
    memory.max and memory.current, else v1's memory.limit_in_bytes and usage_in_bytes; at the
    process's own cgroup path, or the mount's root in a cgroup namespace."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths: dict[str, str] = {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") or [""]:
                paths[controller] = parts[2].lstrip("/")
    candidates = []
    if "" in paths:  # v2: one unified hierarchy
        candidates.append((root / paths[""], "memory.max", "memory.current"))
        candidates.append((root, "memory.max", "memory.current"))
    if "memory" in paths:
        base = root / "memory"
        v1 = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        candidates.append((base / paths["memory"], *v1))
        candidates.append((base, *v1))
    for folder, limit_file, usage_file in candidates:
        limit = _number(folder / limit_file)
        used = _number(folder / usage_file)
        if limit is not None and used is not None:
            return limit, max(0, used - _reclaimable(folder / "memory.stat"))
    return None


def _reclaimable(stat: Path) -> int:
    """Returns the cgroup's inactive page cache, which the kernel reclaims before it kills
    (the usage docker reports leaves it out too)."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key in ("inactive_file", "total_inactive_file"):
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def available(physical: int | None = None) -> Bound:
    """Returns the tightest bound on the host memory this process may still take."""
    if physical is None:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return tightest(int(physical), rlimits(), usage(), cgroup_memory())
