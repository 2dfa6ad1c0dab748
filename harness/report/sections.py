"""The report's content as document blocks, built from run data by pure functions."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.report import findings as why
from harness.report import fmt, ranking, resolution
from harness.report import memory as memory_report
from harness.report.conclusion import retimable, retime_command
from harness.report.data import MISSING, RunData, VariantData
from harness.report.doc import Block, Bullets, Code, Heading, Image, Para, Table
from harness.report.gaps import gap_blocks
from harness.report.observations import FRAMEWORKS, Observation, ObservationRow
from harness.report.plots import PlotOutcome
from harness.report.processes import processes_blocks
from harness.report.sharded import sharded_blocks
from harness.summary import Noise

SUMMARY_HEADER = (
    "variant", "status", "kernels/step", "transfers/step", "step (95% CI)",
    "vs lower bound", "vs baseline", "first call", "recompile", "fusions", "library calls",
    "TFLOP/s", "of peak", "peak memory", "numerics", "first divergence",
)  # fmt: skip

PLOT_CAPTIONS = {
    "launches": "Device kernels and transfers per step, per variant.",
    "step_time": "Time per step from the interleaved timing rounds, with 95% intervals; the dashed "
    "line is the lower bound. Bars are coloured by their verdict against the baseline; grey means "
    "no difference the run can resolve.",
    "compile_time": "First-call compile time: trace, lower, XLA passes by pipeline, the rest of XLA compile.",
    "roofline": "Arithmetic intensity against achieved FLOP/s under the device's measured ceilings.",
    "timeline": "One step per variant: device events on their streams, coloured by cluster.",
    "fusion_map": "Which pre-optimization ops ended up in which cluster: the baseline and one other variant.",
    "memory": "Bytes live over the schedule (XLA's live ranges): the baseline and the variant whose peak differs most; each peak is marked.",
}


def library_calls(v: VariantData) -> str:
    """Returns 'target + epilogue' for each library call, or MISSING when not analyzed."""
    h = v.summary.hlo
    if h.fusion_count is None:
        return MISSING
    if not h.library_calls:
        return "none"
    return "; ".join(f"{c.target} + {c.epilogue or 'no epilogue'}" for c in h.library_calls)


def transfers(v: VariantData) -> str:
    p = v.summary.profile
    if p.kernels_per_step is None:
        return MISSING
    if not p.transfers_per_step:
        return "0"
    return ", ".join(
        f"{fmt.count(t.count)} {t.direction} ({fmt.si(t.bytes, 'B')})" for t in p.transfers_per_step
    )


def fraction_of_peak(v: VariantData) -> str:
    c = v.summary.cost
    if c.fraction_of_peak is not None:
        return f"{fmt.pct(c.fraction_of_peak)} of {c.peak_precision}"
    if c.fraction_withheld:
        return "withheld"
    return MISSING


def numerics(v: VariantData) -> str:
    n = v.summary.numerics
    if n.ok is None:
        return MISSING
    tail = (
        f" (rel {fmt.sci(n.rel_fro_err)} vs tol {fmt.sci(n.tolerance)})"
        if n.rel_fro_err is not None
        else ""
    )
    return ("ok" if n.ok else "FAIL") + tail


def divergence(v: VariantData) -> str:
    if "baseline" in v.roles:
        return "baseline"
    d = v.summary.comparison.first_divergence
    return d.stage if d else MISSING


def status(v: VariantData) -> str:
    i = v.summary.identity
    return i.status + (f": {i.reason}" if i.reason else "")


def summary_row(v: VariantData) -> tuple[str, ...]:
    """Returns one variant's summary-table cells, each formatted once for both renderings."""
    s = v.summary
    return (
        v.name,
        status(v),
        fmt.count(s.profile.kernels_per_step),
        transfers(v),
        fmt.step(s.timing.step_s, s.timing.step_ci95_s),
        fmt.verdict(s.comparison.vs_lower_bound),
        fmt.verdict(s.comparison.vs_baseline),
        fmt.secs(s.compile.first_call_s),
        fmt.secs(s.compile.recompile_s),
        fmt.count(s.hlo.fusion_count),
        library_calls(v),
        fmt.tflops(s.cost.achieved_flops_per_s),
        fraction_of_peak(v),
        memory_report.peak_cell(s),
        numerics(v),
        divergence(v),
    )


def summary_table(run: RunData) -> Table:
    return Table(SUMMARY_HEADER, tuple(summary_row(v) for v in run.variants))


def noise_blocks(run: RunData) -> list[Block]:
    """Returns what the run can resolve: the baseline against itself, and the device clocks."""
    n = run.summary.noise
    if n is None:
        return [
            Para(
                "Noise: this run has no timing rounds, so no difference between variants is resolved."
            )
        ]
    parts = []
    if n.self_ratio is not None and n.self_ci95:
        parts.append(
            f"`{n.baseline}` against itself over {n.rounds} rounds: {n.self_ratio:.4f}× "
            f"(95% CI {n.self_ci95[0]:.4f}–{n.self_ci95[1]:.4f}), so differences under "
            f"{n.floor * 100:.1f}% are noise"
        )
    if n.sm_clock_spread is not None:
        parts.append(
            f"SM clock spread {fmt.pct(n.sm_clock_spread)} over the rounds ({n.context_source})"
        )
    elif n.context_source:
        parts.append(f"device clocks: {n.context_source}")
    if n.flagged_rounds:
        parts.append(
            f"rounds whose SM clock moved by more than 5%: {', '.join(map(str, n.flagged_rounds))}"
        )
    parts += machine_parts(n, run.platform)
    if n.clock_limits:
        parts.append(
            f"the GPU's clocks were held by: {', '.join(n.clock_limits)}"
            + (
                " (at its power cap the clock follows the power each variant draws: the timing "
                "settles each batch on its own variant first, `timing.settle`)"
                if "software power cap" in n.clock_limits
                else ""
            )
        )
    off = [
        f"`{v.name}` {v.summary.profile.device_vs_step * 100:+.0f}%"
        for v in run.variants
        if v.summary.profile.device_vs_step is not None
        and abs(v.summary.profile.device_vs_step) > 0.05
    ]
    if off:
        parts.append(
            "profiled device time per step differs from the timed step by more than 5% for "
            + ", ".join(off)
            + " (a host-bound step, or clocks that moved between the profiled and the timed windows)"
        )
    return [Para("**Noise.** " + "; ".join(parts) + "." if parts else "**Noise.** not measured.")]


def machine_parts(n: Noise, run_platform: str = "cpu") -> list[str]:
    """Returns the machine's state during the rounds, the rounds it flags, and the run's A/A
    verdict on itself, as phrases of the noise paragraph."""
    out = []
    m = n.machine
    if m is not None:
        host = run_platform not in ("gpu", "tpu")
        out += [e for e in resolution.evidence(n, host) if not e.startswith(("`", "SM clock"))][:3]
        if m.flagged_rounds:
            # "round 3: preempted: ...; load average ..." -> round 3, and the kinds seen
            nums = [f.split(":")[0].removeprefix("round ") for f in m.flagged_rounds]
            kinds = sorted(
                {
                    k.split(":")[0].split(" ")[0]
                    for f in m.flagged_rounds
                    for k in f.split(": ", 1)[1].split("; ")
                }
            )
            out.append(
                f"rounds the machine readings flag ({', '.join(kinds)}; timing.json says why): "
                + ", ".join(nums)
            )
    if n.comparisons:
        out.append(f"verdicts corrected for multiplicity (Holm) over {n.comparisons} comparisons")
    out.append(
        "the run resolves differences (its A/A check passed"
        + (f", floor within timing.max_noise {fmt.pct(n.max_noise)})" if n.max_noise else ")")
        if n.resolved
        else "**the run could not resolve differences**: " + "; ".join(n.reasons)
    )
    return out


def observation_cell(o: Observation | None) -> str:
    """Returns one framework's verdict and its evidence, for one cell of the table."""
    if o is None:
        return MISSING
    return o.verdict + (" — " + "; ".join(o.evidence) if o.evidence else "")


def observation_blocks(rows: Sequence[ObservationRow]) -> list[Block]:
    """Returns the observations: claim | JAX verdict and evidence | PyTorch verdict and
    evidence, then the quoted logs and IR lines that back them."""
    out: list[Block] = [Heading(2, "Observations", "observations")]
    header = ("claim", *(f"{name}: verdict and evidence" for name in FRAMEWORKS.values()))
    out.append(
        Table(
            header,
            tuple(
                (f"{i}. {r.claim}", *(observation_cell(r.by_framework.get(f)) for f in FRAMEWORKS))
                for i, r in enumerate(rows, 1)
            ),
            wrap=True,
        )
    )
    for i, r in enumerate(rows, 1):
        for f, name in FRAMEWORKS.items():
            o = r.by_framework.get(f)
            if o is not None and o.quote:
                out.append(Para(f"Quoted for {i} ({name}):"))
                out.append(Code(o.quote))
    return out


def plot_blocks(outcomes: Sequence[PlotOutcome]) -> list[Block]:
    out: list[Block] = [Heading(2, "Plots", "plots")]
    for p in outcomes:
        png = next((f for f in p.files if f.endswith(".png")), None)
        if png:
            svg = next((f for f in p.files if f.endswith(".svg")), "")
            caption = PLOT_CAPTIONS.get(p.name, p.name) + (f" ([svg]({svg}))" if svg else "")
            out.append(Image(png, p.name, caption))
        else:
            out.append(Para(f"**{p.name}**: {p.note}"))
    return out


def findings_blocks(run: RunData) -> list[Block]:
    """The Findings section: resolved differences, largest first; then what is noise."""
    found, noise = why.findings(run)
    out: list[Block] = [Heading(2, "Findings", "findings")]
    if (line := resolution.unresolved_line(run.summary)) is not None:
        out.append(Para(f"**{line}**"))
        if retimable(run):
            out.append(
                Para(
                    "To time the saved run again (each variant compiled again and checked by "
                    "fingerprint against its captured program; the earlier timing is kept):"
                )
            )
            out.append(Code(retime_command(run), "sh"))
    for name, gaps in why.attribution_gaps(run):
        out += gap_blocks(gaps, f"`{name}`")
    if not found and not noise:
        out.append(Para("No variant has paired timing rounds to compare, so nothing is claimed."))
    for i, f in enumerate(found, 1):
        out.append(Para(f"**{i}. {f.what}.** Why: {f.why}."))
        out.append(Bullets(f.evidence))
    if noise:
        out.append(Para("No resolvable difference (noise, never ranked):"))
        out.append(Bullets(tuple(noise)))
    # Peaks are compiled, not timed: the timing gate above never holds these back.
    for f in memory_report.memory_findings(run):
        out.append(Para(f"**Memory: {f.what}.**"))
        if f.evidence.sources:
            out.append(Bullets(memory_report.evidence_lines(f.evidence)))
    return out


def changes_blocks(run: RunData) -> list[Block]:
    """What to change: measured changes with their effect and trade-off; then untested ones."""
    recs = why.recommendations(run)
    out: list[Block] = [Heading(2, "What to change", "what-to-change")]
    if not resolution.resolved(run.summary):
        out.append(Para("No change is recommended: this run could not resolve differences."))
    elif recs:
        out.append(
            Table(
                ("change", "measured effect", "trade-off"),
                tuple((r.change, r.effect, r.tradeoff or MISSING) for r in recs),
            )
        )
    else:
        out.append(Para("No change measured in this run made a resolvable difference."))
    later = why.untested(run)
    if later:
        out.append(Para("Untested in this run (add a variant to measure it):"))
        for u in later:
            out.append(Para(f"{u.change}: {u.why}."))
            out.append(Code(u.snippet, "yaml"))
    return out


def boundaries_blocks(run: RunData, decisions: str) -> list[Block]:
    """Why the baseline's clusters are separate launches, boundary by boundary, with evidence."""
    base = run.by_role("baseline")
    if base is None or not base.summary.profile.step_sequence:
        return []
    found = why.boundaries(run, base, decisions)
    if not found:
        return []
    out: list[Block] = [Heading(3, f"Why `{base.name}`'s clusters are not one", "why-not-fused")]
    for b in found:
        out.append(Para(f"`{b.producer}` → `{b.consumer}`:"))
        out.append(Bullets(b.reasons))
    return out


def clusters_table(v: VariantData, origins: dict[str, str] | None = None) -> Table | None:
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


def top_passes_table(v: VariantData) -> list[Block]:
    c = v.summary.compile
    if not c.top_passes:
        return []
    out: list[Block] = [
        Para("Top compile passes:"),
        Table(
            ("pass", "pipeline", "time"),
            tuple((p.name, p.pipeline or MISSING, fmt.ms(p.total_s)) for p in c.top_passes[:8]),
        ),
    ]
    if c.notes:
        out.append(Bullets(tuple(c.notes)))
    return out


def variant_blocks(
    v: VariantData, run: RunData, origins: dict[str, str] | None = None
) -> list[Block]:
    """Returns one variant's section: ladder, divergence, clusters, passes, compile passes."""
    s = v.summary
    i = s.identity
    out: list[Block] = [Heading(3, v.name, f"variant-{v.name}")]
    roles = f"; roles: {', '.join(i.roles)}" if i.roles else ""
    out.append(
        Para(
            f"{i.description} — mode `{i.mode}`{roles}, status {i.status}"
            + (f": {i.reason}" if i.reason else "")
        )
    )
    if i.xla_options:
        out.append(
            Para("XLA options: " + ", ".join(f"`{k}={val}`" for k, val in i.xla_options.items()))
        )
    if s.dynamo is not None:
        out.append(Para(dynamo_line(s.dynamo)))
    if i.failure and i.failure.stderr_tail:
        out.append(Code("\n".join(i.failure.stderr_tail)))
    if v.stages:
        items = tuple(
            f"{st.order:02d} `{st.stage}`: [{st.path}]({st.path}{'/' if st.is_dir else ''})"
            if st.exists
            else f"{st.order:02d} `{st.stage}`: {st.path} (not kept in this copy of the run)"
            for st in v.stages
        )
        out += [Para("IR ladder:"), Bullets(items)]
    d = s.comparison.first_divergence
    if "baseline" in v.roles:
        out.append(Para("First divergence: this is the baseline."))
    elif d is not None:
        out.append(Para(f"First divergence from `{d.against}`: at `{d.stage}`. {d.detail}".strip()))
    else:
        out.append(
            Para(f"First divergence from {run.baseline}: {MISSING} (not analyzed in this run).")
        )
    for label, verdict in (
        ("lower bound", s.comparison.vs_lower_bound),
        ("baseline", s.comparison.vs_baseline),
        ("JAX variant in its role", s.comparison.vs_framework),
    ):
        if verdict is not None:
            out.append(
                Para(
                    f"Against the {label} `{verdict.against}`: {fmt.verdict(verdict)} — {verdict.why}."
                )
            )
    table = clusters_table(v, origins)
    out.append(
        Para(f"Clusters (fusion count {fmt.count(s.hlo.fusion_count)}):")
        if table
        else Para(f"Clusters: {MISSING} (no fusions.json).")
    )
    if table:
        out.append(table)
    out += ranking.variant_blocks(v, run)
    if s.hlo.fusion_changing_passes:
        out.append(Para("Passes that changed the fusion structure:"))
        out.append(
            Table(
                ("#", "pass", "pipeline", "what changed"),
                tuple(
                    (str(p.index), p.name, p.pipeline, p.sentence)
                    for p in s.hlo.fusion_changing_passes
                ),
            )
        )
    out += top_passes_table(v)
    extra = []
    if s.compile.recompile_s is not None:
        extra.append(
            f"recompile pause {fmt.secs(s.compile.recompile_s)}"
            + (
                f"; fusion changed on recompile: {fmt.text(s.compile.recompile_fusion_changed)}"
                if s.compile.recompile_fusion_changed is not None
                else ""
            )
        )
    extra += [f"FLOP count: {d}" for d in s.cost.disagreements]
    if s.cost.fraction_withheld:
        extra.append(f"fraction of peak withheld: {s.cost.fraction_withheld}")
    if s.profile.host_gap_per_step_s is not None:
        extra.append(
            f"device time per step {fmt.ms(s.profile.device_time_per_step_s)}, host gap "
            f"{fmt.ms(s.profile.host_gap_per_step_s)}, matched {fmt.pct(s.profile.matched_fraction)} of events"
        )
    if s.timing.latency_blocked_median_s is not None:
        extra.append(
            f"blocked per-call latency (dispatch included) {fmt.ms(s.timing.latency_blocked_median_s)} "
            f"(p10 {fmt.ms(s.timing.latency_blocked_p10_s)}, p90 {fmt.ms(s.timing.latency_blocked_p90_s)})"
        )
    extra += [f"analysis error: {e}" for e in s.analysis_errors]
    if extra:
        out.append(Bullets(tuple(extra)))
    if i.expected_error is not None:
        out.append(Code(f"{i.expected_error.type}: {i.expected_error.message}"))
    return out


def dynamo_line(d: Any) -> str:
    """Returns what Dynamo made of a PyTorch variant, in one paragraph."""
    options = ", ".join(f"`{k}={v}`" for k, v in d.options.items()) or "defaults"
    parts = [f"torch.compile({options})"]
    if d.graph_count is not None:
        breaks = f"{d.graph_count} graph(s), {d.graph_break_count} break(s) ({d.explain_source})"
        if d.break_reasons:
            where = f" at `{d.break_locations[0]}`" if d.break_locations else ""
            breaks += f": {d.break_reasons[0]}{where}"
        parts.append(breaks)
    if d.guard_count is not None:
        parts.append(f"{d.guard_count} guards")
    if d.dynamic_shapes:
        parts.append("symbolic sizes from the first call")
    if d.recompiles is not None:
        again = f"new shape: {d.recompiles} recompile(s)"
        if d.recompile_reasons:
            again += f" ({d.recompile_reasons[0].splitlines()[0][:160]})"
        if d.recompile_dynamic_shapes:
            again += ", compiled with symbolic sizes (automatic dynamic shapes)"
        parts.append(again)
    return "Dynamo: " + "; ".join(parts) + "."


def _arrays(specs: Sequence[Any]) -> str:
    return ", ".join(f"{a.dtype}[{','.join(map(str, a.shape))}]" for a in specs) or "none"


def program_blocks(run: RunData) -> list[Block]:
    """What a program study studied: the function, its arguments, parameters and result, the
    new-shape call, where the FLOPs and the reference come from; then each variant's dtypes."""
    base = run.by_role("baseline") or next(iter(run.variants), None)
    p = base.summary.identity.program if base is not None else None
    if base is None or p is None:
        return []
    flops = {
        "config": "given by the config (`program.flops`)",
        "hlo_before": "our cost model of the unoptimized HLO (the ladder's `hlo_before`)",
    }.get(p.flops_source, p.flops_source or MISSING)
    wide = "/".join(p.reference_dtypes) or MISSING
    items = [
        f"function `{p.function}`, called as `function(params, *inputs)`",
        f"parameters from `{p.init}` (`init(jax.random.key(seed), *input_specs)`): "
        f"{p.param_leaves} arrays, {fmt.si(p.param_count, '')} values, "
        f"{fmt.si(p.param_bytes, 'B')} ({', '.join(p.param_dtypes)}) in `{base.name}`",
        f"inputs {_arrays(p.inputs)}; result {_arrays(p.output)}",
        f"the new-shape call (recompile): inputs {_arrays(p.recompile_inputs)}",
        f"FLOPs per call (`cost.flops_analytic`): {fmt.si(base.summary.cost.flops_analytic, 'FLOP')}, "
        f"{flops}; of which dots and convolutions {fmt.si(p.gemm_flops, 'FLOP')}",
        f"numerics against the function itself run with jax's x64 on the CPU (result {wide}), "
        "parameters and inputs widened to float64 from the values each variant used",
    ]
    if wide != "float64":
        items.append(
            "the reference's result is not float64: the function fixes its own dtype, so the "
            "reference is no more precise than that"
        )
    for v in run.variants:
        for f in v.summary.identity.probe_failures:
            items.append(
                f"`{v.name}`: the optional {f.probe} probe failed ({f.reason}); "
                "the variant's other results stand"
            )
    rows = tuple(
        (
            v.name,
            _arrays(v.summary.identity.program.inputs),
            ", ".join(v.summary.identity.program.param_dtypes) or MISSING,
            fmt.si(v.summary.identity.program.param_bytes, "B"),
            ", ".join(f"`{k}={fmt.text(x)}`" for k, x in v.summary.identity.program.kwargs.items())
            or "none",
            _worst_leaf(v.summary.numerics),
        )
        for v in run.variants
        if v.summary.identity.program is not None
    )
    head = ("variant", "inputs as called", "parameter dtypes", "parameter bytes")
    return [
        Heading(2, "The program", "program"),
        Bullets(tuple(items)),
        Table((*head, "keyword arguments", "numerics: worst leaf"), rows),
    ]


def _worst_leaf(n: Any) -> str:
    """The leaf a pytree result's numerics are of: its path, error and verdict."""
    if n.rel_fro_err is None:
        return MISSING
    where = f"`{n.worst_leaf}` " if n.worst_leaf else ""
    failed = f" ({len(n.failed_leaves)} leaves)" if n.failed_leaves else ""
    verdict = "ok" if n.ok else "FAIL" + failed
    return f"{where}{fmt.sci(n.rel_fro_err)} (tol {fmt.sci(n.tolerance)}) {verdict}"


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
            "torch",
            "git_commit",
        )
    )
    rows += tuple((k, fmt.text(m.get(k))) for k in ("config_file", "started", "finished", "status"))
    stages = m.get("stages_s")
    if isinstance(stages, dict) and stages:
        rows += (
            (
                "time by stage",
                ", ".join(f"{k.removesuffix('_s')} {fmt.secs(val)}" for k, val in stages.items()),
            ),
        )
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
    studied = "program" if (cfg.get("program") or {}).get("function") else "problem"
    shown = {
        k: cfg[k] for k in (studied, "measure", "profile", "dump", "timing", "capture") if k in cfg
    }
    if shown:
        out.append(Code(json.dumps(shown, indent=1), "json"))
    return out


def ceilings_line(ceilings: dict[str, Any]) -> str:
    peaks = ceilings.get("peaks") or {}
    if not peaks:
        return "no ceilings measured"
    shown = ", ".join(
        f"{p} {fmt.si(v.get('flops_per_s'), 'FLOP/s')}" for p, v in sorted(peaks.items())
    )
    bw = fmt.si(ceilings.get("peak_bytes_per_s"), "B/s")
    return f"{shown}; copy {bw} (measured {ceilings.get('measured_at', '?')})"


def headline(run: RunData) -> str:
    env = run.environment
    torch = env.get("torch")
    bases = [
        f"`{v.name}` ({FRAMEWORKS.get(v.framework, v.framework)})"
        for v in run.variants
        if "baseline" in v.roles
    ]
    return (
        f"{fmt.text(env.get('device_kind'))} ({run.platform}), jax {fmt.text(env.get('jax'))}, "
        f"jaxlib {fmt.text(env.get('jaxlib'))}, flax {fmt.text(env.get('flax'))}"
        + (
            f", torch {torch}"
            if torch and any(v.framework == "torch" for v in run.variants)
            else ""
        )
        + ". "
        + (f"Baselines {', '.join(bases)}. " if len(bases) > 1 else f"Baseline `{run.baseline}`. ")
        + f"Ceilings: {ceilings_line(run.ceilings)}."
    )


def report_blocks(
    run: RunData,
    obs: Sequence[ObservationRow],
    plots: Sequence[PlotOutcome],
    decisions: str = "",
    origins: dict[str, dict[str, str]] | None = None,
) -> tuple[Block, ...]:
    """Returns the whole report: findings and what to change first, then the summary, noise,
    observations, plots, variants and environment."""
    studied = program_blocks(run)
    blocks: list[Block] = [
        Heading(1, f"{run.experiment}: run {run.run_id}"),
        Para(headline(run)),
        Para(
            ("[the program](#program) · " if studied else "")
            + "[findings](#findings) · [what to change](#what-to-change) · [summary](#summary) · "
            "[where the time goes](#where-the-time-goes) · [observations](#observations) · "
            "[plots](#plots) · [variants](#variants) · [environment](#environment) · "
            "[run folder](index.html)"
        ),
        *studied,
        *findings_blocks(run),
        *changes_blocks(run),
        *boundaries_blocks(run, decisions),
        Heading(2, "Summary", "summary"),
        summary_table(run),
        Para(
            "Step times come from interleaved timing rounds; a ratio is the median of per-round "
            "ratios with its 95% bootstrap interval, and pairs only variants of the same size. "
            f'"{MISSING}" means the run has no such figure.'
        ),
        *noise_blocks(run),
        *memory_report.memory_blocks(run),
        *ranking.overview_blocks(run),
        *observation_blocks(obs),
        *plot_blocks(plots),
        *sharded_blocks(run),
        *processes_blocks(run),
        Heading(2, "Variants", "variants"),
    ]
    for v in run.variants:
        blocks += variant_blocks(v, run, (origins or {}).get(v.name))
    blocks += environment_blocks(run)
    if run.notes:
        blocks += [Heading(2, "Notes", "notes"), Bullets(tuple(run.notes))]
    return tuple(blocks)
