"""Comparisons that can say "no difference": verdicts, intervals, same-program detection, peaks.

The statistics run on synthetic samples whose answer is known; same-program detection and the
ceilings on real CPU compiles and the tiny real run.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import read_summary
from hlo_helpers import write_ladder

from harness.common import stats
from harness.common.precision import precision
from harness.hlo.fingerprint import fingerprint, normalize_llvm, normalize_ptx
from harness.records.ladder import read_ladder
from harness.timing import rounds


def samples(center: float, spread: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


# --- verdicts on synthetic samples --------------------------------------------------------------


def test_equal_timings_are_indistinguishable() -> None:
    a = samples(1.0, 0.01, 10, 1)
    rng = random.Random(2)
    b = [x * (1 + rng.uniform(-0.005, 0.005)) for x in a]  # the same time, measured again
    estimate = stats.ratio_estimate(a, b)
    assert stats.decide(estimate, floor=0.0).verdict == stats.INDISTINGUISHABLE


def test_a_clear_difference_is_faster_or_slower() -> None:
    base = samples(1.0, 0.01, 10, 3)
    slow = [x * 1.2 for x in base]
    assert stats.decide(stats.ratio_estimate(slow, base), 0.01).verdict == stats.SLOWER
    assert stats.decide(stats.ratio_estimate(base, slow), 0.01).verdict == stats.FASTER


def test_noise_hides_a_small_difference() -> None:
    base = samples(1.0, 0.3, 6, 4)
    other = [x * 1.03 * (1 + random.Random(i).uniform(-0.3, 0.3)) for i, x in enumerate(base)]
    decision = stats.decide(stats.ratio_estimate(other, base), 0.0)
    assert decision.verdict == stats.INDISTINGUISHABLE and "contains 1.0" in decision.why


def test_a_difference_within_the_noise_floor_is_indistinguishable() -> None:
    base = samples(1.0, 0.001, 10, 5)
    other = [x * 1.02 for x in base]  # a tight interval away from 1.0 ...
    estimate = stats.ratio_estimate(other, base)
    assert stats.decide(estimate, floor=0.0).verdict == stats.SLOWER
    decision = stats.decide(estimate, floor=0.05)  # ... but the run cannot resolve 2%
    assert decision.verdict == stats.INDISTINGUISHABLE and "noise floor" in decision.why


def test_the_same_program_is_never_faster_or_slower() -> None:
    base = samples(1.0, 0.01, 10, 6)
    decision = stats.decide(
        stats.ratio_estimate([x * 2 for x in base], base), 0.0, same_program=True
    )
    assert decision.verdict == stats.SAME_PROGRAM


def test_the_bootstrap_is_deterministic_and_brackets_the_median() -> None:
    values = samples(2.0, 0.2, 15, 7)
    first, again = stats.bootstrap_ci(values), stats.bootstrap_ci(values)
    assert first == again
    assert first[0] <= stats.median(values) <= first[1]


def test_the_noise_floor_is_the_aa_deviation_and_half_width() -> None:
    estimate = stats.RatioEstimate(1.01, (0.98, 1.03), 10)
    reach = math.log(1.01) + 0.5 * math.log(1.03 / 0.98)
    assert stats.noise_floor(estimate) == pytest.approx(math.expm1(reach))
    assert stats.noise_floor(None) == 0.0


def test_a_failed_aa_check_widens_each_interval_and_withholds_only_what_it_cannot_resolve() -> None:
    """The H200 transformer block of issue 38: `xla` against itself 1.0125× (1.0060–1.0172).
    Before, that one miss suppressed every verdict; now each interval must clear the floor."""
    aa = stats.RatioEstimate(1.0125, (1.0060, 1.0172), 60)
    floor = stats.noise_floor(aa)
    failed = "`xla` timed against itself gave 1.0125×"
    cases = {
        "eager": ((9.05, (8.56, 9.65)), stats.SLOWER),
        "fusion off": ((2.574, (2.572, 2.580)), stats.SLOWER),
        "float32": ((1.612, (1.609, 1.614)), stats.SLOWER),
        "Triton GEMMs off": ((1.013, (1.011, 1.014)), stats.NOT_RESOLVED),
        "faster": ((0.9, (0.88, 0.92)), stats.FASTER),
        "around 1.0": ((1.001, (0.99, 1.012)), stats.NOT_RESOLVED),
    }
    for name, ((ratio, ci), want) in cases.items():
        got = stats.decide(stats.RatioEstimate(ratio, ci, 60, 1e-4), floor, aa_failed=failed)
        assert got.verdict == want, (name, got)
        if want == stats.NOT_RESOLVED:
            assert "failed A/A check" in got.why
    # With the A/A check held, an interval around 1.0 is no difference, not "cannot tell".
    held = stats.decide(stats.RatioEstimate(1.001, (0.99, 1.012), 60, 0.8), floor)
    assert held.verdict == stats.INDISTINGUISHABLE


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 11, 12])
def test_rounds_balance_every_place_and_every_predecessor(n: int) -> None:
    names = [f"v{i}" for i in range(n)]
    orders = [rounds.round_order(names, r) for r in range(2 * n)]
    assert all(sorted(o) == sorted(names) for o in orders)
    for name in names:
        assert sorted(o.index(name) for o in orders) == sorted(list(range(n)) * 2), name
    # Every ordered pair runs back to back twice over 2n rounds (a Williams design): the
    # variant before any one is each other variant equally often, not always the same one.
    pairs = Counter((o[i], o[i + 1]) for o in orders for i in range(n - 1))
    assert set(pairs) == {(a, b) for a in names for b in names if a != b}
    assert set(pairs.values()) <= {2}


def test_odd_rounds_run_the_even_rounds_order_backwards() -> None:
    names = ["a", "b", "c", "d"]
    assert rounds.round_order(names, 0) == ("a", "b", "d", "c")
    assert rounds.round_order(names, 1) == ("c", "d", "b", "a")
    assert rounds.round_order(names, 2) == ("b", "c", "a", "d")


def test_the_budget_shrinks_batches_but_keeps_the_rounds() -> None:
    assert rounds.plan(12, 10, batch_s=0.1, budget_s=3.0) == (10, pytest.approx(0.02))
    assert rounds.plan(12, 10, batch_s=0.01, budget_s=30.0) == (10, pytest.approx(0.01))


def test_calibrated_batches_shrink_alike_to_end_within_the_budget() -> None:
    calibrated = {
        "slow": rounds.Batch(calls=10, seconds=0.05),  # 5 ms a call
        "fast": rounds.Batch(calls=400, seconds=0.04),  # 0.1 ms a call
    }
    calls = rounds.fit_budget(calibrated, rounds=10, seconds_left=0.45)
    spent = sum(calls[n] * b.seconds / b.calls for n, b in calibrated.items()) * 10
    assert spent <= 0.45 and calls["fast"] / calls["slow"] == pytest.approx(40, rel=0.05)
    # Enough budget: the calibrated batches as they are.
    assert rounds.fit_budget(calibrated, rounds=10, seconds_left=5.0) == {"slow": 10, "fast": 400}
    # No budget left: two calls each, never one (a batch times calls back to back).
    assert rounds.fit_budget(calibrated, rounds=10, seconds_left=-1.0) == {"slow": 2, "fast": 2}


# --- same-program detection on real CPU compiles ---------------------------------------------------


def test_frontends_that_only_name_things_differently_are_the_same_program(cpu_run: Path) -> None:
    s = read_summary(cpu_run)
    digest = {n: v.hlo.fingerprint.digest for n, v in s.items() if v.hlo.fingerprint}
    assert digest["xla"] == digest["xla_flax_nnx"] == digest["xla_flax_linen"]
    assert digest["xla"] != digest["xla_exact_gelu"]
    assert s["xla_flax_nnx"].comparison.vs_baseline.verdict == stats.SAME_PROGRAM
    assert s["xla_exact_gelu"].comparison.vs_baseline.verdict != stats.SAME_PROGRAM


def gelu(x, w, b):
    return jax.nn.gelu(x @ w + b)


ARGS = (jnp.ones((16, 32)), jnp.ones((32, 32)), jnp.ones((32,)))


@pytest.fixture(scope="module")
def fast_math(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fingerprints")
    plain = write_ladder(root / "plain", gelu, *ARGS)
    fast = write_ladder(root / "fast", gelu, *ARGS, options={"xla_cpu_enable_fast_math": True})
    return plain, fast


def test_an_option_acting_after_hlo_changes_only_the_code_part(
    fast_math: tuple[Path, Path],
) -> None:
    plain, fast = (fingerprint(read_ladder(p)) for p in fast_math)
    assert plain.hlo == fast.hlo  # fast-math leaves the optimized HLO as it was ...
    assert plain.code != fast.code  # ... and changes the emitted LLVM IR
    assert not plain.same_program(fast)
    text = "\n".join(p.read_text() for p in (fast_math[1] / "70-llvm").iterdir())
    assert "fast" in text or "reassoc" in text


def test_code_normalisation_ignores_names_but_not_instructions() -> None:
    a = "define void @fusion_1(ptr %0) {\n  %x = fadd float %0, 1.0 ; note\n  ret void\n}"
    b = "define void @add_fusion_7(ptr %0) {\n  %y = fadd float %0, 1.0\n  ret void\n}"
    c = "define void @add_fusion_7(ptr %0) {\n  %y = fadd reassoc float %0, 1.0\n  ret void\n}"
    assert normalize_llvm(a) == normalize_llvm(b) != normalize_llvm(c)
    p1 = ".visible .entry loop_fusion(\n.param .u64 loop_fusion_param_0\n)\n{\nld.param.u64 %rd1, [loop_fusion_param_0];\n}"
    p2 = ".visible .entry other_fusion_3(\n.param .u64 other_fusion_3_param_0\n)\n{\nld.param.u64 %rd1, [other_fusion_3_param_0];\n}"
    assert normalize_ptx(p1) == normalize_ptx(p2)


# --- peaks that match what ran --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "x", "w", "expected"),
    [
        ("gpu", "bfloat16", "bfloat16", "bf16"),
        ("gpu", "float16", "float16", "f16"),
        ("gpu", "float32", "float32", "tf32"),  # JAX's default precision on NVIDIA
        ("gpu", "bfloat16", "float32", "tf32"),  # the mixed-dtype trap promotes to f32
        ("cpu", "float32", "float32", "f32"),
        ("cpu", "bfloat16", "bfloat16", "bf16"),
    ],
)
def test_the_ceiling_is_chosen_by_the_precision_the_gemm_ran(platform, x, w, expected) -> None:
    assert precision(platform, x, w) == expected


def test_true_f32_under_highest_precision() -> None:
    assert precision("gpu", "float32", "float32", "highest") == "f32"


def test_fraction_of_peak_never_exceeds_one(cpu_run: Path) -> None:
    for name, v in read_summary(cpu_run).items():
        c = v.cost
        if c.fraction_of_peak is not None:
            assert 0 < c.fraction_of_peak <= 1.0, name
            assert c.peak_precision == "f32" and c.peak_source, name
        elif v.timing.step_s and c.flops_analytic:
            assert c.fraction_withheld, name  # withheld, and the reason given
    bound = read_summary(cpu_run)["matmul_only"].cost
    assert bound.fraction_of_peak is not None  # always given for the lower bound


def test_settling_calls_count_against_the_budget_and_precede_every_batch() -> None:
    calls: list[str] = []
    timed = [rounds.Timed(n, (lambda n=n: calls.append(n)), lambda out: None) for n in ("a", "b")]
    result = rounds.time_rounds(timed, rounds=2, target_batch_s=0.0, warmup=0, settle=0.5)
    # Calibration ran two calls each (a target of 0 s is met by the first batch however slow
    # the machine, and no budget scales it: no count here depends on load); then every batch
    # of 2 calls came after 1 settling call of the same variant, so no batch starts right
    # after another variant's calls.
    assert result.calls_per_batch == {"a": 2, "b": 2} and result.settle_calls == {"a": 1, "b": 1}
    assert calls[4:] == ["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3
    batches = {"a": rounds.Batch(calls=10, seconds=0.1)}
    assert rounds.fit_budget(batches, 1, 0.1, settle=1.0) == {"a": 5}


def test_nvml_clock_reasons_are_named_and_idle_is_left_out() -> None:
    from harness.timing.clocks import clock_limits

    readings = [
        {"throttle_reasons": "0x4"},
        {"throttle_reasons": "0x5"},
        {"throttle_reasons": None},
    ]
    assert clock_limits(readings) == ("software power cap",)
    assert clock_limits([{"throttle_reasons": "0x48"}]) == (
        "hardware slowdown",
        "hardware thermal slowdown",
    )


def test_inputs_kept_between_runs_are_bit_identical_to_made_ones(tmp_path: Path) -> None:
    """The input cache under the results root saves making them again (compiling JAX's random
    kernels, about a second a run) and changes no bit: numerics stay exactly the same."""
    import numpy as np

    from harness.config.experiment import Problem
    from harness.variants import expression

    p = Problem(m=8, k=16, n=24, dtype="bfloat16", w_dtype="float32")
    made = expression.make_inputs(p, seed=3)
    expression._INPUTS.clear()
    first = expression.inputs_for(p, 3, tmp_path)
    (kept,) = tmp_path.glob("inputs-*.npz")
    expression._INPUTS.clear()
    again = expression.inputs_for(p, 3, tmp_path)
    for name in ("x", "w", "b"):
        want = np.asarray(getattr(made, name))
        for got in (getattr(first, name), getattr(again, name)):
            got = np.asarray(got)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    # A damaged file is made again, never read as data.
    kept.write_bytes(b"not an npz")
    expression._INPUTS.clear()
    assert (
        np.asarray(expression.inputs_for(p, 3, tmp_path).x).tobytes()
        == np.asarray(made.x).tobytes()
    )
    expression._INPUTS.clear()


def test_the_half_size_input_is_the_slice_of_x_and_compiles_nothing() -> None:
    """The recompile's m/2 input is cut on the host: the same bits, dtype and placement as a
    device slice, without an eager compile that every variant would pay after clearing
    JAX's caches (a slice, or the identity `jnp.asarray` compiles for each new shape)."""
    import numpy as np

    from harness.capture import measure
    from harness.config.experiment import Problem
    from harness.variants import expression

    p = Problem(m=6, k=16, n=8, batch=(2,), dtype="bfloat16")
    x = expression.make_inputs(p, seed=5).x
    sliced = x[..., :3, :]
    jax.clear_caches()
    with measure.compile_events() as events:
        half = expression.halve_rows(x)
        placed = expression.to_device(np.asarray(x))
    assert measure.summarize_events(events)["backend_compiles"] == 0
    assert half.shape == (2, 3, 16) == sliced.shape and half.dtype == sliced.dtype
    assert np.asarray(half).tobytes() == np.asarray(sliced).tobytes()
    assert half.committed == sliced.committed and half.sharding == sliced.sharding
    assert np.asarray(placed).tobytes() == np.asarray(x).tobytes() and not placed.committed


# One executable, two printings: XLA's dump reads a tuple element inline (`%gemm#0`), the
# executable's as_text() as a get-tuple-element instruction (seen on the H200, where the
# timing note called every fused variant "DIFFERS" from its own captured program).
_INLINE_READ = """HloModule m, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

%fused (p: f32[4,4]) -> f32[4,4] {
  %p = f32[4,4]{1,0} parameter(0)
  ROOT %t = f32[4,4]{1,0} tanh(%p)
}

ENTRY %main (x: f32[4,4]) -> f32[4,4] {
  %x = f32[4,4]{1,0} parameter(0)
  %gemm = (f32[4,4]{1,0}, s8[64]{0}) custom-call(%x, %x), custom_call_target="__cublas$gemm"
  ROOT %f = f32[4,4]{1,0} fusion(%gemm#0), kind=kLoop, calls=%fused
}
"""
_EXPLICIT_READ = _INLINE_READ.replace(
    "  ROOT %f = f32[4,4]{1,0} fusion(%gemm#0)",
    "  %gte = f32[4,4]{1,0} get-tuple-element(%gemm), index=0\n"
    "  ROOT %f = f32[4,4]{1,0} fusion(%gte)",
)


def test_a_dump_and_as_text_of_one_executable_have_one_folded_digest() -> None:
    from harness.hlo.fingerprint import hlo_text_digest

    assert hlo_text_digest(_INLINE_READ, fold_tuple_reads=True) == hlo_text_digest(
        _EXPLICIT_READ, fold_tuple_reads=True
    )
    # Run folders keep the unfolded digest of dumps; it tells the two printings apart.
    assert hlo_text_digest(_INLINE_READ) != hlo_text_digest(_EXPLICIT_READ)
    # Folding hides no real difference: another element read is another program.
    other = _EXPLICIT_READ.replace("index=0", "index=1")
    assert hlo_text_digest(other, fold_tuple_reads=True) != hlo_text_digest(
        _INLINE_READ, fold_tuple_reads=True
    )
