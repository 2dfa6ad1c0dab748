"""XLA dump options for one variant's compiles, including the compiles eager dispatch makes,
and the jit's dump compile.

A jitted variant's dumps come from a compile of their own (`compile_dumped`), after its
first call: the first compile is the user's, and its pause is the one a user sees. Dumped, it
was not: on the CPU a scanned LM train step compiled in 1.22 s, and in 1.59-1.81 s writing
its 405 per-pass files (17 MiB); on the H200 its dump is 470 files (137 MiB) with the
emitters'. The dump compile is of the same lowering with the same options; on a GPU it reads
the first compile's autotune results (harness.capture.reuse), so it times no kernel and
compiles the program measured, which its optimized HLO confirms (the H200: 1.2-3.4 s each).

A jitted variant passes its dump options with its own compile (`compiler_options`). Eager
dispatch compiles one small module per primitive with no options of ours; XLA_FLAGS would
dump every compile of the process, into one shared folder, from the moment XLA starts. So
while an eager variant runs, `eager_compiles_dumped_to` adds the same dump options to every
compile JAX makes, through the one function that builds JAX's compile options
(`jax._src.compiler.get_compile_options`). Should a JAX release move that function, eager
modules are simply not dumped, and the variant says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.capture.turn import DeviceTurn
from harness.config.experiment import Dump
from harness.hlo import fingerprint
from harness.records.probes import ProbeFailure


def dump_options(dump_dir: Path, module_re: str, dump: Dump, platform: str) -> dict[str, Any]:
    """Returns the XLA debug options that dump the modules matching `module_re` into dump_dir."""
    opts: dict[str, Any] = {
        "xla_dump_to": str(dump_dir),
        "xla_dump_hlo_as_text": True,
        "xla_dump_hlo_module_re": module_re,
    }
    if dump.passes:
        opts["xla_dump_hlo_pass_re"] = ".*"
    if dump.emitters and platform == "gpu":
        opts["xla_dump_emitter_re"] = ".*"
    return opts


@contextlib.contextmanager
def eager_compiles_dumped_to(options: dict[str, Any]) -> Iterator[bool]:
    """Adds `options` to every compile JAX makes inside the block; yields whether it could."""
    try:
        from jax._src import compiler
    except ImportError:
        yield False
        return
    original = getattr(compiler, "get_compile_options", None)
    if original is None:
        yield False
        return

    def with_dump(*args: Any, **kwargs: Any) -> Any:
        overrides = dict(kwargs.get("env_options_overrides") or {})
        for key, value in options.items():
            overrides.setdefault(key, value)
        kwargs["env_options_overrides"] = overrides
        return original(*args, **kwargs)

    compiler.get_compile_options = with_dump
    try:
        yield True
    finally:
        compiler.get_compile_options = original


def compile_dumped(
    lowered: Any, options: dict[str, Any], measured: Any, turn: DeviceTurn, tuned: bool
) -> str | None:
    """Compiles `lowered` again with `options` (its dump's, with the jit's own) for its dumps
    alone, and returns a note where that compile's optimized HLO is not the measured
    program's (`measured`'s); None where it is.

    `tuned`: the compile reads the first compile's autotune results, so it runs no kernel and
    is host work, beside other variants' compiles and measurements alike (as a float64
    reference is). Otherwise (a CPU, where the device is the host; a GPU whose results were not
    kept) it is a compile like the others, in the device's compile slot."""
    with contextlib.nullcontext() if tuned else turn.compiling():
        dumped = lowered.compile(compiler_options=options)
    texts = dumped.as_text(), measured.as_text()
    try:
        same = fingerprint.hlo_text_digest(texts[0]) == fingerprint.hlo_text_digest(texts[1])
    except Exception:  # an HLO our parser rejects: compared as text
        same = texts[0] == texts[1]
    if same:
        return None
    return (
        "its dumps are of a second compile whose optimized HLO differs from the measured "
        "program's: the IR ladder and the profile are of different programs"
    )


def missing_note(module: str, others: int, failures: tuple[ProbeFailure, ...]) -> str:
    """The note of a variant whose dump holds no module named `module`, saying why where the
    capture knows: its dump compile failed, or XLA dumped `others` modules of other names."""
    failed = next((f for f in failures if f.probe == "dump"), None)
    if failed is not None:
        return f"XLA wrote no dump for this module: its dump compile failed ({failed.reason})"
    if others:
        return (
            f"XLA wrote no dump for this module `{module}`: the dump holds {others} module(s) of "
            "other names"
        )
    return "XLA wrote no dump for this module"
