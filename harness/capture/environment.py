"""What the process and the machine are: versions, platform, devices, the harness's commit.

The versions are each registered frontend's packages (its traits' `packages`), read from
the installed metadata: a frontend is recorded without being imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform as pyplatform
import re
from typing import Any

from harness.frontends import registry


def platform() -> str:
    import jax  # imports JAX: loaded only when called

    return jax.default_backend()


# XLA's caches that make a compile reuse another process's work, as XLA_FLAGS may set them:
# the GEMM autotuner's results (a file, or a folder per fusion) and the GPU's compiled kernels.
_CACHE_FLAGS = re.compile(
    r"--xla_gpu_(?:per_fusion_autotune_cache_dir|load_autotune_results_from|kernel_cache_file)"
    r"=\S*"
)


# XLA's options that write files where they name, as XLA_FLAGS may set them: a dump folder
# (`--xla_dump_to`: 665 files outside the run, issue 59), an autotune log or results file. A
# config's `xla_options` may not set them (the config refuses them); from the environment they
# are taken out for the study too: each variant's dumps go to its own `dump/` in the run.
_WRITING_FLAGS = re.compile(r"--xla_\w*_to=\S*")


def no_writes_outside() -> str | None:
    """Takes the file-writing options out of XLA_FLAGS for this process, before its backend
    starts; says which (None: there were none)."""
    flags = os.environ.get("XLA_FLAGS", "")
    writing = _WRITING_FLAGS.findall(flags)
    if not writing:
        return None
    os.environ["XLA_FLAGS"] = " ".join(_WRITING_FLAGS.sub("", flags).split())
    return (
        f"XLA_FLAGS {' '.join(writing)}: taken out for the study, which writes nothing outside "
        "the run (each variant's dumps are in variants/<name>/dump)"
    )


def cold_compiles() -> str | None:
    """Turns JAX's persistent compilation cache, and XLA's caches set in XLA_FLAGS, off for
    this process before its backend starts; says what was turned off (None: nothing was on).

    A study measures each compile: its pause, its autotuning, and the per-pass dumps its IR
    stages come from. With the cache on (JAX_COMPILATION_CACHE_DIR, a common setting) a
    second run loaded its executables: on the CPU its first calls took 0.015 s for 0.046 s,
    XLA wrote no dump at all, and the report found no fusion. JAX also points XLA's autotune
    cache there (`jax_persistent_cache_enable_xla_caches`), and an autotune cache set in
    XLA_FLAGS does the same alone: a GPU compile would take another process's choices and
    skip the autotuning its pause is made of. (A variant's own `xla_options` may still set
    them: that is a difference it is studied for.)"""
    import jax  # imports JAX: loaded only when called

    off = []
    where = jax.config.jax_compilation_cache_dir
    if where and jax.config.jax_enable_compilation_cache:
        off.append(f"JAX's persistent compilation cache ({where})")
    # Off whether or not a folder is set yet: a user's program may set one when imported.
    jax.config.update("jax_enable_compilation_cache", False)
    flags = os.environ.get("XLA_FLAGS", "")
    cached = _CACHE_FLAGS.findall(flags)
    if cached:
        os.environ["XLA_FLAGS"] = " ".join(_CACHE_FLAGS.sub("", flags).split())
        off.append(f"XLA_FLAGS {' '.join(cached)}")
    writing = no_writes_outside()
    if not off:
        return writing
    cold = f"{'; '.join(off)}: turned off for the study, each compile measured from cold"
    return f"{cold}; {writing}" if writing else cold


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
