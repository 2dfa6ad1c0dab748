"""A saved run read back for the report: the typed summary plus the per-variant analysis files.

Every file is read through its record (harness.records.summary.load_summary for the summary,
harness.records.run_files for the rest), which migrates an older version and names the file and
the key of anything wrong: a renamed or mistyped key stops the report in one line rather
than printing "–" for it. A per-variant file that is absent leaves its field empty, so a run
captured before a stage existed (or one that failed half-way) still renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.analyze.program import ModuleAnalysis
from harness.common import userfiles
from harness.common.fmt import (
    MISSING as MISSING,  # the report's "no such figure", shared with harness.common.fmt
)
from harness.frontends import registry
from harness.records import events_file, ladder, run_files
from harness.records.by_role import all_with_role, first_with_role
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
from harness.records.summary import RunSummary, VariantSummary, load_summary
from harness.store.records import from_json
from harness.store.runfolder import REPORT_FILE, RunFolder, variant_page

PAGE = REPORT_FILE  # a report page's name: the run's, and each variant's in variants/<name>/


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
class VariantData:
    """One variant: its typed summary plus the optional analysis files of variants/<name>/."""

    name: str
    summary: VariantSummary
    stages: tuple[Rung, ...] = ()
    fusions: FusionsFile | None = None
    kernels: tuple[KernelEvent, ...] = ()
    passes: PassesFile | None = None
    compile: CompileFile | TorchCompileFile | None = None
    cost: CostFile | None = None
    ranking: RankingFile | None = None  # ranking.json: where the time goes
    ranked_modules: tuple[ModuleAnalysis, ...] = ()  # its modules, typed
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

    def stage(self, name: str) -> Rung | None:
        return next((s for s in self.stages if s.stage == name), None)

    def clusters(self) -> list[ClusterEntry]:
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
class RunData:
    """One run folder read back: manifest, typed summary, variants in config order, ceilings."""

    path: Path
    summary: RunSummary
    variants: tuple[VariantData, ...]
    manifest: Manifest = field(default_factory=Manifest)
    ceilings: Ceilings | None = None
    notes: tuple[str, ...] = ()

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

    @property
    def platform(self) -> str:
        return str(self.summary.platform or self.environment.platform or "unknown")

    def variant(self, name: str) -> VariantData | None:
        return next((v for v in self.variants if v.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def by_role(
        self, role: str, framework: str = "jax", like: VariantData | None = None
    ) -> VariantData | None:
        """The first variant with `role` in `framework` (and of `like`'s size)."""
        return first_with_role(self.variants, role, framework, like)

    def with_role(self, role: str, framework: str = "jax") -> list[VariantData]:
        return all_with_role(self.variants, role, framework)


def read_stages(run: Path, name: str, notes: list[str]) -> tuple[Rung, ...]:
    """Returns the variant's IR ladder, paths made relative to the run folder."""
    folder = RunFolder(run)
    ir = folder.variant(name).ir
    if not ladder.has_ladder(ir):
        return ()
    try:
        stages = ladder.read_index(ir)
    except ValueError as e:  # SchemaError: the report goes on without this ladder
        notes.append(f"{name}: ir/index.json could not be read: {e}")
        return ()
    out = []
    for s in stages:
        target = ir / s.path
        found = userfiles.stored(target)  # `<path>.gz` once the capture compressed it
        out.append(
            Rung(
                order=s.order,
                stage=s.name,
                path=folder.relative(target),
                is_dir=target.is_dir(),
                exists=found.exists(),
                stored=folder.relative(found) if found != target else None,
            )
        )
    return tuple(sorted(out, key=lambda s: s.order))


def read_variant(run: Path, name: str, summary: VariantSummary, notes: list[str]) -> VariantData:
    """Returns one variant's data; missing files leave their fields empty, and a file that is
    there but does not match its record raises SchemaError naming the file and the key."""
    vdir = RunFolder(run).variant(name)
    # compile.json holds the frontend's own phases where its traits say so, else XLA's.
    phased = registry.traits(summary.identity.framework).compile_phases
    ranking = run_files.load_if_present(run_files.RANKING, vdir.ranking)
    # The ranking's modules are harness.analyze.program's records, which the library layer
    # of run_records cannot import: typed here, at the edge, with the file and key named.
    ranked = tuple(
        from_json(ModuleAnalysis, m, str(vdir.ranking), f"modules[{i}]")
        for i, m in enumerate(ranking.modules if ranking is not None else ())
    )
    return VariantData(
        name=name,
        summary=summary,
        stages=read_stages(run, name, notes),
        fusions=run_files.load_if_present(run_files.FUSIONS, vdir.fusions),
        kernels=events_file.read(vdir),
        passes=run_files.load_if_present(run_files.PASSES, vdir.passes),
        compile=run_files.load_if_present(
            run_files.TORCH_COMPILE if phased else run_files.COMPILE, vdir.compiles
        ),
        cost=run_files.load_if_present(run_files.COST, vdir.cost),
        ranking=ranking,
        ranked_modules=ranked,
        comm=run_files.load_if_present(run_files.COMM, vdir.comm),
        timeline=vdir.timeline.is_file() and not vdir.timeline.is_symlink(),
    )


def load_run(path: Path | str) -> RunData:
    """Returns the run folder at `path` read back.

    Raises FileNotFoundError without summary.json and SchemaError (naming the file and key)
    for a file that does not match its record.
    """
    run = Path(path).resolve()
    folder = RunFolder(run)
    if not folder.summary.is_file():
        raise FileNotFoundError(f"{run} has no summary.json: not a finished run folder")
    notes: list[str] = []
    summary = load_summary(folder.summary)
    manifest = run_files.load_if_present(run_files.MANIFEST, folder.manifest)
    variants = tuple(
        read_variant(run, name, entry, notes) for name, entry in summary.variants.items()
    )
    return RunData(
        path=run,
        manifest=manifest if manifest is not None else Manifest(),
        summary=summary,
        variants=variants,
        ceilings=run_files.load_if_present(run_files.CEILINGS, folder.ceilings),
        notes=tuple(notes),
    )
