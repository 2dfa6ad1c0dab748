"""python -m harness.worker EVENTS_FD: the process that runs JAX for a study.

The supervisor (harness.run) starts it, sends it jobs as JSON lines on stdin, and reads what
happens as JSON lines on the file descriptor EVENTS_FD (stdout is left to the program being
studied: a host callback prints there). Jobs, in the order the supervisor sends them:

  {"op": "hello", "config": {...}, "source": "...", "checks": true}
      imports JAX, describes the machine, and (with checks) runs the preflight: each XLA
      option set is compiled once and the problems are checked against the device's memory.
  {"op": "capture", "workdir": "...", "variants": [...], "fresh_process": false,
   "executables": "..." | null}
      captures the variants in turn (harness.capture), each into variants/<name>/; with
      `executables` (the supervisor's private folder) it keeps each compiled program there.
  {"op": "ceilings", "workdir": "...", "cache": "..." | null, "remeasure": false}
      measures the device's ceilings into ceilings.json.
  {"op": "time", "workdir": "...", "variants": [...], "executables": "..." | null}
      times the variants together in interleaved rounds (harness.timing), loading the
      program kept for a variant another worker captured, or compiling it again; writes
      timing.json.

If the worker dies (an XLA CHECK failure, SIGABRT, SIGSEGV), the supervisor records the
variant it had announced as failed and starts another worker for the rest.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import io as stdio
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

EVENTS: Any = None
TOKEN = ""  # the supervisor's, read from stdin: every event carries it (harness.workerproc)


def send(event: str, **fields: Any) -> None:
    """Writes one event line for the supervisor."""
    EVENTS.write(json.dumps({"event": event, **fields, "token": TOKEN}, default=str) + "\n")
    EVENTS.flush()


def _private_events(fd: int) -> Any:
    """Returns the event pipe moved to a random descriptor number, closed on exec, with the
    number the supervisor passed gone from sys.argv: the program this worker imports cannot
    write to it by guessing or by reading its arguments."""
    import fcntl
    import resource
    import secrets

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = max(128, min(soft if soft > 0 else 1024, 4096))
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64 + secrets.randbelow(top - 64))
        os.close(fd)
    except OSError:  # too few descriptors: keep the one passed, closed on exec at least
        moved = fd
        os.set_inheritable(fd, False)
    del sys.argv[1:]
    return os.fdopen(moved, "w", buffering=1)


def _die_with_parent() -> None:
    """Asks Linux to end this process when the supervisor dies, so none is ever orphaned."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


def _quiet_exit(signum: int, frame: Any) -> None:
    del frame
    os._exit(128 + signum)


class Worker:
    """The state one worker keeps between jobs: the config and what it has compiled."""

    def __init__(self) -> None:
        self.exp: Any = None
        self.platform = ""
        self.environment: dict[str, Any] = {}
        self.calls: dict[str, Callable[[], Any]] = {}
        self.waits: dict[str, Callable[[Any], Any]] = {}  # a torch variant's own wait

    def hello(self, job: dict[str, Any]) -> None:
        from harness.capture import environment, mesh, preflight
        from harness.config.schema import ConfigError, build_experiment

        self.exp = build_experiment(job["config"], job.get("source", "config"))
        # Before the first device query: jax fixes its CPU device count when it starts.
        forced = mesh.request_host_devices(self.exp.cpu_devices)
        self.environment = {**environment.describe(), "host_devices": forced}
        self.platform = self.environment["platform"]
        limit, where = preflight.device_memory()
        send("hello", environment=self.environment, memory=[limit, where])
        if job.get("checks"):
            try:
                if self.exp.program.enabled:  # a function or init that never returns ends here
                    send("checking", key="program", what="tracing the program's init and function")
                preflight.check_program(self.exp)
                preflight.check_memory(self.exp, self.platform)
                preflight.check_options(
                    self.exp, self.platform, lambda key, opts: send("try", key=key, options=opts)
                )
            except ConfigError as e:
                send("config_error", key=e.key, problem=e.problem)
                return
            send("preflight_ok")
            # The session's first worker, after answering, while the supervisor finishes its
            # own start: the imports would otherwise fall inside the capture, between two
            # variants. (A worker for one variant preloads only its own: run.preload_for.)
            self.import_frontends()

    def import_frontends(self) -> None:
        """Imports what the frontends of this platform's variants need (flax)."""
        from harness.config.schema import FRONTEND_MODULES

        needed = {
            module
            for v in self.exp.selected_variants
            if self.platform in v.platforms
            for module in FRONTEND_MODULES.get(v.problem.frontend, ())
        }
        preload(sorted(needed))

    def config(self, job: dict[str, Any]) -> None:
        """Replaces the experiment (a search adds candidates as it goes); keeps what was compiled."""
        from harness.config.schema import build_experiment

        self.exp = build_experiment(job["config"], job.get("source", "config"))
        send("configured")

    def capture(self, job: dict[str, Any]) -> None:
        from harness import io
        from harness.capture.variant import Context
        from harness.records import to_json
        from harness.summary import RESULT_FILE, CaptureRecord, Failure
        from harness.variants import expression, program

        workdir = Path(job["workdir"])
        # Inputs are made once per distinct problem, before any variant clears JAX's caches,
        # so variants sharing a problem share bit-identical data and none pays for making it.
        # A program's parameters too: its init runs once per distinct inputs and seed.
        for name in job["variants"]:
            v = self.exp.variant(name)
            send("inputs", variant=name)  # a crash or hang here is this variant's
            if v.program.enabled:
                # An init that fails here fails again in each variant, which records why.
                with contextlib.suppress(Exception):
                    program.args_for(v.program, self.exp.seed)
            elif v.mode != "jit_python_branch":
                # Kept between runs beside the ceilings, under the results root.
                expression.inputs_for(v.problem, self.exp.seed, io.cache_dir(workdir))
        for name in job["variants"]:
            variant = self.exp.variant(name)
            vdir = workdir / "variants" / name
            send("start", variant=name)
            ctx = Context(
                vdir,
                self.platform,
                fresh_process=bool(job.get("fresh_process")),
                executables=_executables(job),
            )
            try:
                captured = _capture_for(variant)(self.exp, variant, ctx)
                record = captured.record
                if captured.call is not None:
                    self.calls[name] = captured.call
                if captured.wait is not None:
                    self.waits[name] = captured.wait
            except Exception as e:
                io.write_text(vdir / "error.txt", traceback.format_exc())
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                record = CaptureRecord(
                    status="failed",
                    reason=f"{type(e).__name__}: {first}"[:500],
                    mode=variant.mode,
                    module=None,
                    failure=Failure(kind="exception", signal=None, exit_code=None),
                )
            io.write_json(vdir / RESULT_FILE, to_json(record))
            send("done", variant=name, status=record.status)

    def ceilings(self, job: dict[str, Any]) -> None:
        from harness import io
        from harness.capture import ceilings
        from harness.variants import program

        shapes = []
        for v in self.exp.selected_variants:
            if self.platform in v.platforms and v.program.enabled:
                # A program's GEMMs are known only once compiled: its dtypes' ceiling is
                # measured at the square size every precision gets.
                x, w = program.gemm_dtypes(v.program, self.exp.seed)
                side = ceilings.square_side(self.platform)
                shapes.append(ceilings.GemmShape(side, side, side, x, w))
            elif self.platform in v.platforms and v.mode != "jit_python_branch":
                p = v.problem
                shapes.append(ceilings.GemmShape(p.rows, p.k, p.n, p.dtype, p.weight_dtype))
        cache = Path(job["cache"]) if job.get("cache") else None
        remeasure = bool(self.exp.capture.remeasure_ceilings)
        found = ceilings.measure(self.environment, shapes, cache, remeasure)
        io.write_json(Path(job["workdir"]) / "ceilings.json", found)
        send("ceilings_done")

    def time(self, job: dict[str, Any]) -> None:
        from harness import io
        from harness.capture import mesh
        from harness.capture.variant import compile_for_timing
        from harness.records import to_json
        from harness.timing import stage

        workdir = Path(job["workdir"])
        notes: dict[str, str] = {}
        for name in job["variants"]:
            if name not in self.calls:
                send("timing_compile", variant=name)
                variant = self.exp.variant(name)
                if variant.framework == "torch":
                    from harness.capture import torch_variant

                    call, wait, note = torch_variant.compile_for_timing(
                        self.exp, variant, workdir, self.platform
                    )
                    self.waits[name] = wait
                else:
                    call, note = compile_for_timing(self.exp, variant, workdir, _executables(job))
                self.calls[name] = call
                if note:
                    notes[name] = note
        if mesh.blocks_every_call():
            notes = {
                n: "; ".join(filter(None, (notes.get(n), mesh.BLOCKING_NOTE)))
                for n in job["variants"]
            }
        buffer = stdio.StringIO()
        with contextlib.redirect_stdout(buffer):  # host callbacks print on every call
            record = stage.run(
                self.exp,
                {n: self.calls[n] for n in job["variants"]},
                self.platform,
                workdir,
                notes,
                excluded=job.get("excluded") or {},
                waits={n: self.waits[n] for n in job["variants"] if n in self.waits},
                # Before each variant's batch: a crash, exception or hang is then its own.
                announce=lambda name: send("timing_call", variant=name),
            )
        io.write_json(workdir / job.get("file", "timing.json"), to_json(record))
        send("timed")


def preload(modules: Iterable[str]) -> None:
    """Imports `modules` ahead of the job that needs them; the job reports any failure."""
    from harness.capture.torch_env import scratch_cache_dir

    for module in modules:
        with contextlib.suppress(Exception), scratch_cache_dir():  # no torch folder in $TMPDIR
            importlib.import_module(module)


def _executables(job: dict[str, Any]) -> Path | None:
    """The supervisor's private folder of kept programs named by `job`, if any."""
    return Path(job["executables"]) if job.get("executables") else None


def _capture_for(variant: Any) -> Callable[..., Any]:
    """Returns the capture function of the variant's framework (JAX, or the PyTorch row)."""
    if variant.framework == "torch":
        from harness.capture.torch_variant import capture_torch_variant

        return capture_torch_variant
    from harness.capture.variant import capture_variant

    return capture_variant


def main(argv: list[str]) -> int:
    global EVENTS, TOKEN
    # NVLink multicast (NVLS) stays off in every worker, whatever the caller's environment.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    EVENTS = _private_events(int(argv[1]))
    TOKEN = sys.stdin.readline().strip()
    _die_with_parent()
    signal.signal(signal.SIGINT, _quiet_exit)
    signal.signal(signal.SIGTERM, _quiet_exit)
    # A spare worker imports its framework while the variant before it is captured; it
    # queries no device until its first job.
    preload(filter(None, os.environ.get("HARNESS_WORKER_PRELOAD", "").split(",")))
    from harness.capture.torch_env import scratch_cache_dir

    worker = Worker()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        op = job.get("op")
        if op not in ("hello", "config", "capture", "ceilings", "time"):
            send("error", message=f"unknown op {op!r}")
            return 2
        try:
            # torch, imported or called outside a variant's block, would make its cache folder
            # in $TMPDIR: each job gives it a scratch one, removed when the job ends.
            with scratch_cache_dir():
                getattr(worker, op)(job)
        except Exception as e:
            send(
                "error",
                op=op,
                message=f"{type(e).__name__}: {e}"[:2000],
                traceback=traceback.format_exc(),
            )
            return 1
    # It ends while the supervisor analyses the run: the interpreter's last collection over
    # everything JAX made would take a core from that analysis for nothing.
    gc.freeze()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
