"""The IR ladder: every stage a program went through, one file or folder each, with an index.

This module alone knows the ladder's layout: the capture writes through `LadderWriter`, and
analysis, the first-divergence ladder and the report read through `read_ladder`. Stages are
open to any framework: JAX/XLA fills the jaxpr, StableHLO and HLO stages; the PyTorch row
fills Dynamo's FX graph, the AOT graphs, Inductor's IR and its generated code; a sharded
program adds the SPMD partitioner's output.

Layout of `ir/` (any stage may be absent):

    00-jaxpr.txt | 00-fx-graph.txt            the traced program
    05-aot-forward.txt                         torch: the AOT forward graph before post-grad passes
    10-stablehlo.mlir | 10-post-grad.txt       what the frontend hands to the compiler
    20-hlo-before-optimizations.txt
    25-spmd-partitioned.txt                    after the SPMD partitioner
    30-passes/NNNN.<pipeline>.<pass>.txt       the module after each pass that changed it
    32-inductor-ir-pre-fusion.txt
    35-priority-fusion-decisions.txt           GPU: each fusion priority fusion weighed, and why
    40-hlo-after-optimizations.txt | 40-inductor-ir-post-fusion.txt
    41-hlo-after-optimizations-recompile.txt   the new-shape module
    45-buffer-assignment.txt
    46-live-range.txt                          each value's live range and what is live at the peak
    47-memory-usage-report.txt                 XLA's total allocation per memory space
    50-thunk-sequence.txt | 50-output-code.py  the launch sequence / Inductor's generated module
    51-thunk-metadata.txt                      GPU: each thunk's HLO instruction and kind
    52-thunk-sequence-after-thunk-passes.txt   GPU: command buffers, their commands and DAG
    60-triton/, 70-llvm/, 80-ptx/              code generated for each kernel, where emitted

In eager mode the HLO stages are folders with one file per primitive module
(`NNNN-jit_<primitive>.txt`, NNNN being XLA's module number, which profiles call program_id).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

from harness.common import userfiles
from harness.store import io
from harness.store.records import SchemaError


@dataclasses.dataclass(frozen=True)
class StageKind:
    """One rung a ladder may hold: its name, position, file (or folder) name and meaning."""

    name: str
    order: int
    path: str
    title: str
    folder: bool = False


STAGE_KINDS: tuple[StageKind, ...] = (
    StageKind("jaxpr", 0, "00-jaxpr.txt", "jaxpr: the traced program"),
    StageKind("fx_graph", 0, "00-fx-graph.txt", "Dynamo's FX graph"),
    StageKind("aot_forward", 5, "05-aot-forward.txt", "AOT forward graph, before post-grad passes"),
    StageKind("stablehlo", 10, "10-stablehlo.mlir", "StableHLO: what JAX hands to XLA"),
    StageKind("post_grad", 10, "10-post-grad.txt", "AOT forward graph after post-grad passes"),
    StageKind("hlo_before", 20, "20-hlo-before-optimizations.txt", "HLO before optimization"),
    StageKind("spmd", 25, "25-spmd-partitioned.txt", "HLO after the SPMD partitioner"),
    StageKind("passes", 30, "30-passes", "HLO after each pass that changed it", folder=True),
    StageKind(
        "inductor_pre_fusion", 32, "32-inductor-ir-pre-fusion.txt", "Inductor IR before fusion"
    ),
    StageKind(
        "fusion_decisions", 35, "35-priority-fusion-decisions.txt", "priority fusion's decisions"
    ),
    StageKind("hlo_after", 40, "40-hlo-after-optimizations.txt", "HLO after optimization"),
    StageKind(
        "inductor_post_fusion", 40, "40-inductor-ir-post-fusion.txt", "Inductor IR after fusion"
    ),
    StageKind(
        "hlo_after_recompile",
        41,
        "41-hlo-after-optimizations-recompile.txt",
        "the new-shape module",
    ),
    StageKind("buffer_assignment", 45, "45-buffer-assignment.txt", "buffer assignment"),
    StageKind("live_range", 46, "46-live-range.txt", "live ranges and the memory peak"),
    StageKind("memory_usage", 47, "47-memory-usage-report.txt", "XLA's memory-usage report"),
    StageKind("thunks", 50, "50-thunk-sequence.txt", "the executable's launch sequence"),
    StageKind(
        "thunk_metadata", 51, "51-thunk-metadata.txt", "each thunk's HLO instruction and kind"
    ),
    StageKind(
        "thunks_after_passes",
        52,
        "52-thunk-sequence-after-thunk-passes.txt",
        "the launch sequence after thunk passes: command buffers and their DAG",
    ),
    StageKind("output_code", 50, "50-output-code.py", "Inductor's generated module"),
    StageKind("triton", 60, "60-triton", "Triton IR per kernel", folder=True),
    StageKind("llvm", 70, "70-llvm", "LLVM IR per kernel", folder=True),
    StageKind("ptx", 80, "80-ptx", "PTX per kernel", folder=True),
)
KINDS = {k.name: k for k in STAGE_KINDS}
INDEX = "index.json"

# XLA's dump names: module_NNNN.<name>.<rest>, and per-pass files NNNN.<pipeline>.after_<pass>.
_MODULE_FILE = re.compile(r"^module_(?P<id>\d{1,9})\.(?P<name>[^.]{1,512})\.(?P<rest>.{1,1024})$")
_PASS_FILE = re.compile(
    r"^(?P<index>\d{4})\.(?P<pipeline>[^.]{1,256})\.after_(?P<pass>[^.]{1,256})\.before_[^/]{1,512}\.txt$"
)


@dataclasses.dataclass(frozen=True)
class Stage:
    """A stage a ladder holds: its kind and its path relative to the ladder folder."""

    name: str
    order: int
    path: str

    @property
    def kind(self) -> StageKind:
        return KINDS[self.name]


@dataclasses.dataclass(frozen=True)
class DumpModule:
    """The dump files of one compiled module, keyed by what follows `module_NNNN.<name>.`."""

    module_id: int
    name: str
    files: tuple[tuple[str, Path], ...]


def dump_modules(paths: Iterable[Path]) -> tuple[DumpModule, ...]:
    """Returns the modules found among XLA dump files, oldest (lowest id) first. A file kept
    compressed (`X.gz`, harness.store.io.gzip_in_place) is named as XLA wrote it (`X`),
    which the one reader reads inflated."""
    grouped: dict[tuple[int, str], list[tuple[str, Path]]] = {}
    for found in paths:
        path = found.with_name(found.name.removesuffix(userfiles.GZ))
        m = _MODULE_FILE.match(path.name)
        if m and userfiles.is_file(path):
            grouped.setdefault((int(m["id"]), m["name"]), []).append((m["rest"], path))
    return tuple(
        DumpModule(module_id=i, name=n, files=tuple(sorted(set(files))))
        for (i, n), files in sorted(grouped.items())
    )


# What an eager primitive module keeps: its HLO, its memory files (memory per primitive) and code.
_EAGER_STAGES = frozenset(
    {"hlo_before", "hlo_after", "buffer_assignment", "live_range", "memory_usage", "llvm", "ptx"}
)


def classify(rest: str) -> tuple[str, str] | None:
    """Returns (stage, file name inside the stage's folder or '') for one XLA dump file.

    `rest` is what follows `module_NNNN.<name>.` in XLA's file name; None leaves it out.
    """
    if rest == "before_optimizations.txt":
        return "hlo_before", ""
    if rest == "after_spmd_partitioner.txt":  # the summary dump, written without per-pass dumps
        return "spmd", ""
    m = _PASS_FILE.match(rest)
    if m:
        if m["pass"] == "spmd-partitioning":
            return "spmd", ""
        return "passes", f"{m['index']}.{m['pipeline']}.{m['pass']}.txt"
    if rest == "priority_fusion_dump.txt":
        return "fusion_decisions", ""
    if rest.endswith("_after_optimizations.txt"):
        return "hlo_after", ""
    if rest.endswith("_after_optimizations-buffer-assignment.txt"):
        return "buffer_assignment", ""
    if rest.endswith("_after_optimizations-live-range.txt"):
        return "live_range", ""
    if rest.endswith("_after_optimizations-memory-usage-report.txt"):
        return "memory_usage", ""
    if rest == "thunk_sequence.txt":
        return "thunks", ""
    if rest == "thunk_metadata.txt":  # the matcher reads both inside command buffers
        return "thunk_metadata", ""
    if rest == "thunk_sequence_after_thunk_passes.txt":
        return "thunks_after_passes", ""
    if rest.endswith(".ttir.txt"):
        return "triton", rest
    if rest.endswith(".ll"):
        return "llvm", rest
    if rest.endswith(".ptx"):
        return "ptx", rest
    return None


class LadderWriter:
    """Writes one program's ladder into `ir_dir` stage by stage; `finish()` writes the index."""

    def __init__(self, ir_dir: Path) -> None:
        self.ir_dir = ir_dir
        self._stages: dict[str, Stage] = {}
        ir_dir.mkdir(parents=True, exist_ok=True)

    def _target(self, stage: str, name: str = "") -> Path:
        kind = KINDS[stage]
        if kind.folder != bool(name):
            raise ValueError(
                f"stage {stage}: {'a file name is needed' if kind.folder else 'takes no file name'}"
            )
        self._stages.setdefault(stage, Stage(stage, kind.order, kind.path))
        return self.ir_dir / kind.path / name if name else self.ir_dir / kind.path

    def text(self, stage: str, text: str, name: str = "") -> None:
        """Writes a stage (or one file of a folder stage) from text."""
        io.write_text(self._target(stage, name), text)

    def copy(self, stage: str, source: Path, name: str = "") -> None:
        """Puts a file into a stage (or into a folder stage under `name`): a hard link to XLA's
        dump file where the file system allows, so the ladder costs no second copy."""
        io.link_file(source, self._target(stage, name))

    def module(self, module: DumpModule) -> None:
        """Copies one compiled module's XLA dump files into their stages.

        The SPMD partitioner's per-pass dump is both the `spmd` stage and a pass of the
        pass timeline, so the timeline runs across the partitioning.
        """
        per_pass = any(_PASS_FILE.match(rest) for rest, _ in module.files)
        for rest, path in module.files:
            found = classify(rest)
            if found is None or (found[0] == "spmd" and per_pass and not _PASS_FILE.match(rest)):
                continue  # with per-pass dumps, the partitioner's own pass file is the stage
            self.copy(found[0], path, found[1])
            m = _PASS_FILE.match(rest)
            if found[0] == "spmd" and m:
                self.copy("passes", path, f"{m['index']}.{m['pipeline']}.{m['pass']}.txt")

    def recompile(self, module: DumpModule) -> None:
        """Copies the optimized HLO of the new-shape recompile."""
        for rest, path in module.files:
            if rest.endswith("_after_optimizations.txt"):
                self.copy("hlo_after_recompile", path)

    def eager_module(self, module: DumpModule) -> None:
        """Copies one eager primitive module: each HLO stage holds one file per module."""
        for rest, path in module.files:
            found = classify(rest)
            if found is None or found[0] not in _EAGER_STAGES:
                continue
            stage = found[0]
            if stage in ("llvm", "ptx"):
                name = f"{module.module_id:04d}-{module.name}.{found[1]}"
            else:
                name = f"{module.module_id:04d}-{module.name}.txt"
            kind = KINDS[stage]
            target = self.ir_dir / kind.path.removesuffix(".txt") / name
            io.link_file(path, target)
            self._stages.setdefault(stage, Stage(stage, kind.order, kind.path.removesuffix(".txt")))

    def finish(self) -> tuple[Stage, ...]:
        """Writes index.json and returns the stages in order."""
        ordered = tuple(sorted(self._stages.values(), key=lambda s: (s.order, s.name)))
        io.write_json(
            self.ir_dir / INDEX,
            {"stages": [{"order": s.order, "stage": s.name, "path": s.path} for s in ordered]},
        )
        return ordered


@dataclasses.dataclass(frozen=True)
class Ladder:
    """A ladder read back: its folder and the stages whose files exist, in order."""

    ir_dir: Path
    stages: tuple[Stage, ...]

    def path(self, stage: str) -> Path | None:
        """Returns the file or folder of `stage`, or None when the ladder lacks it."""
        found = next((s for s in self.stages if s.name == stage), None)
        return self.ir_dir / found.path if found else None

    def has(self, stage: str) -> bool:
        return self.path(stage) is not None

    def files(self, stage: str) -> list[Path]:
        """Returns the stage's files: the file itself, or a folder stage's files by name."""
        path = self.path(stage)
        if path is None:
            return []
        if path.is_dir():  # by the names XLA wrote, compressed or not (userfiles.files_in)
            return userfiles.files_in(path)
        return [path]

    def hlo_files(self, stage: str) -> list[Path]:
        """Returns the stage's HLO module files (eager folders hold one per primitive)."""
        return [p for p in self.files(stage) if _starts_with(p, b"HloModule")]


def _starts_with(path: Path, prefix: bytes) -> bool:
    try:
        return userfiles.read_head(path, len(prefix)) == prefix
    except userfiles.Unreadable:
        return False


def read_index(ir_dir: Path) -> tuple[Stage, ...]:
    """Returns every stage `ir_dir`/index.json names, in order, whether its file exists or not.

    The one reader of the index: read_ladder keeps the stages whose files exist, the report
    shows the missing ones too. Strict: an index that cannot be read, an entry naming a stage
    this module does not define, or a path that leaves the folder (absolute, `..`, a link, so
    a doctored index reads nothing outside) raises SchemaError naming the file and the key;
    a caller that must go on without the ladder catches it.
    """
    index = ir_dir / INDEX
    source = str(index)
    try:
        raw = io.read_json(index)
    except (OSError, ValueError) as e:
        raise SchemaError(source, "", f"not a readable IR index ({e})") from None
    entries = raw.get("stages") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise SchemaError(source, "stages", "not a list of stages")
    base = ir_dir.resolve()
    stages = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or entry.get("stage") not in KINDS:
            raise SchemaError(source, f"stages[{i}].stage", "names no known stage")
        rel = entry.get("path", "")
        if not isinstance(rel, str):
            raise SchemaError(source, f"stages[{i}].path", "not a string")
        target = ir_dir / rel
        if (
            os.path.isabs(rel)
            or ".." in Path(rel).parts
            or userfiles.stored(target).is_symlink()
            or base not in userfiles.stored(target).resolve().parents
        ):
            raise SchemaError(source, f"stages[{i}].path", f"{rel!r} leaves the ladder folder")
        stages.append(Stage(entry["stage"], KINDS[entry["stage"]].order, rel))
    return tuple(sorted(stages, key=lambda s: (s.order, s.name)))


def read_ladder(ir_dir: Path) -> Ladder:
    """Returns the ladder in `ir_dir`: the stages its index names whose files exist.
    Raises SchemaError (a ValueError) naming the file and the key (read_index)."""
    return Ladder(
        ir_dir, tuple(s for s in read_index(ir_dir) if userfiles.stored(ir_dir / s.path).exists())
    )


def has_ladder(ir_dir: Path) -> bool:
    return (ir_dir / INDEX).is_file()
