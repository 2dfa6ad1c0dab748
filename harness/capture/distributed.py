"""One JAX process of a group joined by `jax.distributed`: joining, barriers that name the
processes missing from them, values every process agrees on, and the jobs process 0 relays.

The harness runs no runtime of its own across processes: every process is a
`python -m harness.study.worker` that calls `jax.distributed.initialize` before its first device
query, and everything the processes share goes through the key-value store and barriers of
jax's own coordination service (`jax._src.distributed.global_state.client`):

- **Joining:** with the `local` launcher the supervisor passes the coordinator (a free port on
  127.0.0.1), the group's size and the rank; with `external` nothing is passed and jax's
  cluster detection reads the launcher's environment (SLURM_*, OMPI_*, a TPU pod's metadata).
  The CPU's cross-process collectives are gloo's (`jax_cpu_collectives_implementation`).
- **Jobs:** only process 0 reads jobs from its supervisor; it publishes each one under
  `harness/job/<n>` before running it, and the others follow that stream (`follow` in
  harness.study.worker), so every process runs the same jobs in the same order, whoever started it.
- **Barriers** wait at most `processes.barrier_s`. Before waiting each process writes that it
  arrived, so a barrier that times out names the processes that never came (died or hang).
- **Agreement:** a value that steers what runs next (how many calls a timed batch makes,
  whether to add rounds) is process 0's, read by the others, so no process runs a collective
  the others do not.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "harness"
# The jobs that every process of a group runs; the others (the ceilings) are process 0's.
RELAYED = frozenset({"capture", "time", "config", "end"})


class ProcessesMissing(RuntimeError):
    """A barrier (or a value process 0 should have published) timed out; names who is missing."""

    def __init__(self, where: str, missing: tuple[int, ...], count: int, waited_s: float):
        self.where = where
        self.missing = missing
        self.count = count
        self.waited_s = waited_s
        names = ", ".join(map(str, missing)) or "none known"
        super().__init__(
            f"process {names} of {count} did not reach {where} within {waited_s:g} s "
            "(it died or hangs)"
        )

    def how(self) -> str:
        """What the missing process did, as the supervisor records it after 'process N of M'."""
        return f"did not reach {self.where} within {self.waited_s:g} s (it died or hangs)"


@dataclass(frozen=True)
class Membership:
    """Where this process stands in its group, as jax.distributed reports it."""

    rank: int
    count: int
    host: str
    local_devices: tuple[int, ...]  # the ids of this process's own devices
    devices: int  # the devices of the whole group
    launcher: str
    coordinator: str


def join(spec: Mapping[str, Any], timeout_s: float) -> None:
    """Joins the group before any backend starts: `spec` is the supervisor's `distributed`
    entry of the hello job (`launcher`, and for `local` the coordinator, count and rank).

    Raises RuntimeError when jax cannot join (no coordinator within `timeout_s`, no cluster
    environment for `external`)."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeout = max(1, int(timeout_s))
    if spec.get("launcher") == "local":
        address = str(spec["coordinator"])
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=int(spec["count"]),
            process_id=int(spec["rank"]),
            coordinator_bind_address=address,  # 127.0.0.1 only: nothing outside listens
            initialization_timeout=timeout,
        )
    else:
        try:
            jax.distributed.initialize(initialization_timeout=timeout)
        except ValueError as e:  # no launcher's environment: which process is this?
            raise RuntimeError(
                f"processes.launcher is external, but jax.distributed.initialize() found no "
                f"launcher's environment (srun's SLURM_*, mpirun's OMPI_*, a TPU pod's "
                f"metadata): {e}"
            ) from None


def membership(launcher: str) -> Membership:
    """Returns this process's place in the joined group."""
    import jax
    from jax._src import distributed

    return Membership(
        rank=jax.process_index(),
        count=jax.process_count(),
        host=platform.node(),
        local_devices=tuple(int(d.id) for d in jax.local_devices()),
        devices=jax.device_count(),
        launcher=launcher,
        coordinator=str(distributed.global_state.coordinator_address),
    )


class Group:
    """Barriers, agreement and the job stream of one joined group. Every process makes the
    same calls in the same order, so the n-th barrier or value has the same key everywhere."""

    def __init__(self, rank: int, count: int, barrier_s: float) -> None:
        from jax._src import distributed

        self.rank = rank
        self.count = count
        self.barrier_s = barrier_s
        self.client = distributed.global_state.client
        self._barriers = 0
        self._values = 0
        self._jobs = 0

    def _ms(self, seconds: float) -> int:
        return max(1, min(int(seconds * 1000), (1 << 31) - 1))

    def barrier(self, label: str) -> None:
        """Waits until every process reached this barrier; raises ProcessesMissing naming those
        that did not within `barrier_s`."""
        self._barriers += 1
        key = f"{PREFIX}/barrier/{self._barriers}"
        self.client.key_value_set(f"{key}/arrived/{self.rank}", label)
        try:
            self.client.wait_at_barrier(key, self._ms(self.barrier_s))
        except Exception:  # a timeout, or a member the service knows is gone
            raise ProcessesMissing(label, self.missing(key), self.count, self.barrier_s) from None

    def missing(self, key: str) -> tuple[int, ...]:
        """Returns the ranks that have not written their arrival under `key`."""
        try:
            found = self.client.key_value_dir_get(f"{key}/arrived/")
        except Exception:  # the service itself is gone: process 0 hosted it
            return (0,) if self.rank else ()
        arrived = {int(str(k).rsplit("/", 1)[-1]) for k, _ in found}
        return tuple(r for r in range(self.count) if r not in arrived)

    def agree(self, value: Any, within_s: float | None = None) -> Any:
        """Returns process 0's `value` in every process (JSON round trip); the others wait
        `within_s` for it (default `barrier_s`)."""
        self._values += 1
        key = f"{PREFIX}/value/{self._values}"
        if self.rank == 0:
            self.client.key_value_set(key, json.dumps(value))
        wait = self.barrier_s if within_s is None else within_s
        return json.loads(self._get(key, f"agreed value {self._values}", wait))

    def _get(self, key: str, what: str, within_s: float) -> str:
        try:
            return str(self.client.blocking_key_value_get(key, self._ms(within_s)))
        except Exception:
            raise ProcessesMissing(what, (0,), self.count, within_s) from None

    def publish(self, job: Mapping[str, Any]) -> None:
        """Process 0: makes `job` the next one every other process runs."""
        self._jobs += 1
        self.client.key_value_set(f"{PREFIX}/job/{self._jobs}", json.dumps(dict(job)))

    def next_job(self, within_s: float) -> dict[str, Any]:
        """Another process: returns the next job process 0 published, waiting `within_s`."""
        self._jobs += 1
        text = self._get(f"{PREFIX}/job/{self._jobs}", f"job {self._jobs}", within_s)
        return dict(json.loads(text))

    def share_verdict(
        self, problem: tuple[str, str] | None, within_s: float
    ) -> tuple[str, str] | None:
        """Returns process 0's preflight verdict everywhere: None, or (key, problem); the
        others wait `within_s` (the preflight's own limit) for it."""
        found = self.agree(list(problem) if problem else None, within_s)
        return (str(found[0]), str(found[1])) if found else None
