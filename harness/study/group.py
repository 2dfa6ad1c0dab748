"""The supervisor's side of a group of JAX processes (`processes:` in the config).

With the `local` launcher the supervisor starts the N workers of a group itself: each gets
the coordinator (a free port on 127.0.0.1, taken anew for every group, so concurrent runs do
not collide), the group's size and its rank in its hello job, and joins through
`jax.distributed.initialize` (harness.capture.distributed). Process 0 takes the jobs; the
others follow the jobs process 0 publishes. While process 0 works, the supervisor reads the
others' events and watches them: one that dies, raises or reports a missing member ends the
group, and the fault is recorded against the variant it was on, naming the process. A
`jax.distributed` group cannot go on after a member dies, so a new group of N runs the
remaining variants.

With `external`, srun, mpirun or a Kubernetes job started the processes, each a
`python -m harness`; each supervisor starts one worker, which reads its rank from the
launcher's environment. Process 0's supervisor runs the study and writes the run folder (on a
filesystem every process sees); the others' only follow (`follow`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.config.experiment import ConfigError, Experiment
from harness.records.processes import ProcessFault, add_fault
from harness.store.records import to_json
from harness.study.workerproc import WorkerDied, WorkerProcess


def free_port() -> int:
    """Returns a TCP port free on 127.0.0.1 now (the kernel's pick), for a coordinator."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_specs(count: int, port: int) -> list[dict[str, Any]]:
    """Returns each rank's `distributed` entry of the hello job for a local group."""
    address = f"127.0.0.1:{port}"
    return [
        {"launcher": "local", "coordinator": address, "count": count, "rank": rank}
        for rank in range(count)
    ]


def alive(peers: Sequence[WorkerProcess]) -> Callable[[], None]:
    """Returns a watch that raises WorkerDied for the first of `peers` that has ended (while
    the group starts: their events are still to be read)."""

    def watch() -> None:
        for p in peers:
            p.check_alive()

    return watch


def drained(peers: Sequence[WorkerProcess]) -> Callable[[], None]:
    """Returns a watch that reads what `peers` sent (they follow process 0, so their events
    only say they are alive and where they are) and raises WorkerDied for the first that
    ended, raised or reported a fault."""

    def watch() -> None:
        for p in peers:
            p.drain()

    return watch


Hello = Callable[..., dict[str, Any]]


def start_local(
    exp: Experiment,
    source: str,
    first_number: int,
    checks: bool,
    hello: Hello,
    meanwhile: Callable[[], None] = lambda: None,
) -> tuple[WorkerProcess, list[WorkerProcess], dict[str, Any]]:
    """Starts a local group of `processes.count` workers numbered from `first_number`, joined
    through a fresh coordinator; returns process 0, the others (following process 0) and
    process 0's environment. `hello` is harness.study.session.hello (the preflight, with `checks`)."""
    count = exp.processes.count
    specs = local_specs(count, free_port())
    members = [
        WorkerProcess(first_number + rank, stopped_s=exp.limits.stopped_s) for rank in range(count)
    ]
    for rank, m in enumerate(members):
        m.process, m.processes = rank, count
    first, peers = members[0], members[1:]
    try:
        # Process 0 first, as it hosts the coordinator (a member that connects before it is up
        # retries after a pause), then the others; process 0's join waits for all of them.
        send_hello(first, exp, source, specs[0], checks)
        for p, spec in zip(peers, specs[1:], strict=True):
            send_hello(p, exp, source, spec, False)
        first.watch = alive(peers)
        environment = hello(first, exp, source, checks, meanwhile, specs[0], sent=True)
        for p in peers:
            try:
                p.expect("hello", within=exp.limits.preflight_s)
                p.send("follow")
                p.expect("following", within=exp.limits.preflight_s)
            except WorkerDied as e:
                tail = e.stderr_tail[-1] if e.stderr_tail else "no output"
                raise ConfigError(
                    "config", "processes", f"{e.how()} as it started: {tail}"
                ) from None
        first.watch = drained(peers)
    except BaseException:
        for m in members:
            if m.proc.poll() is None:
                m.kill()
        raise
    return first, peers, environment


def send_hello(
    worker: WorkerProcess,
    exp: Experiment,
    source: str,
    spec: dict[str, Any] | None,
    checks: bool,
) -> None:
    """Sends a worker its hello job without waiting: the config, the group it joins (`spec`,
    None for none) and whether it runs the preflight (`checks`; in a group, process 0's: it
    is the group's)."""
    worker.send(
        "hello",
        config=to_json(exp),
        source=source,
        checks=checks,
        distributed=spec,
    )


def start_workers(
    exp: Experiment,
    source: str,
    number: int,
    checks: bool,
    hello: Hello,
    meanwhile: Callable[[], None] = lambda: None,
) -> tuple[WorkerProcess, list[WorkerProcess], dict[str, Any]]:
    """Starts the worker numbered `number` (with a local group, the whole group from it) and
    says hello; returns it, the group's others and its environment. `hello` is
    harness.study.session.hello; with `checks` it runs the preflight (ConfigError when it fails)."""
    p = exp.processes
    if p.enabled and p.launcher == "local":
        return start_local(exp, source, number, checks, hello, meanwhile)
    worker = WorkerProcess(number, stopped_s=exp.limits.stopped_s)
    # With an external launcher the worker reads its rank from the launcher's environment.
    spec = {"launcher": "external"} if p.enabled else None
    try:
        environment = hello(worker, exp, source, checks, meanwhile, distributed=spec)
    except BaseException:
        if worker.proc.poll() is None:
            worker.kill()
        raise
    if p.enabled:
        worker.process = int((environment.get("process") or {}).get("rank", 0))
        worker.processes = p.count
    return worker, [], environment


def restart(
    worker: WorkerProcess,
    peers: Sequence[WorkerProcess],
    workdir: Path,
    exp: Experiment,
    source: str,
    number: int,
    hello: Hello,
) -> tuple[WorkerProcess, list[WorkerProcess]]:
    """Ends a group that lost a member (keeping every member's log) and starts a new one of
    the same size for the remaining work; returns its process 0 and the others. With an
    external launcher no process can be replaced: raises WorkerDied, which stops the run."""
    for w in (worker, *peers):
        if w.proc.poll() is None:
            w.kill()
        w.save_log(workdir)
    if exp.processes.launcher == "external":
        raise WorkerDied(
            1,
            (),
            reason="lost a member of its group; the processes an external launcher started "
            "cannot be replaced, so the run stops (processes/faults.json)",
            process=worker.process,
            processes=worker.processes,
        )
    first, others, _ = start_workers(exp, source, number, False, hello)
    return first, others


def record_fault(
    workdir: Path, exp: Experiment, variant: str | None, stage: str, died: Any
) -> None:
    """Records, in processes/faults.json, the process that took `variant` down."""

    add_fault(
        workdir,
        ProcessFault(
            variant=variant,
            process=died.process,
            processes=exp.processes.count,
            stage=stage,
            how=died.how(),
            signal=died.signal_name(),
            launcher=exp.processes.launcher,
        ),
    )


def follow(worker: WorkerProcess, exp: Experiment, out: Any) -> int:
    """With an external launcher, a process other than 0: its worker runs the jobs process 0
    publishes until process 0 ends the group; returns the exit status (0, or 1 when the
    worker died, which process 0 records). Writes nothing: the run folder is process 0's."""
    rank, count = worker.process, worker.processes
    print(f"process {rank} of {count}: following process 0, which writes the run", file=out)
    within = exp.limits.call_s * (3 + len(exp.selected_variants))
    worker.send("follow")
    try:
        worker.expect("following", within=exp.limits.preflight_s)
        worker.expect("followed", within=within)
    except WorkerDied as died:
        # how() names the process at fault when one is known ("process 1 of 2 crashed ...").
        named = died.how() if died.process is not None else None
        print(named or f"process {rank} of {count}: the worker {died.how()}", file=out)
        return 1
    worker.end()
    worker.close(None)
    return 0


def describe(exp: Experiment, environment: dict[str, Any]) -> str:
    """Returns the line a run prints about its group of processes."""
    p = exp.processes
    joined = environment.get("process") or {}
    return (
        f"{p.count} processes × {p.devices} device{'s' if p.devices > 1 else ''} through "
        "jax.distributed "
        f"({p.launcher} launcher, coordinator {joined.get('coordinator', '?')}); "
        "each process captures and times every variant"
    )


def successor(exp: Experiment) -> str:
    """What takes over after a worker died: a new worker, a new group, or nothing."""
    p = exp.processes
    if not p.enabled:
        return "a new worker takes over"
    if p.launcher == "external":
        return "an external launcher's processes cannot be replaced: the run stops"
    return "a new group of processes takes over"
