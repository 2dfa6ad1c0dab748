"""A saved run read back for the report: the typed summary plus the per-variant analysis files.

The summary is read only through harness.summary.load_summary, which validates it and names
the file and key of anything wrong. Every per-variant file is optional: a file that is absent
or unreadable becomes an empty value and a note, so a run captured before a stage existed (or
one that failed half-way) still renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import io, ladder
from harness.config.roles import same_size as same_problem_size
from harness.fmt import MISSING as MISSING  # the report's "no such figure", shared with harness.fmt
from harness.summary import SUMMARY_FILE, RunSummary, VariantSummary, load_summary

PAGE = "report.md"  # a report page's name: the run's, and each variant's in variants/<name>/


@dataclass(frozen=True)
class Stage:
    """One rung of a variant's IR ladder: its order, name and path relative to the run folder."""

    order: int
    stage: str
    path: str
    is_dir: bool
    exists: bool = True


@dataclass(frozen=True)
class VariantData:
    """One variant: its typed summary plus the optional analysis files of variants/<name>/."""

    name: str
    summary: VariantSummary
    stages: tuple[Stage, ...] = ()
    fusions: dict[str, Any] = field(default_factory=dict)
    kernels: tuple[dict[str, Any], ...] = ()
    passes: dict[str, Any] = field(default_factory=dict)
    compile: dict[str, Any] = field(default_factory=dict)
    ranking: dict[str, Any] = field(default_factory=dict)  # ranking.json: where the time goes

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
        return f"variants/{self.name}/{PAGE}"

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.stage == name), None)

    def clusters(self) -> list[dict[str, Any]]:
        """Returns every cluster of fusions.json, over all its modules, in file order."""
        mods = self.fusions.get("modules")
        groups = (
            [m.get("clusters") for m in mods if isinstance(m, dict)]
            if isinstance(mods, list)
            else []
        )
        return [c for g in groups if isinstance(g, list) for c in g if isinstance(c, dict)]

    def reverse_map(self) -> dict[str, list[str]]:
        """Returns pre-optimization op -> clusters holding it, merged over fusions.json's modules.

        With several modules (eager: one per primitive) each op is prefixed by its module.
        """
        mods = self.fusions.get("modules")
        maps = [
            (str(m.get("module", "")), m.get("reverse_map"))
            for m in (mods if isinstance(mods, list) else [])
            if isinstance(m, dict)
        ]
        maps = [(n, m) for n, m in maps if isinstance(m, dict) and m]
        out: dict[str, list[str]] = {}
        for module, m in maps:
            for op, cs in m.items():
                key = f"{module}: {op}" if len(maps) > 1 and module else str(op)
                out[key] = [str(c) for c in (cs if isinstance(cs, list) else [cs])]
        return out


@dataclass(frozen=True)
class RunData:
    """One run folder read back: manifest, typed summary, variants in config order, ceilings."""

    path: Path
    manifest: dict[str, Any]
    summary: RunSummary
    variants: tuple[VariantData, ...]
    ceilings: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def experiment(self) -> str:
        return self.summary.experiment

    @property
    def baseline(self) -> str:
        return self.summary.baseline

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.summary.run_id or self.path.name)

    @property
    def environment(self) -> dict[str, Any]:
        env = self.manifest.get("environment")
        return env if isinstance(env, dict) else {}

    @property
    def platform(self) -> str:
        return str(self.summary.platform or self.environment.get("platform") or "unknown")

    def variant(self, name: str) -> VariantData | None:
        return next((v for v in self.variants if v.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def by_role(
        self, role: str, framework: str = "jax", like: VariantData | None = None
    ) -> VariantData | None:
        """Returns the first variant with `role` in `framework` (and of `like`'s size)."""
        for v in self.variants:
            if (
                role in v.roles
                and v.framework == framework
                and (like is None or same_size(v, like))
            ):
                return v
        return None

    def with_role(self, role: str, framework: str = "jax") -> list[VariantData]:
        return [v for v in self.variants if role in v.roles and v.framework == framework]


def same_size(a: VariantData, b: VariantData) -> bool:
    """True when two variants ran the same m, k, n and batch (harness.config.roles)."""
    return same_problem_size(a.summary.identity.problem, b.summary.identity.problem)


def _read_json(path: Path, notes: list[str]) -> Any:
    """Returns the parsed JSON at `path`, or None (with a note) when it is missing or broken."""
    if not path.is_file():
        return None
    try:
        return io.read_json(path)
    except (OSError, ValueError) as e:  # SchemaError too: too deep, NaN, a huge number
        notes.append(f"{path.name} in {path.parent.name} could not be read: {e}")
        return None


def read_stages(run: Path, name: str, notes: list[str]) -> tuple[Stage, ...]:
    """Returns the variant's IR ladder, paths made relative to the run folder."""
    ir = run / "variants" / name / "ir"
    if not ladder.has_ladder(ir):
        return ()
    try:
        raw = io.read_json(ir / ladder.INDEX).get("stages", [])
    except (OSError, ValueError, AttributeError) as e:
        notes.append(f"{name}: ir/index.json could not be read: {e}")
        return ()
    out = []
    for s in raw if isinstance(raw, list) else []:
        if not isinstance(s, dict) or s.get("stage") not in ladder.KINDS:
            continue
        rel = str(s.get("path", ""))
        if rel.startswith("/") or ".." in Path(rel).parts:
            notes.append(
                f"{name}: ir/index.json names a path outside the ladder ({rel!r}); left out"
            )
            continue
        target = ir / rel
        out.append(
            Stage(
                order=ladder.KINDS[s["stage"]].order,
                stage=str(s["stage"]),
                path=f"variants/{name}/ir/{rel}",
                is_dir=target.is_dir() and not target.is_symlink(),
                exists=target.exists() and not target.is_symlink(),
            )
        )
    return tuple(sorted(out, key=lambda s: s.order))


def _kernel_rows(data: Any) -> tuple[dict[str, Any], ...]:
    rows = data.get("events") if isinstance(data, dict) else None
    return tuple(r for r in rows or [] if isinstance(r, dict))


def read_variant(run: Path, name: str, summary: VariantSummary, notes: list[str]) -> VariantData:
    """Returns one variant's data; missing files leave their fields empty."""
    vdir = run / "variants" / name
    fusions = _read_json(vdir / "fusions.json", notes)
    passes = _read_json(vdir / "passes.json", notes)
    compile_ = _read_json(vdir / "compile.json", notes)
    ranking = _read_json(vdir / "ranking.json", notes)
    return VariantData(
        name=name,
        summary=summary,
        stages=read_stages(run, name, notes),
        fusions=fusions if isinstance(fusions, dict) else {},
        kernels=_kernel_rows(_read_json(vdir / "kernels.json", notes)),
        passes=passes if isinstance(passes, dict) else {},
        compile=compile_ if isinstance(compile_, dict) else {},
        ranking=ranking if isinstance(ranking, dict) else {},
    )


def load_run(path: Path | str) -> RunData:
    """Returns the run folder at `path` read back.

    Raises FileNotFoundError without summary.json and SchemaError (naming the file and key)
    for a summary that does not match the schema.
    """
    run = Path(path).resolve()
    if not (run / SUMMARY_FILE).is_file():
        raise FileNotFoundError(f"{run} has no summary.json: not a finished run folder")
    notes: list[str] = []
    summary = load_summary(run / SUMMARY_FILE)
    manifest = _read_json(run / "manifest.json", notes)
    ceilings = _read_json(run / "ceilings.json", notes)
    timing = _read_json(run / "timing.json", notes)
    variants = tuple(
        read_variant(run, name, entry, notes) for name, entry in summary.variants.items()
    )
    return RunData(
        path=run,
        manifest=manifest if isinstance(manifest, dict) else {},
        summary=summary,
        variants=variants,
        ceilings=ceilings if isinstance(ceilings, dict) else {},
        timing=timing if isinstance(timing, dict) else {},
        notes=tuple(notes),
    )
