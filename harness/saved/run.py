"""A saved run read back: the typed summary plus what the run folder holds beyond it.

One view for every reader: the rules (harness.findings) read its facts, the report and compare
its files. Its reader is harness.saved.read.load_run; the rules' edge
(harness.findings.facts.read_facts) adds the few facts only the rules read (each cluster's
time, the baseline's fusion log, the emitted code), which need the IR and profile readers the
report never imports. A test builds one by hand, and nothing here opens a file.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.memory import MemoryOptions
from harness.frontends import registry
from harness.frontends.roles import same_size
from harness.records.numerics import AccuracyFile, DistancesFile, PassSearch
from harness.records.processes import ProcessesSummary
from harness.records.run_files import (
    Ceilings,
    ClusterEntry,
    CommFile,
    CompileFile,
    CostFile,
    Environment,
    FusionsFile,
    KernelEvent,
    Manifest,
    PassesFile,
    RankingFile,
    TorchCompileFile,
)
from harness.records.summary import RunSummary, VariantSummary
from harness.saved.control_flow import ControlFlowFacts
from harness.store.runfolder import variant_page

MIN_RATIO = MemoryOptions().min_ratio
MIN_BYTES = MemoryOptions().min_bytes


@dataclass(frozen=True)
class Rung:
    """One rung of a variant's IR ladder: its order, name and path relative to the run folder."""

    order: int
    stage: str
    path: str
    is_dir: bool
    exists: bool = True
    stored: str | None = None  # the file on disk where it is kept compressed: the page links it


@dataclass(frozen=True)
class ClusterFact:
    """One cluster of a variant's optimized program (fusions.json)."""

    name: str
    kind: str = ""  # kLoop, kInput, library, ...
    target: str | None = None  # a library call's entry
    epilogue: str | None = None
    ops: int = 0  # its member ops, parameters and constants not counted
    backend: str = ""  # a fusion's backend kind (`__triton_nested_gemm_fusion`)
    opcodes: tuple[str, ...] = ()  # its member opcodes, sorted


@dataclass(frozen=True)
class ClusterTime:
    """One cluster's device time a step, from ranking.json (a profiled variant's)."""

    name: str
    time_s: float
    launches: float | None = None
    line: str = ""  # its first source line, file:line
    key: str = ""  # what pairs it across variants: its name, a library call's target and line
    lines: tuple[str, ...] = ()  # every source line it holds, file:line (each an equal part)
    work: str = "other"  # its kind of work (harness.hlo.work.KINDS)
    bytes: float | None = None  # bytes it moves a step (our cost model, times its runs)
    flops: float | None = None  # FLOPs a step


@dataclass(frozen=True)
class DecisionStep:
    """One step of priority fusion's decision log (GPU): what it weighed, and why not."""

    kind: str  # `producer_ineligible`, `fusion`, `update_priority`, ...
    producer: str = ""
    consumers: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class IrText:
    """The first characters of one emitted-code file, its path relative to the run folder."""

    path: str
    text: str


@dataclass(frozen=True)
class SavedVariant:
    """One variant: its typed summary, the facts the rules read, and the optional analysis files
    of variants/<name>/ (a file that is absent leaves its field empty)."""

    name: str
    summary: VariantSummary
    clusters: tuple[ClusterFact, ...] = ()  # fusions.json's clusters, as the rules see them
    guards: tuple[str, ...] = ()  # Dynamo's: the first compile's TENSOR_MATCH guards
    # clusters' device time a step (ranking.json): the rules' edge adds it
    times: tuple[ClusterTime, ...] = ()
    accuracy: AccuracyFile | None = None  # numerics.json: each leaf against float64
    distances: DistancesFile | None = None  # distances.json: each leaf against the baseline
    pass_search: PassSearch | None = None  # numerics_pass.json: the pass that moved it
    control_flow: ControlFlowFacts = field(default_factory=ControlFlowFacts)  # loops, syncs
    # a profiled step's first event's start to its last event's end, mean (s): busy + launch
    # gaps; the rules' edge adds it
    span_s: float | None = None
    stages: tuple[Rung, ...] = ()
    fusions: FusionsFile | None = None
    kernels: tuple[KernelEvent, ...] = ()
    passes: PassesFile | None = None
    compile: CompileFile | TorchCompileFile | None = None
    cost: CostFile | None = None
    ranking: RankingFile | None = None  # ranking.json: where the time goes
    comm: CommFile | None = None
    timeline: bool = False  # variants/<name>/timeline.perfetto.json.gz was written

    @property
    def ok(self) -> bool:
        return self.summary.identity.status == "ok"

    @property
    def measured(self) -> bool:
        """True when the variant ran and has a steady time per step."""
        return self.ok and self.summary.timing.step_s is not None

    @property
    def roles(self) -> tuple[str, ...]:
        return self.summary.identity.roles

    @property
    def framework(self) -> str:
        return self.summary.identity.framework

    @property
    def page(self) -> str:
        """The variant's report page, relative to the run folder (its HTML is beside it)."""
        return variant_page(self.name)

    def same_size(self, other: SavedVariant) -> bool:
        """True when both ran the same m, k, n and batch (harness.frontends.roles)."""
        return same_size(self.summary.identity.problem, other.summary.identity.problem)

    def stage(self, name: str) -> Rung | None:
        return next((s for s in self.stages if s.stage == name), None)

    def cluster_entries(self) -> list[ClusterEntry]:
        """Returns every cluster of fusions.json, over all its modules, in file order."""
        modules = self.fusions.modules if self.fusions is not None else ()
        return [c for m in modules for c in m.clusters]

    def reverse_map(self) -> dict[str, list[str]]:
        """Returns pre-optimization op -> clusters holding it, merged over fusions.json's modules.

        With several modules (eager: one per primitive) each op is prefixed by its module.
        """
        modules = self.fusions.modules if self.fusions is not None else ()
        maps = [(m.module, m.reverse_map) for m in modules if m.reverse_map]
        out: dict[str, list[str]] = {}
        for module, m in maps:
            for op, cs in m.items():
                key = f"{module}: {op}" if len(maps) > 1 and module else str(op)
                out[key] = list(cs)
        return out


@dataclass(frozen=True)
class SavedRun:
    """One run folder read back: typed summary, variants in config order, manifest, ceilings,
    and the facts the rules read beyond the summary."""

    summary: RunSummary
    variants: tuple[SavedVariant, ...]
    path: Path = Path()
    manifest: Manifest = field(default_factory=Manifest)
    ceilings: Ceilings | None = None
    notes: tuple[str, ...] = ()  # what could not be read, said on the report
    # "" takes the summary's platform, else its environment's (a test names its own)
    platform: str = ""
    min_ratio: float = MIN_RATIO  # memory.min_ratio
    min_bytes: int = MIN_BYTES  # memory.min_bytes
    decisions: tuple[DecisionStep, ...] = ()  # the baseline's priority-fusion log
    # framework -> emitter stage (triton, llvm, ptx, output_code) -> files, baseline's first
    emitted: Mapping[str, Mapping[str, tuple[IrText, ...]]] = field(default_factory=dict)
    processes: ProcessesSummary | None = None  # processes.json of a study across processes

    def __post_init__(self) -> None:
        # A field, not a property, so a rule's test can name the platform without a manifest.
        if not self.platform:
            found = self.summary.platform or self.environment.platform or "unknown"
            object.__setattr__(self, "platform", str(found))

    @property
    def experiment(self) -> str:
        return self.summary.experiment

    @property
    def baseline(self) -> str:
        return self.summary.baseline

    @property
    def run_id(self) -> str:
        return str(self.manifest.run_id or self.summary.run_id or self.path.name)

    @property
    def environment(self) -> Environment:
        return self.manifest.environment or Environment()

    @functools.cached_property
    def _by_name(self) -> dict[str, SavedVariant]:
        return {v.name: v for v in self.variants}

    def variant(self, name: str | None) -> SavedVariant | None:
        return self._by_name.get(name or "")

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def frameworks(self) -> tuple[str, ...]:
        """The frameworks the study has variants of, JAX first (the registry's order)."""
        have = {v.framework for v in self.variants}
        return tuple(f for f in registry.names() if f in have)

    def by_role(
        self, role: str, framework: str = "jax", like: SavedVariant | None = None
    ) -> SavedVariant | None:
        """The first variant with `role` in `framework` (and of `like`'s size)."""
        return next(
            (v for v in self.with_role(role, framework) if like is None or v.same_size(like)),
            None,
        )

    def with_role(self, role: str, framework: str = "jax") -> list[SavedVariant]:
        """Every variant with `role` in `framework`, in the run's order."""
        return [v for v in self.variants if role in v.roles and v.framework == framework]
