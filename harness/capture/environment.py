"""What the process and the machine are: versions, platform, devices, the harness's commit.

The versions are each registered frontend's packages (its traits' `packages`), read from
the installed metadata: a frontend is recorded without being imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform as pyplatform
from typing import Any

from harness.frontends import registry


def platform() -> str:
    import jax  # imports JAX: loaded only when called

    return jax.default_backend()


def cold_compiles() -> str | None:
    """Turns JAX's persistent compilation cache off for this process, before its first
    compile, and says what was turned off (None when it was off already).

    A study measures each compile: its pause, its autotuning, and the per-pass dumps its IR
    stages come from. With the cache on (JAX_COMPILATION_CACHE_DIR, or
    `jax_compilation_cache_dir` set by the user's code) a second run loads its executables:
    on the CPU its first calls took 0.015 s for 0.046 s, XLA wrote no dump at all, and the
    report found no fusion. JAX also points XLA's autotune cache there
    (`jax_persistent_cache_enable_xla_caches`), so a GPU compile would reuse another process's
    choices."""
    import jax  # imports JAX: loaded only when called

    where = jax.config.jax_compilation_cache_dir
    if not where or not jax.config.jax_enable_compilation_cache:
        return None
    jax.config.update("jax_enable_compilation_cache", False)
    return f"off for the study (it was set to {where}): each compile is measured from cold"


def describe() -> dict[str, Any]:
    """Returns versions, platform and devices for the manifest."""

    import jax  # imports JAX: loaded only when called

    devices = jax.devices()
    return {
        "python": pyplatform.python_version(),
        "versions": versions(importlib.metadata),
        "platform": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "host": pyplatform.node(),
        "cpu_count": os.cpu_count(),
    }


def versions(metadata: Any) -> dict[str, str]:
    """Returns each registered frontend's packages' versions, frontend by frontend."""
    return {
        p: _version(metadata, p)
        for name in registry.names()
        for p in registry.traits(name).packages
    }


def _version(metadata: Any, package: str) -> str:
    """Returns an installed package's version without importing it (flax takes a second)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
