"""The seed chapter's observations, one rule per claim, judged per framework on this run.

Variants are found by role and framework (harness.frontends.roles), never by name, so renaming a
variant in the config changes nothing here. A verdict is "yes", "no", "not on this platform",
or "not measured" with the reason (the run lacks the figures to decide). A rule is silent for
a framework the study has no variant of in the role its claim needs (a program study has no
host callback): nothing was measured there, and nothing is claimed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from harness.common import fmt
from harness.findings.base import Rule
from harness.frontends import registry
from harness.frontends.modes import Traits
from harness.records.findings import Observation
from harness.records.summary import Compile
from harness.saved.run import IrText, SavedRun, SavedVariant

YES, NO, NOT_HERE, NOT_MEASURED = "yes", "no", "not on this platform", "not measured"
PAUSE_FACTOR = 10.0  # a pause is a first call (or recompile) at least this many steps long


class Claim(Rule):
    """A claim of the seed chapter, judged once per framework of the study."""

    kind = "observations"
    key: ClassVar[str] = ""
    claim: ClassVar[str] = ""

    def conclude(self, run: SavedRun) -> tuple[Observation, ...]:
        return tuple(o for f in run.frameworks() if (o := self.judge(run, f)) is not None)

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        raise NotImplementedError

    def said(
        self, framework: str, verdict: str, evidence: Sequence[str], quote: str = ""
    ) -> Observation:
        return Observation(
            self.id, self.key, self.claim, framework, verdict, tuple(evidence), quote
        )

    def missing(self, framework: str, why: str) -> Observation:
        return self.said(framework, NOT_MEASURED, (why,))


def _transfers(v: SavedVariant) -> tuple[float, float] | None:
    """Returns (count, bytes) of transfers per step over all directions; None if not profiled."""
    p = v.summary.profile
    if p.kernels_per_step is None:
        return None
    return sum(t.count for t in p.transfers_per_step), sum(t.bytes for t in p.transfers_per_step)


class _EagerClaim(Claim):
    """A claim about the eager variant: silent for a framework without one, not measured
    where it did not run."""

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        v = run.by_role("eager", framework)
        if v is None:
            return None
        if not v.ok:
            return self.missing(framework, f"{v.name} {v.summary.identity.status}")
        return self.judge_eager(run, framework, v)

    def judge_eager(self, run: SavedRun, framework: str, v: SavedVariant) -> Observation:
        raise NotImplementedError


class EagerLaunches(_EagerClaim):
    """Eager dispatch issues one launch per primitive: three or more a step."""

    id, key = "observation.eager_launches", "eager_launches"
    claim = "Eager issues three or more launches per step."

    def judge_eager(self, run: SavedRun, framework: str, v: SavedVariant) -> Observation:
        kernels = v.summary.profile.kernels_per_step
        modules = v.summary.identity.eager_modules
        ev: list[str] = []
        if kernels is not None:
            ev.append(f"{v.name}: {fmt.count(kernels)} device kernels per step")
        if modules:
            ev.append(f"{len(modules)} primitive modules compiled: {', '.join(modules)}")
        elif not registry.traits(framework).xla and v.summary.profile.step_sequence:
            # A frontend that compiles no primitive module: its profile's first step.
            ev.append(f"one step: {', '.join(v.summary.profile.step_sequence[:8])}")
        launches = kernels if kernels is not None else (len(modules) or None)
        if launches is None:
            return self.missing(framework, f"{v.name} has neither a profile nor eager modules")
        return self.said(framework, YES if launches >= 3 else NO, ev)


class EagerTransfers(_EagerClaim):
    """Eager dispatch adds temporary host-device transfers (on a GPU)."""

    id, key = "observation.eager_transfers", "eager_transfers"
    claim = "Eager adds temporary host-device transfers per step."

    def judge_eager(self, run: SavedRun, framework: str, v: SavedVariant) -> Observation:
        t = _transfers(v)
        if t is None:
            return self.missing(framework, f"{v.name} was not profiled")
        ev = (f"{v.name}: {fmt.count(t[0])} transfers per step ({fmt.si(t[1], 'B')})",)
        if t[0] > 0:
            return self.said(framework, YES, ev)
        if run.platform == "cpu":
            why = "on a CPU host memory is device memory: nothing to transfer"
            return self.said(framework, NOT_HERE, (*ev, why))
        return self.said(framework, NO, ev)


class _Pause(Claim):
    which: ClassVar[str] = "first"

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        v = run.by_role("baseline", framework)
        if v is None:
            return None
        if not v.ok:
            return self.missing(
                framework,
                f"this run has no {registry.traits(framework).label or framework} baseline that ran",
            )
        c, step = v.summary.compile, v.summary.timing.step_s
        first = self.which == "first"
        pause = c.first_call_s if first else c.recompile_s
        if pause is None or step is None:
            kind = "first-call" if first else "recompile"
            return self.missing(framework, f"{v.name} has no {kind} pause or step time")
        factor = pause / step
        detail = _pause_detail(v, registry.traits(framework), first)
        label = "first call" if first else "recompile"
        # The threshold is in the sentence, so "no" beside a 216 ms recompile reads as what it
        # is: a pause under the ten steps this claim needs, not the absence of one.
        ev = (
            f"{v.name}: {label} {fmt.ms(pause)}, {fmt.against_threshold(factor, PAUSE_FACTOR)} "
            f"the step {fmt.ms(step)} (the claim needs a pause of ≥ {PAUSE_FACTOR:g} steps)",
            detail,
        )
        return self.said(framework, YES if factor >= PAUSE_FACTOR else NO, ev)


def _pause_detail(v: SavedVariant, traits: Traits, first: bool) -> str:
    """What the pause held: the compile's phases, or the recompile's compiles and why, with
    the other compiles that ran beside it."""
    c = v.summary.compile
    # A compiler with phases of its own has recompiles of its own too (Dynamo's).
    detail = _phased_detail(v, traits, first) if traits.compile_phases else _xla_detail(c, first)
    if c.compiled_together > 1:  # the pause may hold another compile's contention
        detail += f"; measured with up to {c.compiled_together} compiles at once"
    return detail


def _phased_detail(v: SavedVariant, traits: Traits, first: bool) -> str:
    """A compiler that records its phases (torch.compile): the first compile by phase, or the
    recompile's Dynamo compiles and its first reason."""
    c = v.summary.compile
    if first:
        phases = ", ".join(f"{k} {fmt.secs(val)}" for k, val in c.by_pipeline.items())
        return f"{traits.compile_call or traits.compiler} {fmt.secs(c.compile_s)}" + (
            f": {phases}" if phases else ""
        )
    reasons = v.summary.dynamo.recompile_reasons if v.summary.dynamo else ()
    return f"{fmt.text(c.recompile_backend_compiles)} Dynamo compiles for the new shape" + (
        f": {reasons[0].splitlines()[0][:120]}" if reasons else ""
    )


def _xla_detail(c: Compile, first: bool) -> str:
    """XLA's compile within the first call's, and its autotuning; or the recompile's."""
    if first:
        return f"compile {fmt.secs(c.compile_s)}, of which XLA {fmt.secs(c.xla_compile_s)}" + (
            f", autotuning {fmt.secs(c.autotuning_s)}" if c.autotuning_s else ""
        )
    return (
        f"{fmt.text(c.recompile_backend_compiles)} XLA compilations for the new "
        f"shape, {fmt.secs(c.recompile_xla_compile_s)}"
    )


class FirstCallPause(_Pause):
    """The baseline's first call takes at least ten steps: the compile pause."""

    id, key = "observation.first_call_pause", "first_call_pause"
    claim = "The first compiled call pauses."
    which = "first"


class NewShapePause(_Pause):
    """The baseline's call at a new shape takes at least ten steps: it compiles again."""

    id, key = "observation.new_shape_pause", "new_shape_pause"
    claim = "A new shape pauses again."
    which = "recompile"


class LibraryEpilogue(Claim):
    """A compiled variant calls a library matmul with a fused epilogue."""

    id, key = "observation.library_epilogue", "library_epilogue"
    claim = "A compiled call runs one library matmul with a fused epilogue."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        if not run.with_role("compiled", framework):
            return None
        compiled = [
            v for v in run.with_role("compiled", framework) if v.ok and "lower_bound" not in v.roles
        ]
        found = [
            (v, c)
            for v in compiled
            for c in v.summary.hlo.library_calls
            if c.epilogue and c.epilogue != "DEFAULT"
        ]
        if found:
            return self.said(
                framework,
                YES,
                [
                    f"{v.name}: {c.target} with epilogue {c.epilogue} ({c.cluster})"
                    for v, c in found[:4]
                ],
            )
        if any(v.summary.hlo.fusion_count is not None for v in compiled):
            libs = [f"{v.name}: {_calls(v)}" for v in compiled[:4]]
            return self.said(framework, NO, [f"library calls — {x}" for x in libs])
        return self.missing(framework, "no compiled variant was analyzed")


def _calls(v: SavedVariant) -> str:
    """A variant's library calls, repeats counted: `__ynn_fusion ×4`."""
    calls = Counter(c.target for c in v.summary.hlo.library_calls)
    return ", ".join(t + (f" ×{n}" if n > 1 else "") for t, n in calls.items()) or "none"


class FewerKernels(Claim):
    """The compiled baseline runs fewer kernels a step than eager dispatch."""

    id, key = "observation.fewer_kernels", "fewer_kernels"
    claim = "A compiled call runs fewer kernels than eager."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        e, b = run.by_role("eager", framework), run.by_role("baseline", framework)
        if e is None or b is None:
            return None
        ke, kb = e.summary.profile.kernels_per_step, b.summary.profile.kernels_per_step
        if ke is None or kb is None:
            return self.missing(
                framework, "kernels per step needs a profiled eager variant and baseline"
            )
        return self.said(
            framework,
            YES if kb < ke else NO,
            (f"kernels per step: {e.name} {fmt.count(ke)}, {b.name} {fmt.count(kb)}",),
        )


def _breaks(v: SavedVariant) -> str:
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


class HostCallbackSplit(Claim):
    """A host callback splits the compiled region: more kernels or transfers than the
    baseline (for a frontend whose traits say `dynamo`, also: Dynamo broke the graph at the
    print)."""

    id, key = "observation.host_callback_split", "host_callback_split"
    claim = "A host callback (print) splits the compiled region."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        cb, base = run.by_role("host_callback", framework), run.by_role("baseline", framework)
        if cb is None or base is None:
            return None
        if not cb.ok or not base.ok:
            return self.missing(
                framework, "needs a variant in the `host_callback` role and a baseline that ran"
            )
        pa, pb = cb.summary.profile, base.summary.profile
        if pa.kernels_per_step is None or pb.kernels_per_step is None:
            return self.missing(framework, "needs both variants profiled")
        ev = [
            f"kernels per step: {cb.name} {fmt.count(pa.kernels_per_step)}, {base.name} "
            f"{fmt.count(pb.kernels_per_step)}",
            f"device ops per step: {cb.name} {fmt.count(pa.device_ops_per_step)}, {base.name} "
            f"{fmt.count(pb.device_ops_per_step)}",
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
        if broke := _breaks(cb):
            ev.append(broke)
            more |= bool(cb.summary.dynamo and (cb.summary.dynamo.graph_break_count or 0) > 0)
        if cb.summary.identity.callback_lines:
            ev.append(f"the callback printed {cb.summary.identity.callback_lines} lines")
        return self.said(framework, YES if more else NO, ev)


class TracedBranch(Claim):
    """A data-dependent Python branch cannot stay inside the compiled region: jit refuses
    it, Dynamo breaks the graph at it."""

    id, key = "observation.traced_branch", "traced_branch"
    claim = "A data-dependent branch splits (or is refused by) the compiled region."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        v = run.by_role("traced_branch", framework)
        if v is None:
            return None
        err = v.summary.identity.expected_error
        ev = []
        if err is not None:
            refuser = registry.traits(framework).refuser or "the compiler"
            ev.append(f"{v.name}: {refuser} refused it: {err.type}: {err.message[:160]}")
        if split := _breaks(v):
            ev.append(split)
        d = run.by_role("device_branch", framework)
        if d is not None and d.ok:
            ev.append(
                f"{d.name} keeps the branch on the device (lax.cond): "
                f"{fmt.count(d.summary.profile.kernels_per_step)} kernels per step"
            )
        broke = bool(v.summary.dynamo and (v.summary.dynamo.graph_break_count or 0) > 0)
        return self.said(
            framework,
            YES if err is not None or broke else NO,
            ev or (f"{v.name}: {v.summary.identity.status}",),
        )


_SIZE_MISMATCH = re.compile(
    r"tensor '([^']+)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)"
)


class CacheMissExplains(Claim):
    """The compiler's log names the argument whose shape changed (JAX's tracing-cache miss,
    Dynamo's recompile reason next to the guards that failed)."""

    id, key = "observation.cache_miss_log", "cache_miss_log"
    claim = "The compiler's log explains the recompile."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        v = run.by_role("baseline", framework)
        if v is None:
            return None
        if registry.traits(framework).dynamo:  # Dynamo's recompile reasons and guards
            d = v.summary.dynamo
            if d is None or not d.recompile_reasons:
                label = registry.traits(framework).label or framework
                return self.missing(framework, f"the {label} baseline logged no recompile reason")
            found = _SIZE_MISMATCH.search(d.recompile_reasons[0])
            named = (
                f"argument {found.group(1)}, dim {found.group(2)}: {found.group(3)} → "
                f"{found.group(4)}"
                if found
                else "no changed argument named"
            )
            ev = [f"{v.name}: {named}"]
            if d.guard_count is not None:
                ev.append(f"{d.guard_count} guards on the first compile")
            quote = "\n".join([*d.recompile_reasons[:2], *v.guards[:6]])
            return self.said(framework, YES if found else NO, ev, quote)
        text = v.summary.compile.recompile_explanation
        if not text:
            return self.missing(framework, "the baseline has no recompile explanation")
        named_jax = re.search(r"now \S+ and before \S+", text)
        ev = (f"{v.name}: " + (named_jax.group(0) if named_jax else "no changed argument named"),)
        verdict = YES if "CACHE MISS" in text and named_jax else NO
        return self.said(framework, verdict, ev, text)


# What a later IR says about loops, thread blocks and memory spaces, by stage.
IR_PATTERNS: dict[str, tuple[tuple[str, str], ...]] = {
    # A PTX `bra` may be a plain branch, so loops come from Triton's scf.for and LLVM's loop
    # metadata or phi nodes only. Triton comes first so quotes prefer the highest-level IR.
    # Inductor's output_code (its frontend's own stage) comes last: its C++ loops, or
    # Triton's source.
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


def ir_excerpts(texts: Mapping[str, Sequence[IrText]], part: str, per_part: int = 2) -> list[str]:
    """Returns up to `per_part` quoted lines `path: line` of IR_PATTERNS' `part`."""
    found: list[str] = []
    for stage, pat in IR_PATTERNS[part]:
        rx = re.compile(pat)
        for f in texts.get(stage, ()):
            for line in f.text.splitlines():
                if len(found) >= per_part:
                    break
                if rx.search(line):
                    found.append(f"{f.path}: {line.strip()[:140]}")
    return found


# The emitter stages a frontend keeps (its traits' `emitter_stages`), in prose.
STAGE_NAMES = {"triton": "Triton", "llvm": "LLVM", "ptx": "PTX", "output_code": "Inductor code"}


def _either(names: Iterable[str]) -> str:
    """Returns "A, B or C" (nothing kept: "later IR")."""
    found = list(names)
    if not found:
        return "later IR"
    return found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"


class _LaterIr(Claim):
    part: ClassVar[str] = ""

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        texts = run.emitted.get(framework, {})
        if not any(texts.values()):
            kept = _either(STAGE_NAMES.get(s, s) for s in registry.traits(framework).emitter_stages)
            return self.missing(framework, f"this run kept no {kept} stage")
        lines = ir_excerpts(texts, self.part)
        if lines:
            return self.said(framework, YES, (f"{len(lines)} quoted",), "\n".join(lines))
        if self.part in _GPU_ONLY and run.platform == "cpu":
            return self.said(
                framework, NOT_HERE, ("thread blocks and shared memory are GPU concepts",)
            )
        return self.said(framework, NO, ("no line of the kept IR matches",))


class LaterIrLoops(_LaterIr):
    """A later IR (Triton, LLVM, Inductor's code) names loops."""

    id, key, part = "observation.later_ir_loops", "later_ir_loops", "loops"
    claim = "A later IR names loops."


class LaterIrThreadBlocks(_LaterIr):
    """A later IR (Triton, PTX, LLVM) names thread blocks: a GPU concept."""

    id, key, part = "observation.later_ir_thread_blocks", "later_ir_thread_blocks", "thread blocks"
    claim = "A later IR names thread blocks."


class LaterIrMemorySpaces(_LaterIr):
    """A later IR (Triton, PTX, LLVM) names memory spaces: a GPU concept."""

    id, key, part = "observation.later_ir_memory_spaces", "later_ir_memory_spaces", "memory spaces"
    claim = "A later IR names memory spaces."


class FlopsCounted(Claim):
    """The baseline's FLOPs and bytes are counted: ours against XLA's cost analysis."""

    id, key = "observation.flops_counted", "flops_counted"
    claim = "FLOPs and bytes are counted."

    def judge(self, run: SavedRun, framework: str) -> Observation | None:
        v = run.by_role("baseline", framework)
        if v is None:
            return None
        c = v.summary.cost
        if c.flops_analytic is None:
            return self.missing(framework, "the baseline has no FLOP count")
        traits = registry.traits(framework)
        if not traits.xla and c.flops is None:
            return self.missing(
                framework,
                f"{v.name}: analytic {fmt.si(c.flops_analytic, 'FLOP')} only; the cost model "
                f"reads HLO, and {traits.compiler or framework}'s kernels are not costed",
            )
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
        return self.said(framework, verdict, ev)


CLAIMS: tuple[Claim, ...] = (
    EagerLaunches(),
    EagerTransfers(),
    FirstCallPause(),
    LibraryEpilogue(),
    FewerKernels(),
    NewShapePause(),
    HostCallbackSplit(),
    TracedBranch(),
    CacheMissExplains(),
    LaterIrLoops(),
    LaterIrThreadBlocks(),
    LaterIrMemorySpaces(),
    FlopsCounted(),
)
