"""The migrations of summary.json's first two versions: version 1 wrote every variant as one
flat dict; version 2 had sections but not yet `comm`, `dynamo` or `comparison.vs_framework`.
Kept apart from harness.records.summary, which would be over its size limit with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.frontends.roles import roles_of
from harness.store.records import SchemaError

# Version 1 wrote every variant as one flat dict merged from six producers. Each flat key
# maps to its section here; keys that no section keeps are listed in V1_DROPPED with why.
V1_KEYS: dict[str, tuple[str, str]] = {
    "status": ("identity", "status"),
    "reason": ("identity", "reason"),
    "mode": ("identity", "mode"),
    "description": ("identity", "description"),
    "problem": ("identity", "problem"),
    "xla_options": ("identity", "xla_options"),
    "module": ("identity", "module"),
    "wall_s": ("identity", "wall_s"),
    "expected_error": ("identity", "expected_error"),
    "callback_lines": ("identity", "callback_lines"),
    "eager_modules": ("identity", "eager_modules"),
    "step_time_pipelined_s": ("timing", "step_s"),
    "step_time_median_s": ("timing", "latency_blocked_median_s"),
    "step_time_p10_s": ("timing", "latency_blocked_p10_s"),
    "step_time_p90_s": ("timing", "latency_blocked_p90_s"),
    "first_call_s": ("compile", "first_call_s"),
    "compile_s": ("compile", "compile_s"),
    "trace_s": ("compile", "trace_s"),
    "lower_s": ("compile", "lower_s"),
    "xla_compile_s": ("compile", "xla_compile_s"),
    "first_execute_s": ("compile", "first_execute_s"),
    "backend_compiles": ("compile", "backend_compiles"),
    "recompile_s": ("compile", "recompile_s"),
    "recompile_explanation": ("compile", "recompile_explanation"),
    "recompile_backend_compiles": ("compile", "recompile_backend_compiles"),
    "recompile_xla_compile_s": ("compile", "recompile_xla_compile_s"),
    "recompile_fusion_changed": ("compile", "recompile_fusion_changed"),
    "compile_by_pipeline": ("compile", "by_pipeline"),
    "autotuning_s": ("compile", "autotuning_s"),
    "fusion_count": ("hlo", "fusion_count"),
    "cluster_count": ("hlo", "cluster_count"),
    "flops_analytic": ("cost", "flops_analytic"),
    "flops": ("cost", "flops"),
    "bytes": ("cost", "bytes"),
    "transcendentals": ("cost", "transcendentals"),
    "arithmetic_intensity": ("cost", "arithmetic_intensity"),
    "flops_xla": ("cost", "flops_xla"),
    "bytes_xla": ("cost", "bytes_xla"),
    "transcendentals_xla": ("cost", "transcendentals_xla"),
    "flops_disagreement": ("cost", "disagreements"),
    "achieved_flops_per_s": ("cost", "achieved_flops_per_s"),
    "achieved_bytes_per_s": ("cost", "achieved_bytes_per_s"),
    "peak_flops_per_s": ("cost", "peak_flops_per_s"),
    "peak_dtype": ("cost", "peak_precision"),
    "peak_source": ("cost", "peak_source"),
    "fraction_of_peak": ("cost", "fraction_of_peak"),
    "kernels_per_step": ("profile", "kernels_per_step"),
    "device_ops_per_step": ("profile", "device_ops_per_step"),
    "device_time_per_step_s": ("profile", "device_time_per_step_s"),
    "profiled_step_time_s": ("profile", "profiled_step_time_s"),
    "host_gap_per_step_s": ("profile", "host_gap_per_step_s"),
    "matched_fraction": ("profile", "matched_fraction"),
    "unmatched_events": ("profile", "unmatched_events"),
    "launches_per_cluster": ("profile", "launches_per_cluster"),
    "step_sequence": ("profile", "step_sequence"),
    "unlaunched_clusters": ("profile", "unlaunched_clusters"),
    "max_abs_err": ("numerics", "max_abs_err"),
    "max_rel_err": ("numerics", "max_rel_err"),
    "rel_fro_err": ("numerics", "rel_fro_err"),
    "tolerance": ("numerics", "tolerance"),
    "numerics_ok": ("numerics", "ok"),
}
V1_DROPPED = {
    # Per-pass rows had no pipeline; the migration keeps them with pipeline null (below).
    "xla_compile_top_passes": "moved to compile.top_passes, each pass with its pipeline",
    "library_calls": "moved to hlo.library_calls, each call with its cluster",
    "fusion_changing_passes": "moved to hlo.fusion_changing_passes (`pass` renamed `name`)",
    "transfers_per_step": "moved to profile.transfers_per_step",
    "first_divergence": "moved to comparison.first_divergence, with the variant compared with",
    "analysis_errors": "kept at the variant's top level",
}


# The sections a version-2 variant has, in the order version 2 wrote them.
V2_SECTIONS = ("identity", "timing", "compile", "hlo", "cost", "profile", "numerics", "comparison")
# Version 1 named the peak's precision by its dtype; version 2 by its short name.
V2_PRECISION = {"bfloat16": "bf16", "float32": "f32"}


def migrate_v1(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-2 data for a version-1 summary (flat variants) read from `source`."""
    baseline = str(data.get("baseline") or "")
    variants_in = data.get("variants")
    if not isinstance(variants_in, dict):
        raise SchemaError(source, "variants", "expected an object of variants")
    out: dict[str, Any] = {}
    for name, flat in variants_in.items():
        if not isinstance(flat, dict):
            raise SchemaError(source, f"variants.{name}", "expected an object")
        out[name] = _v2_variant(name, flat, baseline, source)
    return {
        "schema_version": 2,
        "experiment": data.get("experiment") or "",
        "run_id": data.get("run_id") or Path(source).parent.name,
        "platform": data.get("platform"),
        "baseline": baseline,
        "variants": out,
    }


def _v2_variant(name: str, flat: dict[str, Any], baseline: str, source: str) -> dict[str, Any]:
    """Returns the sectioned version-2 variant of one flat version-1 variant."""
    v = _v2_sections(name, flat, source)
    _complete_identity(v["identity"], name, baseline)
    if v["timing"].get("step_s") is not None:
        v["timing"]["rounds"] = 1
        v["timing"]["interleaved"] = False
    precision = v["cost"].get("peak_precision")
    if isinstance(precision, str) and precision in V2_PRECISION:
        v["cost"]["peak_precision"] = V2_PRECISION[precision]
    v["compile"]["top_passes"] = _top_passes(flat)
    if v["compile"]["top_passes"]:
        v["compile"]["notes"] = [
            "pass pipelines unknown: this run was saved before pipelines were recorded per "
            "pass, and its compile profile is not kept"
        ]
    v["hlo"]["library_calls"] = [
        {"target": c.get("target"), "epilogue": c.get("epilogue") or None, "cluster": None}
        for c in _object_rows(flat, "library_calls")
    ]
    v["hlo"]["fusion_changing_passes"] = [
        {
            "index": p.get("index"),
            "pipeline": p.get("pipeline"),
            "name": p.get("pass"),
            "sentence": p.get("sentence"),
        }
        for p in _object_rows(flat, "fusion_changing_passes")
    ]
    v["profile"]["transfers_per_step"] = [
        {"direction": t.get("direction"), "count": t.get("count"), "bytes": t.get("bytes")}
        for t in _object_rows(flat, "transfers_per_step")
    ]
    d = flat.get("first_divergence")
    if isinstance(d, dict):
        v["comparison"]["first_divergence"] = {"against": baseline, **d}
    return {**v, "analysis_errors": flat.get("analysis_errors") or []}


def _v2_sections(name: str, flat: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Returns the version-2 sections that V1_KEYS moves a flat variant's keys to; a key
    neither moved nor dropped is an error, not silently lost."""
    v: dict[str, dict[str, Any]] = {s: {} for s in V2_SECTIONS}
    for key, value in flat.items():
        if key in V1_KEYS:
            section, field = V1_KEYS[key]
            v[section][field] = value
        elif key not in V1_DROPPED:
            raise SchemaError(source, f"variants.{name}.{key}", "unknown version-1 key")
    return v


def _complete_identity(ident: dict[str, Any], name: str, baseline: str) -> None:
    """Fills in the identity keys version 1 could leave out, and the roles it never wrote
    (version 1 knew only JAX variants)."""
    ident.setdefault("status", "failed")
    ident.setdefault("mode", "jit")
    ident["framework"] = "jax"
    ident.setdefault("problem", {})
    ident.setdefault("xla_options", {})
    ident["roles"] = list(
        roles_of(name, ident["mode"], ident["xla_options"], baseline, explicit=())
    )


def _object_rows(flat: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Returns the objects of a flat variant's list `key` (absent is empty; a row that is
    not an object is skipped, as version 1's readers skipped it)."""
    return [row for row in flat.get(key) or [] if isinstance(row, dict)]


def _top_passes(flat: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns compile.top_passes of a flat variant: version 1 kept no pass's pipeline."""
    return [
        {
            "name": p.get("name"),
            "pipeline": None,
            "count": p.get("count", 1),
            "total_s": p.get("total_s", 0.0),
            "self_s": p.get("self_s", 0.0),
        }
        for p in _object_rows(flat, "xla_compile_top_passes")
    ]


def migrate_v2(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-3 data for a version-2 summary: version 3 only added keys (the `comm`
    section of sharded variants, the PyTorch row's `dynamo` section and
    `comparison.vs_framework`), which read as absent."""
    del source
    return {**data, "schema_version": 3}
