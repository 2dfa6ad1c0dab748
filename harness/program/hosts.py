"""A profiling session of several hosts: each host analysed apart, in parallel, then merged.

jax.profiler writes one profile per host (`<session>/<host>.xplane.pb`; a study across
processes, one per process). Each host's profile is read, attributed and written as its own
part of one events dataset, partitioned by host as Hive lays it out and DuckDB, Polars, Spark,
Trino and pyarrow read it (`events/host=<name>/part-0.parquet`), by worker processes forked
from this one (harness.common.forked), as many as the cores and the memory allow. A worker
gives back only its host's totals (`HostTotals`), which are summed here (`merged_hosts`).
The first host's attributed profile stays in this process: the report's clusters, steps and
timeline are its own (the hosts of one SPMD program run the same steps), beside every host's
totals and the merged ones. A session of one host is analysed as before, into events.parquet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from harness.common import forked
from harness.program.dump import ModuleResult, ProfileResult, attach_profile, write_kernels
from harness.records.program import HostTotals
from harness.store.records import from_json, to_json
from harness.store.runfolder import EVENTS_DIR

PART = "part-0.parquet"
# A worker's peak resident memory per byte of its profile, and what it adds beyond that (it
# shares the parent's parsed dump). Measured on the 2-core CPU (2026-12-07): 2.7x a 234 MB
# profile of 1.57 M device events, beside 127 MB of the parent's own.
PEAK_PER_BYTE = 3
WORKER_BASE = 256 << 20


def events_part(host: str) -> str:
    """A host's part of the events dataset, relative to the output folder."""
    return f"{EVENTS_DIR}/host={host}/{PART}"


def workers_for(sizes: Sequence[int], cpus: int, available: int) -> int:
    """How many hosts to analyse at once: one a core, no more than `available` bytes of
    memory hold at a worker's peak for the largest profile (`sizes`, bytes), at least one."""
    need = PEAK_PER_BYTE * max(sizes, default=0) + WORKER_BASE
    return max(1, min(cpus, len(sizes), available // need))


def available_memory() -> int:
    """The memory this machine can still give (MemAvailable), in bytes; 0 where unknown."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def host_totals(host: str, profile: ProfileResult, events_file: str) -> HostTotals:
    """One host's attributed profile as counts that sum over hosts."""
    r = profile.report
    return HostTotals(
        host,
        r.events_in_window,
        r.events_in_window - len(r.unmatched),
        r.steps,
        round(r.kernels_per_step * r.steps),
        r.device_time_per_step_s * r.steps,
        sum(o.events for o in profile.outside),
        tuple((k, round(v * r.steps)) for k, v in sorted(r.launches_per_cluster.items())),
        events_file,
    )


def attach_session(
    results: list[ModuleResult],
    hosts: Mapping[str, Path],
    out: Path,
    steps: int | None,
    mode: str,
) -> ProfileResult:
    """Attributes each host's profile (`hosts`, host order) to the analysed modules; returns
    the first host's attributed profile with every host's totals (`ProfileResult.hosts`, none
    for a single host, whose events go to events.parquet). Writes the events dataset and
    kernels.json."""
    names = list(hosts)
    if len(names) == 1:
        return attach_profile(results, hosts[names[0]], out, steps, mode)

    def one(i: int) -> tuple[ProfileResult | None, HostTotals]:
        host = names[i]
        profile = attach_profile(
            results, hosts[host], out, steps, mode, events=out / events_part(host), kernels=False
        )
        # Only this process keeps an attributed profile, the first host's: a worker's is freed
        # as soon as its totals are taken.
        return (profile if i == 0 else None), host_totals(host, profile, events_part(host))

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    sizes = [hosts[h].stat().st_size for h in names]
    workers = workers_for(sizes, cpus or 1, available_memory() or (cpus or 1) << 40)
    found = forked.fork_map(
        one,
        range(len(names)),
        lambda r: to_json(r[1]),
        lambda d: (None, from_json(HostTotals, d, "a host's totals")),
        children=workers - 1,
    )
    first = found[0][0]
    assert first is not None  # the first item is always this process's own
    first = replace(first, hosts=tuple(t for _, t in found))
    write_kernels(out, first, session=str(hosts[names[0]].parent))
    return first
