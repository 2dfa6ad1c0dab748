"""A saved run read back into frozen dataclasses: the only place the report touches run files.

Every per-variant file is optional. A file that is absent or unreadable becomes an empty value
and a note, so a run captured before a stage existed (or one that failed half-way) still renders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MISSING = "–"


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
    """What the report needs from variants/<name>/: summary entry plus the optional files."""

    name: str
    summary: dict[str, Any]
    stages: tuple[Stage, ...] = ()
    fusions: dict[str, Any] = field(default_factory=dict)
    kernels: tuple[dict[str, Any], ...] = ()
    passes: dict[str, Any] = field(default_factory=dict)
    compile: dict[str, Any] = field(default_factory=dict)
    step_times_s: tuple[float, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        """Returns the summary value of `key`, or `default` when the key is absent or null."""
        value = self.summary.get(key)
        return default if value is None else value

    @property
    def ok(self) -> bool:
        return self.summary.get("status") == "ok"

    @property
    def measured(self) -> bool:
        """True when the variant ran and has a steady step time."""
        return self.ok and self.summary.get("step_time_median_s") is not None

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
        groups.append(self.fusions.get("clusters"))
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
        maps.append(("", self.fusions.get("reverse_map")))
        maps = [(n, m) for n, m in maps if isinstance(m, dict) and m]
        out: dict[str, list[str]] = {}
        for module, m in maps:
            for op, cs in m.items():
                key = f"{module}: {op}" if len(maps) > 1 and module else str(op)
                out[key] = [str(c) for c in (cs if isinstance(cs, list) else [cs])]
        return out


@dataclass(frozen=True)
class RunData:
    """One run folder read back: manifest, summary, variants in config order, ceilings."""

    path: Path
    manifest: dict[str, Any]
    experiment: str
    baseline: str
    variants: tuple[VariantData, ...]
    ceilings: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def environment(self) -> dict[str, Any]:
        return self.manifest.get("environment") or {}

    @property
    def platform(self) -> str:
        return str(self.environment.get("platform") or "unknown")

    def variant(self, name: str) -> VariantData | None:
        return next((v for v in self.variants if v.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)


def _read_json(path: Path, notes: list[str]) -> Any:
    """Returns the parsed JSON at `path`, or None (with a note) when it is missing or broken."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        notes.append(f"{path.name} in {path.parent.name} could not be read: {e}")
        return None


def read_stages(run: Path, name: str, notes: list[str]) -> tuple[Stage, ...]:
    """Returns the variant's IR ladder from ir/index.json, paths made relative to the run folder."""
    ir = run / "variants" / name / "ir"
    index = _read_json(ir / "index.json", notes) or {}
    out = []
    for s in index.get("stages", []):
        if not isinstance(s, dict) or "path" not in s:
            continue
        target = ir / s["path"]
        out.append(
            Stage(
                order=int(s.get("order", 0)),
                stage=str(s.get("stage", s["path"])),
                path=f"variants/{name}/ir/{s['path']}",
                is_dir=target.is_dir(),
                exists=target.exists(),
            )
        )
    return tuple(sorted(out, key=lambda s: s.order))


def _kernel_rows(data: Any) -> tuple[dict[str, Any], ...]:
    """Returns kernels.json's event rows whether it is a list or {"events": [...]}."""
    if isinstance(data, dict):
        data = data.get("events") or data.get("kernels") or []
    return tuple(r for r in data or [] if isinstance(r, dict))


def read_variant(run: Path, name: str, summary: dict[str, Any], notes: list[str]) -> VariantData:
    """Returns one variant's data; missing files leave their fields empty."""
    vdir = run / "variants" / name
    timings = _read_json(vdir / "timings.json", notes) or {}
    fusions = _read_json(vdir / "fusions.json", notes)
    passes = _read_json(vdir / "passes.json", notes)
    compile_ = _read_json(vdir / "compile.json", notes)
    return VariantData(
        name=name,
        summary=summary if isinstance(summary, dict) else {},
        stages=read_stages(run, name, notes),
        fusions=fusions if isinstance(fusions, dict) else {},
        kernels=_kernel_rows(_read_json(vdir / "kernels.json", notes)),
        passes=passes if isinstance(passes, dict) else {"passes": passes} if passes else {},
        compile=compile_ if isinstance(compile_, dict) else {},
        step_times_s=tuple(
            float(t) for t in timings.get("step_times_s", []) if isinstance(t, int | float)
        ),
    )


def load_run(path: Path | str) -> RunData:
    """Returns the run folder at `path` read back; raises FileNotFoundError without summary.json."""
    run = Path(path).resolve()
    if not (run / "summary.json").is_file():
        raise FileNotFoundError(f"{run} has no summary.json: not a finished run folder")
    notes: list[str] = []
    summary = _read_json(run / "summary.json", notes) or {}
    manifest = _read_json(run / "manifest.json", notes) or {}
    variants = tuple(
        read_variant(run, name, entry, notes)
        for name, entry in (summary.get("variants") or {}).items()
    )
    ceilings = _read_json(run / "ceilings.json", notes) or {}
    return RunData(
        path=run,
        manifest=manifest,
        experiment=str(summary.get("experiment") or manifest.get("experiment") or run.parent.name),
        baseline=str(summary.get("baseline") or ""),
        variants=variants,
        ceilings=ceilings if isinstance(ceilings, dict) else {},
        notes=tuple(notes),
    )
