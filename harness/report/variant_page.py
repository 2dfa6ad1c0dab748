"""One variant's page, variants/<name>/report.md and .html: everything the leading page leaves
out for that variant.

Its figures, how to open its profile and logs elsewhere (XProf, Perfetto, tlparse), the first
stage at which it differs from its reference as a diff, its IR ladder, clusters, where its time
goes, why the baseline's clusters are separate launches, the passes that changed its fusion
structure and its compile passes. Pure functions over the run data and what the report's edge
read for the page (`PageInputs`); links are relative to the page's folder.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.frontends import registry
from harness.records.numerics import EffectFinding
from harness.report import findings as why
from harness.report import memory as memory_report
from harness.report import ranking
from harness.report.doc import Block, Bullets, Code, Heading, Para, Table, code, literal
from harness.report.sections import (
    failed_numerics,
    first_call_cell,
    fraction_of_peak,
    library_calls,
    numerics,
    status,
    transfers,
)
from harness.report.stage_diff import CONTEXT, HLO_STAGES, MAX_COMPARED, MAX_LINES, StageDiff
from harness.saved.run import SavedRun, SavedVariant
from harness.store.runfolder import REPORT_FILE as PAGE


def here(v: SavedVariant, path: str) -> str:
    """A path relative to the run folder, as a link from the variant's page."""
    own = f"variants/{v.name}/"
    return path.removeprefix(own) if path.startswith(own) else f"../../{path}"


@dataclass(frozen=True)
class ShownDivergence:
    """The first differing stage against the reference, and its diff when both stage files
    were kept (else why there is none)."""

    stage: str
    against: str
    detail: str
    diff: StageDiff | None = None
    files: tuple[str, str] = ("", "")  # the reference's and the variant's, from the run folder
    why_none: str = ""


@dataclass(frozen=True)
class Elsewhere:
    """What the variant's folder holds for other tools, paths from the run folder."""

    profile: str | None = None  # a jax.profiler log dir (xplane.pb files under it)
    perfetto: tuple[str, ...] = ()  # traces Perfetto opens: perfetto_trace.json.gz, torch's
    torch_traces: tuple[str, ...] = ()  # TORCH_TRACE logs
    tlparse: str | None = None  # tlparse's index.html, when tlparse made one
    tlparse_note: str = ""  # why there is none


@dataclass(frozen=True)
class PageInputs:
    """What the report's edge read from the run folder for one variant's page."""

    divergence: ShownDivergence | None = None
    elsewhere: Elsewhere = field(default_factory=Elsewhere)


# --- the page's own figures ------------------------------------------------------------------


def figures_table(v: SavedVariant, failure: bool | None = None) -> Table:
    """Every figure of the variant, including those the leading page's summary leaves out;
    `failure`: the findings' word on its accuracy (sections.failed_numerics)."""
    s = v.summary
    rows = (
        ("status", status(v)),
        ("step (95% CI)", fmt.step(s.timing.step_s, s.timing.step_ci95_s)),
        ("vs baseline", fmt.verdict(s.comparison.vs_baseline)),
        ("vs lower bound", fmt.verdict(s.comparison.vs_lower_bound)),
        ("kernels a step", fmt.count(s.profile.kernels_per_step)),
        ("transfers a step", transfers(v)),
        ("first call", first_call_cell(s.compile)),
        ("recompile", fmt.secs(s.compile.recompile_s)),
        ("fusions", fmt.count(s.hlo.fusion_count)),
        ("library calls", library_calls(v)),
        ("TFLOP/s", fmt.tflops(s.cost.achieved_flops_per_s)),
        ("of peak", fraction_of_peak(v)),
        ("peak memory", memory_report.peak_cell(s)),
        ("numerics", numerics(v, failure)),
    )
    return Table(("figure", "value"), rows)


# --- open it elsewhere -----------------------------------------------------------------------


# The project's extra that holds XProf (pyproject.toml `xprof`), installed into make's .venv.
XPROF_INSTALL = ".venv/bin/pip install 'xprof>=2.24'"


def elsewhere_blocks(v: SavedVariant, e: Elsewhere) -> list[Block]:
    """The commands and links that open the variant's profile and logs in other tools."""
    out: list[Block] = [Heading(2, "Open it elsewhere", "elsewhere")]
    cmds: list[str] = []
    traits = registry.traits(v.framework)  # what its frontend's capture keeps
    if e.profile is not None:
        # make's set-up does not install XProf (about 100 MB): its install is printed beside.
        cmds.append(f"{XPROF_INSTALL}  # once: make's set-up does not install XProf")
        cmds.append(f"xprof --logdir={shlex.quote(e.profile)} --port=6006")
        out.append(
            Para(
                "**XProf** (TensorBoard with `tensorboard-plugin-profile` "
                "reads the same folder): from the run folder, run the command below and open "
                "http://localhost:6006; each profiled window (`first_call`, `steady`, "
                "`recompile`) is a run of its own."
            )
        )
    elif traits.xprof and v.ok:
        out.append(Para("No jax.profiler trace of this variant is kept in this copy of the run."))
    for trace in e.perfetto:
        out.append(
            Para(
                f"**Perfetto**: open [ui.perfetto.dev](https://ui.perfetto.dev) and load "
                f"[`{trace}`]({here(v, trace)}) (Open trace file)."
            )
        )
    if e.profile is not None and not e.perfetto and traits.xprof:
        out.append(
            Para(
                "No Perfetto trace: jax writes `perfetto_trace.json.gz` only when a trace is "
                "started with `create_perfetto_trace=True`; XProf's trace viewer shows the same "
                "events."
            )
        )
    for log in e.torch_traces:
        out_dir = f"variants/{v.name}/tlparse"
        cmds.append(f"tlparse {shlex.quote(log)} -o {shlex.quote(out_dir)} --no-browser")
    if e.torch_traces:
        made = (
            f" Its output for this run: [tlparse/index.html]({here(v, e.tlparse)})."
            if e.tlparse
            else f" {e.tlparse_note}"
            if e.tlparse_note
            else ""
        )
        out.append(
            Para(
                "**tlparse** (`pip install tlparse`) turns the TORCH_TRACE log into pages of "
                "Dynamo's graphs, guards and Inductor's output code, one per compile." + made
            )
        )
    elif traits.torch_trace and v.ok:
        out.append(Para("No TORCH_TRACE log of this variant is kept in this copy of the run."))
    if cmds:
        out.append(Code("\n".join(cmds), "sh"))
    return out if len(out) > 1 else []


# --- the first divergence --------------------------------------------------------------------


def _moved(e: EffectFinding) -> str:
    """Where the numerics first move: the pass the search found, or why it found none."""
    where = f"`{e.leaf}`" if e.leaf else "the result"
    head = (
        f"The numerics move: {where} is {fmt.sci(e.distance)} from `{e.against}`'s result "
        f"(allowed {fmt.sci(e.allowed)})."
    )
    if e.first_pass is not None:
        return (
            f"{head} The numerics first move at pass `{e.first_pass}` (disabling it alone "
            f"restores the baseline's result: {fmt.sci(e.distance)} → {fmt.sci(e.restored)})."
        )
    return f"{head} No pass named: {e.search or 'the pass search did not run'}."


def divergence_blocks(v: SavedVariant, run: SavedRun, d: ShownDivergence | None) -> list[Block]:
    """Where the variant first differs from its reference: the stage, the sentence the
    analysis recorded, and the diff of that stage's two files."""
    out: list[Block] = [Heading(2, "First divergence", "divergence")]
    if "baseline" in v.roles:
        return [*out, Para("This is the baseline: the other variants are compared with it.")]
    found = run.summary.findings
    effect = next((e for e in found.effects if e.variant == v.name), None) if found else None
    if effect is not None and effect.verdict == "changes":
        out.append(Para(_moved(effect)))
    if d is None:
        return [*out, Para(f"Not analysed in this run ({MISSING}).")]
    out.append(Para(f"From `{d.against}`: at `{d.stage}`. {d.detail}".strip()))
    if d.diff is None:
        return [*out, Para(d.why_none)] if d.why_none else out
    left, right = d.files
    out.append(
        Para(
            f"The diff of that stage, `{d.against}`'s against `{v.name}`'s, with {CONTEXT} "
            "lines of context"
            + (
                "; `metadata={...}` left out of each line"
                if d.stage in HLO_STAGES
                else "; locations (`loc(...)`) left out"
                if d.stage == "stablehlo"
                else ""
            )
            + f". The full files: [`{d.against}`'s]({here(v, left)}), "
            f"[`{v.name}`'s]({here(v, right)})."
        )
    )
    if d.diff.equal:
        out.append(
            Para(
                "The two files are the same but for what the diff leaves out: the comparison "
                "found the stages differ where this diff does not look."
            )
        )
        return out
    out.append(d.diff.diff)
    if d.diff.left_out:
        out.append(
            Para(f"{d.diff.left_out} more lines of the diff are left out (over {MAX_LINES}).")
        )
    if d.diff.not_compared:
        out.append(
            Para(
                f"The diff is capped: past the first change, {d.diff.not_compared} lines of the "
                f"two files were not compared (at most {MAX_COMPARED} a side are, so the "
                "report's work stays bounded); the full files are linked above."
            )
        )
    return out


# --- why the baseline's clusters are not one -------------------------------------------------


def boundaries_blocks(run: SavedRun, v: SavedVariant) -> list[Block]:
    """Why the baseline's consecutive clusters are separate launches, on the baseline's page:
    the `structure.why_not_fused` rule's records, grouped by reason."""
    f = run.summary.findings
    if f is None or f.boundaries is None or f.boundaries.variant != v.name:
        return []
    return why.boundaries_blocks(run, level=2)


# --- clusters, passes, the rest --------------------------------------------------------------


def clusters_table(v: SavedVariant) -> Table | None:
    """Returns the variant's clusters with their source ops and the kernels matched to them."""
    clusters = v.cluster_entries()
    if not clusters:
        return None
    steps = len({k.step for k in v.kernels if k.step is not None}) or 1
    by_cluster: dict[str, Counter[str]] = {}
    for k in v.kernels:
        if k.cluster:
            by_cluster.setdefault(k.cluster, Counter())[str(k.name)] += 1
    rows = []
    for c in clusters:
        kern = by_cluster.get(c.name, Counter())
        matched = ", ".join(f"{n[:40]} ×{fmt.count(m / steps)}" for n, m in kern.most_common(3))
        target = c.target or ""
        if c.epilogue:
            target += f" + {c.epilogue}"
        ops = c.source_ops
        source = ", ".join(ops[:8]) + (f" … (+{len(ops) - 8})" if len(ops) > 8 else "")
        cells = (  # names, ops and shapes from the dump and the profile: text, never Markdown
            c.name if c.name is not None else "?",
            c.kind if c.kind is not None else MISSING,
            target or MISSING,
            source or MISSING,
            c.output_shape if c.output_shape is not None else MISSING,
            matched or (MISSING if not v.kernels else "none"),
        )
        rows.append(tuple(literal(cell) for cell in cells))
    return Table(
        ("cluster", "kind", "target", "source ops", "output", "kernels per step"), tuple(rows)
    )


def top_passes_blocks(v: SavedVariant) -> list[Block]:
    c = v.summary.compile
    if not c.top_passes:
        return []
    out: list[Block] = [
        Heading(2, "Compile passes", "compile-passes"),
        Table(
            ("pass", "pipeline", "time"),
            tuple((p.name, p.pipeline or MISSING, fmt.ms(p.total_s)) for p in c.top_passes[:8]),
        ),
    ]
    if c.notes:
        out.append(Bullets(tuple(c.notes)))
    return out


def dynamo_line(d: Any) -> str:
    """Returns what Dynamo made of a variant (a frontend whose traits say `dynamo`), in one
    paragraph."""
    options = ", ".join(code(f"{k}={fmt.option(v)}") for k, v in d.options.items()) or "defaults"
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


def ladder_blocks(v: SavedVariant) -> list[Block]:
    if not v.stages:
        return []
    items = tuple(
        f"{st.order:02d} `{st.stage}`: [{here(v, st.path)}]({here(v, st.stored or st.path)}"
        f"{'/' if st.is_dir else ''})"
        if st.exists
        else f"{st.order:02d} `{st.stage}`: {here(v, st.path)} (not kept in this copy of the run)"
        for st in v.stages
    )
    return [Heading(2, "IR ladder", "ladder"), Bullets(items)]


def comparison_blocks(v: SavedVariant) -> list[Block]:
    s = v.summary
    out: list[Block] = []
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
    return out


def extra_lines(v: SavedVariant) -> list[str]:
    """The variant's other figures: recompile, FLOP disagreements, host gap, latency, errors."""
    s = v.summary
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
            f"{fmt.DEVICE_TIME} {fmt.ms(s.profile.device_time_per_step_s)}, host gap "
            f"{fmt.ms(s.profile.host_gap_per_step_s)}, matched {fmt.pct(s.profile.matched_fraction)} of events"
        )
    if s.timing.latency_blocked_median_s is not None:
        extra.append(
            f"blocked per-call latency (dispatch included) {fmt.ms(s.timing.latency_blocked_median_s)} "
            f"(p10 {fmt.ms(s.timing.latency_blocked_p10_s)}, p90 {fmt.ms(s.timing.latency_blocked_p90_s)})"
        )
    extra += [f"analysis error: {e}" for e in s.analysis_errors]
    return extra


def page_blocks(v: SavedVariant, run: SavedRun, inputs: PageInputs) -> tuple[Block, ...]:
    """The variant's page: what it is and its figures, how to open it elsewhere, its first
    divergence, IR ladder, clusters, where its time goes and why, passes and the rest."""
    s = v.summary
    i = s.identity
    roles = f"; roles: {', '.join(i.roles)}" if i.roles else ""
    out: list[Block] = [
        Heading(1, f"{literal(run.experiment)}: {code(v.name)}"),
        Para(
            f"[the run's report](../../{PAGE}) · [run folder](../../index.html) · "
            f"run {literal(run.run_id)}"
        ),
        Para(
            f"{literal(i.description)} — mode {code(i.mode)}{literal(roles)}, "
            f"status {literal(i.status)}" + (f": {literal(i.reason)}" if i.reason else "")
        ),
    ]
    if i.xla_options:
        out.append(
            Para(
                "XLA options: "
                + ", ".join(code(f"{k}={fmt.option(val)}") for k, val in i.xla_options.items())
            )
        )
    if s.dynamo is not None:
        out.append(Para(dynamo_line(s.dynamo)))
    if i.failure and i.failure.stderr_tail:
        out.append(Code("\n".join(i.failure.stderr_tail)))
    if i.expected_error is not None:
        out.append(Code(f"{i.expected_error.type}: {i.expected_error.message}"))
    out += [figures_table(v, failed_numerics(run).get(v.name)), *comparison_blocks(v)]
    extra = extra_lines(v)
    if extra:
        out.append(Bullets(tuple(extra)))
    out += elsewhere_blocks(v, inputs.elsewhere)
    out += divergence_blocks(v, run, inputs.divergence)
    out += ladder_blocks(v)
    table = clusters_table(v)
    out.append(Heading(2, "Clusters", "clusters"))
    out.append(
        Para(f"Fusion count {fmt.count(s.hlo.fusion_count)}.")
        if table
        else Para(f"Clusters: {MISSING} (no fusions.json).")
    )
    if table:
        out.append(table)
    out += ranking.variant_blocks(v, run)
    out += memory_report.variant_memory_blocks(v)
    out += boundaries_blocks(run, v)
    out += why.control_flow_blocks(run, v.name)
    if s.hlo.fusion_changing_passes:
        out += [
            Heading(2, "Passes that changed the fusion structure", "fusion-passes"),
            Table(
                ("#", "pass", "pipeline", "what changed"),
                tuple(
                    (str(p.index), p.name, p.pipeline, p.sentence)
                    for p in s.hlo.fusion_changing_passes
                ),
            ),
        ]
    out += top_passes_blocks(v)
    return tuple(out)
