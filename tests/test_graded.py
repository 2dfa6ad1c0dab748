"""Graded conclusions (issue 38): each comparison resolved on its own evidence, a "why" that
takes its ratio apart, no figure compared that was never measured, and sentences whose counts
and signs are computed from their own numbers."""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from pathlib import Path

import pytest

from harness import findings as rules
from harness import saved
from harness.analyze import judging
from harness.commands.migrate import add_findings
from harness.common import fmt, stats
from harness.findings import compare, explain, untested
from harness.findings.facts import facts_of
from harness.findings.words import mechanisms
from harness.records.findings import Findings
from harness.records.run_files import Manifest
from harness.records.summary import (
    ArraySpec,
    Identity,
    Profile,
    ProgramRecord,
    RunSummary,
    Timing,
    Transfer,
    VariantSummary,
    load_summary,
)
from harness.report.compare import default_out
from harness.saved.run import ClusterTime
from harness.timing import rounds

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "results" / "reference" / "h200"


# --- resolution per comparison ----------------------------------------------------------------


def test_migrate_judges_the_h200_reference_again_and_ranks_its_findings(tmp_path: Path) -> None:
    """The committed H200 run: its A/A pair excluded 1.0 (0.9899×, 0.9798–0.9967), which once
    withheld every verdict. Judged again from its saved rounds, each comparison must clear the
    floor that pair measured (1.9%), and the five differences the study is about are ranked."""
    run = tmp_path / "h200"
    shutil.copytree(H200, run, ignore=shutil.ignore_patterns("*.png", "*.html", "ir"))
    # Forget the verdicts: every one not resolved, as the schema-6 gate had it.
    summary = load_summary(run / "summary.json")
    assert summary.noise is not None
    add_findings(run)
    judged = load_summary(run / "summary.json")
    n = judged.noise
    assert n is not None and n.resolved and n.aa_held is False
    assert n.floor == pytest.approx(0.0188, abs=5e-4)
    ranked = {f.variant: f for f in judged.findings.timing}
    assert {"eager", "xla_no_fusion", "xla_mixed_dtype", "xla_host_callback"} <= set(ranked)
    assert ranked["xla_library_epilogue"].verdict == stats.FASTER
    # A 1–5% difference whose interval reaches into the floor is named, not called.
    assert any(u.startswith("`xla_lax_cond` against `xla`") for u in n.unresolvable)
    assert "xla_lax_cond" not in ranked
    # The gate names what the floor left unresolved; the report leads with findings.
    assert "widened by the floor 1.9%" in judged.findings.gate.line
    # Every ranked finding's interval, widened by the floor, excludes 1.0.
    for f in judged.findings.timing:
        assert stats.clears_floor(f.ci95, n.floor), f.what


def test_the_committed_h200_reference_is_migrated_so() -> None:
    summary = load_summary(H200 / "summary.json")
    ranked = [f.variant for f in summary.findings.timing]
    assert {"eager", "xla_no_fusion", "xla_mixed_dtype", "xla_host_callback"} <= set(ranked)
    assert "xla_library_epilogue" in ranked
    md = (H200 / "report.md").read_text()
    assert md.index("## Findings") < md.index("### 1. ")
    assert "Its A/A check failed (the pair's interval excludes 1.0)" in md


def test_a_busy_machine_still_withholds_every_verdict() -> None:
    """Other processes change the ratios themselves: that still withholds them all, and then
    nothing is named as left unresolved by the A/A floor."""
    from harness.records.machine_state import MachineState

    g = judging.StageGate(
        stats.RatioEstimate(0.8, (0.7, 0.99), 10),
        0.3,
        ("A/A failed",),
        ("other processes took 60% of the 2 CPUs",),
        MachineState(cpus=2),
    )
    pending = [
        judging.verdicts.Pending(
            "eager", "vs_baseline", "xla", stats.RatioEstimate(9.0, (8.5, 9.6), 10, 1e-4), False
        )
    ]
    judged = judging.judge(pending, g, judging.TimingLimits())
    assert judged[("eager", "vs_baseline")].verdict == stats.NOT_RESOLVED
    assert "other processes" in judged[("eager", "vs_baseline")].why


def test_the_aa_twin_times_exactly_its_baselines_calls() -> None:
    """Calibrated apart, the A/A pair's two slots timed 25 and 24 calls on the H200 (issue 38:
    1.06% mean A/A deviation, 0.37% with the twin). The twin is never calibrated."""
    calibrated: list[str] = []

    def call() -> int:
        return 1

    timed = [rounds.Timed(n, call, lambda out: out) for n in ("a", "b", "a#again")]
    out = rounds.time_rounds(
        timed,
        2,
        0.0005,
        warmup=0,
        announce=calibrated.append,
        twins={"a#again": "a"},
    )
    assert out.calls_per_batch["a#again"] == out.calls_per_batch["a"]
    assert out.settle_calls["a#again"] == out.settle_calls["a"]
    # Announced before its warm-up, its calibration and each slot: the twin has no calibration.
    assert calibrated.count("a#again") == calibrated.count("a") - 1 == 3


# --- the why takes the ratio apart ------------------------------------------------------------


def _variant(step: float | None, profile: Profile, **identity: object) -> VariantSummary:
    return VariantSummary(
        identity=Identity(status="ok", mode="jit", roles=("compiled",), **identity),  # type: ignore[arg-type]
        timing=Timing(step_s=step, step_ci95_s=(step, step) if step else None, rounds=10),
        profile=profile,
    )


PROFILED = Profile(kernels_per_step=2, device_time_per_step_s=1.0e-3, profiled_step_time_s=1.2e-3)


def _facts(v: VariantSummary, ref: VariantSummary, times: dict | None = None) -> tuple:
    summary = RunSummary(
        schema_version=8,
        experiment="e",
        run_id="r",
        platform="gpu",
        baseline="ref",
        noise=None,
        variants={"v": v, "ref": ref},
    )
    facts = facts_of(summary)
    if times:
        facts = dataclasses.replace(
            facts,
            variants=tuple(
                dataclasses.replace(x, times=times.get(x.name, ())) for x in facts.variants
            ),
        )
    return facts.variant("v"), facts.variant("ref")


def test_the_parts_sum_to_the_timed_difference_grouped_by_kind_of_work() -> None:
    slow = Profile(kernels_per_step=3, device_time_per_step_s=2.0e-3, profiled_step_time_s=2.5e-3)
    times = {
        "v": (
            ClusterTime("gemm", 1.2e-3, 1, "m.py:3", "lib@m.py:3", work="library"),
            ClusterTime("f", 0.7e-3, 2, "m.py:4", work="loop_fusion", bytes=4e9),
        ),
        "ref": (ClusterTime("custom-call.1", 0.8e-3, 1, "m.py:3", "lib@m.py:3", work="library"),),
    }
    v, ref = _facts(_variant(2.6e-3, slow), _variant(1.1e-3, PROFILED), times)
    d = explain.decompose(v, ref)
    assert d is not None and d.measured_s == pytest.approx(1.5e-3)
    assert sum(p.delta_s for p in d.parts) + d.residual_s == pytest.approx(d.measured_s)
    by_kind = {p.kind: p.delta_s for p in d.parts}
    # One GEMM under two instruction names is one kind of work: +0.4 ms, not +1.2/−0.8.
    assert by_kind["library"] == pytest.approx(0.4e-3)
    # The host gap is the timed step's: its median less the profiled device time.
    assert by_kind["host_gap"] == pytest.approx((2.6e-3 - 2.0e-3) - (1.1e-3 - 1.0e-3))
    assert d.overhead_s == pytest.approx(2.5e-3 - 2.6e-3)
    assert d.against_overhead_s == pytest.approx(1.2e-3 - 1.1e-3)
    # The largest group leads, tied to its traffic; lines follow it.
    assert explain.sentence(d).startswith(
        "+0.700 ms of the +1.500 ms a step is loop fusions (m.py:4)"
    )
    assert "4 GB more traffic a step" in d.lead
    assert [p.what for p in d.by_line][:2] == ["m.py:4", "m.py:3"]


def test_a_failed_profile_is_measured_but_not_explained_and_never_a_zero() -> None:
    """A scanned LM on the H200: `xla`'s profile failed, and its command-buffers-off variant
    read "102 D2D copies a step (287 MB) instead of 0". That 0 was never measured."""
    copies = Profile(
        kernels_per_step=50,
        device_time_per_step_s=1e-3,
        profiled_step_time_s=1.2e-3,
        transfers_per_step=(Transfer("D2D", 102, 287e6),),
    )
    failed = VariantSummary(
        identity=Identity(status="ok", mode="jit", roles=("baseline",)),
        timing=Timing(step_s=1e-3, step_ci95_s=(1e-3, 1e-3), rounds=10),
        analysis_errors=("profile: not a thunk line: 'condition:'",),
    )
    v, ref = _facts(_variant(2e-3, copies), failed)
    said = " ".join(mechanisms(v, ref))
    assert "D2D" not in said and "instead of 0" not in said
    d = explain.decompose(v, ref)
    assert d is not None and d.parts == () and d.explained_share is None
    assert d.note.startswith("measured but not explained") and "not a thunk line" in d.note


# --- sentences that cannot contradict themselves ------------------------------------------------

# "3 kernels more a step (101 against 98)", "1 D2H copy fewer (0 against 1)"
VERSUS = re.compile(
    r"(?P<n>\d+(?:\.\d+)?) (?P<noun>[\w ]+?) (?P<word>more|fewer)(?: [a-z ]+?)? "
    r"\((?P<a>\d+(?:\.\d+)?) against (?P<b>\d+(?:\.\d+)?)\)"
)
THRESHOLD = re.compile(r"(?P<x>\d+(?:\.\d+)?)× (?P<sign>≥|<) (?P<t>\d+(?:\.\d+)?)×")


def contradictions(text: str) -> list[str]:
    """Every "N X more/fewer (a against b)" whose N or word disagrees with a and b, and every
    "x× ≥/< t×" whose sign disagrees with its numbers."""
    out = []
    for m in VERSUS.finditer(text):
        n, a, b = float(m["n"]), float(m["a"]), float(m["b"])
        want = "more" if a > b else "fewer"
        if not math.isclose(n, abs(a - b), rel_tol=0.01, abs_tol=0.051) or m["word"] != want:
            out.append(m.group(0))
    for m in THRESHOLD.finditer(text):
        x, t = float(m["x"]), float(m["t"])
        if (m["sign"] == "≥") != (x >= t):
            out.append(m.group(0))
    return out


def finding_text(found: Findings) -> str:
    parts = [found.top, found.gate.line if found.gate else ""]
    for f in (*found.timing, *found.noise):
        parts += [f.what, f.why, *f.evidence, *f.mechanisms]
    for o in found.observations:
        parts += [o.claim, *o.evidence]
    parts += [c.change + " " + c.tradeoff for c in found.changes]
    return "\n".join(parts)


def test_the_property_check_fails_on_a_planted_contradiction() -> None:
    assert contradictions("15 clusters more (101 against 119)") != []
    assert contradictions("3 clusters more (101 against 119)") != []
    assert contradictions("recompile 216.5 ms, 9.4× ≥ 10× the step") != []
    assert contradictions(fmt.versus(101, 119, "cluster")) == []
    assert contradictions(fmt.versus(3, 1, "D2H copy", "a step")) == []
    assert contradictions(fmt.against_threshold(9.96, 10.0)) == []
    assert fmt.against_threshold(9.96, 10.0).startswith("9.96× <")


@pytest.mark.parametrize("name", ["cpu", "h200", "h200x2"])
def test_no_committed_reference_sentence_contradicts_its_numbers(name: str) -> None:
    summary = load_summary(REPO / "results" / "reference" / name / "summary.json")
    assert contradictions(finding_text(summary.findings)) == []


def test_no_fresh_run_sentence_contradicts_its_numbers(cpu_run: Path) -> None:
    summary = load_summary(cpu_run / "summary.json")
    found = rules.evaluate(rules.read_facts(cpu_run, summary))
    assert contradictions(finding_text(found)) == []
    # Every pair of a fresh run takes its difference apart: parts plus residual are the
    # measured difference of the timed steps.
    facts = rules.read_facts(cpu_run, summary)
    checked = 0
    for v, ref, _ in rules.timing.judged_pairs(facts):
        d = explain.decompose(v, ref)
        assert d is not None
        assert d.measured_s == pytest.approx(v.summary.timing.step_s - ref.summary.timing.step_s)
        assert sum(p.delta_s for p in d.parts) + d.residual_s == pytest.approx(d.measured_s)
        assert d.parts, d.note
        checked += 1
    assert checked >= 5
    for f in found.timing:
        assert f.decomposition is not None and " a step is " in f.why.split(";")[0]


def test_no_bf16_suggestion_for_a_program_already_in_bf16() -> None:
    def program(params: tuple[str, ...], inputs: tuple[str, ...]) -> VariantSummary:
        record = ProgramRecord(
            function="m:f",
            init="m:init",
            inputs=tuple(ArraySpec((8, 513), d) for d in inputs),
            param_dtypes=params,
        )
        return VariantSummary(
            identity=Identity(
                status="ok", mode="jit", framework="jax", roles=("baseline",), program=record
            ),
            timing=Timing(step_s=1e-3, step_ci95_s=(1e-3, 1e-3), rounds=10),
        )

    def suggested(v: VariantSummary) -> tuple:
        summary = RunSummary(8, "e", "r", "gpu", "xla", None, {"xla": v})
        return untested.UntestedProgramBf16().conclude(facts_of(summary))

    assert suggested(program(("bfloat16",), ("int32",))) == ()
    assert suggested(program(("float32",), ("int32",))) != ()


# --- compare ----------------------------------------------------------------------------------


def test_compare_names_the_keys_that_differ_and_a_knob_is_not_a_size(cpu_run: Path) -> None:
    run = saved.load_run(cpu_run)

    def with_program(program: dict) -> Manifest:
        config = {**run.manifest.config, "program": program}
        return dataclasses.replace(run.manifest, config=config)

    base = {"function": "m:f", "inputs": [{"shape": [8, 16], "dtype": "bfloat16"}], "kwargs": {}}
    knob = {**base, "kwargs": {"attention": "cudnn"}}
    assert compare.same_problem(with_program(base), with_program(knob))
    bigger = {**base, "inputs": [{"shape": [8, 32], "dtype": "bfloat16"}]}
    keys = [k for k, _, _ in compare.size_differences(with_program(base), with_program(bigger))]
    assert keys == ["program.inputs"]
    a = cpu_run.parent / "a" / "20260101-000000"
    b = cpu_run.parent / "b" / "20260102-000000"
    assert default_out(a, b).name.startswith("a-20260101-000000_vs_b-20260102-000000-")
    # Two results roots whose experiments and run ids coincide: two folders (issue 59).
    elsewhere = cpu_run.parent.parent / "other-root" / "a" / "20260101-000000"
    assert default_out(elsewhere, b) != default_out(a, b)
    assert default_out(a, b) == default_out(a, b)


def test_a_saved_limit_of_zero_is_that_limit_and_a_missing_one_the_default() -> None:
    from harness.records.saved_config import SavedConfig

    zero = judging.limits_of(SavedConfig({"timing": {"max_noise": 0, "max_others": 0.0}}))
    assert (zero.max_noise, zero.max_others) == (0, 0)
    assert judging.limits_of(SavedConfig({"timing": {}})) == judging.TimingLimits()
    assert judging.limits_of(None) == judging.TimingLimits()
