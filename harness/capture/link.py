"""The link between the devices, measured once per run: a timed all-reduce of a large buffer.

Every device of the process holds `nbytes` of float32 and they all-reduce it
(`shard_map(psum)`), best of many batches. Under the ring model that harness.hlo.collectives
applies to every collective, each device sends 2(P-1)/P of its buffer, so bytes sent per
device over the time is the bandwidth a collective of the run can be compared with (what
nccl-tests calls bus bandwidth). On a CPU with forced host devices the "link" is host memory
and the rendezvous between the client's threads; the figure is measured the same way.
"""

from __future__ import annotations

from typing import Any

# Bytes each device all-reduces: large enough to be bandwidth-bound, small enough to be quick.
LINK_BYTES = {"gpu": 256 << 20, "cpu": 8 << 20}


def measure_link(platform: str, budget_s: float, best_batch: Any) -> dict[str, Any] | None:
    """Returns {bytes_per_s, source, devices, nbytes} for an all-reduce over every device, or
    None with one device. `best_batch(fn, wait, budget_s, calls)` is the ceilings' timer."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.local_devices()  # in a group of processes: process 0's own (no other joins)
    p = len(devices)
    if p < 2:
        return None
    nbytes = LINK_BYTES.get(platform, LINK_BYTES["cpu"])
    mesh = Mesh(np.array(devices), ("link",))
    per_device = nbytes // 4
    make = jax.jit(
        lambda: jnp.ones((p, per_device), jnp.float32),
        out_shardings=NamedSharding(mesh, PartitionSpec("link")),
    )
    buffer = jax.block_until_ready(make())
    reduce = jax.jit(
        jax.shard_map(
            lambda a: jax.lax.psum(a, "link"),
            mesh=mesh,
            in_specs=PartitionSpec("link"),
            out_specs=PartitionSpec(),
        )
    )
    jax.block_until_ready(reduce(buffer))
    seconds = best_batch(lambda: reduce(buffer), jax.block_until_ready, budget_s, 1)
    sent = 2 * (p - 1) * (per_device * 4) // p
    kind = devices[0].device_kind
    return {
        "bytes_per_s": sent / seconds,
        "devices": p,
        "nbytes": per_device * 4,
        "source": (
            f"best all-reduce (shard_map psum) of {per_device * 4 / 2**20:.0f} MiB per device "
            f"over {p} {kind} devices: ring model, 2(P-1)/P of the buffer sent per device, "
            f"{seconds * 1e3:.3f} ms"
        ),
    }
