"""Numerics that tell the compiler from the dtype (issue 41): accuracy against float64 stated
once per dtype, a compiler effect judged against the baseline with an estimated allowance, and
the first HLO pass after which a result moves.

The planted case is real and on the CPU (jax 0.10): examples/rounding.py's float32 layer stores
its activations in bfloat16, and the default jit's YNNPACK dot fusion (pass
`dot-library-rewriter`) drops that round trip, which XLA's own emitters keep.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, run_harness

from examples import rounding
from harness.capture import numerics_pass
from harness.commands.migrate import add_findings
from harness.common import userfiles
from harness.config import load
from harness.findings import numerics
from harness.records import numerics_effect, run_files
from harness.records.numerics import AccuracyFile, LeafAccuracy, PassTrial
from harness.records.numerics_effect import Result
from harness.records.summary import Identity, Numerics, RunSummary, VariantSummary, load_summary
from harness.saved.run import SavedRun, SavedVariant
from harness.variants import program

YNN_OFF = {"xla_cpu_experimental_ynn_fusion_type": ""}


def _args() -> tuple[dict, jax.Array]:
    x = jax.random.normal(jax.random.key(1), (64, 128), jnp.float32)
    return rounding.rounded_init(jax.random.key(0), x), x


def _accuracy(errors: list[float], dtype: str = "bfloat16", tol: float = 2e-2) -> AccuracyFile:
    leaves = tuple(
        LeafAccuracy(f"[{i}]", dtype, (8,), e, tol, e <= tol, kept=8) for i, e in enumerate(errors)
    )
    return AccuracyFile(1, leaves, "outputs.npz")


def _variant(name: str, roles: tuple[str, ...], **files: object) -> SavedVariant:
    summary = VariantSummary(
        identity=Identity(status="ok", reason=None, mode="jit", framework="jax", roles=roles)
    )
    return SavedVariant(name, summary, **files)


def _run(*variants: SavedVariant) -> SavedRun:
    summary = RunSummary(8, "t", "r", "cpu", "xla", None, {v.name: v.summary for v in variants})
    return SavedRun(summary=summary, variants=variants, platform="cpu")


# --- the estimate and the distances -----------------------------------------------------------


def test_the_allowance_is_eagers_spread_and_never_below_the_dtypes_roundoff() -> None:
    u = numerics_effect.UNIT_ROUNDOFF["float32"]
    assert numerics_effect.allowed("float32", 3e-5, 1e-3) == pytest.approx(6e-5)
    assert numerics_effect.allowed("float32", 0.0, 1e-3) == pytest.approx(8 * u)
    # No eager of these inputs: the baseline's error against float64 stands in.
    assert numerics_effect.allowed("float32", None, 1e-3) == pytest.approx(2e-3)
    assert numerics_effect.allowed("int32", None, None) == 0.0


def _result(acc: AccuracyFile, values: np.ndarray, reference: np.ndarray) -> Result:
    return Result(acc, [values], [reference])


def test_distances_name_each_leaf_and_refuse_other_dtypes_or_functions() -> None:
    base = np.linspace(1, 2, 8, dtype=np.float32)
    ref = base.astype(np.float64)
    acc = _accuracy([1e-2])
    mine = _result(acc, base * (1 + 1e-1), ref)
    d = numerics_effect.distances(
        "xla", mine, _result(acc, base, ref), ("eager", _result(acc, base * (1 + 1e-3), ref))
    )
    (leaf,) = d.leaves
    assert leaf.vs_baseline == pytest.approx(1e-1, rel=1e-3)
    assert leaf.spread == pytest.approx(1e-3, rel=1e-3)
    assert numerics_effect.moved(leaf)
    other = numerics_effect.distances(
        "xla", _result(_accuracy([1e-2], "float32"), base, ref), _result(acc, base, ref), None
    )
    assert not other.comparable and "float32" in other.why
    # Another function (an exact GELU, the GEMM alone): its float64 reference differs.
    exact = numerics_effect.distances(
        "xla", _result(acc, base, ref * 1.01), _result(acc, base, ref), None
    )
    assert not exact.comparable and "references differ" in exact.why


def test_kept_outputs_sample_big_leaves_with_one_seed(tmp_path: Path) -> None:
    big = np.arange(10_000, dtype=np.float32)
    refs = [big.astype(np.float64), np.arange(3.0)]
    kept = numerics_effect.write_outputs(tmp_path / "o.npz", [big, np.arange(3)], refs)
    assert kept == ((numerics_effect.MAX_KEPT, True), (3, False))
    values = numerics_effect.read_outputs(tmp_path / "o.npz", [n for n, _ in kept])
    references = numerics_effect.read_outputs(tmp_path / "o.npz", [n for n, _ in kept], "r")
    assert values is not None and references is not None
    idx = numerics_effect.sample_indices(big.size)
    np.testing.assert_array_equal(values[0], big[idx])
    np.testing.assert_array_equal(references[0], refs[0][idx])


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda p: p.write_bytes(b""), "not a NumPy archive"),
        (lambda p: p.write_bytes(p.read_bytes()[:200]), "not a NumPy archive"),
        (lambda p: np.savez(p, v0=np.arange(4.0), r0=np.arange(3.0)), "its record says (3,)"),
    ],
    ids=["empty", "truncated", "mismatched"],
)
def test_a_damaged_outputs_file_is_one_line_not_a_traceback(
    tmp_path: Path, damage: Callable[[Path], object], words: str
) -> None:
    """The broke attacks of issue 59: an empty, a truncated and a mismatched outputs.npz gave
    EOFError, BadZipFile and ValueError tracebacks from reanalyze and --resume."""
    path = tmp_path / "o.npz"
    numerics_effect.write_outputs(path, [np.arange(3.0)], [np.arange(3.0)])
    damage(path)
    with pytest.raises(userfiles.Unreadable) as refused:
        numerics_effect.read_outputs(path, [3])
    assert words in str(refused.value) and "\n" not in str(refused.value)


# --- the rules ---------------------------------------------------------------------------------


def test_a_dtypes_own_rounding_over_its_tolerance_is_a_note_stated_once() -> None:
    run = _run(
        _variant("eager", ("eager",), accuracy=_accuracy([0.0229, 0.004])),
        _variant("xla", ("baseline",), accuracy=_accuracy([0.0251, 0.004])),
        _variant("xla_no_fusion", (), accuracy=_accuracy([0.0251, 0.004])),
    )
    (found,) = numerics.Accuracy().conclude(run)
    assert found.verdict == "rounding" and not found.failed
    assert found.reference == "eager" and found.leaf == "[0]"
    assert "bfloat16 rounding: 2.29%" in found.what


def test_a_variant_beyond_its_dtypes_rounding_fails() -> None:
    run = _run(
        _variant("eager", ("eager",), accuracy=_accuracy([0.0229])),
        _variant("xla", ("baseline",), accuracy=_accuracy([0.0251])),
        _variant("xla_sloppy", (), accuracy=_accuracy([0.09])),
    )
    (found,) = numerics.Accuracy().conclude(run)
    assert found.verdict == "failure" and found.failed == ("xla_sloppy",)


def test_an_old_summary_is_judged_from_its_worst_leaf() -> None:
    summary = VariantSummary(
        identity=Identity(
            status="ok", reason=None, mode="jit", framework="jax", roles=("baseline",)
        ),
        numerics=Numerics(rel_fro_err=3e-7, tolerance=2e-3, ok=True),
    )
    run = _run(SavedVariant("xla", summary))
    (found,) = numerics.Accuracy().conclude(run)
    assert (found.dtype, found.verdict) == ("float32", "within")
    assert numerics.CompilerEffect().conclude(run) == ()


# --- the planted compiler effect, compiled for real ---------------------------------------------


def _kept(options: dict) -> list[np.ndarray]:
    params, x = _args()
    y = (
        jax.jit(rounding.rounded_apply)
        .lower(params, x)
        .compile(compiler_options=options)(params, x)
    )
    return [numerics_effect.kept_values(np.asarray(leaf))[0] for leaf in jax.tree.leaves(y)]


def test_the_ynnpack_fusion_moves_the_result_and_the_search_names_its_pass(
    tmp_path: Path,
) -> None:
    params, x = _args()
    base = _kept(YNN_OFF)
    eager = [np.asarray(rounding.rounded_apply(params, x), np.float32)]
    dump = tmp_path / "dump"
    moved = _kept({"xla_dump_to": str(dump), "xla_dump_hlo_pass_re": ".*"})
    if not any("ynn_fusion" in p.read_text() for p in dump.glob("*after_optimizations.txt")):
        pytest.skip("this CPU build has no YNNPACK dot fusion (jax 0.10 on x86 has)")
    acc = _accuracy([1e-7], "float32", 2e-3)
    ref = [base[0].astype(np.float64)]  # one function of one input: one reference
    d = numerics_effect.distances(
        "xla", Result(acc, moved, ref), Result(acc, base, ref), ("eager", Result(acc, eager, ref))
    )
    (leaf,) = d.leaves
    assert numerics_effect.moved(leaf), (leaf.vs_baseline, leaf.allowed)
    assert leaf.vs_baseline > 1e-4 > 1e-6 > leaf.allowed  # the bf16 rounding, dropped

    module = next(p.name.split(".")[1] for p in dump.iterdir() if "rounded_apply" in p.name)
    search = numerics_pass.run_search(
        rounding.rounded_apply, (params, x), {}, sorted(dump.iterdir()), module, base, d, 16
    )
    assert search.found == "dot-library-rewriter", search
    assert search.restored is not None and search.restored <= leaf.allowed
    assert search.trials[-1].disabled == ("dot-library-rewriter",)  # the verification
    assert search.compiles == len(search.trials) <= 16


def test_a_search_past_its_budget_says_so() -> None:
    def never(disabled: tuple[str, ...]) -> PassTrial:
        return PassTrial(disabled, 1.0, False, None)

    found, reason, trials = numerics_pass.bisect(("a", "b", "c", "d"), never, 1)
    assert found is None and reason == "past its budget of 1 compiles" and len(trials) == 1
    found, reason, _ = numerics_pass.bisect(("a", "b"), never, 8)
    assert found is None and reason is not None and "neither half" in reason


# --- the study ---------------------------------------------------------------------------------


@pytest.mark.study
def test_the_planted_study_records_the_pass_and_migrate_rejudges_it(tmp_path: Path) -> None:
    proc = run_harness(
        f"--config={REPO / 'configs' / 'numerics_cpu.yaml'}",
        "--config.timing.rounds=2",
        "--config.timing.budget_s=0.3",
        results_root=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = (tmp_path / "numerics_cpu" / "latest").resolve()
    folder = run / "variants" / "xla_default"
    search = run_files.load(run_files.NUMERICS_PASS, folder / "numerics_pass.json")
    assert search.found == "dot-library-rewriter" and search.restored is not None
    assert "numerics first move at pass `dot-library-rewriter`" in proc.stdout
    assert "numerics FAIL" not in proc.stdout
    report = (run / "report.md").read_text()
    assert "changes: 2.9" in report
    # The rules judge the kept files again: findings removed, migrate makes them anew.
    data = json.loads((run / "summary.json").read_text())
    data["findings"] = None
    (run / "summary.json").write_text(json.dumps(data))
    add_findings(run)
    (effect,) = [
        e for e in load_summary(run / "summary.json").findings.effects if e.variant == "xla_default"
    ]
    assert (effect.verdict, effect.first_pass) == ("changes", "dot-library-rewriter")


# --- the bf16 program: its own rounding is no failure ------------------------------------------


def _kept_result(values: list[np.ndarray], ref: tuple, leaves: list) -> Result:
    acc = AccuracyFile(1, tuple(leaves), "outputs.npz")
    return Result(acc, [numerics_effect.kept_values(v)[0] for v in values], list(ref))


@pytest.mark.slow
def test_bf16_attention_rounding_is_a_note_and_no_variant_changes_the_numerics() -> None:
    exp = load(str(REPO / "configs" / "bf16_cpu.yaml")).experiment
    v = exp.variant("xla")
    args = program.args_for(v.program, exp.seed)
    ref, _ = program.reference_for(v.program, exp.program.kwargs, args, exp.seed)
    fn = program.bound(v.program)
    results = {}
    for name, y in (("eager", fn(*args.args)), ("xla", jax.jit(fn)(*args.args))):
        leaves = program.judged_leaves(y, ref, program.computed_in(args))
        values = [np.asarray(leaf) for leaf in jax.tree.leaves(y)]
        results[name] = _kept_result(values, ref, leaves)
    eager_err = max(leaf.rel_fro_err or 0.0 for leaf in results["eager"].accuracy.leaves)
    assert eager_err > 2e-2  # bf16's own rounding, with no compiler choice, is over tolerance
    d = numerics_effect.distances("xla", results["eager"], results["xla"], None)
    run = _run(
        _variant("eager", ("eager",), accuracy=results["eager"].accuracy, distances=d),
        _variant("xla", ("baseline",), accuracy=results["xla"].accuracy),
    )
    (accuracy,) = numerics.Accuracy().conclude(run)
    assert accuracy.dtype == "bfloat16" and accuracy.verdict == "rounding", accuracy.what
    (effect,) = numerics.CompilerEffect().conclude(run)
    assert effect.verdict == "same", effect.what
