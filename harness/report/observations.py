"""The textbook's observations, one verdict per claim and framework, checked against this run.

Each function takes the run's data, the framework whose variants it judges (`jax`, or `torch`
for the PyTorch row) and, for the IR claims, excerpts of emitted files read at the edge; it
returns Observations: the claim, a verdict, and the figures behind it. Variants are found by
role and framework (harness.config.roles), never by name, so renaming a variant in the config
changes nothing here. A verdict is "yes", "no", "not on this platform", or "not measured"
with the reason: the run lacks the variant or the figures to decide. `observation_table`
puts the frameworks side by side, one row per claim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report import fmt
from harness.report.data import RunData, VariantData

YES, NO, NOT_HERE, NOT_MEASURED = "yes", "no", "not on this platform", "not measured"
# The study has no variant in the role a claim needs (a program study has no host callback,
# no traced branch, no lower bound): nothing was measured, and nothing is claimed.
NOT_IN_STUDY = "not measured in this study"
PAUSE_FACTOR = 10.0  # a pause is a first call (or recompile) at least this many steps long
FRAMEWORKS = {"jax": "JAX", "torch": "PyTorch"}


@dataclass(frozen=True)
class Observation:
    key: str
    claim: str
    verdict: str
    evidence: tuple[str, ...]
    quote: str = ""


def _missing(key: str, claim: str, why: str) -> Observation:
    return Observation(key, claim, NOT_MEASURED, (why,))


def _transfers(v: VariantData) -> tuple[float, float] | None:
    """Returns (count, bytes) of transfers per step over all directions; None if not profiled."""
    p = v.summary.profile
    if p.kernels_per_step is None:
        return None
    return sum(t.count for t in p.transfers_per_step), sum(t.bytes for t in p.transfers_per_step)


def _none_in_role(role: str, framework: str) -> str:
    return f"this run has no {FRAMEWORKS.get(framework, framework)} variant in the `{role}` role"


def _absent(key: str, claim: str, role: str, framework: str) -> Observation:
    """The claim needs a variant in `role`, which the study does not have."""
    return Observation(key, claim, NOT_IN_STUDY, (_none_in_role(role, framework),))


def eager(run: RunData, framework: str = "jax") -> list[Observation]:
    """Eager dispatch issues one launch per primitive (≥ 3), and temporary transfers."""
    k1, c1 = "eager_launches", "Eager issues three or more launches per step."
    k2, c2 = "eager_transfers", "Eager adds temporary host-device transfers per step."
    v = run.by_role("eager", framework)
    if v is None:
        return [_absent(k1, c1, "eager", framework), _absent(k2, c2, "eager", framework)]
    if not v.ok:
        why = f"{v.name} {v.summary.identity.status}"
        return [_missing(k1, c1, why), _missing(k2, c2, why)]
    kernels = v.summary.profile.kernels_per_step
    modules = v.summary.identity.eager_modules
    ev: list[str] = []
    if kernels is not None:
        ev.append(f"{v.name}: {fmt.count(kernels)} device kernels per step")
    if modules:
        ev.append(f"{len(modules)} primitive modules compiled: {', '.join(modules)}")
    elif framework == "torch" and v.summary.profile.step_sequence:
        ev.append(f"one step: {', '.join(v.summary.profile.step_sequence[:8])}")
    launches = kernels if kernels is not None else (len(modules) or None)
    first = (
        _missing(k1, c1, f"{v.name} has neither a profile nor eager modules")
        if launches is None
        else Observation(k1, c1, YES if launches >= 3 else NO, tuple(ev))
    )
    t = _transfers(v)
    if t is None:
        second = _missing(k2, c2, f"{v.name} was not profiled")
    else:
        tev = (f"{v.name}: {fmt.count(t[0])} transfers per step ({fmt.si(t[1], 'B')})",)
        if t[0] > 0:
            second = Observation(k2, c2, YES, tev)
        elif run.platform == "cpu":
            second = Observation(
                k2,
                c2,
                NOT_HERE,
                (*tev, "on a CPU host memory is device memory: nothing to transfer"),
            )
        else:
            second = Observation(k2, c2, NO, tev)
    return [first, second]


def _pause(run: RunData, key: str, claim: str, which: str, framework: str) -> Observation:
    v = run.by_role("baseline", framework)
    if v is None:
        return _absent(key, claim, "baseline", framework)
    if not v.ok:
        return _missing(
            key, claim, f"this run has no {FRAMEWORKS.get(framework, framework)} baseline that ran"
        )
    c, step = v.summary.compile, v.summary.timing.step_s
    pause = c.first_call_s if which == "first" else c.recompile_s
    if pause is None or step is None:
        return _missing(
            key,
            claim,
            f"{v.name} has no {'first-call' if which == 'first' else 'recompile'} pause or step time",
        )
    factor = pause / step
    label = "first call" if which == "first" else "recompile"
    if framework == "torch":
        phases = ", ".join(f"{k} {fmt.secs(val)}" for k, val in c.by_pipeline.items())
        reasons = v.summary.dynamo.recompile_reasons if v.summary.dynamo else ()
        detail = (
            f"torch.compile {fmt.secs(c.compile_s)}" + (f": {phases}" if phases else "")
            if which == "first"
            else f"{fmt.text(c.recompile_backend_compiles)} Dynamo compiles for the new shape"
            + (f": {reasons[0].splitlines()[0][:120]}" if reasons else "")
        )
    else:
        detail = (
            f"compile {fmt.secs(c.compile_s)}, of which XLA {fmt.secs(c.xla_compile_s)}"
            + (f", autotuning {fmt.secs(c.autotuning_s)}" if c.autotuning_s else "")
            if which == "first"
            else f"{fmt.text(c.recompile_backend_compiles)} XLA compilations for the new shape, "
            f"{fmt.secs(c.recompile_xla_compile_s)}"
        )
    ev = (f"{v.name}: {label} {fmt.ms(pause)} = {factor:.0f}× the step {fmt.ms(step)}", detail)
    return Observation(key, claim, YES if factor >= PAUSE_FACTOR else NO, ev)


def first_call_pause(run: RunData, framework: str = "jax") -> list[Observation]:
    return [_pause(run, "first_call_pause", "The first compiled call pauses.", "first", framework)]


def new_shape_pause(run: RunData, framework: str = "jax") -> list[Observation]:
    return [_pause(run, "new_shape_pause", "A new shape pauses again.", "recompile", framework)]


def fused_epilogue(run: RunData, framework: str = "jax") -> list[Observation]:
    """Compiled calls use a library matmul with a fused epilogue; and fewer kernels than eager."""
    k1 = "library_epilogue"
    c1 = "A compiled call runs one library matmul with a fused epilogue."
    k2 = "fewer_kernels"
    c2 = "A compiled call runs fewer kernels than eager."
    if not run.with_role("compiled", framework):
        return [
            _absent(k1, c1, "compiled", framework),
            _absent(k2, c2, "compiled", framework),
        ]
    compiled = [
        v for v in run.with_role("compiled", framework) if v.ok and "lower_bound" not in v.roles
    ]
    found = [
        (v, c)
        for v in compiled
        for c in v.summary.hlo.library_calls
        if c.epilogue and c.epilogue not in ("DEFAULT",)
    ]
    if found:
        ev = tuple(
            f"{v.name}: {c.target} with epilogue {c.epilogue} ({c.cluster})" for v, c in found[:4]
        )
        first = Observation(k1, c1, YES, ev)
    elif any(v.summary.hlo.fusion_count is not None for v in compiled):
        libs = [
            f"{v.name}: {', '.join(c.target for c in v.summary.hlo.library_calls) or 'none'}"
            for v in compiled[:4]
        ]
        first = Observation(k1, c1, NO, tuple(f"library calls — {x}" for x in libs))
    else:
        first = _missing(k1, c1, "no compiled variant was analyzed")
    e, b = run.by_role("eager", framework), run.by_role("baseline", framework)
    ke = e.summary.profile.kernels_per_step if e else None
    kb = b.summary.profile.kernels_per_step if b else None
    if ke is None or kb is None:
        second = _missing(k2, c2, "kernels per step needs a profiled eager variant and baseline")
    else:
        second = Observation(
            k2,
            c2,
            YES if kb < ke else NO,
            (f"kernels per step: {e.name} {fmt.count(ke)}, {b.name} {fmt.count(kb)}",),
        )
    return [first, second]


def host_callback_split(run: RunData, framework: str = "jax") -> list[Observation]:
    """A host callback splits the compiled region: more kernels or transfers than the baseline
    (for PyTorch also: Dynamo broke the graph at the print)."""
    key, claim = "host_callback_split", "A host callback (print) splits the compiled region."
    cb, base = run.by_role("host_callback", framework), run.by_role("baseline", framework)
    if cb is None or base is None:
        return [_absent(key, claim, "host_callback" if cb is None else "baseline", framework)]
    if not cb.ok or not base.ok:
        return [
            _missing(
                key, claim, "needs a variant in the `host_callback` role and a baseline that ran"
            )
        ]
    pa, pb = cb.summary.profile, base.summary.profile
    if pa.kernels_per_step is None or pb.kernels_per_step is None:
        return [_missing(key, claim, "needs both variants profiled")]
    ev = [
        f"kernels per step: {cb.name} {fmt.count(pa.kernels_per_step)}, {base.name} {fmt.count(pb.kernels_per_step)}",
        f"device ops per step: {cb.name} {fmt.count(pa.device_ops_per_step)}, {base.name} {fmt.count(pb.device_ops_per_step)}",
    ]
    ta, tb = _transfers(cb), _transfers(base)
    more = pa.kernels_per_step > pb.kernels_per_step or (pa.device_ops_per_step or 0) > (
        pb.device_ops_per_step or 0
    )
    if ta is not None and tb is not None:
        ev.append(
            f"transfers per step: {cb.name} {fmt.count(ta[0])}, {base.name} {fmt.count(tb[0])}"
        )
        more |= ta[0] > tb[0]
    if pa.step_sequence:
        ev.append(f"{cb.name}'s step: {', '.join(pa.step_sequence[:8])}")
    broke = _breaks(cb)
    if broke:
        ev.append(broke)
        more |= bool(cb.summary.dynamo and (cb.summary.dynamo.graph_break_count or 0) > 0)
    if cb.summary.identity.callback_lines:
        ev.append(f"the callback printed {cb.summary.identity.callback_lines} lines")
    return [Observation(key, claim, YES if more else NO, tuple(ev))]


def _breaks(v: VariantData) -> str:
    """Returns `name: N graphs, M breaks (explain()): reason at file:line`, or '' (JAX)."""
    d = v.summary.dynamo
    if d is None or d.graph_count is None:
        return ""
    where = f" at {d.break_locations[0].rsplit('/', 1)[-1]}" if d.break_locations else ""
    why = f": {d.break_reasons[0][:120]}{where}" if d.break_reasons else ""
    breaks = d.graph_break_count or 0
    return (
        f"{v.name}: {d.graph_count} graphs, {breaks} graph break{'' if breaks == 1 else 's'} "
        f"({d.explain_source}){why}"
    )


def traced_branch(run: RunData, framework: str = "jax") -> list[Observation]:
    """A data-dependent Python branch cannot stay inside the compiled region: jit refuses it,
    Dynamo breaks the graph at it."""
    key = "traced_branch"
    claim = "A data-dependent branch splits (or is refused by) the compiled region."
    v = run.by_role("traced_branch", framework)
    if v is None:
        return [_absent(key, claim, "traced_branch", framework)]
    err = v.summary.identity.expected_error
    ev = []
    if err is not None:
        refuser = "torch.compile(fullgraph=True)" if framework == "torch" else "jit"
        ev.append(f"{v.name}: {refuser} refused it: {err.type}: {err.message[:160]}")
    split = _breaks(v)
    if split:
        ev.append(split)
    d = run.by_role("device_branch", framework)
    if d is not None and d.ok:
        ev.append(
            f"{d.name} keeps the branch on the device (lax.cond): {fmt.count(d.summary.profile.kernels_per_step)} kernels per step"
        )
    broke = bool(v.summary.dynamo and (v.summary.dynamo.graph_break_count or 0) > 0)
    return [
        Observation(
            key,
            claim,
            YES if err is not None or broke else NO,
            tuple(ev) or (f"{v.name}: {v.summary.identity.status}",),
        )
    ]


_SIZE_MISMATCH = re.compile(
    r"tensor '([^']+)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)"
)


def cache_miss_explains(run: RunData, framework: str = "jax") -> list[Observation]:
    """The compiler's log names the argument whose shape changed (JAX's tracing-cache miss,
    Dynamo's recompile reason next to the guards that failed)."""
    key, claim = "cache_miss_log", "The compiler's log explains the recompile."
    v = run.by_role("baseline", framework)
    if v is None:
        return [_absent(key, claim, "baseline", framework)]
    if framework == "torch":
        d = v.summary.dynamo
        if d is None or not d.recompile_reasons:
            return [_missing(key, claim, "the PyTorch baseline logged no recompile reason")]
        found = _SIZE_MISMATCH.search(d.recompile_reasons[0])
        ev = [
            f"{v.name}: "
            + (
                f"argument {found.group(1)}, dim {found.group(2)}: {found.group(3)} → "
                f"{found.group(4)}"
                if found
                else "no changed argument named"
            )
        ]
        if d.guard_count is not None:
            ev.append(f"{d.guard_count} guards on the first compile")
        guards = [
            g.lstrip("| +-")
            for g in v.compile.get("guards") or []
            if isinstance(g, str) and "TENSOR_MATCH" in g
        ]
        quote = "\n".join([*d.recompile_reasons[:2], *guards[:6]])
        return [Observation(key, claim, YES if found else NO, tuple(ev), quote=quote)]
    text = v.summary.compile.recompile_explanation
    if not text:
        return [_missing(key, claim, "the baseline has no recompile explanation")]
    named = re.search(r"now \S+ and before \S+", text)
    ev = (f"{v.name}: " + (named.group(0) if named else "no changed argument named"),)
    return [Observation(key, claim, YES if "CACHE MISS" in text and named else NO, ev, quote=text)]


# What a later IR says about loops, thread blocks and memory spaces, by stage.
IR_PATTERNS: dict[str, tuple[tuple[str, str], ...]] = {
    # A PTX `bra` may be a plain branch, so loops come from Triton's scf.for and LLVM's loop
    # metadata or phi nodes only. Triton comes first so quotes prefer the highest-level IR.
    # Inductor's output_code (the PyTorch row) comes last: its C++ loops, or Triton's source.
    "loops": (
        ("triton", r"scf\.for"),
        ("llvm", r"llvm\.loop|\bphi\b"),
        ("output_code", r"for\s*\(\s*int64_t|\bfor \w+ in range\("),
    ),
    "thread blocks": (
        ("triton", r"tt\.get_program_id"),
        ("ptx", r"%tid\.[xyz]|%ctaid\.[xyz]"),
        ("llvm", r"nvvm\.read\.ptx\.sreg\.(tid|ctaid)"),
        ("output_code", r"tl\.program_id"),
    ),
    "memory spaces": (
        ("triton", r"ttg\.local_alloc|#smem|shared"),
        ("ptx", r"\.shared|\.global|ld\.shared|st\.shared"),
        ("llvm", r"addrspace\(3\)|addrspace\(1\)"),
    ),
}
_GPU_ONLY = ("thread blocks", "memory spaces")


def ir_excerpts(
    texts: Mapping[str, Sequence[tuple[str, str]]], per_part: int = 2
) -> dict[str, list[str]]:
    """Returns, for each part of IR_PATTERNS, up to `per_part` quoted lines `path: line`."""
    out: dict[str, list[str]] = {}
    for part, pats in IR_PATTERNS.items():
        found: list[str] = []
        for stage, pat in pats:
            rx = re.compile(pat)
            for path, text in texts.get(stage, ()):
                for line in text.splitlines():
                    if len(found) >= per_part:
                        break
                    if rx.search(line):
                        found.append(f"{path}: {line.strip()[:140]}")
        out[part] = found
    return out


def later_ir(
    run: RunData, texts: Mapping[str, Sequence[tuple[str, str]]], framework: str = "jax"
) -> list[Observation]:
    """A later IR (Triton, LLVM, PTX) names loops, thread blocks and memory spaces: three claims."""
    out = []
    have = any(texts.values())
    found = ir_excerpts(texts) if have else {}
    for part in IR_PATTERNS:
        key = f"later_ir_{part.replace(' ', '_')}"
        claim = f"A later IR names {part}."
        if not have:
            kept = (
                "Triton, LLVM, PTX or Inductor code"
                if framework == "torch"
                else "Triton, LLVM or PTX"
            )
            out.append(_missing(key, claim, f"this run kept no {kept} stage"))
            continue
        lines = found[part]
        if lines:
            out.append(Observation(key, claim, YES, (f"{len(lines)} quoted",), "\n".join(lines)))
        elif part in _GPU_ONLY and run.platform == "cpu":
            out.append(
                Observation(
                    key, claim, NOT_HERE, ("thread blocks and shared memory are GPU concepts",)
                )
            )
        else:
            out.append(Observation(key, claim, NO, ("no line of the kept IR matches",)))
    return out


def flops_counted(run: RunData, framework: str = "jax") -> list[Observation]:
    """FLOPs and bytes are counted: ours against XLA's cost analysis."""
    key, claim = "flops_counted", "FLOPs and bytes are counted."
    v = run.by_role("baseline", framework)
    if v is None:
        return [_absent(key, claim, "baseline", framework)]
    if v.summary.cost.flops_analytic is None:
        return [_missing(key, claim, "the baseline has no FLOP count")]
    c = v.summary.cost
    if framework == "torch" and c.flops is None:
        return [
            _missing(
                key,
                claim,
                f"{v.name}: analytic {fmt.si(c.flops_analytic, 'FLOP')} only; the cost model "
                "reads HLO, and Inductor's kernels are not costed",
            )
        ]
    first = {
        "hlo_before": f"ours before optimization {fmt.si(c.flops_analytic, 'FLOP')}, after",
        "config": f"from the config {fmt.si(c.flops_analytic, 'FLOP')}, ours",
    }.get(c.flops_analytic_source or "", f"analytic {fmt.si(c.flops_analytic, 'FLOP')}, ours")
    ev = [
        f"{v.name}: {first} {fmt.si(c.flops, 'FLOP')}, XLA {fmt.si(c.flops_xla, 'FLOP')}; "
        f"bytes ours {fmt.si(c.bytes, 'B')}, XLA {fmt.si(c.bytes_xla, 'B')}"
    ]
    ev += [f"flagged: {d}" for d in c.disagreements[:3]] or ["no disagreement flagged"]
    verdict = YES if c.flops is not None and c.bytes is not None else NO
    return [Observation(key, claim, verdict, tuple(ev))]


SUMMARY_OBSERVATIONS: tuple[Callable[[RunData, str], list[Observation]], ...] = (
    eager,
    first_call_pause,
    fused_epilogue,
    new_shape_pause,
    host_callback_split,
    traced_branch,
    cache_miss_explains,
)


def all_observations(
    run: RunData, texts: Mapping[str, Sequence[tuple[str, str]]], framework: str = "jax"
) -> tuple[Observation, ...]:
    """Returns every observation of one framework, in the textbook's order."""
    out: list[Observation] = []
    for f in SUMMARY_OBSERVATIONS:
        out += f(run, framework)
    return (*out, *later_ir(run, texts, framework), *flops_counted(run, framework))


@dataclass(frozen=True)
class ObservationRow:
    """One claim, judged once per framework (`by_framework`: framework -> its Observation)."""

    key: str
    claim: str
    by_framework: Mapping[str, Observation]


def observation_table(
    run: RunData, texts: Mapping[str, Mapping[str, Sequence[tuple[str, str]]]]
) -> tuple[ObservationRow, ...]:
    """Returns one row per claim with every framework's verdict (`texts`: framework -> its
    emitter excerpts, from read_emitter_texts)."""
    judged = {f: all_observations(run, texts.get(f, {}), f) for f in FRAMEWORKS}
    keys = [o.key for o in judged["jax"]]
    rows = []
    for i, key in enumerate(keys):
        by = {f: obs[i] for f, obs in judged.items() if i < len(obs) and obs[i].key == key}
        rows.append(ObservationRow(key, judged["jax"][i].claim, by))
    return tuple(rows)


EMITTER_STAGES = ("triton", "llvm", "ptx")
TORCH_EMITTER_STAGES = (*EMITTER_STAGES, "output_code")


def read_emitter_texts(
    run: RunData, limit: int = 500_000, per_stage: int = 200, framework: str = "jax"
) -> dict[str, list[tuple[str, str]]]:
    """Reads (at the edge) the first `limit` characters of up to `per_stage` files per emitter
    stage of the framework's variants (for PyTorch also Inductor's output_code); the
    baseline's files come first, so quotes prefer it."""
    stages = TORCH_EMITTER_STAGES if framework == "torch" else EMITTER_STAGES
    mine = [v for v in run.variants if v.framework == framework]
    order = sorted(mine, key=lambda v: "baseline" not in v.roles)
    out: dict[str, list[tuple[str, str]]] = {s: [] for s in stages}
    for v in order:
        for s in v.stages:
            if s.stage not in out or len(out[s.stage]) >= per_stage or not s.exists:
                continue
            p = run.path / s.path
            files = (
                sorted(f for f in p.iterdir() if f.is_file() and not f.is_symlink())
                if p.is_dir()
                else [p]
            )
            for f in files:
                if len(out[s.stage]) >= per_stage:
                    break
                with open(f, errors="replace") as fh:
                    out[s.stage].append((str(Path(f).relative_to(run.path)), fh.read(limit)))
    return out
