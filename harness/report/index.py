"""results/index.html (every run, newest first) and a per-run folder index.html."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import io
from harness.report import fmt
from harness.report.doc import Bullets, Heading, Para, Table, to_html


@dataclass(frozen=True)
class RunRow:
    """One run as the results index lists it."""

    href: str
    experiment: str
    run_id: str
    started: str
    device: str
    status: str
    headline: tuple[str, ...]


def run_row(root: Path, run: Path, summary: dict[str, Any], manifest: dict[str, Any]) -> RunRow:
    """Returns the index row of one run: date, device and its headline numbers."""
    variants = summary.get("variants") or {}
    base = variants.get(summary.get("baseline") or "xla") or {}
    bound = (variants.get("matmul_only") or {}).get("step_time_median_s")
    env = manifest.get("environment") or {}
    report = "report.html" if (run / "report.html").exists() else "index.html"
    return RunRow(
        href=f"{run.relative_to(root)}/{report}",
        experiment=str(summary.get("experiment") or run.parent.name),
        run_id=run.name,
        started=str(manifest.get("started") or fmt.text(None)),
        device=f"{fmt.text(env.get('device_kind'))} ({fmt.text(env.get('platform'))})",
        status=str(manifest.get("status") or fmt.text(None)),
        headline=(
            fmt.ms(base.get("step_time_median_s")),
            fmt.ratio(base.get("step_time_median_s"), bound),
            fmt.secs(base.get("first_call_s")),
            str(sum(1 for r in variants.values() if r.get("status") == "ok")) + f"/{len(variants)}",
        ),
    )


def find_runs(root: Path) -> list[Path]:
    """Returns every run folder (with summary.json) under root/<experiment>/, links skipped."""
    return sorted(
        (
            p
            for p in root.glob("*/*")
            if p.is_dir() and not p.is_symlink() and (p / "summary.json").is_file()
        ),
        key=lambda p: p.name,
        reverse=True,
    )


def results_index_html(rows: list[RunRow]) -> str:
    table = Table(
        (
            "run",
            "experiment",
            "started",
            "device",
            "status",
            "baseline step",
            "× matmul_only",
            "first call",
            "variants ok",
        ),
        tuple(
            (f"[{r.run_id}]({r.href})", r.experiment, r.started, r.device, r.status, *r.headline)
            for r in rows
        ),
    )
    return to_html((Heading(1, "Runs"), Para(f"{len(rows)} runs, newest first."), table), "Runs")


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_results_index(root: Path) -> Path:
    """Writes root/index.html listing every run under root; returns its path."""
    rows = [
        run_row(root, r, _read(r / "summary.json"), _read(r / "manifest.json"))
        for r in find_runs(root)
    ]
    return io.write_text(root / "index.html", results_index_html(rows))


def run_index_html(run: Path) -> str:
    """Returns the run folder's index page: report, plots, and each variant's files."""
    blocks: list[Any] = [Heading(1, f"Run folder {run.name}"), Para("[all runs](../../index.html)")]
    top = [
        f"[{p.name}]({p.name})"
        for p in sorted(run.iterdir())
        if p.is_file() and not p.name.startswith(".") and p.name != "index.html"
    ]
    blocks += [Heading(2, "Files"), Bullets(tuple(top))]
    plots = run / "plots"
    if plots.is_dir():
        blocks += [
            Heading(2, "Plots"),
            Bullets(
                tuple(
                    f"[{p.name}](plots/{p.name})"
                    for p in sorted(plots.iterdir())
                    if not p.name.startswith(".")
                )
            ),
        ]
    vdir = run / "variants"
    if vdir.is_dir():
        blocks.append(Heading(2, "Variants"))
        for v in sorted(p for p in vdir.iterdir() if p.is_dir()):
            items = [
                f"[{p.name}](variants/{v.name}/{p.name}{'/' if p.is_dir() else ''})"
                for p in sorted(v.iterdir())
            ]
            ir = v / "ir"
            if ir.is_dir():
                items += [
                    f"[ir/{p.name}](variants/{v.name}/ir/{p.name}{'/' if p.is_dir() else ''})"
                    for p in sorted(ir.iterdir())
                ]
            blocks += [Heading(3, v.name), Bullets(tuple(items))]
    return to_html(tuple(blocks), f"Run {run.name}")


def write_run_index(run: Path) -> Path:
    return io.write_text(run / "index.html", run_index_html(run))
