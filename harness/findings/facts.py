"""What the rules read: the typed summary, and the few facts of the run folder it does not hold.

The rules are pure functions of a `RunFacts`. `read_facts` is their edge: it reads, once, what
a rule needs beyond summary.json (each variant's clusters from fusions.json, the guards
from compile.json of a variant whose frontend's traits say `dynamo`, the baseline's
priority-fusion log and the emitted code from the IR ladder), so a test builds a RunFacts by hand and a rule never opens a file.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.common import userfiles
from harness.config.memory import MemoryOptions
from harness.findings.control_flow_facts import ControlFlowFacts, control_flow_facts
from harness.frontends import registry
from harness.hlo import work
from harness.match import step_events
from harness.records import events_file, ladder, run_files
from harness.records.by_role import all_with_role, first_with_role
from harness.records.numerics import AccuracyFile, DistancesFile, PassSearch
from harness.records.processes import ProcessesSummary
from harness.records.processes import load as load_processes
from harness.records.run_files import Environment, FusionsFile, Manifest, TorchCompileFile
from harness.records.saved_config import SavedConfig
from harness.records.summary import RunSummary, VariantSummary
from harness.store.runfolder import RunFolder

MIN_RATIO = MemoryOptions().min_ratio
MIN_BYTES = MemoryOptions().min_bytes


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
class VariantFacts:
    name: str
    summary: VariantSummary
    clusters: tuple[ClusterFact, ...] = ()
    guards: tuple[str, ...] = ()  # Dynamo's: the first compile's TENSOR_MATCH guards
    times: tuple[ClusterTime, ...] = ()  # clusters' device time a step (ranking.json)
    accuracy: AccuracyFile | None = None  # numerics.json: each leaf against float64
    distances: DistancesFile | None = None  # distances.json: each leaf against the baseline
    pass_search: PassSearch | None = None  # numerics_pass.json: the pass that moved it
    control_flow: ControlFlowFacts = field(default_factory=ControlFlowFacts)  # loops, syncs
    # a profiled step's first event's start to its last event's end, mean (s): busy + launch gaps
    span_s: float | None = None

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


@dataclass(frozen=True)
class RunFacts:
    """A run as the rules see it."""

    summary: RunSummary
    variants: tuple[VariantFacts, ...]
    platform: str = "unknown"
    min_ratio: float = MIN_RATIO  # memory.min_ratio
    min_bytes: int = MIN_BYTES  # memory.min_bytes
    decisions: tuple[DecisionStep, ...] = ()  # the baseline's priority-fusion log
    # framework -> emitter stage (triton, llvm, ptx, output_code) -> files, baseline's first
    emitted: Mapping[str, Mapping[str, tuple[IrText, ...]]] = field(default_factory=dict)
    processes: ProcessesSummary | None = None  # processes.json of a study across processes

    @property
    def baseline(self) -> str:
        return self.summary.baseline

    @functools.cached_property
    def _by_name(self) -> dict[str, VariantFacts]:
        return {v.name: v for v in self.variants}

    def variant(self, name: str | None) -> VariantFacts | None:
        return self._by_name.get(name or "")

    def frameworks(self) -> tuple[str, ...]:
        """The frameworks the study has variants of, JAX first (the registry's order)."""
        have = {v.framework for v in self.variants}
        return tuple(f for f in registry.names() if f in have)

    def by_role(
        self, role: str, framework: str = "jax", like: VariantFacts | None = None
    ) -> VariantFacts | None:
        """The first variant with `role` in `framework` (and of `like`'s size)."""
        return first_with_role(self.variants, role, framework, like)

    def with_role(self, role: str, framework: str = "jax") -> list[VariantFacts]:
        return all_with_role(self.variants, role, framework)


def facts_of(
    summary: RunSummary,
    clusters: Mapping[str, tuple[ClusterFact, ...]] | None = None,
    **run: Any,
) -> RunFacts:
    """A RunFacts from a summary alone (and, optionally, clusters per variant): what a test
    or a caller without a run folder builds."""
    return RunFacts(
        summary=summary,
        variants=tuple(
            VariantFacts(name, s, (clusters or {}).get(name, ()))
            for name, s in summary.variants.items()
        ),
        platform=run.pop("platform", None) or summary.platform or "unknown",
        **run,
    )


# --- the edge: reading the run folder --------------------------------------------------------


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


def _per_step(c: dict[str, Any], key: str) -> float | None:
    """A ranking row's cost a step: one run's cost times its runs a step (None where unknown)."""
    value, runs = c.get(key), c.get("runs")
    if not isinstance(value, int | float) or not isinstance(runs, int | float):
        return None
    return float(value) * float(runs)


def _add(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else x + y


def cluster_times(
    ranking: run_files.RankingFile | None, clusters: tuple[ClusterFact, ...] = ()
) -> tuple[ClusterTime, ...]:
    """Each timed cluster's device time a step, summed over the ranked modules by name (none
    without the file, or where the ranking was by FLOPs: no profile), with its kind of work
    from fusions.json's record of it (`clusters`), else from the ranking row's kind."""
    if ranking is None or ranking.ranked_by != "device time":
        return ()
    facts = {c.name: c for c in clusters}
    found: dict[str, ClusterTime] = {}
    for module in ranking.modules:
        for c in module.get("clusters") or ():
            if not isinstance(c, dict) or not isinstance(c.get("time_s"), int | float):
                continue
            name = str(c.get("name") or "?")
            lines = c.get("lines") or ()
            line = str(lines[0]) if isinstance(lines, list | tuple) and lines else ""
            launches = c.get("launches")
            launches = float(launches) if isinstance(launches, int | float) else None
            # A library call is named by its instruction (`custom-call.1`, `cublas-lt-matmul.1`),
            # which differs between compiles of one GEMM: it pairs by its entry and source line.
            target = c.get("target")
            key = f"{target}@{line}" if c.get("kind") == "library" and target else name
            fact = facts.get(name)
            kind = work.kind_of(
                str(c.get("kind") or (fact.kind if fact else "")),
                str(c.get("target") or (fact.target if fact and fact.target else "")),
                fact.backend if fact else "",
                fact.opcodes if fact else (),
            )
            every = tuple(str(x) for x in lines) if isinstance(lines, list | tuple) else ()
            moved, flops = _per_step(c, "bytes"), _per_step(c, "flops")
            had = found.get(key)
            if had is not None:
                both = None if had.launches is None or launches is None else had.launches + launches
                found[key] = dataclasses.replace(
                    had,
                    time_s=had.time_s + c["time_s"],
                    launches=both,
                    line=had.line or line,
                    lines=tuple(dict.fromkeys((*had.lines, *every))),
                    bytes=_add(had.bytes, moved),
                    flops=_add(had.flops, flops),
                )
            else:
                found[key] = ClusterTime(
                    name, float(c["time_s"]), launches, line, key, every, kind, moved, flops
                )
    return tuple(found.values())


def guard_lines(compiled: TorchCompileFile | None) -> tuple[str, ...]:
    """A Dynamo-compiled variant's TENSOR_MATCH guards from compile.json, as Dynamo printed
    them."""
    guards = compiled.guards if compiled is not None else ()
    return tuple(g.lstrip("| +-") for g in guards if "TENSOR_MATCH" in g)


_STEP = re.compile(r"fusion_steps \{\s*(\w+) \{([^{}]*)\}\s*\}")
_FIELD = re.compile(r'(\w+): "?([^"\n]*)"?')


def decision_steps(text: str) -> tuple[DecisionStep, ...]:
    """Parses priority fusion's decision log (a text proto) into its steps."""
    out = []
    for kind, body in _STEP.findall(text):
        fields: dict[str, list[str]] = {}
        for key, value in _FIELD.findall(body):
            fields.setdefault(key, []).append(value)
        out.append(
            DecisionStep(
                kind=kind,
                producer=(fields.get("producer_name") or [""])[0],
                consumers=tuple(fields.get("consumer_names", []) + fields.get("consumer_name", [])),
                reason=(fields.get("reason") or [""])[0],
            )
        )
    return tuple(out)


def _ladder(workdir: Path, name: str) -> ladder.Ladder | None:
    ir = RunFolder(workdir).variant(name).ir
    if not ladder.has_ladder(ir):
        return None
    try:
        return ladder.read_ladder(ir)
    except ValueError:
        return None


def read_decisions(
    workdir: Path, baseline: str, limit: int = 2_000_000
) -> tuple[DecisionStep, ...]:
    """The baseline's priority-fusion decision log (GPU); none when the ladder lacks it."""
    lad = _ladder(workdir, baseline)
    path = lad.path("fusion_decisions") if lad else None
    if path is None or not userfiles.is_file(path):
        return ()
    return decision_steps(userfiles.read_head(path, limit).decode(errors="replace"))


def read_emitted(
    workdir: Path,
    variants: tuple[VariantFacts, ...],
    framework: str,
    limit: int = 500_000,
    per_stage: int = 200,
) -> dict[str, tuple[IrText, ...]]:
    """The first `limit` characters of up to `per_stage` files per emitter stage of the
    framework's variants (each its traits' `emitter_stages`); the baseline's first, so
    quotes prefer it."""
    stages = registry.traits(framework).emitter_stages
    mine = sorted(
        (v for v in variants if v.framework == framework), key=lambda v: "baseline" not in v.roles
    )
    out: dict[str, list[IrText]] = {s: [] for s in stages}
    for v in mine:
        lad = _ladder(workdir, v.name)
        for stage in (s for s in stages if lad is not None and lad.has(s)):
            for path in lad.files(stage):
                if len(out[stage]) >= per_stage:
                    break
                text = userfiles.read_head(path, limit).decode(errors="replace")
                out[stage].append(IrText(str(path.relative_to(workdir)), text))
    return {s: tuple(files) for s, files in out.items()}


def thresholds(config: SavedConfig) -> tuple[float, int]:
    """A saved config's `memory.min_ratio` and `memory.min_bytes` (the defaults for a run
    saved before the keys existed, or values of another type)."""
    ratio, size = config.number("memory", "min_ratio"), config.number("memory", "min_bytes")
    return (
        MIN_RATIO if ratio is None else ratio,
        MIN_BYTES if size is None else int(size),
    )


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


def _variant_facts(folder: RunFolder, name: str, s: VariantSummary) -> VariantFacts:
    """One variant's facts from its files (each read only where its rules need it)."""
    vdir = folder.variant(name)
    clusters = cluster_facts(run_files.load_if_present(run_files.FUSIONS, vdir.fusions))
    guards = (
        guard_lines(run_files.load_if_present(run_files.TORCH_COMPILE, vdir.compiles))
        if registry.traits(s.identity.framework).dynamo
        else ()
    )
    cost = run_files.load_if_present(run_files.COST, vdir.cost)
    looping = cost is not None and any(c.loop for m in cost.modules for c in m.clusters)
    kinds = {c.name: c.kind for c in clusters}
    has_control = looping or any(k in ("conditional", "while") for k in kinds.values())
    flow = (
        control_flow_facts(
            cost,
            run_files.load_if_present(run_files.KERNELS, vdir.kernels),
            events_file.read(vdir),
            kinds,
        )
        if has_control
        else ControlFlowFacts()
    )
    times = cluster_times(run_files.load_if_present(run_files.RANKING, vdir.ranking), clusters)
    accuracy, distances, pass_search = _numerics_files(folder, name)
    span = step_events.mean_span_s(step_events.step_events(vdir)) if times else None
    return VariantFacts(
        name,
        s,
        clusters,
        guards,
        times=times,
        accuracy=accuracy,
        distances=distances,
        pass_search=pass_search,
        control_flow=flow,
        span_s=span,
    )


def read_facts(
    workdir: Path,
    summary: RunSummary,
    min_ratio: float | None = None,
    min_bytes: int | None = None,
) -> RunFacts:
    """Returns the facts of the run folder `workdir` whose summary is `summary`: the memory
    thresholds from its manifest's config unless given (an analysis passes the config's)."""
    workdir = Path(workdir)
    folder = RunFolder(workdir)
    manifest = run_files.load_if_present(run_files.MANIFEST, folder.manifest) or Manifest()
    ratio, size = thresholds(manifest.saved_config)
    env = manifest.environment or Environment()
    variants = tuple(_variant_facts(folder, name, s) for name, s in summary.variants.items())
    # The baseline of the framework the others are timed against (JAX's).
    base = next(
        (
            v
            for v in variants
            if "baseline" in v.roles and registry.traits(v.framework).timed_against is None
        ),
        None,
    )
    return RunFacts(
        summary=summary,
        variants=variants,
        platform=str(summary.platform or env.platform or "unknown"),
        min_ratio=ratio if min_ratio is None else min_ratio,
        min_bytes=size if min_bytes is None else min_bytes,
        decisions=read_decisions(workdir, base.name) if base is not None else (),
        emitted={f: read_emitted(workdir, variants, f) for f in registry.names()},
        processes=load_processes(workdir),
    )
