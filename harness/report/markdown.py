"""report.md: one table comparing every variant with the matmul_only lower bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import io


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.3f}"


def _s(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.3f}"


def summary_table(variants: dict[str, dict[str, Any]]) -> list[str]:
    """Returns the markdown rows of the variant table."""
    bound = variants.get("matmul_only", {}).get("step_time_median_s")
    rows = [
        "| variant | status | step median ms (p10–p90) | × matmul_only | first call s | compile s | recompile s | numerics |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in variants.items():
        median = r.get("step_time_median_s")
        ratio = f"{median / bound:.2f}" if median and bound else "–"
        spread = (
            f"{_ms(median)} ({_ms(r.get('step_time_p10_s'))}–{_ms(r.get('step_time_p90_s'))})"
            if median is not None
            else "–"
        )
        numerics = {True: "ok", False: "FAIL", None: "–"}[r.get("numerics_ok")]
        status = r.get("status", "?")
        if status != "ok" and r.get("reason"):
            status += f": {r['reason']}"
        rows.append(
            f"| {name} | {status} | {spread} | {ratio} | {_s(r.get('first_call_s'))} | {_s(r.get('compile_s'))} "
            f"| {_s(r.get('recompile_s'))} | {numerics} |"
        )
    return rows


def write_report(workdir: Path) -> Path:
    """Writes report.md from summary.json and manifest.json; returns its path."""
    summary = io.read_json(workdir / "summary.json")
    manifest = io.read_json(workdir / "manifest.json")
    env = manifest["environment"]
    lines = [
        f"# {summary['experiment']}: run {manifest['run_id']}",
        "",
        f"{env['device_kind']} ({env['platform']}), jax {env['jax']}, jaxlib {env['jaxlib']}, flax {env['flax']}, "
        f"Python {env['python']}.",
        "",
        *summary_table(summary["variants"]),
        "",
    ]
    return io.write_text(workdir / "report.md", "\n".join(lines))
