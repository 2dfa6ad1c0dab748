"""What each variant stands for in the study, derived from the config alone.

The report and the comparisons find variants by role (the baseline, the lower bound, eager,
the host callback, ...), never by the names one config happens to use. A role comes from the
variant's mode, its XLA options, the config's `baseline`, or the variant's own `roles` key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.frontends import registry

ROLES = (
    "baseline",  # the config's baseline: every comparison's reference
    "lower_bound",  # the GEMM alone: no fused variant can beat it
    "eager",  # op-by-op dispatch
    "host_callback",  # a host callback inside the compiled region
    "traced_branch",  # a Python branch on a traced value (refused by jit, split by Dynamo)
    "device_branch",  # the same branch kept on the device (lax.cond)
    "library_epilogue",  # the GEMM's epilogue fused into the library call
    "compiled",  # any whole-program compile
    "sharded",  # spread over a mesh of devices (its `sharding` key)
    "one_device",  # the unsharded program that sharded variants of its size scale against
)


def framework_of(mode: str) -> str:
    """Returns the framework a mode runs in: its frontend's name (harness.frontends); a mode
    no frontend registered reads as JAX's, as an unknown mode always did, until the
    config's validation refuses it."""
    found = registry.find_mode(mode)
    return found.framework if found is not None else "jax"


# XLA options whose documented effect is to hand the GEMM's epilogue to the library.
_LIBRARY_EPILOGUE_OPTIONS = {"xla_gpu_enable_triton_gemm": False}


def roles_of(
    name: str,
    mode: str,
    xla_options: Mapping[str, Any],
    baseline: str,
    explicit: Iterable[str] = (),
    sharded: bool = False,
) -> tuple[str, ...]:
    """Returns the variant's roles, in ROLES order, without repeats."""
    spec = registry.find_mode(mode)
    found = set(spec.roles if spec is not None else ())
    found |= set(explicit)
    if sharded:
        found.add("sharded")
    if name == baseline:
        found.add("baseline")
    if any(xla_options.get(k) == v for k, v in _LIBRARY_EPILOGUE_OPTIONS.items()):
        found.add("library_epilogue")
    return tuple(r for r in ROLES if r in found) + tuple(sorted(found - set(ROLES)))


SIZE_KEYS = ("m", "k", "n", "batch")


def same_size(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when two variants' problems have the same m, k, n and batch, so a time ratio
    between them means something (a variant's reference is of its own size)."""
    return all(a.get(d) == b.get(d) for d in SIZE_KEYS)
