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
