"""The leading page's content as document blocks, built from run data by pure functions.

The conclusions (findings, what to change, why-not-fused, observations) are summary.json's
`findings`, made by the analysis stage's rules; harness.report.findings and
harness.report.observations lay them out.

The leading page opens with the verdict (resolved or not, the noise floor), the findings and
what to change, then one summary row per variant linked to its own page
(harness.report.variant_page), then the plots. The run's details page (details.md) holds what
backs them: the evidence, noise, memory, where the time goes, observations and environment.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.frontends import registry
from harness.records.findings import Findings
from harness.records.run_files import Ceilings
from harness.records.summary import Compile, Noise
from harness.report import memory as memory_report
from harness.report import ranking, unresolved
from harness.report.doc import Block, Bullets, Heading, Image, Para, Table, code, literal
from harness.report.findings import (
    changes_blocks,
    coverage_blocks,
    evidence_blocks,
    findings_blocks,
    has_evidence,
)
from harness.report.observations import observation_blocks
from harness.report.plots import PlotOutcome
from harness.report.processes import processes_blocks
from harness.report.sharded import sharded_blocks
from harness.saved.run import SavedRun, SavedVariant
from harness.store.runfolder import DETAILS_FILE, REPORT_FILE

# The columns a reader compares across variants; each variant's page has every figure.
SUMMARY_HEADER = (
    "variant", "status", "kernels/step", "transfers/step", "step (95% CI)", "vs baseline",
    "vs lower bound", "first call", "fusions", "peak memory", "numerics", "first divergence",
)  # fmt: skip

PLOT_CAPTIONS = {
    "launches": "Device kernels and transfers per step, per variant.",
    "step_time": "Time per step with 95% intervals; the dashed line is the lower bound. Colour: "
    "the verdict against the baseline (grey: no difference the run can resolve).",
    "compile_time": "First-call compile time: trace, lower, XLA passes by pipeline, the rest.",
    "roofline": "Arithmetic intensity against achieved FLOP/s under the measured ceilings.",
    "timeline": "One step per variant on its streams: the ten clusters with the most device time "
    "in colours the legend names, the rest grey; the light band is the median timed step.",
    "fusion_map": "Which pre-optimization ops ended up in which cluster: the baseline and one "
    "other variant.",
    "memory": "Bytes live over the schedule: the baseline and the variant whose peak differs "
    "most, each peak marked.",
}


def library_calls(v: SavedVariant) -> str:
    """Returns 'target + epilogue' for each library call, or MISSING when not analyzed."""
    h = v.summary.hlo
    if h.fusion_count is None:
        return MISSING
    if not h.library_calls:
        return "none"
    calls = Counter(f"{c.target} + {c.epilogue or 'no epilogue'}" for c in h.library_calls)
    return "; ".join(call + (f" ×{n}" if n > 1 else "") for call, n in calls.items())


def transfers(v: SavedVariant) -> str:
    p = v.summary.profile
    if p.kernels_per_step is None:
        return MISSING
    if not p.transfers_per_step:
        return "0"
    return ", ".join(
        f"{fmt.count(t.count)} {t.direction} ({fmt.si(t.bytes, 'B')})" for t in p.transfers_per_step
    )


def fraction_of_peak(v: SavedVariant) -> str:
    c = v.summary.cost
    if c.fraction_of_peak is not None:
        return f"{fmt.pct(c.fraction_of_peak)} of {c.peak_precision}"
    if c.fraction_withheld:
        return "withheld"
    return MISSING


# The accuracy verdict (issue 61) has one definition, said in the same words wherever a page
# gives it (the summary table, a variant's figures, the program table): the accuracy findings
# (rule `numerics.accuracy`) decide whether an error over its tolerance is a failure or the
# dtype's own rounding, and no page judges that again.
ROUNDING = "the dtype's own rounding (a note)"


def accuracy_verdict(n: Any, failure: bool | None) -> str:
    """`ok`, ROUNDING or `FAIL`, MISSING where no accuracy was measured. `failure` is the
    findings' word on an error over its tolerance (`failed_numerics`): False for the dtype's
    own rounding (never an exact, integer leaf's), True or None (no findings) a failure."""
    if n is None or n.ok is None:
        return MISSING
    if n.ok:
        return "ok"
    return ROUNDING if failure is False and n.tolerance else "FAIL"


def numerics(v: SavedVariant, failure: bool | None = None) -> str:
    """The accuracy verdict with its error and tolerance."""
    n = v.summary.numerics
    verdict = accuracy_verdict(n, failure)
    if verdict == MISSING:
        return MISSING
    tail = (
        f" (rel {fmt.sci(n.rel_fro_err)} vs tol {fmt.sci(n.tolerance)})"
        if n.rel_fro_err is not None
        else ""
    )
    return verdict + tail


def divergence(v: SavedVariant, linked: bool = False) -> str:
    """The first stage at which the variant differs from its reference (linked to the diff on
    its page)."""
    if "baseline" in v.roles:
        return "baseline"
    d = v.summary.comparison.first_divergence
    if d is None:
        return MISSING
    return f"[{d.stage}]({v.page}#divergence)" if linked else d.stage


def status(v: SavedVariant) -> str:
    """The variant's status, with its analysis errors beside it: a figure a failed stage
    never measured shows as missing in its row, and the row says why."""
    i = v.summary.identity
    errors = v.summary.analysis_errors
    shown = "; ".join(e.splitlines()[0][:120] for e in errors[:2]) if errors else ""
    more = f" (+{len(errors) - 2} more)" if len(errors) > 2 else ""
    return (
        literal(i.status)
        + (f": {literal(i.reason)}" if i.reason else "")
        + (f"; analysis error: {literal(shown)}{more}" if shown else "")
    )


def numerics_cell(v: SavedVariant, found: Findings | None = None) -> str:
    """The compiler-effect verdict against the baseline where the run has one (`same`, or
    `changes` with the leaf and the size); else the accuracy: `ok`, the dtype's own rounding,
    or FAIL where a rule found the error beyond it (the page has the figures always)."""
    effect = next((e for e in found.effects if e.variant == v.name), None) if found else None
    if effect is not None:
        where = f" on `{effect.leaf}`" if effect.leaf else ""
        return (
            f"changes: {fmt.sci(effect.distance)}{where} (allowed {fmt.sci(effect.allowed)})"
            if effect.verdict == "changes"
            else "same as baseline"
        )
    if v.summary.numerics.ok:
        return "ok"
    return numerics(v, any(v.name in a.failed for a in found.numerics) if found else None)


def first_call_cell(c: Compile) -> str:
    """The first-call pause, and how many compiles could run beside it when others could."""
    slots = c.compiled_together
    return fmt.secs(c.first_call_s) + (f" (≤{slots} compiling)" if slots > 1 else "")


def summary_row(
    v: SavedVariant, paged: bool = False, found: Findings | None = None
) -> tuple[str, ...]:
    """Returns one variant's summary-table cells, each formatted once for both renderings;
    with `paged`, its name and first divergence link to its page."""
    s = v.summary
    return (
        f"[{v.name}]({v.page})" if paged else v.name,
        status(v),
        fmt.count(s.profile.kernels_per_step),
        transfers(v),
        fmt.step(s.timing.step_s, s.timing.step_ci95_s),
        fmt.short_verdict(s.comparison.vs_baseline),
        fmt.short_verdict(s.comparison.vs_lower_bound),
        first_call_cell(s.compile),
        fmt.count(s.hlo.fusion_count),
        memory_report.peak_cell(s),
        numerics_cell(v, found),
        divergence(v, linked=paged),
    )


def summary_table(run: SavedRun, pages: frozenset[str] = frozenset()) -> Table:
    """One row per variant; those in `pages` link to their own page."""
    found = run.summary.findings
    return Table(
        SUMMARY_HEADER, tuple(summary_row(v, v.name in pages, found) for v in run.variants)
    )


def noise_blocks(run: SavedRun) -> list[Block]:
    """Returns what the run can resolve: the baseline against itself, and the device clocks."""
    n = run.summary.noise
    out: list[Block] = [Heading(2, "Noise", "noise")]
    if n is None:
        return [
            *out,
            Para("This run has no timing rounds, so no difference between variants is resolved."),
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
    parts += machine_parts(n, unresolved.evidence(run.summary))
    if (spread := unresolved.between_runs_line(run.summary)) is not None:
        parts.append(spread)
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
            f"profiled {fmt.DEVICE_TIME} differs from the timed step by more than 5% for "
            + ", ".join(off)
            + " (host-bound, or clocks that moved between the two windows)"
        )
    return [*out, Para("; ".join(parts) + "." if parts else "Not measured.")]


def machine_parts(n: Noise, gate_evidence: Sequence[str] = ()) -> list[str]:
    """Returns the machine's state during the rounds (`gate_evidence`: the A/A gate's, as
    its rule worded it), the rounds it flags, and the run's A/A verdict on itself, as
    phrases of the noise paragraph."""
    out = []
    m = n.machine
    if m is not None:
        out += [e for e in gate_evidence if not e.startswith(("`", "SM clock"))][:3]
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
    if not n.resolved:
        out.append("**the run could not resolve differences**: " + "; ".join(n.reasons))
    elif n.aa_held is False:
        out.append(
            f"the run's A/A check failed ({'; '.join(n.aa_reasons)}): each comparison had to "
            f"clear its floor {fmt.pct(n.floor)}"
            + (
                f"; not resolved for that reason: {'; '.join(n.unresolvable)}"
                if n.unresolvable
                else ""
            )
        )
    else:
        out.append(
            "the run resolves differences (its A/A check passed"
            + (f", floor within timing.max_noise {fmt.pct(n.max_noise)})" if n.max_noise else ")")
        )
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


def _arrays(specs: Sequence[Any]) -> str:
    return ", ".join(f"{a.dtype}[{','.join(map(str, a.shape))}]" for a in specs) or "none"


def _flops_source(p: Any) -> str:
    """Where the program's FLOPs per call come from, in words."""
    return {
        "config": "given by the config (`program.flops`)",
        "hlo_before": "our cost model of the unoptimized HLO (the ladder's `hlo_before`)",
    }.get(p.flops_source, p.flops_source or MISSING)


def _program_facts(base: Any, p: Any) -> list[str]:
    """The function studied: how it is called, its parameters, inputs and result, the
    new-shape call, and its FLOPs per call with where they come from."""
    return [
        f"function `{p.function}`, called as `function(params, *inputs)`",
        f"parameters from `{p.init}` (`init(jax.random.key(seed), *input_specs)`): "
        f"{p.param_leaves} arrays, {fmt.si(p.param_count, '')} values, "
        f"{fmt.si(p.param_bytes, 'B')} ({', '.join(p.param_dtypes)}) in `{base.name}`",
        f"inputs {_arrays(p.inputs)}; result {_arrays(p.output)}",
        f"the new-shape call (recompile): inputs {_arrays(p.recompile_inputs)}",
        f"FLOPs per call (`cost.flops_analytic`): {fmt.si(base.summary.cost.flops_analytic, 'FLOP')}, "
        f"{_flops_source(p)}"
        # The capture's share counts each loop the HLO does not count once: not beside the
        # profile's counts.
        + (
            f"; of which dots and convolutions {fmt.si(p.gemm_flops, 'FLOP')}"
            if not base.summary.cost.loop_counts
            else ""
        ),
    ]


def _reference_facts(run: SavedRun, wide: str) -> list[str]:
    """How the numerics reference ran (x64 on the CPU, or float32 where that fell back), and
    whether its result is less precise than float64."""
    fell_back = any(
        "the program in float32" in (v.summary.numerics.reference_note or "")
        for v in run.variants
        if v.summary.numerics is not None
    )
    items = [
        "numerics against the function itself run with jax's x64 on the CPU (result "
        f"{wide}), parameters and inputs widened to float64 from the values each variant used"
        if not fell_back
        else "numerics against the function itself in float32 on the CPU (the reference "
        "below says why)"
    ]
    if wide != "float64" and not fell_back:  # else the reference note says why
        items.append(
            "the reference's result is not float64: the function fixes its own dtype, so the "
            "reference is no more precise than that"
        )
    return items


def _variant_notes(run: SavedRun) -> list[str]:
    """Each variant's loop counts, reference note and failed probes; what every variant
    shares (the same loop counts, the same reference) is said once, not per variant."""
    items: list[str] = []
    counts = {
        v.name: v.summary.cost.loop_counts for v in run.variants if v.summary.cost.loop_counts
    }
    notes = {
        v.name: v.summary.numerics.reference_note
        for v in run.variants
        if v.summary.numerics is not None and v.summary.numerics.reference_note
    }
    for said, label in ((counts, "loop counts"), (notes, "reference")):
        if len(said) == len(run.variants) and len(set(said.values())) == 1:
            items.append(f"every variant's {label}: {next(iter(said.values()))}")
            said.clear()
    for v in run.variants:
        if v.name in counts:
            items.append(f"`{v.name}` loop counts: {counts[v.name]}")
        if v.name in notes:
            items.append(f"`{v.name}`: {notes[v.name]}")
        for f in v.summary.identity.probe_failures:
            items.append(
                f"`{v.name}`: the optional {f.probe} probe failed ({f.reason}); "
                "the variant's other results stand"
            )
    return items


def _program_rows(run: SavedRun) -> tuple[tuple[str, ...], ...]:
    """One row per variant with a program: its inputs as called, parameter dtypes and bytes,
    keyword arguments and the worst leaf of its numerics."""
    failed = failed_numerics(run)
    return tuple(
        (
            v.name,
            _arrays(v.summary.identity.program.inputs),
            ", ".join(v.summary.identity.program.param_dtypes) or MISSING,
            fmt.si(v.summary.identity.program.param_bytes, "B"),
            ", ".join(f"`{k}={fmt.text(x)}`" for k, x in v.summary.identity.program.kwargs.items())
            or "none",
            _worst_leaf(v.summary.numerics, failed.get(v.name)),
        )
        for v in run.variants
        if v.summary.identity.program is not None
    )


def program_blocks(run: SavedRun) -> list[Block]:
    """What a program study studied: the function, its arguments, parameters and result, the
    new-shape call, where the FLOPs and the reference come from; then each variant's dtypes."""
    base = run.by_role("baseline") or next(iter(run.variants), None)
    p = base.summary.identity.program if base is not None else None
    if base is None or p is None:
        return []
    wide = "/".join(p.reference_dtypes) or MISSING
    items = [*_program_facts(base, p), *_reference_facts(run, wide), *_variant_notes(run)]
    head = ("variant", "inputs as called", "parameter dtypes", "parameter bytes")
    return [
        Heading(2, "The program", "program"),
        Bullets(tuple(items)),
        Table((*head, "keyword arguments", "numerics: worst leaf"), _program_rows(run)),
    ]


def failed_numerics(run: SavedRun) -> dict[str, bool]:
    """Each variant over a tolerance, and whether the findings call that a failure (True) or
    its dtype's own rounding (False): the numerics verdict has one record, the accuracy
    findings (rule `numerics.accuracy`), which the table repeats and never judges again."""
    f = run.summary.findings
    if f is None:
        return {}
    failed = {name for a in f.numerics for name in a.failed}
    return {
        v.name: v.name in failed
        for v in run.variants
        if v.summary.numerics.ok is False or v.name in failed
    }


def _worst_leaf(n: Any, failure: bool | None = None) -> str:
    """The leaf a pytree result's numerics are of: its path, error and verdict (a leaf over
    its tolerance that the findings call its dtype's own rounding is said so, not FAIL)."""
    if n.rel_fro_err is None:
        return MISSING
    where = f"`{n.worst_leaf}` " if n.worst_leaf else ""
    failed = f" ({len(n.failed_leaves)} leaves)" if n.failed_leaves else ""
    verdict = accuracy_verdict(n, failure)
    verdict += failed if verdict == "FAIL" else ""
    return f"{where}{fmt.sci(n.rel_fro_err)} (tol {fmt.sci(n.tolerance)}) {verdict}"


def folder_size(sizes: Mapping[str, int]) -> str:
    """The run folder's size in one line: its total, then each kind that holds bytes, the
    largest first (`14.1 MB: dumps 6.93 MB, profiles 4.32 MB, ...`)."""
    kinds = sorted((k for k, n in sizes.items() if n), key=lambda k: (-sizes[k], k))
    parts = ", ".join(f"{k} {fmt.si(sizes[k], 'B')}" for k in kinds)
    return f"{fmt.si(sum(sizes.values()), 'B')}: {parts}" if parts else fmt.si(0, "B")


def environment_blocks(run: SavedRun) -> list[Block]:
    env = run.environment
    m = run.manifest
    # The environment and the manifest are the run's own text: shown as text, never Markdown.
    keys = ("platform", "device_kind", "device_count", "python", *env.versions, "git_commit")
    if env.compilation_cache is not None:
        keys += ("compilation_cache",)
    rows = tuple((k, literal(fmt.text(env.value(k)))) for k in keys)
    rows += tuple(
        (k, literal(fmt.text(getattr(m, k))))
        for k in ("config_file", "started", "finished", "status")
    )
    stages = m.stages_s
    if stages:
        rows += (
            (
                "time by stage",
                ", ".join(f"{k.removesuffix('_s')} {fmt.secs(val)}" for k, val in stages.items()),
            ),
        )
    if m.sizes:
        rows += (("run folder", folder_size(m.sizes)),)
    out: list[Block] = [Heading(2, "Environment", "environment"), Table(("what", "value"), rows)]
    if m.overrides:
        out.append(
            Table(
                ("override", "value", "previous"),
                tuple(
                    (literal(o.key), literal(fmt.option(o.value)), literal(fmt.text(o.previous)))
                    for o in m.overrides
                ),
            )
        )
    else:
        out.append(Para("No overrides: the config file as written."))
    studied = m.saved_config.studied()
    if studied is not None:
        name, section = studied
        out.append(
            Para(
                f"The {name}: {code(json.dumps(section, separators=(',', ':')))}; the whole "
                "config as run is in [manifest.json](manifest.json)."
            )
        )
    return out


def ceilings_line(ceilings: Ceilings | None) -> str:
    if ceilings is None or not ceilings.peaks:
        return "no ceilings measured"
    shown = ", ".join(
        f"{p} {fmt.si(v.flops_per_s, 'FLOP/s')}" for p, v in sorted(ceilings.peaks.items())
    )
    bw = fmt.si(ceilings.peak_bytes_per_s, "B/s")
    when = ceilings.measured_at if ceilings.measured_at is not None else "?"
    return f"{shown}; copy {bw} (measured {when})"


def headline(run: SavedRun) -> str:
    env = run.environment
    # The versions of the frontends the run has variants of, as each frontend's traits name
    # its packages.
    ran = {v.framework for v in run.variants}
    versions = [
        f"{p} {literal(fmt.text(env.versions.get(p)))}"
        for f in registry.names()
        if f in ran
        for p in registry.traits(f).packages
    ]
    bases = [
        f"`{v.name}` ({registry.traits(v.framework).label or v.framework})"
        for v in run.variants
        if "baseline" in v.roles
    ]
    return (
        f"{literal(fmt.text(env.device_kind))} ({literal(run.platform)})"
        + "".join(f", {v}" for v in versions)
        + ". "
        + (f"Baselines {', '.join(bases)}. " if len(bases) > 1 else f"Baseline `{run.baseline}`. ")
        + f"Ceilings: {ceilings_line(run.ceilings)}."
    )


def report_blocks(
    run: SavedRun,
    plots: Sequence[PlotOutcome],
    pages: frozenset[str] = frozenset(),
) -> tuple[Block, ...]:
    """Returns the leading page: the verdict, findings and what to change first, then the
    summary (a row per variant, linked to the variants in `pages`) and the plots. What backs
    them is on the run's details page (`details_blocks`): on a run whose differences resolve,
    one page of both was 3,059 words on the CPU and 6,569 on the H200."""
    studied = program_blocks(run)
    return (
        Heading(1, f"{literal(run.experiment)}: run {literal(run.run_id)}"),
        Para(headline(run)),
        *findings_blocks(run),
        *changes_blocks(run),
        Para(
            ("[the program](#program) · " if studied else "")
            + "[summary](#summary) · [plots](#plots) · details: "
            + (f"[evidence]({DETAILS_FILE}#evidence) · " if has_evidence(run) else "")
            + f"[noise]({DETAILS_FILE}#noise) · [memory and where the time goes]({DETAILS_FILE}) · "
            f"[observations]({DETAILS_FILE}#observations) · "
            f"[environment]({DETAILS_FILE}#environment) · "
            "[run folder](index.html)"
        ),
        *studied,
        Heading(2, "Summary", "summary"),
        summary_table(run, pages),
        Para(
            "A name opens the variant's page (every figure, its IR, clusters and first "
            "divergence as a diff). A ratio is the median of paired per-round ratios with its "
            "95% interval, between variants of one size; noise: no resolvable difference. "
            f'"{MISSING}": no such figure.'
        ),
        *plot_blocks(plots),
    )


def details_blocks(run: SavedRun) -> tuple[Block, ...]:
    """Returns the run's details page: each finding's evidence and the pairs that are noise,
    the noise, coverage, memory, where the time goes, observations, processes and
    environment."""
    blocks: list[Block] = [
        Heading(1, f"{literal(run.experiment)}: run {literal(run.run_id)}, the details"),
        Para(f"What backs the [leading page]({REPORT_FILE}): its findings' evidence and more."),
        *evidence_blocks(run),
        *noise_blocks(run),
        *coverage_blocks(run),
        *memory_report.memory_blocks(run),
        *ranking.overview_blocks(run),
        *observation_blocks(run),
        *sharded_blocks(run),
        *processes_blocks(run),
        *environment_blocks(run),
    ]
    if run.notes:
        blocks += [Heading(2, "Notes", "notes"), Bullets(tuple(run.notes))]
    return tuple(blocks)
