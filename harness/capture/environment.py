"""What the process and the machine are: versions, platform, devices, the harness's commit."""

from __future__ import annotations

import os
import platform as pyplatform
from typing import Any


def platform() -> str:
    import jax

    return jax.default_backend()


def describe() -> dict[str, Any]:
    """Returns versions, platform and devices for the manifest."""
    import importlib.metadata

    import jax
    import jaxlib

    devices = jax.devices()
    return {
        "python": pyplatform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "flax": _version(importlib.metadata, "flax"),
        "torch": _version(importlib.metadata, "torch"),  # the PyTorch row's; not imported here
        "platform": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "host": pyplatform.node(),
        "cpu_count": os.cpu_count(),
    }


def _version(metadata: Any, package: str) -> str:
    """Returns an installed package's version without importing it (flax takes a second)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
