"""Checks XLA option names and values against the installed jaxlib, in a child process.

Each option is tried by compiling a trivial function with it. Most bad options raise, but some
abort the whole process instead (`xla_cpu_parallel_codegen_split_count: -1` ends in
std::length_error and SIGABRT), so the probes run in a child: it announces each option before
trying it, and when it dies the last announced option is the one that killed it.

Run as `python -m harness.capture.xla_options` with a JSON list of [key, options] on stdin;
it prints one JSON object per line: {"try": i} before option i, {"reject": i, "error": "..."}
when XLA rejects it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.capture import environment
from harness.config.schema import ConfigError, Experiment

TIMEOUT_S = 300


def options_to_check(exp: Experiment) -> list[tuple[str, dict[str, Any]]]:
    """Returns (config key, options) to compile with: each option alone, then each variant's
    full set, since some options are fine alone and abort XLA together (xla_disable_hlo_passes
    with xla_enable_hlo_passes_only fails a CHECK)."""
    single = [
        (f"variants.{v.name}.xla_options.{name}", {name: value})
        for v in exp.variants
        for name, value in v.xla_options.items()
    ]
    together = [
        (f"variants.{v.name}.xla_options", dict(v.xla_options))
        for v in exp.variants
        if len(v.xla_options) > 1
    ]
    return single + together


def _child_env() -> dict[str, str]:
    """The environment for the child: this one, on the CPU, without the eager dump folder.

    Option names and types live in one DebugOptions proto for every backend, so the CPU
    checks them; and a child on the GPU would contend with the parent for device memory.
    """
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    folder = environment.process_dump_dir()
    if folder is not None and "XLA_FLAGS" in env:
        flags = env["XLA_FLAGS"].replace(f"--xla_dump_to={folder}", "")
        env["XLA_FLAGS"] = flags.replace("--xla_dump_hlo_as_text", "").strip()
    return env


def check(exp: Experiment, source: str = "config") -> None:
    """Raises ConfigError naming the first XLA option the installed jaxlib rejects or dies on."""
    options = options_to_check(exp)
    if not options:
        return
    payload = json.dumps([[key, opts] for key, opts in options])
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.capture.xla_options"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=_child_env(),
        )
    except subprocess.TimeoutExpired as e:
        raise ConfigError(
            source, "xla_options", f"checking the XLA options took over {TIMEOUT_S} s"
        ) from e
    tried = None
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue  # anything else XLA printed to stdout
        if "try" in msg:
            tried = msg["try"]
        elif "reject" in msg:
            raise ConfigError(
                source,
                options[msg["reject"]][0],
                f"rejected by the installed jaxlib {_jaxlib_version()}: {msg['error']}",
            )
    if proc.returncode != 0:
        died = _death(proc.returncode)
        if tried is None:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(source, "xla_options", f"the XLA option check {died}: {last}")
        key, opts = options[tried]
        shown = ", ".join(f"{n}={v!r}" for n, v in opts.items())
        what = "another value" if len(opts) == 1 else "options that XLA accepts together"
        raise ConfigError(
            source, key, f"XLA {died} compiling with {shown}; choose {what} (see DebugOptions)"
        )


def _jaxlib_version() -> str:
    try:
        import jaxlib

        return jaxlib.__version__
    except ImportError:
        return "(not importable)"


def _death(returncode: int) -> str:
    if returncode < 0:
        import signal

        try:
            return f"crashed the process ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"crashed the process (signal {-returncode})"
    return f"exited with status {returncode}"


def _probe(options: Sequence[Sequence[Any]]) -> None:
    import jax

    probe = jax.jit(lambda a: a + 1)
    arg = jax.numpy.zeros((2,), jax.numpy.float32)
    for i, (_, opts) in enumerate(options):
        print(json.dumps({"try": i}), flush=True)
        try:
            probe.lower(arg).compile(compiler_options=opts)
        except Exception as e:  # XLA raises a runtime error naming the option
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if "No such compile option" in first:
                first += "; valid names are the DebugOptions fields of this jaxlib"
            print(json.dumps({"reject": i, "error": first}), flush=True)
            return


if __name__ == "__main__":
    _probe(json.load(sys.stdin))
