"""XLA dump options for one variant's compiles, including the compiles eager dispatch makes.

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

from harness.config.experiment import Dump


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
