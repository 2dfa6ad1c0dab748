"""The IR ladder: XLA's dump files renamed by stage and order, with an index.

Stage files in `ir/` (a stage may be absent; eager mode holds one file per primitive module in
the HLO stages, which are then folders):

    00-jaxpr.txt                       the traced program
    10-stablehlo.mlir                  what JAX hands to XLA
    20-hlo-before-optimizations.txt
    30-passes/NNNN.<pipeline>.<pass>.txt   the module after each pass that changed it
    35-priority-fusion-decisions.txt   GPU: each fusion the priority-fusion pass weighed, and why
    40-hlo-after-optimizations.txt
    41-hlo-after-optimizations-recompile.txt   the new-shape module
    45-buffer-assignment.txt
    50-thunk-sequence.txt              GPU: the executable's launch sequence
    60-triton/, 70-llvm/, 80-ptx/      code generated for each fusion, where emitted
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

from harness import io

_MODULE_FILE = re.compile(r"^module_(?P<id>\d+)\.(?P<name>[^.]+)\.(?P<rest>.+)$")
_PASS_FILE = re.compile(
    r"^(?P<index>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<pass>.+?)\.before_.+\.txt$"
)


@dataclasses.dataclass(frozen=True)
class Stage:
    order: int
    stage: str
    path: str


@dataclasses.dataclass(frozen=True)
class DumpModule:
    """The dump files of one compiled module, keyed by what follows `module_NNNN.<name>.`."""

    module_id: int
    name: str
    files: tuple[tuple[str, Path], ...]


def dump_modules(paths: Iterable[Path]) -> tuple[DumpModule, ...]:
    """Returns the modules found among dump files, oldest (lowest id) first."""
    grouped: dict[tuple[int, str], list[tuple[str, Path]]] = {}
    for path in paths:
        m = _MODULE_FILE.match(path.name)
        if m and path.is_file():
            grouped.setdefault((int(m["id"]), m["name"]), []).append((m["rest"], path))
    return tuple(
        DumpModule(module_id=i, name=n, files=tuple(sorted(files)))
        for (i, n), files in sorted(grouped.items())
    )


def classify(rest: str) -> tuple[int, str, str] | None:
    """Returns (order, stage, file name in ir/) for one dump file, or None to leave it out."""
    if rest == "before_optimizations.txt":
        return 20, "hlo_before", "20-hlo-before-optimizations.txt"
    m = _PASS_FILE.match(rest)
    if m:
        return 30, "passes", f"30-passes/{m['index']}.{m['pipeline']}.{m['pass']}.txt"
    if rest == "priority_fusion_dump.txt":
        return 35, "fusion_decisions", "35-priority-fusion-decisions.txt"
    if rest.endswith("_after_optimizations.txt"):
        return 40, "hlo_after", "40-hlo-after-optimizations.txt"
    if rest.endswith("_after_optimizations-buffer-assignment.txt"):
        return 45, "buffer_assignment", "45-buffer-assignment.txt"
    if rest == "thunk_sequence.txt":
        return 50, "thunks", "50-thunk-sequence.txt"
    if rest.endswith(".ttir.txt"):
        return 60, "triton", "60-triton/" + rest
    if rest.endswith(".ll"):
        return 70, "llvm", "70-llvm/" + rest
    if rest.endswith(".ptx"):
        return 80, "ptx", "80-ptx/" + rest
    return None


_STAGE_DIRS = {"passes": "30-passes", "triton": "60-triton", "llvm": "70-llvm", "ptx": "80-ptx"}


def write_ladder(
    ir_dir: Path,
    module: DumpModule | None,
    jaxpr: str | None,
    stablehlo: str | None,
    recompile: DumpModule | None = None,
) -> tuple[Stage, ...]:
    """Copies one compiled module's dumps into `ir_dir` by stage and writes `index.json`."""
    ir_dir.mkdir(parents=True, exist_ok=True)
    stages: dict[str, Stage] = {}
    if jaxpr is not None:
        io.write_text(ir_dir / "00-jaxpr.txt", jaxpr)
        stages["jaxpr"] = Stage(0, "jaxpr", "00-jaxpr.txt")
    if stablehlo is not None:
        io.write_text(ir_dir / "10-stablehlo.mlir", stablehlo)
        stages["stablehlo"] = Stage(10, "stablehlo", "10-stablehlo.mlir")
    for rest, path in module.files if module else ():
        found = classify(rest)
        if found is None:
            continue
        order, stage, name = found
        target = ir_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        io.copy_file(path, target)
        stages.setdefault(stage, Stage(order, stage, _STAGE_DIRS.get(stage, name)))
    if recompile is not None:
        for rest, path in recompile.files:
            if rest.endswith("_after_optimizations.txt"):
                io.copy_file(path, ir_dir / "41-hlo-after-optimizations-recompile.txt")
                stages["hlo_after_recompile"] = Stage(
                    41, "hlo_after_recompile", "41-hlo-after-optimizations-recompile.txt"
                )
    return _write_index(ir_dir, stages.values())


def write_eager_ladder(
    ir_dir: Path, modules: Iterable[DumpModule], jaxpr: str
) -> tuple[Stage, ...]:
    """Writes the ladder of an eager run: one file per primitive module in each HLO stage."""
    ir_dir.mkdir(parents=True, exist_ok=True)
    io.write_text(ir_dir / "00-jaxpr.txt", jaxpr)
    stages = {"jaxpr": Stage(0, "jaxpr", "00-jaxpr.txt")}
    folders = {
        "hlo_before": (20, "20-hlo-before-optimizations"),
        "hlo_after": (40, "40-hlo-after-optimizations"),
        "llvm": (70, "70-llvm"),
        "ptx": (80, "80-ptx"),
    }
    for module in modules:
        for rest, path in module.files:
            found = classify(rest)
            if found is None or found[1] not in folders:
                continue
            order, folder = folders[found[1]]
            suffix = Path(rest).suffix if found[1] in ("llvm", "ptx") else ".txt"
            extra = "" if found[1] not in ("llvm", "ptx") else "." + rest.removesuffix(suffix)
            target = ir_dir / folder / f"{module.module_id:04d}-{module.name}{extra}{suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            io.copy_file(path, target)
            stages.setdefault(found[1], Stage(order, found[1], folder))
    return _write_index(ir_dir, stages.values())


def _write_index(ir_dir: Path, stages: Iterable[Stage]) -> tuple[Stage, ...]:
    ordered = tuple(sorted(stages, key=lambda s: s.order))
    io.write_json(ir_dir / "index.json", {"stages": [dataclasses.asdict(s) for s in ordered]})
    return ordered
