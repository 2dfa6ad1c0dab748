"""What the machine was doing around each timing round: load, the worker's CPU time, CPU steal.

On a shared machine (a CI runner, a laptop building something else) the timing worker is
preempted: its calls then take longer for reasons no variant owns. These readings are taken
before and after every round, beside the GPU's clocks (harness.timing.clocks), and `flags`
names the rounds they put in doubt, as NVML's clock events do on the GPU:

- the 1-minute load average (`os.getloadavg`), against the CPUs the process may use;
- the worker's CPU time (all its threads) against the wall time of the round: a worker that
  got less CPU than wall time waited for a core (on a CPU platform, where the calls compute
  on the host; a GPU worker waits on the device by design);
- the CPU steal time of the whole machine from /proc/stat, where the kernel reports it (a
  virtual machine whose host gave its cores to another guest).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from harness.machine_state import cpu_share, reading_number, steal_share

PROC_STAT = "/proc/stat"
# A round is flagged when the worker got under this share of the wall time as CPU time...
MIN_CPU_SHARE = 0.9
# ...or the machine's steal time was over this share of the round's wall time on all CPUs...
MAX_STEAL_SHARE = 0.05
# ...or more runnable tasks than usable CPUs (the worker's own threads count as one).
LOAD_PER_CPU = 1.0


def usable_cpus() -> int:
    """Returns the CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def steal_s(path: str = PROC_STAT) -> float | None:
    """Returns the machine's total CPU steal time in seconds, or None where /proc/stat has no
    steal column (not Linux, or a kernel too old)."""
    try:
        with open(path) as f:
            first = f.readline().split()
    except OSError:
        return None
    # "cpu user nice system idle iowait irq softirq steal ...", in clock ticks
    if len(first) < 9 or first[0] != "cpu":
        return None
    try:
        ticks = int(first[8])
    except ValueError:
        return None
    return ticks / float(os.sysconf("SC_CLK_TCK"))


def read() -> dict[str, Any]:
    """Returns one reading: wall and CPU clocks of this process, load average, steal."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "wall_s": time.perf_counter(),
        "cpu_s": time.process_time(),
        "load_1m": load,
        "steal_s": steal_s(),
        "cpus": usable_cpus(),
    }


def with_machine(device: Callable[[], dict[str, Any]] | None) -> Callable[[], dict[str, Any]]:
    """Returns a reader of the machine's state and, when given, the device's (its keys kept)."""
    if device is None:
        return read
    return lambda: {**device(), **read()}


def flags(
    before: Mapping[str, Any], after: Mapping[str, Any], cpus: int, host_bound: bool
) -> tuple[str, ...]:
    """Returns why a round's machine readings put its times in doubt (empty when they don't).

    `host_bound`: the calls compute on the host (a CPU platform), so CPU time under wall time
    means the worker waited for a core.
    """
    out = []
    share = cpu_share(before, after)
    if host_bound and share is not None and share < MIN_CPU_SHARE:
        out.append(f"preempted: the worker got {share * 100:.0f}% of the wall time as CPU time")
    steal = steal_share(before, after, cpus)
    if steal is not None and steal > MAX_STEAL_SHARE:
        out.append(f"CPU steal {steal * 100:.0f}% of the round")
    loads = [
        x
        for x in (reading_number(before, "load_1m"), reading_number(after, "load_1m"))
        if x is not None
    ]
    if loads and max(loads) > LOAD_PER_CPU * cpus:
        out.append(f"load average {max(loads):.1f} on {cpus} CPUs")
    return tuple(out)
