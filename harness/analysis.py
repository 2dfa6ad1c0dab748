"""Analyze stage: turns each saved variant folder into summary entries.

Reads only files under the run folder, so it can run again on a saved run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.schema import Experiment

REQUIRED = (
    "status", "reason", "mode",
    "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
    "first_call_s", "compile_s", "recompile_s",
    "flops_analytic", "flops_xla", "bytes_xla",
    "max_abs_err", "numerics_ok",
)  # fmt: skip


def analyze_run(
    workdir: Path, exp: Experiment, records: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Returns the summary entry of every variant, in config order, with every required key."""
    out: dict[str, dict[str, Any]] = {}
    for v in exp.selected_variants:
        if v.name not in records:
            continue
        entry = {key: None for key in REQUIRED}
        entry.update(records[v.name])
        out[v.name] = entry
    return out
