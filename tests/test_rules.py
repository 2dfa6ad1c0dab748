"""Every rule of harness.findings on a constructed summary: it fires where it should and
stays silent where it should not. No run, no file: a SavedRun built by hand (issue 25)."""

from __future__ import annotations

import dataclasses

import pytest

from harness import findings as rules
from harness.common import stats
from harness.findings import boundaries, memory, observations, timing, untested
from harness.findings.facts import facts_of
from harness.records.gaps import AttributionGaps, UnattributedKernel
from harness.records.machine_state import MachineState
from harness.records.memory import Memory, PeakBuffer
from harness.records.summary import (
    ArraySpec,
    Comparison,
    Compile,
    Cost,
    Divergence,
    Dynamo,
    ExpectedError,
    Hlo,
    Identity,
    LibraryCall,
    Noise,
    Profile,
    ProgramRecord,
    RunSummary,
    Timing,
    Transfer,
    VariantSummary,
    Verdict,
)
from harness.saved.run import ClusterFact, DecisionStep, IrText, SavedRun

PROBLEM = {"m": 16, "k": 32, "n": 32, "batch": None, "dtype": "float32", "gelu": "tanh"}
RESOLVED = Noise(baseline="xla", self_ratio=1.0, self_ci95=(0.99, 1.01), floor=0.01, rounds=10)
FAILED = dataclasses.replace(
    RESOLVED,
    self_ratio=0.66,
    self_ci95=(0.51, 0.99),
    floor=0.49,
    resolved=False,
    reasons=("`xla` timed against itself gave 0.6600× (95% CI 0.5100–0.9900)",),
    machine=MachineState(cpus=2, load_1m=(6.9, 7.1), cpu_share_min=0.41),
)


def variant(
    mode: str = "jit",
    roles: tuple[str, ...] = ("compiled",),
    step: float | None = 1e-3,
    problem: dict | None = None,
    options: dict | None = None,
    framework: str = "jax",
    **sections: object,
) -> VariantSummary:
    ident = sections.pop("identity", {})
    return VariantSummary(
        identity=Identity(
            status="ok",
            reason=None,
            mode=mode,
            framework=framework,
            roles=roles,
            problem={**PROBLEM, **(problem or {})},
            xla_options=options or {},
            **ident,  # type: ignore[arg-type]
        ),
        timing=Timing(
            step_s=step, step_ci95_s=(step * 0.99, step * 1.01) if step else None, rounds=10
        ),
        **sections,  # type: ignore[arg-type]
    )


BASE = variant(roles=("baseline", "compiled"))


def judged(ratio: float, verdict: str, against: str = "xla", why: str = "") -> Comparison:
    return Comparison(
        vs_baseline=Verdict(against, ratio, (ratio * 0.97, ratio * 1.03), verdict, why)
    )


def facts(
    noise: Noise | None = RESOLVED,
    platform: str = "cpu",
    clusters: dict | None = None,
    **vs: VariantSummary,
) -> SavedRun:
    summary = RunSummary(
        schema_version=6,
        experiment="e",
        run_id="r",
        platform=platform,
        baseline="xla",
        noise=noise,
        variants={"xla": BASE, **vs} if "xla" not in vs else vs,
    )
    return facts_of(summary, clusters)


SLOWER_EAGER = variant(mode="eager", roles=("eager",), comparison=judged(3.0, stats.SLOWER))
NO_FUSION = variant(
    options={"xla_disable_hlo_passes": "fusion"}, comparison=judged(1.2, stats.SLOWER)
)


# --- the gate -------------------------------------------------------------------------------------


def test_the_gate_says_why_a_run_cannot_resolve_differences() -> None:
    (gate,) = timing.AaGate().conclude(facts(FAILED))
    assert not gate.resolved and gate.rule == "gate.aa_check"
    assert "0.6600×" in gate.line and "load average 6.9–7.1 on 2 CPUs" in gate.line
    assert "41% of the wall time" in gate.line  # a CPU run: the worker's CPU time counts
    (gpu,) = timing.AaGate().conclude(facts(FAILED, platform="gpu"))
    assert "41%" not in gpu.line  # a GPU worker waits on the device by design


def test_the_gate_is_silent_when_the_run_passed_or_has_no_rounds() -> None:
    (gate,) = timing.AaGate().conclude(facts(RESOLVED))
    assert gate.resolved and gate.line == ""
    assert not timing.AaGate().applies(facts(None))
    assert rules.evaluate(facts(None)).gate is None


# --- timing -----------------------------------------------------------------------------------


def test_a_resolved_difference_is_a_finding_with_its_typed_evidence() -> None:
    (f,) = timing.TimingDifference().conclude(facts(xla_no_fusion=NO_FUSION))
    assert (f.variant, f.against, f.verdict, f.ratio) == ("xla_no_fusion", "xla", "slower", 1.2)
    assert f.what.startswith("`xla_no_fusion` is 1.20× slower than `xla` (ratio 1.200")
    (change,) = f.changes
    assert (change.key, change.value, change.was) == (
        "xla_options.xla_disable_hlo_passes",
        "fusion",
        None,
    )
    assert "`xla_disable_hlo_passes=fusion`" in f.why


def test_timing_findings_are_ranked_by_effect() -> None:
    found = timing.TimingDifference().conclude(facts(xla_no_fusion=NO_FUSION, eager=SLOWER_EAGER))
    assert [f.variant for f in found] == ["eager", "xla_no_fusion"]


def test_no_timing_finding_when_the_gate_fails_or_the_pair_is_noise() -> None:
    assert timing.TimingDifference().conclude(facts(FAILED, xla_no_fusion=NO_FUSION)) == ()
    noise = variant(comparison=judged(1.01, stats.INDISTINGUISHABLE, why="the interval holds 1.0"))
    assert timing.TimingDifference().conclude(facts(xla_exact=noise)) == ()


def test_noise_lists_what_the_run_cannot_tell_apart() -> None:
    same = variant(comparison=judged(1.0, stats.SAME_PROGRAM))
    found = timing.NoDifference().conclude(facts(FAILED, xla_flax=same, xla_no_fusion=NO_FUSION))
    assert [n.what for n in found] == [
        "`xla_flax` against `xla`: the same program",
        "`xla_no_fusion` against `xla`: the run could not resolve differences",
    ]
    assert timing.NoDifference().conclude(facts(xla_no_fusion=NO_FUSION)) == ()


def test_the_lower_bound_is_never_judged() -> None:
    bound = variant(
        mode="matmul_only", roles=("lower_bound", "compiled"), comparison=judged(0.5, stats.FASTER)
    )
    run = facts(matmul_only=bound)
    assert timing.TimingDifference().conclude(run) == timing.NoDifference().conclude(run) == ()


def test_coverage_names_unattributed_time_and_no_gate_suppresses_it() -> None:
    gaps = AttributionGaps(
        unattributed_time_per_step_s=2e-4,
        unattributed_share=0.25,
        unattributed=(UnattributedKernel("nvjet_x", "kernel", 1.0, 2e-4, "no hlo_op"),),
    )
    torn = variant(profile=Profile(kernels_per_step=2, gaps=gaps))
    for noise in (RESOLVED, FAILED):
        (c,) = timing.Coverage().conclude(facts(noise, xla_other=torn))
        assert (c.variant, c.verdict) == ("xla_other", "unattributed") and c.gaps == gaps
    whole = variant(profile=Profile(kernels_per_step=2, gaps=AttributionGaps()))
    assert timing.Coverage().conclude(facts(xla_other=whole)) == ()


# --- what to change ---------------------------------------------------------------------------


def test_a_slower_variant_says_what_to_keep_and_what_was_measured() -> None:
    (c,) = timing.MeasuredChange().conclude(facts(xla_no_fusion=NO_FUSION))
    assert c.verdict == "keep" and c.change == (
        "keep `xla_disable_hlo_passes` unset (not `fusion`)"
    )
    assert c.effect == "`xla_no_fusion` measured 1.200× the time of `xla` (95% CI 1.164–1.236)"
    assert "opposite" not in c.effect


def test_first_calls_from_one_process_are_compared_only_without_an_autotuner() -> None:
    def timed(first_call_s: float, fresh: bool, **kw: object) -> VariantSummary:
        return variant(compile=Compile(first_call_s=first_call_s, fresh_process=fresh), **kw)

    base = timed(1.16, False, roles=("baseline", "compiled"))
    slower = timed(0.21, False, options=NO_FUSION.identity.xla_options)
    slower = dataclasses.replace(slower, comparison=NO_FUSION.comparison)
    (gpu,) = timing.MeasuredChange().conclude(facts(platform="gpu", xla=base, xla_no_fusion=slower))
    assert "first calls not compared (0.210 s, was 1.160 s)" in gpu.tradeoff
    assert "first call 0.210 s" not in gpu.tradeoff
    (cpu,) = timing.MeasuredChange().conclude(facts(platform="cpu", xla=base, xla_no_fusion=slower))
    assert "first call 0.210 s (was 1.160 s)" in cpu.tradeoff
    fresh_base = timed(1.16, True, roles=("baseline", "compiled"))
    fresh = dataclasses.replace(
        timed(1.86, True, options=NO_FUSION.identity.xla_options), comparison=NO_FUSION.comparison
    )
    (own,) = timing.MeasuredChange().conclude(
        facts(platform="gpu", xla=fresh_base, xla_no_fusion=fresh)
    )
    assert "first call 1.860 s (was 1.160 s)" in own.tradeoff
    # Compiled in processes of their own, but up to two at once: each pause may hold the
    # other compile's contention, so none is compared.
    together = dataclasses.replace(
        fresh, compile=dataclasses.replace(fresh.compile, compile_slots=2)
    )
    (beside,) = timing.MeasuredChange().conclude(
        facts(platform="gpu", xla=fresh_base, xla_no_fusion=together)
    )
    assert "first calls not compared (1.860 s, was 1.160 s): compiled up to 2 at once" in (
        beside.tradeoff
    )


def test_a_faster_keyword_knob_is_adopted_named_like_an_option() -> None:
    def program(**kwargs: object) -> ProgramRecord:
        return ProgramRecord(function="m:f", init="m:init", kwargs=kwargs)

    base = variant(roles=("baseline", "compiled"), identity={"program": program(attention="xla")})
    cudnn = variant(
        identity={"program": program(attention="cudnn")}, comparison=judged(0.62, stats.FASTER)
    )
    (c,) = timing.MeasuredChange().conclude(facts(xla=base, xla_cudnn=cudnn))
    assert c.verdict == "adopt" and c.change == "use `attention=cudnn` (was `attention=xla`)"
    (knob,) = c.changes
    assert (knob.key, knob.value, knob.was) == ("program.kwargs.attention", "cudnn", "xla")


def test_no_change_is_recommended_when_gated_or_only_slower_than_the_gemm_alone() -> None:
    assert timing.MeasuredChange().conclude(facts(FAILED, xla_no_fusion=NO_FUSION)) == ()
    vs_bound = variant(
        mode="eager",
        roles=("eager",),
        comparison=Comparison(vs_lower_bound=Verdict("xla", 2.0, (1.9, 2.1), stats.SLOWER, "")),
    )
    bound = variant(mode="matmul_only", roles=("lower_bound", "compiled"))
    run = facts(xla=bound, eager=vs_bound)
    assert timing.TimingDifference().conclude(run) and timing.MeasuredChange().conclude(run) == ()


# --- memory -----------------------------------------------------------------------------------


def peaked(peak: int, line: str = "f.py:3") -> Memory:
    buffer = PeakBuffer(value="b{}", bytes=peak, instruction="b", source_line=line, scope="s")
    return Memory(peak_bytes=peak, largest=(buffer,))


def test_a_peak_beyond_both_thresholds_is_a_memory_finding_never_gated() -> None:
    base = variant(roles=("baseline", "compiled"), memory=peaked(100 << 20))
    more = variant(memory=peaked(400 << 20))
    for noise in (RESOLVED, FAILED):
        (m,) = memory.MemoryPeak().conclude(facts(noise, xla=base, xla_no_fusion=more))
        assert (m.variant, m.verdict, m.peak_bytes - m.against_bytes) == (
            "xla_no_fusion",
            "more",
            300 << 20,
        )
        (source,) = m.sources
        assert (source.bytes, source.against_bytes) == (400 << 20, 100 << 20)


def test_a_small_or_other_size_peak_difference_is_silent() -> None:
    base = variant(roles=("baseline", "compiled"), memory=peaked(100 << 20))
    close = variant(memory=peaked(105 << 20))  # 5%, under memory.min_ratio
    other = variant(problem={"m": 8}, memory=peaked(400 << 20))  # another size
    assert memory.MemoryPeak().conclude(facts(xla=base, a=close, b=other)) == ()


# --- untested ---------------------------------------------------------------------------------


def test_the_untested_option_is_named_until_a_variant_measures_it() -> None:
    (u,) = untested.UntestedOption().conclude(facts())
    assert (
        u.change == "`xla_cpu_enable_fast_math: true`" and "xla_cpu_enable_fast_math" in u.snippet
    )
    fast = variant(options={"xla_cpu_enable_fast_math": True})
    assert untested.UntestedOption().conclude(facts(xla_fast=fast)) == ()


def test_tanh_and_bf16_are_suggested_until_measured_and_tensor_cores_only_on_a_gpu() -> None:
    erf = variant(roles=("baseline", "compiled"), problem={"gelu": "erf"})
    (tanh,) = untested.UntestedTanh().conclude(facts(xla=erf))
    assert tanh.change == "the tanh GELU"
    assert untested.UntestedTanh().conclude(facts()) == ()
    (cpu,) = untested.UntestedBf16().conclude(facts())
    (gpu,) = untested.UntestedBf16().conclude(facts(platform="gpu"))
    assert "tensor cores" not in cpu.why and "bf16 arithmetic" in cpu.why
    assert "bf16 tensor cores" in gpu.why
    bf16 = variant(problem={"dtype": "bfloat16"})
    assert untested.UntestedBf16().conclude(facts(xla_bf16=bf16)) == ()


def test_a_program_study_gets_its_own_bf16_suggestion_not_the_gelu_ones() -> None:
    def program(dtype: str) -> dict:
        return {
            "program": ProgramRecord(
                function="m:f", init="m:i", inputs=(ArraySpec((4,), dtype),), param_dtypes=(dtype,)
            )
        }

    base = variant(roles=("baseline", "compiled"), problem={}, identity=program("float32"))
    (u,) = untested.UntestedProgramBf16().conclude(facts(xla=base))
    assert u.change == "bfloat16 inputs and parameters" and "tensor cores" not in u.why
    assert not untested.UntestedTanh().applies(facts(xla=base))
    halved = variant(problem={}, identity=program("bfloat16"))
    assert untested.UntestedProgramBf16().conclude(facts(xla=base, xla_bf16=halved)) == ()


# --- why not fused ----------------------------------------------------------------------------

CLUSTERS = {
    "xla": (
        ClusterFact("a_fusion", "kLoop", ops=3),
        ClusterFact("b_fusion", "kLoop", ops=3),
        ClusterFact("c_fusion", "kInput", ops=3),
        ClusterFact("d_fusion", "kLoop", ops=3),
    )
}


def stepped(*sequence: str) -> VariantSummary:
    return variant(roles=("baseline", "compiled"), profile=Profile(step_sequence=sequence))


def test_a_log_line_naming_one_cluster_is_quoted_at_its_boundary_and_no_other() -> None:
    """priority fusion's log says `b_fusion` (a producer) could not be fused: that is the
    reason at `b_fusion` → `c_fusion` alone, not at `a_fusion` → `b_fusion` (b is the
    consumer there) nor at `c_fusion` → `d_fusion`."""
    run = dataclasses.replace(
        facts(clusters=CLUSTERS, xla=stepped("a_fusion", "b_fusion", "c_fusion", "d_fusion")),
        decisions=(
            DecisionStep("producer_ineligible", "b_fusion", (), "the producer is not fusible"),
            DecisionStep("producer_ineligible", "fusion.14", (), "No users to fuse"),
        ),
    )
    (b,) = boundaries.WhyNotFused().conclude(run)
    by_pair = {(p.producer, p.consumer): g.reasons for g in b.groups for p in g.examples}
    quoted = "XLA's fusion log (priority fusion): `b_fusion`: the producer is not fusible"
    assert by_pair[("b_fusion", "c_fusion")] == (quoted,)
    assert (
        by_pair[("a_fusion", "b_fusion")]
        == by_pair[("c_fusion", "d_fusion")]
        == (boundaries.NO_REASON,)
    )
    assert not any("fusion.14" in r for rs in by_pair.values() for r in rs)
    # grouped by reason: the two without one in one group, counted
    assert [(g.count, g.reasons) for g in b.groups] == [
        (2, (boundaries.NO_REASON,)),
        (1, (quoted,)),
    ]


def test_boundaries_are_between_clusters_never_kernel_names() -> None:
    seq = (
        "a_fusion",
        "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT",
        "memset(a)",
        "b_fusion",
        "b_fusion",
    )
    (b,) = boundaries.WhyNotFused().conclude(facts(clusters=CLUSTERS, xla=stepped(*seq)))
    assert (b.clusters, b.boundaries) == (2, 1)
    assert [(p.producer, p.consumer) for g in b.groups for p in g.examples] == [
        ("a_fusion", "b_fusion")
    ]


def test_a_library_call_ends_a_fusion_and_a_variant_shows_where_it_fuses() -> None:
    clusters = {
        "xla": (ClusterFact("gemm", "library", "__cublas$lt$matmul", "BIAS"), CLUSTERS["xla"][0])
    }
    call = LibraryCall("__cublas$lt$matmul", "BIAS", "gemm")
    base = dataclasses.replace(stepped("gemm", "a_fusion"), hlo=Hlo(library_calls=(call,)))
    fused = variant(
        options={"xla_gpu_enable_triton_gemm": False},
        hlo=Hlo(library_calls=(LibraryCall("__cublas$lt$matmul", "BIAS_GELU", "gemm"),)),
        comparison=Comparison(first_divergence=Divergence("xla", "passes", "B ran cublas")),
    )
    (b,) = boundaries.WhyNotFused().conclude(
        facts(platform="gpu", clusters=clusters, xla=base, lib=fused)
    )
    (group,) = b.groups
    structure, fuses = group.reasons
    assert structure.startswith("structure: the producer is a library call (__cublas$lt$matmul")
    assert fuses == (
        "with `xla_gpu_enable_triton_gemm=no` (`lib`) the GEMM is __cublas$lt$matmul with "
        "epilogue BIAS_GELU, one launch; the compiles first differ at `passes`: B ran cublas"
    )


def test_one_cluster_has_no_boundary() -> None:
    assert not boundaries.WhyNotFused().applies(facts(clusters=CLUSTERS, xla=stepped("a_fusion")))


# --- observations -----------------------------------------------------------------------------

EAGER = variant(
    mode="eager",
    roles=("eager",),
    identity={"eager_modules": ("jit_add", "jit_tanh", "jit_dot")},
    profile=Profile(kernels_per_step=10, transfers_per_step=(Transfer("H2D", 4, 16),)),
)
PROFILED_BASE = variant(
    roles=("baseline", "compiled"),
    compile=Compile(
        first_call_s=0.1,
        compile_s=0.09,
        recompile_s=0.05,
        recompile_explanation="TRACING CACHE MISS at x, now f32[8,32] and before f32[16,32]",
    ),
    hlo=Hlo(fusion_count=1, library_calls=(LibraryCall("__cublas$lt$matmul", "BIAS", "gemm"),)),
    profile=Profile(kernels_per_step=2, device_ops_per_step=2),
    cost=Cost(flops_analytic=1e6, flops=1e6, bytes=1e4),
)
CALLBACK = variant(
    mode="jit_host_callback",
    roles=("host_callback", "compiled"),
    profile=Profile(
        kernels_per_step=5, device_ops_per_step=6, transfers_per_step=(Transfer("D2H", 1, 4),)
    ),
)
BRANCH = variant(
    mode="jit_python_branch",
    roles=("traced_branch",),
    step=None,
    identity={"expected_error": ExpectedError("TracerBoolConversionError", "no")},
)
EMITTED = {
    "jax": {
        "llvm": (IrText("variants/xla/ir/70-llvm/a.ll", "  %i = phi i64 [ 0, %entry ]"),),
        "ptx": (IrText("variants/xla/ir/80-ptx/a.ptx", "mov.u32 %r1, %tid.x;\nld.shared.f32 %f1"),),
    }
}
EVERY = facts(
    platform="gpu", xla=PROFILED_BASE, eager=EAGER, xla_host_callback=CALLBACK, xla_branch=BRANCH
)
EVERY = dataclasses.replace(EVERY, emitted=EMITTED)
BARE = facts(xla=variant(roles=("baseline", "compiled"), framework="jax"))  # no eager, ...


@pytest.mark.parametrize("claim", observations.CLAIMS, ids=lambda c: c.key)
def test_each_claim_holds_on_a_run_made_to_show_it(claim: observations.Claim) -> None:
    (o,) = claim.conclude(EVERY)
    assert (o.rule, o.framework) == (claim.id, "jax")
    assert o.verdict == observations.YES, (o.key, o.evidence)


ROLES = {
    "eager_launches": "eager",
    "eager_transfers": "eager",
    "fewer_kernels": "eager",
    "host_callback_split": "host_callback",
    "traced_branch": "traced_branch",
}


@pytest.mark.parametrize("key", ROLES)
def test_a_claim_is_silent_where_the_study_has_no_variant_in_its_role(key: str) -> None:
    claim = next(c for c in observations.CLAIMS if c.key == key)
    assert claim.conclude(BARE) == ()


def test_claims_are_judged_only_for_the_frameworks_the_study_has() -> None:
    found = rules.evaluate(EVERY).observations
    assert {o.framework for o in found} == {"jax"}  # no PyTorch column in a JAX-only study
    torch_eager = variant(mode="torch_eager", roles=("eager",), framework="torch")
    found = rules.evaluate(facts(t=torch_eager)).observations
    assert {o.framework for o in found} == {"jax", "torch"}


def test_the_torch_cache_miss_quotes_the_guards_of_its_first_compile() -> None:
    base = variant(
        roles=("baseline", "compiled"),
        framework="torch",
        dynamo=Dynamo(
            recompile_reasons=("tensor 'x' size mismatch at index 0. expected 16, actual 8",),
            guard_count=3,
        ),
    )
    run = facts(torch_compile=base)
    run = dataclasses.replace(
        run,
        variants=tuple(
            dataclasses.replace(v, guards=("TENSOR_MATCH: x",)) if v.name == "torch_compile" else v
            for v in run.variants
        ),
    )
    (o,) = [o for o in observations.CacheMissExplains().conclude(run) if o.framework == "torch"]
    assert (
        o.verdict == observations.YES
        and o.evidence[0] == "torch_compile: argument x, dim 0: 16 → 8"
    )
    assert "TENSOR_MATCH: x" in o.quote


def test_thread_blocks_are_not_a_cpu_concept() -> None:
    cpu = dataclasses.replace(
        EVERY, platform="cpu", emitted={"jax": {"llvm": EMITTED["jax"]["llvm"]}}
    )
    (o,) = observations.LaterIrThreadBlocks().conclude(cpu)
    assert o.verdict == observations.NOT_HERE


# --- the engine -------------------------------------------------------------------------------


def test_every_rule_has_a_stable_unique_id_and_says_what_it_concludes() -> None:
    ids = [r.id for r in rules.RULES]
    assert len(ids) == len(set(ids)) and all("." in i for i in ids)
    assert all(r.summary() and r.kind in rules.KINDS for r in rules.RULES)


def test_the_top_finding_is_the_largest_else_the_gate_else_memory() -> None:
    run = facts(xla_no_fusion=NO_FUSION, eager=SLOWER_EAGER)
    assert rules.evaluate(run).top.startswith("`eager` is 3.00× slower")
    assert rules.evaluate(facts(FAILED, eager=SLOWER_EAGER)).top.startswith(
        "could not resolve differences: `xla` timed against itself"
    )
    assert rules.evaluate(facts()).top == "no resolvable difference between the variants"


def test_a_failing_rule_is_recorded_and_the_others_still_conclude() -> None:
    class Broken(rules.Rule):
        """Always fails."""

        id, kind = "test.broken", "timing"

        def conclude(self, run: SavedRun) -> tuple:
            raise KeyError("boom")

    found = rules.evaluate(facts(eager=SLOWER_EAGER), (Broken(), timing.TimingDifference()))
    assert found.rules[0].error.startswith("KeyError: 'boom' (at test_rules.py:")
    assert [t.variant for t in found.timing] == ["eager"]


# --- processes.straggler ---------------------------------------------------------------------


def _processes(spread: float, lo: float, hi: float, floor: float = 0.05):
    from harness.records.processes import ProcessesSummary, VariantProcesses

    v = VariantProcesses(
        status="ok", same_program=True, straggler=1, fastest=0, spread=spread,
        spread_ci95=(lo, hi),
    )  # fmt: skip
    return ProcessesSummary(count=2, noise_floor=floor, noise_resolved=True, variants={"dp": v})


def test_a_resolvable_straggler_is_found_and_a_spread_within_noise_is_not() -> None:
    from harness.findings import processes

    rule = processes.Straggler()
    base = facts()
    assert not rule.applies(base)  # one process: no processes.json, nothing to conclude
    slow = dataclasses.replace(base, processes=_processes(1.30, 1.20, 1.40))
    found = rule.conclude(slow)
    assert [(f.variant, f.straggler, f.fastest) for f in found] == [("dp", 1, 0)]
    assert found[0].rule == "processes.straggler"
    equal = dataclasses.replace(base, processes=_processes(1.03, 0.99, 1.08))
    assert rule.conclude(equal) == ()
    gated = dataclasses.replace(slow, summary=dataclasses.replace(slow.summary, noise=FAILED))
    assert not rule.applies(gated)  # a timing rule reads the A/A gate


def test_an_attention_call_is_not_read_as_a_gemm_epilogue() -> None:
    """cuDNN attention has no epilogue: with the same cuBLAS GEMM on both sides, no epilogue
    difference is named (the H200 once read "DEFAULT/none instead of DEFAULT")."""
    from harness.findings.words import mechanisms

    gemm = LibraryCall("__cublas$lt$matmul", "DEFAULT", "gemm")
    fmha = LibraryCall("__cudnn$fmhaSoftmax", None, "attention")
    run = facts(
        xla=variant(roles=("baseline", "compiled"), hlo=Hlo(library_calls=(gemm,))),
        cudnn=variant(hlo=Hlo(library_calls=(gemm, fmha))),
    )
    said = mechanisms(run.variant("cudnn"), run.variant("xla"))
    assert not any("epilogue" in s for s in said)
    bias = LibraryCall("__cublas$lt$matmul", "BIAS", "gemm")
    other = facts(
        xla=variant(roles=("baseline", "compiled"), hlo=Hlo(library_calls=(gemm,))),
        cudnn=variant(hlo=Hlo(library_calls=(bias, fmha))),
    )
    said = mechanisms(other.variant("cudnn"), other.variant("xla"))
    assert "the library GEMM's epilogue is BIAS instead of DEFAULT" in said


def test_the_program_bf16_suggestion_counts_the_bytes_it_would_move_and_none_when_few() -> None:
    def program(params: dict[str, int], inputs: tuple[ArraySpec, ...]) -> dict:
        record = ProgramRecord(
            function="m:f",
            init="m:i",
            inputs=inputs,
            param_bytes=sum(params.values()),
            param_dtypes=tuple(params),
            param_bytes_by_dtype=params,
        )
        return {"program": record}

    # The decoder: 107 MB of bf16 parameters, int32 tokens, a float32 temperature of 8.
    tokens, temperature = ArraySpec((8, 16), "int32"), ArraySpec((8,), "float32")
    decoder = program({"bfloat16": 107_000_000}, (tokens, temperature))
    base = variant(roles=("baseline", "compiled"), problem={}, identity=decoder)
    assert untested.UntestedProgramBf16().conclude(facts(xla=base)) == ()
    # The same in float32, beside 4 MB of bf16: 1.6 MB of the 2.6 MB move, 0.8 MB fewer.
    mixed = program({"bfloat16": 1_000_000, "float32": 1_600_000}, (tokens,))
    base = variant(roles=("baseline", "compiled"), problem={}, identity=mixed)
    (u,) = untested.UntestedProgramBf16().conclude(facts(xla=base))
    assert u.why.startswith("moves the 1.6 MB of its 2.6 MB of inputs and parameters")
    assert "(800 kB fewer)" in u.why


def test_a_program_study_whose_variants_all_failed_is_offered_no_gelu_change() -> None:
    """Its variants have no `problem` and, failed before their result, no program record."""
    failed = dataclasses.replace(
        BASE,
        identity=dataclasses.replace(BASE.identity, status="failed", problem={}),
        timing=Timing(),
    )
    run = facts(xla=failed)
    for rule in (untested.UntestedTanh(), untested.UntestedBf16()):
        assert not rule.applies(run), rule.id
    # a program study: its own suggestion rule applies, but with no dtypes known it says nothing
    assert untested.UntestedProgramBf16().applies(run)
    assert untested.UntestedProgramBf16().conclude(run) == ()


def test_tanh_is_not_offered_where_the_study_is_tanh_already() -> None:
    """The snippet inherits the study's problem: with tanh there, it is the baseline again."""
    failed_tanh = dataclasses.replace(
        BASE, identity=dataclasses.replace(BASE.identity, status="failed"), timing=Timing()
    )
    assert failed_tanh.identity.problem["gelu"] == "tanh"
    assert untested.UntestedTanh().conclude(facts(xla=failed_tanh)) == ()


def test_an_empty_option_value_is_written_as_the_config_writes_it() -> None:
    """`xla_gpu_enable_command_buffer: ""` (command buffers off) is `""`, never the `–` that
    means no value."""
    from harness.common import fmt
    from harness.config.program import knob
    from harness.findings import words

    assert fmt.option("") == '""' and fmt.option(None) == fmt.MISSING and fmt.option(4) == "4"
    change = words._option("xla_gpu_enable_command_buffer", "", None, True, False)
    assert '`xla_gpu_enable_command_buffer=""`' in change.phrase and "–" not in change.phrase
    assert knob("mode", "") == 'mode=""'
