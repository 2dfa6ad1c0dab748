"""Findings and recommendations, derived from a run's data for any config.

A finding is one measured difference between a variant and its reference (the baseline of its
framework and size, else the lower bound), ranked by effect size, in three sentences: what (the
ratio with its interval), why (what differs in the config and in what XLA made of it: kernels,
transfers, epilogues, the GEMM's precision, bytes moved, where the programs first differ), and
the evidence. Pairs the run cannot resolve (same program, or an interval around 1.0) are grouped
as noise. Recommendations are the measured changes: a faster variant's difference from its
reference, or the reverse of a slower one's, each with its interval and its numerics; changes
this run did not measure are listed as untested, with the config that would measure them.

Nothing here reads a variant's name for meaning: roles, configs and measurements decide.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness import stats
from harness.config.program import knob
from harness.match.gaps import AttributionGaps
from harness.report import fmt, resolution
from harness.report.data import RunData, VariantData, same_size
from harness.report.memory import tradeoff as memory_tradeoff
from harness.summary import Verdict

PROBLEM_WORDS = {
    "dtype": "x's dtype",
    "w_dtype": "W's dtype",
    "gelu": "the GELU form",
    "frontend": "the frontend",
    "bias": "the bias",
    "m": "m",
    "k": "k",
    "n": "n",
    "batch": "the batch",
}
MODE_WORDS = {
    "eager": "op-by-op (eager) dispatch",
    "jit": "jit",
    "jit_host_callback": "a host callback (jax.debug.print) inside jit",
    "jit_lax_cond": "a data-dependent lax.cond inside jit",
    "matmul_only": "the GEMM alone",
}


@dataclass(frozen=True)
class Finding:
    variant: str
    against: str
    verdict: str
    effect: float  # |log ratio|, for ranking
    what: str
    why: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Recommendation:
    change: str
    variant: str
    effect: str
    tradeoff: str
    effect_size: float


@dataclass(frozen=True)
class Untested:
    change: str
    why: str
    snippet: str


# --- what differs -------------------------------------------------------------------------------


def config_differences(v: VariantData, ref: VariantData) -> list[str]:
    """Returns the config differences of `v` from `ref` as phrases: mode, problem, options."""
    a, b = v.summary.identity, ref.summary.identity
    out = []
    if a.mode != b.mode:
        out.append(f"{MODE_WORDS.get(a.mode, a.mode)} instead of {MODE_WORDS.get(b.mode, b.mode)}")
    for key, word in PROBLEM_WORDS.items():
        x, y = a.problem.get(key), b.problem.get(key)
        if key == "w_dtype":
            x, y = x or a.problem.get("dtype"), y or b.problem.get("dtype")
        if x != y:
            out.append(f"{word} {fmt.text(x)} (was {fmt.text(y)})")
    out += program_differences(v, ref)
    out += knob_differences(v, ref)
    for key in sorted(set(a.xla_options) | set(b.xla_options)):
        x, y = a.xla_options.get(key), b.xla_options.get(key)
        if x != y:
            out.append(
                f"`{key}={fmt.text(x)}`" + (f" (was {fmt.text(y)})" if y is not None else "")
            )
    return out


def knob_differences(v: VariantData, ref: VariantData) -> list[str]:
    """Returns the function's keyword arguments (`program.kwargs`) that differ, named like an
    XLA option: "`attention=cudnn` (was `attention=xla`)"."""
    a, b = v.summary.identity.program, ref.summary.identity.program
    if a is None or b is None:
        return []
    out = []
    for key in sorted(set(a.kwargs) | set(b.kwargs)):
        x, y = a.kwargs.get(key, None), b.kwargs.get(key, None)
        if x != y:
            was = f" (was `{knob(key, y)}`)" if key in b.kwargs else " (was unset)"
            out.append(f"`{knob(key, x)}`" + was if key in a.kwargs else f"`{key}` unset" + was)
    return out


def program_differences(v: VariantData, ref: VariantData) -> list[str]:
    """Returns what differs between two variants of a program study, as phrases: the inputs'
    dtypes and the parameters' dtypes, as each variant called its function."""
    a, b = v.summary.identity.program, ref.summary.identity.program
    if a is None or b is None:
        return []
    out = []
    for word, x, y in (
        (
            "the inputs' dtype",
            "/".join(sorted({i.dtype for i in a.inputs})),
            "/".join(sorted({i.dtype for i in b.inputs})),
        ),
        ("the parameters' dtype", "/".join(a.param_dtypes), "/".join(b.param_dtypes)),
    ):
        if x != y:
            out.append(f"{word} {x} (was {y})")
    return out


def config_change(v: VariantData, ref: VariantData) -> str:
    """The change that turns `ref` into `v`, in words and config keys."""
    return "; ".join(config_differences(v, ref)) or "no config difference (same options)"


def _clusters(v: VariantData) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in v.clusters():
        name = re.sub(r"(\.\d+)+$", "", str(c.get("name", "?")))
        what = c.get("target") or c.get("kind") or "?"
        out[f"{name} ({what})"] += 1
    return out


def mechanism(v: VariantData, ref: VariantData) -> list[str]:
    """Returns what XLA made differently, measured: kernels, transfers, clusters, epilogues,
    the GEMM's precision, bytes moved."""
    s, r = v.summary, ref.summary
    out = []
    kv, kr = s.profile.kernels_per_step, r.profile.kernels_per_step
    if kv is not None and kr is not None and kv != kr:
        out.append(f"{fmt.counted(kv, 'kernel')} a step instead of {fmt.count(kr)}")
        fused = _largest_fusion(ref)
        if kv > kr and fused and fused[1] >= 4:
            out.append(
                f"`{ref.name}` fuses {fused[1]} ops into `{fused[0]}`, which here run as separate kernels"
            )
    tv = Counter({t.direction: t.count for t in s.profile.transfers_per_step})
    tr = Counter({t.direction: t.count for t in r.profile.transfers_per_step})
    for direction in sorted(set(tv) | set(tr)):
        if tv[direction] != tr[direction]:
            nbytes = sum(t.bytes for t in s.profile.transfers_per_step if t.direction == direction)
            out.append(
                f"{fmt.counted(tv[direction], direction + ' copy')} a step ({fmt.si(nbytes, 'B')}) "
                f"instead of {fmt.count(tr[direction])}"
            )
    ea = {c.epilogue or "none" for c in s.hlo.library_calls}
    eb = {c.epilogue or "none" for c in r.hlo.library_calls}
    if s.hlo.library_calls and r.hlo.library_calls and ea != eb:
        out.append(
            f"the library GEMM's epilogue is {'/'.join(sorted(ea))} instead of {'/'.join(sorted(eb))}"
        )
    added = _clusters(v) - _clusters(ref)
    if added and ref.clusters() and len(added) <= 4:
        compiler = "Inductor" if v.framework == "torch" else "XLA"
        out.append(f"{compiler} adds " + ", ".join(f"`{k}`" for k in added))
    elif added and ref.clusters():
        out.append(
            f"{sum(added.values())} clusters more ({len(v.clusters())} against {len(ref.clusters())})"
        )
    pv, pr = s.cost.peak_precision, r.cost.peak_precision
    if pv and pr and pv != pr:
        out.append(f"the GEMM runs on {pv} instead of {pr}")
    bv, br = s.cost.bytes, r.cost.bytes
    if bv and br and abs(bv - br) > 0.05 * br:
        out.append(
            f"{fmt.si(abs(bv - br), 'B')} {'more' if bv > br else 'less'} memory traffic ({fmt.si(bv, 'B')} against {fmt.si(br, 'B')})"
        )
    seq = s.profile.step_sequence
    if any(x.startswith(("D2H(", "H2D(")) for x in seq) and not any(
        x.startswith(("D2H(", "H2D(")) for x in r.profile.step_sequence
    ):
        out.append("the device program is split by a host transfer: " + ", ".join(seq[:6]))
    return out


def _largest_fusion(v: VariantData) -> tuple[str, int] | None:
    """The fusion cluster holding the most ops (constants and parameters not counted)."""
    best = None
    for c in v.clusters():
        if not str(c.get("kind", "")).startswith("k"):
            continue
        ops = sum(
            int(n)
            for op, n in (c.get("member_opcodes") or {}).items()
            if op not in ("parameter", "constant")
        )
        if best is None or ops > best[1]:
            best = (str(c.get("name")), ops)
    return best


def divergence_sentence(v: VariantData) -> str:
    d = v.summary.comparison.first_divergence
    if d is None or d.stage == "none":
        return ""
    detail = d.detail if len(d.detail) <= 300 else d.detail[:297] + "..."
    return f"the programs first differ at `{d.stage}`: {detail}"


def reference(run: RunData, v: VariantData) -> tuple[VariantData | None, Verdict | None]:
    """The variant `v` is judged against: the baseline of its size, else the lower bound."""
    c = v.summary.comparison
    for verdict in (c.vs_baseline, c.vs_lower_bound):
        if verdict is not None and verdict.against != v.name:
            return run.variant(verdict.against), verdict
    return None, None


def finding_for(run: RunData, v: VariantData) -> Finding | None:
    ref, verdict = reference(run, v)
    if ref is None or verdict is None or verdict.ratio is None:
        return None
    lo, hi = verdict.ci95 or (verdict.ratio, verdict.ratio)
    words = "slower" if verdict.ratio > 1 else "faster"
    what = (
        f"`{v.name}` is {max(verdict.ratio, 1 / verdict.ratio):.2f}× {words} than `{ref.name}` "
        f"(ratio {verdict.ratio:.3f}, 95% CI {lo:.3f}–{hi:.3f})"
    )
    causes = config_differences(v, ref)
    mech = mechanism(v, ref)
    why = (
        "; ".join([*causes[:2], *mech[:4]])
        or "no difference in config or in what XLA made was recorded"
    )
    evidence = [
        f"time per step {fmt.step(v.summary.timing.step_s, v.summary.timing.step_ci95_s)} against "
        f"{fmt.step(ref.summary.timing.step_s, ref.summary.timing.step_ci95_s)}, {v.summary.timing.rounds} paired rounds",
    ]
    if (d := divergence_sentence(v)) and v.summary.comparison.first_divergence.against == ref.name:
        evidence.append(d)
    evidence += mech[4:]
    return Finding(
        v.name, ref.name, verdict.verdict, abs(math.log(verdict.ratio)), what, why, tuple(evidence)
    )


def findings(run: RunData) -> tuple[list[Finding], list[str]]:
    """Returns the resolved differences, largest effect first, and the unresolved pairs (noise).

    A run that failed its own A/A check (`noise.resolved` false) ranks no timing finding: every
    pair is then unresolved, whatever its verdict says (harness.resolution).
    """
    out: list[Finding] = []
    noise: list[str] = []
    gated = not resolution.resolved(run.summary)
    for v in run.variants:
        # The lower bound is what the others are measured against: "it is faster than the
        # baseline" only restates the baseline's own finding.
        if not v.measured or "lower_bound" in v.roles:
            continue
        ref, verdict = reference(run, v)
        if verdict is None or ref is None:
            continue
        if gated and verdict.verdict != stats.SAME_PROGRAM:
            noise.append(f"`{v.name}` against `{ref.name}`: the run could not resolve differences")
            continue
        if verdict.verdict in stats.NO_DIFFERENCE:
            why = "the same program" if verdict.verdict == stats.SAME_PROGRAM else verdict.why
            noise.append(f"`{v.name}` against `{ref.name}`: {why}")
            continue
        found = finding_for(run, v)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda f: -f.effect), noise


def attribution_gaps(run: RunData) -> list[tuple[str, AttributionGaps]]:
    """Returns each profiled variant whose steady window holds unattributed (or ambiguous)
    events, with what is missing: the findings and rankings that follow leave that time out."""
    out = []
    for v in run.variants:
        gaps = v.summary.profile.gaps
        if gaps is not None and (not gaps.complete or gaps.ambiguous_fraction > 0):
            out.append((v.name, gaps))
    return out


# --- what to change ----------------------------------------------------------------------------


def _numerics(v: VariantData, ref: VariantData) -> str:
    a, b = v.summary.numerics.rel_fro_err, ref.summary.numerics.rel_fro_err
    if a is None or b is None:
        return "numerics not measured"
    return f"error against float64 {fmt.sci(a)} (was {fmt.sci(b)})" + (
        "" if v.summary.numerics.ok else ", OUTSIDE its tolerance"
    )


def _pause(v: VariantData, ref: VariantData) -> str:
    a, b = v.summary.compile.first_call_s, ref.summary.compile.first_call_s
    if a is None or b is None:
        return ""
    return f"first call {fmt.secs(a)} (was {fmt.secs(b)})"


def recommendations(run: RunData) -> list[Recommendation]:
    """Returns the measured changes, largest effect first: adopt what a faster variant did;
    avoid what a slower one did (a choice the user makes: dtype, GELU form, options, mode)."""
    out = []
    for f in findings(run)[0]:
        v, ref = run.variant(f.variant), run.variant(f.against)
        if v is None or ref is None or "lower_bound" in v.roles:
            continue
        verdict = v.summary.comparison.vs_baseline or v.summary.comparison.vs_lower_bound
        interval = (
            f"{verdict.ratio:.3f}× (95% CI {verdict.ci95[0]:.3f}–{verdict.ci95[1]:.3f})"
            if verdict and verdict.ci95
            else "?"
        )
        diffs = config_differences(v, ref)
        if not diffs:
            continue
        peak = memory_tradeoff(run, v.name, ref.name)
        tradeoff = "; ".join(x for x in (_numerics(v, ref), _pause(v, ref), peak) if x)
        if f.verdict == stats.FASTER:
            change = "use " + "; ".join(diffs)
            effect = f"measured by `{v.name}`: {interval} against `{ref.name}`"
        elif "lower_bound" in ref.roles:
            continue
        else:
            change = "keep " + "; ".join(_reverse(d) for d in diffs)
            effect = f"`{v.name}` measured the opposite: {interval} against `{ref.name}`"
        out.append(Recommendation(change, v.name, effect, tradeoff, f.effect))
    return sorted(out, key=lambda r: -r.effect_size)


def _reverse(phrase: str) -> str:
    """'x (was y)' -> 'y (not x)'; 'a instead of b' -> 'b (not a)'."""
    m = re.match(r"^`(\w+)=(.*)` \(was `\w+=(.*)`\)$", phrase)  # a keyword argument
    if m:
        return f"`{m[1]}={m[3]}` (not `{m[1]}={m[2]}`)"
    m = re.match(r"^(.*?) (\S+) \(was (.+)\)$", phrase)
    if m:
        return f"{m[1]} {m[3]} (not {m[2]})"
    m = re.match(r"^(.*) instead of (.*)$", phrase)
    if m:
        return f"{m[2]} (not {m[1]})"
    m = re.match(r"^`(\w+)=(.+)`$", phrase)
    if m:
        return f"`{m[1]}` unset (not `{m[2]}`)"
    return f"without {phrase}"


UNTESTED_GPU = (
    (
        "xla_gpu_enable_triton_gemm",
        False,
        "cuBLASLt can then fuse bias and a tanh GELU into the GEMM's epilogue",
    ),
    (
        "xla_gpu_enable_command_buffer",
        "",
        "launches each kernel on its own instead of through a CUDA graph",
    ),
    ("xla_gpu_autotune_level", 4, "autotunes more GEMM configurations (longer first call)"),
)
UNTESTED_CPU = (
    (
        "xla_cpu_enable_fast_math",
        True,
        "lets LLVM reassociate and contract floating point in fusions",
    ),
)


def untested(run: RunData) -> list[Untested]:
    """Returns known changes this run did not measure, each with the config that would."""
    base = run.by_role("baseline")
    if base is None:
        return []
    measured = {
        (k, repr(val)) for v in run.variants for k, val in v.summary.identity.xla_options.items()
    }
    catalogue = UNTESTED_GPU if run.platform == "gpu" else UNTESTED_CPU
    out = []
    for key, value, why in catalogue:
        if (key, repr(value)) in measured:
            continue
        snippet = (
            f"  - name: {base.name}_{key.removeprefix('xla_')}\n    mode: {base.summary.identity.mode}\n"
            f"    xla_options: {{{key}: {_yaml(value)}}}"
        )
        out.append(Untested(f"`{key}: {_yaml(value)}`", why, snippet))
    studied = base.summary.identity.program
    if studied is not None:
        return out + _untested_program(run, base)
    p = base.summary.identity.problem
    forms = {v.summary.identity.problem.get("gelu") for v in run.variants if v.measured}
    if "tanh" not in forms:
        out.append(
            Untested(
                "the tanh GELU",
                "it is cheaper than erf and a cuBLASLt epilogue",
                f"  - name: {base.name}_tanh\n    problem: {{gelu: tanh}}",
            )
        )
    dtypes = {v.summary.identity.problem.get("dtype") for v in run.variants if v.measured}
    if "bfloat16" not in dtypes and p.get("dtype") == "float32":
        out.append(
            Untested(
                "bfloat16 inputs",
                "halves the bytes and runs the GEMM on bf16 tensor cores",
                f"  - name: {base.name}_bf16\n    problem: {{dtype: bfloat16}}",
            )
        )
    return out


def _untested_program(run: RunData, base: VariantData) -> list[Untested]:
    """A program study's untested dtype change: bfloat16 inputs and parameters, when no
    measured variant ran them."""
    ran = {
        (tuple(i.dtype for i in s.inputs), s.param_dtypes)
        for v in run.variants
        if v.measured and (s := v.summary.identity.program) is not None
    }
    if any("bfloat16" in inputs and "bfloat16" in params for inputs, params in ran):
        return []
    return [
        Untested(
            "bfloat16 inputs and parameters",
            "halves the bytes moved and runs the GEMMs on bf16 arithmetic (tensor cores on a "
            "GPU), at bf16's tolerance",
            f"  - name: {base.name}_bf16\n    mode: {base.summary.identity.mode}\n"
            "    program: {dtype: bfloat16, w_dtype: bfloat16}",
        )
    ]


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "''"
    return str(value)


# --- why the baseline's clusters are apart ------------------------------------------------------


@dataclass(frozen=True)
class Boundary:
    producer: str
    consumer: str
    reasons: tuple[str, ...]


def decision_lines(text: str) -> list[dict[str, str]]:
    """Parses priority fusion's decision log (text proto) into flat steps."""
    steps = []
    for block in re.findall(r"fusion_steps \{\s*(\w+) \{([^{}]*)\}\s*\}", text):
        kind, body = block
        fields = dict(re.findall(r'(\w+): "?([^"\n]*)"?', body))
        steps.append({"kind": kind, **fields})
    return steps


def _gemm_like(name: str) -> bool:
    return bool(re.search(r"gemm|dot|matmul|cublas", name))


def boundaries(run: RunData, base: VariantData, decisions: str) -> list[Boundary]:
    """Returns, for each pair of consecutive device clusters of the baseline's step, the
    evidence for why they are two launches (or 'no reason recorded')."""
    seq = [
        x
        for x in base.summary.profile.step_sequence
        if not x.startswith(("memset(", "D2H(", "H2D("))
    ]
    clusters = {str(c.get("name")): c for c in base.clusters()}
    steps = decision_lines(decisions) if decisions else []
    out = []
    for producer, consumer in itertools.pairwise(seq):
        pc = clusters.get(producer, {})
        reasons: list[str] = []
        if pc.get("kind") == "library":
            target = pc.get("target") or "a library call"
            epi = pc.get("epilogue")
            reasons.append(
                f"structure: `{producer}` is a library call ({target}"
                + (f", epilogue {epi}" if epi else "")
                + "): XLA fuses into it only the epilogues the library offers"
            )
            for step in steps:
                if step["kind"] == "producer_ineligible" and _gemm_like(
                    step.get("producer_name", "")
                ):
                    reasons.append(
                        f"XLA's fusion log (priority fusion): `{step.get('producer_name')}`: {step.get('reason')}"
                    )
                    break
            for p in base.summary.hlo.fusion_changing_passes:
                if (
                    "cublas" in p.sentence
                    or "custom-call" in p.sentence
                    or "turned dot" in p.sentence
                ):
                    reasons.append(f"pass {p.index:04d} `{p.name}` ({p.pipeline}): {p.sentence}")
                    break
            reasons += _where_it_fuses(run, base, pc)
        else:
            for step in steps:
                if (
                    step["kind"] == "producer_ineligible"
                    and step.get("producer_name", "").split(".")[0] in producer
                ):
                    reasons.append(
                        f"XLA's fusion log: `{step.get('producer_name')}`: {step.get('reason')}"
                    )
                    break
        out.append(Boundary(producer, consumer, tuple(reasons) or ("no reason recorded",)))
    return out


def _epilogue_parts(epilogue: str | None) -> frozenset[str]:
    """The operations a library GEMM's epilogue applies: BIAS_GELU is {BIAS, GELU}."""
    if not epilogue or epilogue == "DEFAULT":
        return frozenset()
    return frozenset(epilogue.split("_"))


def _where_it_fuses(run: RunData, base: VariantData, gemm: dict[str, Any]) -> list[str]:
    """A variant of the same size whose library GEMM holds a larger epilogue: what it did
    differently, and where the two compiles part."""
    out = []
    mine = max(
        (_epilogue_parts(c.epilogue) for c in base.summary.hlo.library_calls),
        key=len,
        default=frozenset(),
    )
    for v in run.variants:
        if v is base or not v.ok or not same_size(v, base) or v.framework != base.framework:
            continue
        for call in v.summary.hlo.library_calls:
            # A larger epilogue holds the base's and more (BIAS_GELU over BIAS); DEFAULT holds
            # nothing, however long its name.
            if _epilogue_parts(call.epilogue) > mine:
                d = v.summary.comparison.first_divergence
                part = f"; the compiles first differ at `{d.stage}`: {d.detail}" if d else ""
                out.append(
                    f"with {config_change(v, base)} (`{v.name}`) the GEMM is {call.target} with "
                    f"epilogue {call.epilogue}, one launch{part}"
                )
                return out
    return out


def origins(v: VariantData, pass_texts: dict[str, str]) -> dict[str, str]:
    """Returns, for clusters XLA created (no source op of their own: converts, copies,
    wrapped ops), the pass whose output first holds them."""
    out = {}
    ordered = sorted(pass_texts)
    for c in v.clusters():
        name = str(c.get("name", ""))
        if c.get("source_ops") and not name.startswith(
            ("wrapped_", "copy", "convert", "transpose")
        ):
            continue
        for key in ordered:
            if f"%{name} = " in pass_texts[key]:
                out[name] = f"created by pass {key}"
                break
        else:
            out.setdefault(
                name, "not in any dumped pass (created before the first one, or not dumped)"
            )
    return out
