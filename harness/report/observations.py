"""The textbook's observations, each checked against this run by one small pure function.

Each function takes the run's data (and, for the IR observation, excerpts of emitter files read
at the edge) and returns an Observation: the claim, a verdict, and the figures behind it. A
verdict is "yes", "no", "not on this platform", or "not measured" when the run lacks the numbers
(named in the evidence) to decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report import fmt
from harness.report.data import RunData, VariantData

YES, NO, NOT_HERE, NOT_MEASURED = "yes", "no", "not on this platform", "not measured"
PAUSE_FACTOR = 10.0  # a pause is a first call (or recompile) at least this many steps long


@dataclass(frozen=True)
class Observation:
    key: str
    claim: str
    verdict: str
    evidence: tuple[str, ...]
    quote: str = ""


def _missing(key: str, claim: str, what: str) -> Observation:
    return Observation(key, claim, NOT_MEASURED, (f"this run has no {what}",))


def _transfers(v: VariantData) -> tuple[float, float] | None:
    """Returns (count, bytes) of transfers per step summed over directions, None if unknown."""
    rows = v.get("transfers_per_step")
    if not isinstance(rows, list):
        return None
    n = sum(
        fmt.num(r.get("count", r.get("count_per_step"))) or 0 for r in rows if isinstance(r, dict)
    )
    b = sum(
        fmt.num(r.get("bytes", r.get("bytes_per_step"))) or 0 for r in rows if isinstance(r, dict)
    )
    return n, b


def eager_launches(run: RunData) -> Observation:
    """Eager dispatch issues one launch per primitive (≥ 3) plus temporary transfers."""
    key, claim = "eager_launches", "Eager issues ≥ 3 launches per step plus temporary transfers."
    v = run.variant("eager")
    if v is None or not v.ok:
        return _missing(key, claim, "eager variant")
    kernels = fmt.num(v.get("kernels_per_step"))
    modules = v.get("eager_modules") or []
    ev: list[str] = []
    if kernels is not None:
        ev.append(f"eager runs {fmt.count(kernels)} device kernels per step")
    if modules:
        ev.append(f"{len(modules)} primitive modules compiled: {', '.join(modules)}")
    launches = kernels if kernels is not None else (len(modules) or None)
    if launches is None:
        return _missing(key, claim, "kernels_per_step or eager_modules for eager")
    t = _transfers(v)
    if t is not None:
        ev.append(f"{fmt.count(t[0])} transfers per step ({fmt.si(t[1], 'B')})")
    if launches < 3:
        return Observation(key, claim, NO, tuple(ev))
    if t is None:
        return Observation(key, claim, NOT_MEASURED, (*ev, "transfers_per_step is absent"))
    if t[0] > 0:
        return Observation(key, claim, YES, tuple(ev))
    if run.platform == "cpu":
        ev.append("on the CPU host memory is device memory, so there is nothing to transfer")
        return Observation(key, claim, NOT_HERE, tuple(ev))
    return Observation(key, claim, NO, tuple(ev))


def _pause(run: RunData, key: str, claim: str, field: str, label: str) -> Observation:
    v = run.variant(run.baseline) or run.variant("xla")
    if v is None or not v.measured or fmt.num(v.get(field)) is None:
        return _missing(key, claim, f"{field} and step time for the baseline")
    pause, step = float(v.get(field)), float(v.get("step_time_median_s"))
    factor = pause / step
    compile_line = (
        f"{v.get('recompile_backend_compiles')} XLA compilations for the new shape, "
        f"{fmt.secs(v.get('recompile_xla_compile_s'))}"
        if field == "recompile_s"
        else f"compile {fmt.secs(v.get('compile_s'))}, of which XLA {fmt.secs(v.get('xla_compile_s'))}"
    )
    ev = (
        f"{v.name}: {label} {fmt.ms(pause)} = {factor:.0f}× the median step {fmt.ms(step)}",
        compile_line,
    )
    return Observation(key, claim, YES if factor >= PAUSE_FACTOR else NO, ev)


def first_call_pause(run: RunData) -> Observation:
    """The first compiled call pauses: it traces, lowers and compiles before it runs."""
    return _pause(
        run, "first_call_pause", "The first compiled call pauses.", "first_call_s", "first call"
    )


def new_shape_pause(run: RunData) -> Observation:
    """A call with a new input shape pauses again: the cache key changed, so XLA recompiles."""
    return _pause(run, "new_shape_pause", "A new shape pauses again.", "recompile_s", "recompile")


def _libs(v: VariantData | None) -> list[dict]:
    calls = v.get("library_calls") if v else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def library_epilogue(run: RunData) -> Observation:
    """Compiled calls use a library matmul with a fused epilogue, or fewer generated kernels."""
    key = "library_epilogue"
    claim = "Later calls show a library matmul with a fused epilogue, or fewer generated kernels than eager."
    ev: list[str] = []
    fused = False
    for name in ("xla", "xla_library_epilogue"):
        v = run.variant(name)
        if v is None:
            continue
        if not v.ok:
            ev.append(f"{name}: {v.get('status')} ({v.get('reason', '')})")
            continue
        libs = _libs(v)
        if v.get("library_calls") is not None:
            shown = ", ".join(
                f"{c.get('target')} + {c.get('epilogue') or 'no epilogue'}" for c in libs
            )
            ev.append(f"{name}: library calls {shown or 'none'}")
        fused |= any(c.get("epilogue") for c in libs)
    eager, xla = run.variant("eager"), run.variant("xla")
    ke = fmt.num(eager.get("kernels_per_step")) if eager else None
    kx = fmt.num(xla.get("kernels_per_step")) if xla else None
    fewer = ke is not None and kx is not None and kx < ke
    if ke is not None and kx is not None:
        ev.append(f"kernels per step: eager {fmt.count(ke)}, xla {fmt.count(kx)}")
    if fused or fewer:
        return Observation(key, claim, YES, tuple(ev))
    measured_libs = any("library calls" in e for e in ev)
    if not measured_libs and (ke is None or kx is None):
        return _missing(key, claim, "library_calls or kernels_per_step")
    return Observation(key, claim, NO, tuple(ev))


def host_callback_split(run: RunData) -> Observation:
    """A host callback splits the compiled region: more kernels or transfers than plain jit."""
    key, claim = "host_callback_split", "A host callback splits the compiled region."
    cb, xla = run.variant("xla_host_callback"), run.variant("xla")
    if cb is None or xla is None or not cb.ok or not xla.ok:
        return _missing(key, claim, "xla_host_callback and xla variants")
    ev: list[str] = []
    more = False
    for field in ("kernels_per_step", "device_ops_per_step"):
        a, b = fmt.num(cb.get(field)), fmt.num(xla.get(field))
        if a is not None and b is not None:
            ev.append(f"{field.replace('_', ' ')}: callback {fmt.count(a)}, xla {fmt.count(b)}")
            more |= a > b
    ta, tb = _transfers(cb), _transfers(xla)
    if ta is not None and tb is not None:
        ev.append(f"transfers per step: callback {fmt.count(ta[0])}, xla {fmt.count(tb[0])}")
        more |= ta[0] > tb[0]
    if cb.get("callback_lines"):
        ev.append(f"the callback printed {cb.get('callback_lines')} lines (once per call)")
    if len(ev) <= 1 and not more:
        return _missing(key, claim, "kernels_per_step or transfers_per_step for both variants")
    return Observation(key, claim, YES if more else NO, tuple(ev))


def cache_miss_explains(run: RunData) -> Observation:
    """The tracing cache-miss log names the argument whose shape changed."""
    key, claim = "cache_miss_log", "The cache-miss log explains the recompile."
    v = run.variant(run.baseline) or run.variant("xla")
    text = v.get("recompile_explanation") if v else None
    if not text:
        return _missing(key, claim, "recompile_explanation for the baseline")
    named = re.search(r"now \S+ and before \S+", text)
    ev = (f"{v.name}: " + (named.group(0) if named else "no changed argument named"),)
    verdict = YES if "CACHE MISS" in text and named else NO
    return Observation(key, claim, verdict, ev, quote=text)


# What a later IR says about loops, thread blocks and memory spaces, by stage.
IR_PATTERNS: dict[str, tuple[tuple[str, str], ...]] = {
    # A PTX `bra` may be a plain branch, so loops come from Triton's scf.for and LLVM's loop
    # metadata or phi nodes only. Triton comes first so quotes prefer the highest-level IR.
    "loops": (
        ("triton", r"scf\.for"),
        ("llvm", r"llvm\.loop|\bphi\b"),
    ),
    "thread blocks": (
        ("triton", r"tt\.get_program_id"),
        ("ptx", r"%tid\.[xyz]|%ctaid\.[xyz]"),
        ("llvm", r"nvvm\.read\.ptx\.sreg\.(tid|ctaid)"),
    ),
    "memory spaces": (
        ("triton", r"ttg\.local_alloc|#smem|shared"),
        ("ptx", r"\.shared|\.global|ld\.shared|st\.shared"),
        ("llvm", r"addrspace\(3\)|addrspace\(1\)"),
    ),
}


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
                    if rx.search(line) and len(found) < per_part:
                        found.append(f"{path}: {line.strip()[:140]}")
        out[part] = found
    return out


def later_ir_names_hardware(
    run: RunData, texts: Mapping[str, Sequence[tuple[str, str]]]
) -> Observation:
    """A later IR (Triton, LLVM, PTX) names loops, thread blocks and memory spaces."""
    key = "later_ir_names_hardware"
    claim = "A later IR names loops, thread blocks and memory spaces."
    if not any(texts.values()):
        return _missing(key, claim, "Triton, LLVM or PTX stage files")
    found = ir_excerpts(texts)
    ev = tuple(f"{part}: {'found' if lines else 'not found'}" for part, lines in found.items())
    quote = "\n".join(line for lines in found.values() for line in lines)
    if all(found.values()):
        return Observation(key, claim, YES, ev, quote)
    if found["loops"] and run.platform == "cpu":
        note = "the CPU's LLVM IR has loops; thread blocks and shared memory are GPU concepts"
        return Observation(key, claim, NOT_HERE, (*ev, note), quote)
    return Observation(key, claim, NO, ev, quote)


def flops_counted(run: RunData) -> Observation:
    """FLOPs and bytes are counted: the analytic count against XLA's cost analysis."""
    key, claim = "flops_counted", "FLOPs and bytes are counted."
    v = run.variant(run.baseline) or run.variant("xla")
    if v is None or fmt.num(v.get("flops_analytic")) is None:
        return _missing(key, claim, "flops_analytic for the baseline")
    a, x, b = v.get("flops_analytic"), v.get("flops_xla"), v.get("bytes_xla")
    ev = [
        f"{v.name}: analytic {fmt.si(a, 'FLOP')}, XLA {fmt.si(x, 'FLOP')} ({fmt.ratio(x, a)} of analytic), "
        f"XLA bytes {fmt.si(b, 'B')}"
    ]
    flagged = [
        f"{n}: {d}"
        for n in (w.name for w in run.variants)
        for d in (run.variant(n).get("flops_disagreement") or [])
    ]
    ev += [f"disagreement flagged: {d}" for d in flagged] or ["no disagreement flagged"]
    verdict = YES if fmt.num(x) is not None and fmt.num(b) is not None else NO
    return Observation(key, claim, verdict, tuple(ev))


SUMMARY_OBSERVATIONS: tuple[Callable[[RunData], Observation], ...] = (
    eager_launches,
    first_call_pause,
    library_epilogue,
    new_shape_pause,
    host_callback_split,
    cache_miss_explains,
)


def all_observations(
    run: RunData, texts: Mapping[str, Sequence[tuple[str, str]]]
) -> tuple[Observation, ...]:
    """Returns every observation in the textbook's order."""
    return (
        *(f(run) for f in SUMMARY_OBSERVATIONS),
        later_ir_names_hardware(run, texts),
        flops_counted(run),
    )


EMITTER_STAGES = ("triton", "llvm", "ptx")


def read_emitter_texts(
    run: RunData, limit: int = 500_000, per_stage: int = 200
) -> dict[str, list[tuple[str, str]]]:
    """Reads (at the edge) the first `limit` characters of up to `per_stage` files per emitter stage.

    The baseline's files come first, then the other variants', so quotes prefer the baseline.
    """
    order = sorted(run.variants, key=lambda v: v.name != run.baseline)
    out: dict[str, list[tuple[str, str]]] = {s: [] for s in EMITTER_STAGES}
    for v in order:
        for s in v.stages:
            if s.stage not in out or len(out[s.stage]) >= per_stage:
                continue
            p = run.path / s.path
            files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
            for f in files:
                if len(out[s.stage]) >= per_stage or not f.is_file():
                    break
                with open(f, errors="replace") as fh:
                    out[s.stage].append((str(Path(f).relative_to(run.path)), fh.read(limit)))
    return out
