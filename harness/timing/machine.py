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
  virtual machine whose host gave its cores to another guest);
- the CPU time every other process took meanwhile: the machine's busy time from /proc/stat
  less the worker's own. A busy machine does more than add noise: on the 2-core machine, with
  two other single-threaded processes running, `xla_no_fusion` measured 2.36× the time of
  `xla` against 1.30× idle, with a clean A/A pair, so the A/A check alone cannot say that
  the ratios measured are not an idle machine's (harness.records.resolution gates on this share).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from harness.records.machine_state import cpu_share, others_share, reading_number, steal_share

PROC_STAT = "/proc/stat"
# A round is flagged when the worker got under this share of the wall time as CPU time...
MIN_CPU_SHARE = 0.9
# ...or the machine's steal time was over this share of the round's wall time on all CPUs...
MAX_STEAL_SHARE = 0.05
# ...or more runnable tasks than usable CPUs (the worker's own threads count as one)...
LOAD_PER_CPU = 1.0
# ...or other processes took over this share of all the CPUs' time during the round.
MAX_OTHERS_SHARE = 0.25


def usable_cpus() -> int:
    """Returns the CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpu_ticks(path: str = PROC_STAT) -> list[int] | None:
    """Returns /proc/stat's first line, "cpu user nice system idle iowait irq softirq steal
    ...", as clock ticks summed over all CPUs; None where it cannot be read."""
    try:
        with open(path) as f:
            first = f.readline().split()
    except OSError:
        return None
    if len(first) < 8 or first[0] != "cpu":
        return None
    try:
        return [int(x) for x in first[1:]]
    except ValueError:
        return None


def steal_s(path: str = PROC_STAT) -> float | None:
    """Returns the machine's total CPU steal time in seconds, or None where /proc/stat has no
    steal column (not Linux, or a kernel too old)."""
    ticks = _cpu_ticks(path)
    if ticks is None or len(ticks) < 8:
        return None
    return ticks[7] / float(os.sysconf("SC_CLK_TCK"))


def busy_s(path: str = PROC_STAT) -> float | None:
    """Returns the seconds all CPUs have spent running anything (user, nice, system, irq,
    softirq; neither idle, iowait nor steal), or None without /proc/stat."""
    ticks = _cpu_ticks(path)
    if ticks is None:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = ticks[:7]
    return (user + nice + system + irq + softirq) / float(os.sysconf("SC_CLK_TCK"))


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
        "busy_s": busy_s(),
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
    others = others_share(before, after, cpus)
    if others is not None and others > MAX_OTHERS_SHARE:
        out.append(f"other processes {others * 100:.0f}% of the CPUs")
    loads = [
        x
        for x in (reading_number(before, "load_1m"), reading_number(after, "load_1m"))
        if x is not None
    ]
    if loads and max(loads) > LOAD_PER_CPU * cpus:
        out.append(f"load average {max(loads):.1f} on {cpus} CPUs")
    return tuple(out)
