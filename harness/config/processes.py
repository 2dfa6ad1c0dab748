"""The study across processes (`processes:`): one JAX process per host, joined by
`jax.distributed`, as the largest users run their programs.

    processes:
      count: 2          # processes in the group; 1 (the default): no group, one process
      devices: 2        # devices of each process (forced host devices on a CPU)
      launcher: local   # local: the harness starts the processes on this machine;
                        # external: srun, mpirun or a Kubernetes job started them, and each
                        # reads its rank from jax.distributed's cluster detection
      barrier_s: 120    # how long a process waits at a barrier before the missing ones are
                        # recorded as failed

Kept apart from harness.config.schema (over its size limit); the schema imports it, and
`problem` names what the sections' ranges cannot express.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.config.fields import ranged
from harness.frontends import registry

LAUNCHERS = ("local", "external")
# What a group of processes runs: the variants whose frontend's compile is XLA's (traits
# `xla`). Another frontend's variants have no jax.distributed group to join, and a search
# compiles candidates in one process.


@dataclasses.dataclass(frozen=True)
class Processes:
    """How many processes run the study, with how many devices each, started by whom."""

    count: int = ranged(
        1, 1, 64, "processes in the jax.distributed group; 1: one process, no group"
    )
    devices: int = ranged(
        1, 1, 4096, "devices of each process (a CPU forces this many host devices)"
    )
    launcher: str = "local"  # local | external
    barrier_s: float = ranged(
        120.0,
        1.0,
        86400.0,
        "seconds a process waits at a barrier for the others before the missing ones are "
        "recorded as failed (a process that died or hangs)",
    )

    @property
    def enabled(self) -> bool:
        """True when the study runs in a group of processes (an external launcher always
        makes one, whatever its size)."""
        return self.count > 1 or self.launcher == "external"

    @property
    def global_devices(self) -> int:
        """Returns the devices of the whole group."""
        return self.count * self.devices


def problem(p: Processes, variants: Any, searching: bool) -> tuple[str, str] | None:
    """Returns (key, problem) for the first thing a group of processes cannot run, or None:
    an unknown launcher, a search, a variant of a frontend not XLA's, or a sharded variant
    whose mesh is not the whole group (every process must hold a part of every sharded program)."""
    if p.launcher not in LAUNCHERS:
        return "processes.launcher", f"{p.launcher!r} is not supported; allowed: local, external"
    if not p.enabled:
        if p.devices != 1:
            return "processes.devices", "applies to a group of processes; set processes.count"
        return None
    if searching:
        return "search.base", "a search compiles its candidates in one process; remove processes"
    for v in variants:
        if not registry.traits(v.framework).xla:
            return (
                f"variants.{v.name}.mode",
                f"{v.mode} runs no JAX program a jax.distributed group could share; "
                "select JAX variants only in a study across processes",
            )
        if v.sharding.enabled and v.sharding.devices != p.global_devices:
            return (
                f"variants.{v.name}.sharding.mesh",
                f"has {v.sharding.devices} devices; across {p.count} processes of "
                f"{p.devices} devices a mesh must hold all {p.global_devices}",
            )
    return None
