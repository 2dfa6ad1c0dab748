"""The report's content as document blocks, built from run data by pure functions."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.report import fmt
from harness.report.data import MISSING, RunData, VariantData
from harness.report.doc import Block, Bullets, Code, Heading, Image, Para, Table
from harness.report.observations import Observation
from harness.report.plots import PlotOutcome

SUMMARY_HEADER = (
    "variant", "status", "kernels/step", "transfers/step", "step median (p10–p90)",
    "× matmul_only", "first call", "compile", "recompile", "fusions", "library calls",
    "TFLOP/s", "of peak", "numerics", "first divergence",
)  # fmt: skip

PLOT_CAPTIONS = {
    "launches": "Device kernels and transfers per step, per variant.",
    "step_time": "Median step time with p10–p90 whiskers; the dashed line is matmul_only.",
    "compile_time": "First-call compile time: trace, lower, XLA passes by pipeline, the rest of XLA compile.",
    "roofline": "Arithmetic intensity against achieved FLOP/s under the device's measured ceilings.",
    "timeline": "One step per variant: device events on their streams, coloured by cluster; grey is the median wall step.",
    "fusion_map": "Which pre-optimization ops ended up in which cluster: the baseline and one other variant.",
}


def library_calls(v: VariantData) -> str:
    """Returns 'target + epilogue' for each library call, or MISSING when not analyzed."""
    calls = v.get("library_calls")
    if not isinstance(calls, list):
        return MISSING
    if not calls:
        return "none"
    return "; ".join(
        f"{c.get('target', '?')} + {c.get('epilogue') or 'no epilogue'}"
        for c in calls
        if isinstance(c, dict)
    )


def transfers(v: VariantData) -> str:
    rows = v.get("transfers_per_step")
    if not isinstance(rows, list):
        return MISSING
    if not rows:
        return "0"
    return ", ".join(
        f"{fmt.count(r.get('count', r.get('count_per_step')))} {r.get('direction', '?')}"
        f" ({fmt.si(r.get('bytes', r.get('bytes_per_step')), 'B')})"
        for r in rows
        if isinstance(r, dict)
    )


def fraction_of_peak(v: VariantData, ceilings: dict[str, Any]) -> str:
    """Returns the summary's fraction_of_peak, else achieved FLOP/s over the ceilings' peak."""
    f = fmt.num(v.get("fraction_of_peak"))
    if f is None:
        a, p = fmt.num(v.get("achieved_flops_per_s")), fmt.num(ceilings.get("peak_flops_per_s"))
        f = a / p if a is not None and p else None
    return fmt.pct(f)


def numerics(v: VariantData) -> str:
    ok = v.summary.get("numerics_ok")
    if ok is None:
        return MISSING
    err = v.get("rel_fro_err")
    tail = f" (rel {fmt.sci(err)} vs tol {fmt.sci(v.get('tolerance'))})" if err is not None else ""
    return ("ok" if ok else "FAIL") + tail


def divergence(v: VariantData, baseline: str) -> str:
    if v.name == baseline:
        return "baseline"
    d = v.get("first_divergence")
    if isinstance(d, dict):
        return str(d.get("stage") or MISSING)
    return fmt.text(d)


def same_size(v: VariantData, bound: VariantData | None) -> bool:
    """True when the bound ran the same m, k, n and batch, so a time ratio means something."""
    if bound is None:
        return False
    dims = ("m", "k", "n", "batch")
    a, b = v.get("problem") or {}, bound.get("problem") or {}
    return all(a.get(d) == b.get(d) for d in dims)


def summary_row(
    v: VariantData, bound: VariantData | None, run: RunData, ceilings: dict[str, Any]
) -> tuple[str, ...]:
    """Returns one variant's summary-table cells, each formatted once for both renderings."""
    status = str(v.get("status", "?"))
    if v.get("reason"):
        status += f": {v.get('reason')}"
    med = v.get("step_time_median_s")
    spread = (
        f"{fmt.ms(med)} ({fmt.ms(v.get('step_time_p10_s'))}–{fmt.ms(v.get('step_time_p90_s'))})"
        if med is not None
        else MISSING
    )
    return (
        v.name,
        status,
        fmt.count(v.get("kernels_per_step")),
        transfers(v),
        spread,
        fmt.ratio(med, bound.get("step_time_median_s") if same_size(v, bound) else None),
        fmt.secs(v.get("first_call_s")),
        fmt.secs(v.get("compile_s")),
        fmt.secs(v.get("recompile_s")),
        fmt.count(v.get("fusion_count")),
        library_calls(v),
        fmt.tflops(v.get("achieved_flops_per_s")),
        fraction_of_peak(v, ceilings),
        numerics(v),
        divergence(v, run.baseline),
    )


def summary_table(run: RunData, ceilings: dict[str, Any]) -> Table:
    bound = run.variant("matmul_only")
    return Table(SUMMARY_HEADER, tuple(summary_row(v, bound, run, ceilings) for v in run.variants))


def observation_blocks(obs: Sequence[Observation]) -> list[Block]:
    out: list[Block] = [Heading(2, "Observations", "observations")]
    for i, o in enumerate(obs, 1):
        out.append(Para(f"**{i}. {o.claim}** reproduced: {o.verdict}"))
        out.append(Bullets(o.evidence))
        if o.quote:
            out.append(Code(o.quote))
    return out


def plot_blocks(outcomes: Sequence[PlotOutcome]) -> list[Block]:
    out: list[Block] = [Heading(2, "Plots", "plots")]
    for p in outcomes:
        png = next((f for f in p.files if f.endswith(".png")), None)
        if png:
            svg = next((f for f in p.files if f.endswith(".svg")), "")
            out.append(Image(png, p.name, f"{PLOT_CAPTIONS.get(p.name, p.name)} ([svg]({svg}))"))
        else:
            out.append(Para(f"**{p.name}**: {p.note}"))
    return out


def clusters_table(v: VariantData) -> Table | None:
    """Returns the variant's clusters with their source ops and the kernels matched to them."""
    clusters = v.clusters()
    if not clusters:
        return None
    steps = len({k.get("step") for k in v.kernels if k.get("step") is not None}) or 1
    by_cluster: dict[str, Counter[str]] = {}
    for k in v.kernels:
        if k.get("cluster"):
            by_cluster.setdefault(str(k["cluster"]), Counter())[str(k.get("name"))] += 1
    rows = []
    for c in clusters:
        if not isinstance(c, dict):
            continue
        name = str(c.get("name", "?"))
        kern = by_cluster.get(name, Counter())
        matched = ", ".join(f"{n[:40]} ×{fmt.count(m / steps)}" for n, m in kern.most_common(3))
        target = c.get("target") or ""
        if c.get("epilogue"):
            target += f" + {c['epilogue']}"
        ops = c.get("source_ops") or []
        rows.append(
            (
                name,
                str(c.get("kind", MISSING)),
                target or MISSING,
                ", ".join(str(o) for o in ops[:8])
                + (f" … (+{len(ops) - 8})" if len(ops) > 8 else "")
                or MISSING,
                str(c.get("output_shape", MISSING)),
                matched or (MISSING if not v.kernels else "none"),
            )
        )
    return Table(
        ("cluster", "kind", "target", "source ops", "output", "kernels per step"), tuple(rows)
    )


def variant_blocks(v: VariantData, run: RunData) -> list[Block]:
    """Returns one variant's section: ladder, divergence, clusters, passes, compile passes."""
    out: list[Block] = [Heading(3, f"{v.name}", f"variant-{v.name}")]
    desc = v.get("description", "")
    out.append(
        Para(
            f"{desc} — mode `{v.get('mode', MISSING)}`, status {v.get('status', '?')}"
            + (f": {v.get('reason')}" if v.get("reason") else "")
        )
    )
    if v.get("xla_options"):
        out.append(
            Para(
                "XLA options: "
                + ", ".join(f"`{k}={val}`" for k, val in v.get("xla_options").items())
            )
        )
    if v.stages:
        items = tuple(
            f"{s.order:02d} `{s.stage}`: [{s.path}]({s.path}{'/' if s.is_dir else ''})"
            if s.exists
            else f"{s.order:02d} `{s.stage}`: {s.path} (not kept in this copy of the run)"
            for s in v.stages
        )
        out += [Para("IR ladder:"), Bullets(items)]
    d = v.get("first_divergence")
    if v.name == run.baseline:
        out.append(Para("First divergence: this is the baseline."))
    elif isinstance(d, dict):
        out.append(
            Para(
                f"First divergence from {run.baseline}: at `{d.get('stage', MISSING)}`. {d.get('detail', '')}".strip()
            )
        )
    else:
        out.append(
            Para(f"First divergence from {run.baseline}: {MISSING} (not analyzed in this run).")
        )
    table = clusters_table(v)
    out.append(
        Para(f"Clusters (fusion count {fmt.count(v.get('fusion_count'))}):")
        if table
        else Para(f"Clusters: {MISSING} (no fusions.json).")
    )
    if table:
        out.append(table)
    changing = v.get("fusion_changing_passes")
    if isinstance(changing, list) and changing:
        out.append(Para("Passes that changed the fusion structure:"))
        out.append(
            Table(
                ("#", "pass", "pipeline", "what changed"),
                tuple(
                    (
                        fmt.text(p.get("index")),
                        fmt.text(p.get("pass")),
                        fmt.text(p.get("pipeline")),
                        fmt.text(p.get("sentence")),
                    )
                    for p in changing
                    if isinstance(p, dict)
                ),
            )
        )
    top = v.get("xla_compile_top_passes")
    if isinstance(top, list) and top:
        out.append(Para("Top compile passes:"))
        out.append(
            Table(
                ("pass", "pipeline", "time"),
                tuple(
                    (fmt.text(p.get("name")), fmt.text(p.get("pipeline")), fmt.ms(p.get("seconds")))
                    for p in top[:8]
                    if isinstance(p, dict)
                ),
            )
        )
    extra = []
    if v.get("recompile_s") is not None:
        extra.append(
            f"recompile pause {fmt.secs(v.get('recompile_s'))}"
            + (
                f"; fusion changed on recompile: {fmt.text(v.get('recompile_fusion_changed'))}"
                if v.get("recompile_fusion_changed") is not None
                else ""
            )
        )
    if v.get("flops_disagreement"):
        extra += [f"FLOP count: {d}" for d in v.get("flops_disagreement")]
    if v.get("host_gap_per_step_s") is not None:
        extra.append(
            f"device time per step {fmt.ms(v.get('device_time_per_step_s'))}, host gap {fmt.ms(v.get('host_gap_per_step_s'))}, matched {fmt.pct(v.get('matched_fraction'))} of events"
        )
    if extra:
        out.append(Bullets(tuple(extra)))
    if isinstance(v.get("expected_error"), dict):
        e = v.get("expected_error")
        out.append(Code(f"{e.get('type')}: {e.get('message')}"))
    return out


def environment_blocks(run: RunData) -> list[Block]:
    env = run.environment
    m = run.manifest
    rows = tuple(
        (k, fmt.text(env.get(k)))
        for k in (
            "platform",
            "device_kind",
            "device_count",
            "python",
            "jax",
            "jaxlib",
            "flax",
            "git_commit",
        )
    )
    rows += tuple((k, fmt.text(m.get(k))) for k in ("config_file", "started", "finished", "status"))
    out: list[Block] = [Heading(2, "Environment", "environment"), Table(("what", "value"), rows)]
    overrides = m.get("overrides") or []
    if overrides:
        out.append(
            Table(
                ("override", "value", "previous"),
                tuple(
                    (str(o.get("key")), fmt.text(o.get("value")), fmt.text(o.get("previous")))
                    for o in overrides
                ),
            )
        )
    else:
        out.append(Para("No overrides: the config file as written."))
    cfg = m.get("config") or {}
    shown = {k: cfg[k] for k in ("problem", "measure", "profile", "dump") if k in cfg}
    if shown:
        out.append(Code(json.dumps(shown, indent=1), "json"))
    return out


def headline(run: RunData, ceilings: dict[str, Any]) -> str:
    env = run.environment
    return (
        f"{fmt.text(env.get('device_kind'))} ({run.platform}), jax {fmt.text(env.get('jax'))}, "
        f"jaxlib {fmt.text(env.get('jaxlib'))}, flax {fmt.text(env.get('flax'))}. "
        f"Baseline `{run.baseline}`. Ceilings: {ceilings.get('source', 'none known')}."
    )


def report_blocks(
    run: RunData, obs: Sequence[Observation], plots: Sequence[PlotOutcome], ceilings: dict[str, Any]
) -> tuple[Block, ...]:
    """Returns the whole report: summary, observations, plots, variants, environment, notes."""
    blocks: list[Block] = [
        Heading(1, f"{run.experiment}: run {run.run_id}"),
        Para(headline(run, ceilings)),
        Para(
            "[summary](#summary) · [observations](#observations) · [plots](#plots) · "
            "[variants](#variants) · [environment](#environment) · [run folder](index.html)"
        ),
        Heading(2, "Summary", "summary"),
        summary_table(run, ceilings),
        Para(
            f"Ratios are against `matmul_only`, for variants of the same size; "
            f'"{MISSING}" means the run has no such figure.'
        ),
        *observation_blocks(obs),
        *plot_blocks(plots),
        Heading(2, "Variants", "variants"),
    ]
    for v in run.variants:
        blocks += variant_blocks(v, run)
    blocks += environment_blocks(run)
    notes = [*run.notes]
    if ceilings.get("note"):
        notes.append(str(ceilings["note"]))
    if notes:
        blocks += [Heading(2, "Notes", "notes"), Bullets(tuple(notes))]
    return tuple(blocks)
