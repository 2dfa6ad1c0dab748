"""Reading a run folder into its view (harness.saved.run.SavedRun): the one reader of a saved run.

Every file is read through its record (harness.records.summary.load_summary for the summary,
harness.records.run_files for the rest), which migrates an older version and names the file and
the key of anything wrong: a renamed or mistyped key stops the reader in one line rather than
a report printing "–" for it. A per-variant file that is absent leaves its field empty, so a
run captured before a stage existed (or one that failed half-way) still reads.
"""

from __future__ import annotations

from pathlib import Path

from harness.common import userfiles
from harness.frontends import registry
from harness.records import events_file, ladder, run_files
from harness.records.numerics import AccuracyFile, DistancesFile, PassSearch
from harness.records.processes import load as load_processes
from harness.records.run_files import FusionsFile, Manifest, TorchCompileFile
from harness.records.saved_config import SavedConfig
from harness.records.summary import RunSummary, VariantSummary, load_summary
from harness.saved.control_flow import CONTROL_KINDS, ControlFlowFacts, control_flow_facts
from harness.saved.run import MIN_BYTES, MIN_RATIO, ClusterFact, Rung, SavedRun, SavedVariant
from harness.store.runfolder import RunFolder


def cluster_facts(fusions: FusionsFile | None) -> tuple[ClusterFact, ...]:
    """Every cluster of fusions.json's modules, in file order (none without the file)."""
    out = []
    for m in fusions.modules if fusions is not None else ():
        for c in m.clusters:
            ops = sum(
                n for op, n in c.member_opcodes.items() if op not in ("parameter", "constant")
            )
            out.append(
                ClusterFact(
                    name=c.name if c.name is not None else "?",
                    kind=c.kind or "",
                    target=c.target or None,
                    epilogue=c.epilogue or None,
                    ops=ops,
                    backend=c.backend_kind or "",
                    opcodes=tuple(sorted(c.member_opcodes)),
                )
            )
    return tuple(out)


def guard_lines(compiled: TorchCompileFile | None) -> tuple[str, ...]:
    """A Dynamo-compiled variant's TENSOR_MATCH guards from compile.json, as Dynamo printed
    them."""
    guards = compiled.guards if compiled is not None else ()
    return tuple(g.lstrip("| +-") for g in guards if "TENSOR_MATCH" in g)


def _guards(path: Path, compiled: object) -> tuple[str, ...]:
    """A Dynamo frontend's guards: its compile.json as Dynamo's record (read again where its
    traits did not already read it so)."""
    if not isinstance(compiled, TorchCompileFile):
        compiled = run_files.load_if_present(run_files.TORCH_COMPILE, path)
    return guard_lines(compiled)


def thresholds(config: SavedConfig) -> tuple[float, int]:
    """A saved config's `memory.min_ratio` and `memory.min_bytes` (the defaults for a run
    saved before the keys existed, or values of another type)."""
    ratio, size = config.number("memory", "min_ratio"), config.number("memory", "min_bytes")
    return (
        MIN_RATIO if ratio is None else ratio,
        MIN_BYTES if size is None else int(size),
    )


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


def _numerics_files(
    folder: RunFolder, name: str
) -> tuple[AccuracyFile | None, DistancesFile | None, PassSearch | None]:
    """A variant's numerics.json, distances.json and numerics_pass.json (None where absent)."""
    vf = folder.variant(name)
    return (
        run_files.load_if_present(run_files.NUMERICS, vf.numerics),
        run_files.load_if_present(run_files.DISTANCES, vf.distances),
        run_files.load_if_present(run_files.NUMERICS_PASS, vf.numerics_pass),
    )


def read_variant(run: Path, name: str, summary: VariantSummary, notes: list[str]) -> SavedVariant:
    """Returns one variant read back; missing files leave their fields empty, and a file that
    is there but does not match its record raises SchemaError naming the file and the key."""
    folder = RunFolder(run)
    vdir = folder.variant(name)
    traits = registry.traits(summary.identity.framework)
    # compile.json holds the frontend's own phases where its traits say so, else XLA's.
    compiled = run_files.load_if_present(
        run_files.TORCH_COMPILE if traits.compile_phases else run_files.COMPILE, vdir.compiles
    )
    fusions = run_files.load_if_present(run_files.FUSIONS, vdir.fusions)
    clusters = cluster_facts(fusions)
    cost = run_files.load_if_present(run_files.COST, vdir.cost)
    kernels = events_file.read(vdir)
    looping = cost is not None and any(c.loop for m in cost.modules for c in m.clusters)
    kinds = {c.name: c.kind for c in clusters}
    flow = (
        control_flow_facts(
            cost, run_files.load_if_present(run_files.KERNELS, vdir.kernels), kernels, kinds
        )
        if looping or any(k in CONTROL_KINDS for k in kinds.values())
        else ControlFlowFacts()
    )
    accuracy, distances, pass_search = _numerics_files(folder, name)
    return SavedVariant(
        name=name,
        summary=summary,
        clusters=clusters,
        guards=_guards(vdir.compiles, compiled) if traits.dynamo else (),
        accuracy=accuracy,
        distances=distances,
        pass_search=pass_search,
        control_flow=flow,
        stages=read_stages(run, name, notes),
        fusions=fusions,
        kernels=kernels,
        passes=run_files.load_if_present(run_files.PASSES, vdir.passes),
        compile=compiled,
        cost=cost,
        ranking=run_files.load_if_present(run_files.RANKING, vdir.ranking),
        comm=run_files.load_if_present(run_files.COMM, vdir.comm),
        timeline=vdir.timeline.is_file() and not vdir.timeline.is_symlink(),
    )


def load_run(path: Path | str, summary: RunSummary | None = None) -> SavedRun:
    """Returns the run folder at `path` read back, with `summary` for its summary.json where
    given (the analysis passes the one it is about to write).

    Raises FileNotFoundError without summary.json (and no `summary`) and SchemaError (naming
    the file and key) for a file that does not match its record.
    """
    run = Path(path).resolve()
    folder = RunFolder(run)
    if summary is None:
        if not folder.summary.is_file():
            raise FileNotFoundError(f"{run} has no summary.json: not a finished run folder")
        summary = load_summary(folder.summary)
    notes: list[str] = []
    manifest = run_files.load_if_present(run_files.MANIFEST, folder.manifest) or Manifest()
    ratio, size = thresholds(manifest.saved_config)
    variants = tuple(
        read_variant(run, name, entry, notes) for name, entry in summary.variants.items()
    )
    return SavedRun(
        summary=summary,
        variants=variants,
        path=run,
        manifest=manifest,
        ceilings=run_files.load_if_present(run_files.CEILINGS, folder.ceilings),
        notes=tuple(notes),
        min_ratio=ratio,
        min_bytes=size,
        processes=load_processes(run),
    )
