"""Shared test data access for the hlo tests: H200 fixtures and tiny live CPU dumps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixture_root import fixtures_root

FIXTURES = fixtures_root()
H200 = FIXTURES / "h200-jax0.11.2"


def require_fixtures() -> Path:
    """The H200 fixture root, or skip the test when the shared fixtures are absent."""
    if not H200.is_dir():
        pytest.skip(f"H200 fixtures not found at {H200}")
    return H200


def hlo_text_files() -> list[Path]:
    """Every HLO module text file (`.txt`/`.hlo` starting with `HloModule`) in the fixtures."""
    if not FIXTURES.is_dir():
        return []
    return sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.suffix in (".txt", ".hlo") and p.read_bytes()[:9] == b"HloModule"
    )


def module_numbers(variant: str) -> list[int]:
    """The module numbers of a variant's dumped modules, ascending."""
    dump = require_fixtures() / variant / "dump"
    return sorted(
        {int(p.name.split(".")[0][7:]) for p in dump.glob("module_*before_optimizations.txt")}
    )


def gpu_file(variant: str, suffix: str, large: bool = True) -> Path:
    """A variant's dump file for the full-size module (the lower number) or the m/2 recompile."""
    numbers = module_numbers(variant)
    if not numbers:
        pytest.skip(f"{variant} has no HLO modules in its dump")
    number = numbers[0] if large else numbers[-1]
    matches = sorted((require_fixtures() / variant / "dump").glob(f"module_{number:04d}.*{suffix}"))
    if not matches:
        pytest.skip(f"{variant}: no module_{number:04d}.*{suffix}")
    return matches[0]


def cpu_dump(out: Path, fn: Callable, *args: object) -> tuple[Path, object]:
    """Compile `fn` on CPU with every pass dumped as text into `out`; returns (out, compiled)."""
    import jax

    options = {
        "xla_dump_to": str(out),
        "xla_dump_hlo_as_text": True,
        "xla_dump_hlo_pass_re": ".*",
    }
    compiled = jax.jit(fn, compiler_options=options).lower(*args).compile()
    return out, compiled


def write_ladder(ir: Path, fn: Callable, *args: object, options: dict | None = None) -> Path:
    """Writes the harness IR ladder for `fn` with the harness's own ladder writer."""
    import jax

    from harness.records import ladder

    dump = ir.parent / f"{ir.name}_dump"
    jitted = jax.jit(
        fn,
        compiler_options={
            "xla_dump_to": str(dump),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_pass_re": ".*",
            **(options or {}),
        },
    )
    traced = jitted.trace(*args)
    lowered = traced.lower()
    lowered.compile()
    module = ladder.dump_modules(dump.iterdir())[0]
    writer = ladder.LadderWriter(ir)
    writer.text("jaxpr", str(traced.jaxpr))
    writer.text("stablehlo", lowered.as_text())
    writer.module(module)
    writer.finish()
    return ir
