"""The migration of a version-3 summary to version 4 (kept apart from harness.records.summary, which is
over its size limit).

Version 4 added the run's A/A gate (`noise.resolved`, `noise.reasons`, `noise.max_noise`),
the machine's state (`noise.machine`), Holm-adjusted p-values (`p_holm`) and the verdict
`not_resolved`. A version-3 summary's gate is judged here from what it recorded, the A/A
interval and floor against the default timing.max_noise, so an old run whose baseline
disagreed with itself stops ranking findings once read; its verdicts were decided pair by
pair, which the reasons then say. The rest reads as absent.
"""

from __future__ import annotations

from typing import Any

from harness.records.resolution import DEFAULT_MAX_NOISE, aa_reasons


def migrate_v3(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-4 data for a version-3 summary read from `source`."""
    del source
    noise = data.get("noise")
    if not isinstance(noise, dict):
        return {**data, "schema_version": 4}
    ci = noise.get("self_ci95")
    reasons = aa_reasons(
        noise.get("baseline"),
        noise.get("self_ratio"),
        tuple(ci) if isinstance(ci, list) and len(ci) == 2 else None,
        float(noise.get("floor") or 0.0),
        DEFAULT_MAX_NOISE,
    )
    judged = {
        **noise,
        "resolved": not reasons,
        "reasons": list(reasons),
        "max_noise": DEFAULT_MAX_NOISE,
    }
    return {**data, "schema_version": 4, "noise": judged}
