"""Numerics that never go missing (issue 58): the reference a program's result is judged
against when its float64 reference fails or computes something else, and a leaf whose
reference is zero. Real JAX on the CPU, tiny shapes; the programs are this module's own.

- an x64-unclean program (an index from `jnp.arange`, int64 under x64, beside an int32 one
  in `dynamic_update_slice`): its float64 reference raises, the float32 reference is used and
  said, and both questions are answered: accuracy against it, and each variant against the
  baseline's outputs;
- a program with dropout: under x64 `jax.random.bernoulli` draws 64 bits an element, another
  mask from the same key; the harness sees the draws differ and uses the float32 reference,
  and the bias gradient that centring cancels (exactly 0) is judged on its neighbours' scale:
  no failure and no rounding over the tolerance;
- a program no reference can run: its accuracy is not measured (the `numerics` probe says
  why), yet its outputs are kept and each variant is compared with the baseline's.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harness.capture import variant as capture_variant
from harness.config import load
from harness.config.experiment import Program
from harness.frontends.contract import Context
from harness.records import numerics_effect, run_files
from harness.records.numerics import AccuracyFile
from harness.store.runfolder import VariantFolder
from harness.variants import program as programs
from harness.variants import references
from harness.variants.program import ProgramArgs


def unclean(params: dict, x: jax.Array) -> jax.Array:
    """A tiny cache write: the row index comes from `jnp.arange`, the column is an int32."""
    buf = jnp.zeros((8, x.shape[1]), x.dtype)
    row = jnp.arange(8)[2]
    buf = jax.lax.dynamic_update_slice(buf, jnp.tanh(x @ params["w"]), (row, jnp.int32(0)))
    return buf @ params["w"]


def dropout_grads(params: dict, x: jax.Array, key: jax.Array) -> dict:
    """A train step's gradients: a dense layer, centring over the batch (as BatchNorm does:
    the bias's gradient is exactly 0), dropout at 0.5, a squared loss."""

    def loss(p: dict) -> jax.Array:
        h = x @ p["w"] + p["b"]
        h = h - h.mean(0)
        keep = jax.random.bernoulli(jax.random.wrap_key_data(key), 0.5, h.shape)
        h = jnp.where(keep, h / 0.5, 0.0)
        return jnp.mean(jnp.square(jnp.tanh(h @ p["v"])))

    return jax.grad(loss)(params)


def _args(*inputs: np.ndarray, width: int = 16) -> ProgramArgs:
    rng = np.random.default_rng(0)
    params = {
        "w": (rng.standard_normal((width, width)) / 4).astype(np.float32),
        "b": rng.standard_normal(width).astype(np.float32),
        "v": (rng.standard_normal((width, width)) / 4).astype(np.float32),
    }
    return ProgramArgs(params, inputs)


def _result(y: object, ref: tuple[np.ndarray, ...]) -> numerics_effect.Result:
    """A variant's result as the analysis reads it back (numerics.json, outputs.npz)."""
    leaves = programs.judged_leaves(y, ref)
    values = [numerics_effect.kept_values(np.asarray(v))[0] for v in jax.tree.leaves(y)]
    return numerics_effect.Result(AccuracyFile(1, tuple(leaves), "o"), values, list(ref))


def test_an_x64_unclean_program_is_judged_against_float32_and_against_the_baseline() -> None:
    program = Program(function="test_references:unclean")
    x = np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32)
    args = _args(x)
    with pytest.raises(TypeError, match="dynamic_update_slice"):
        programs.reference(program, args, 0)
    ref, note = references.reference_for(program, {}, args, 0)
    assert note is not None and note.startswith("the float64 reference failed (TypeError")
    assert "the program in float32 on the CPU at the highest matmul precision" in note
    fn = jax.jit(unclean)
    base = fn(args.params, x)
    options = {"xla_disable_hlo_passes": "fusion,priority-fusion,multi_output_fusion"}
    other = fn.lower(args.params, x).compile(compiler_options=options)(args.params, x)
    # The accuracy question: each leaf within its dtype's tolerance of the reference.
    assert all(
        leaf.ok and leaf.rel_fro_err is not None for leaf in programs.judged_leaves(base, ref)
    )
    # The compiler-effect question: the other variant against the baseline's outputs.
    found = numerics_effect.distances("xla", _result(other, ref), _result(base, ref), None)
    assert found.comparable and found.leaves
    assert all(d.vs_baseline is not None and not numerics_effect.moved(d) for d in found.leaves)


def test_a_dropout_program_is_judged_against_a_reference_drawing_its_own_mask() -> None:
    """The float64 reference draws the program's float32 bits (harness.variants.program), so
    dropout reads no failure and the bias's zero gradient no rounding note."""
    program = Program(function="test_references:dropout_grads")
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    key = np.asarray(jax.random.key_data(jax.random.key(3)))
    args = _args(x, key)
    assert references.differing_draws(program, args) is None
    y = jax.jit(dropout_grads)(args.params, x, key)
    ref, note = references.reference_for(program, {}, args, 0)
    assert note is None  # the float64 reference is the same computation: used as it is
    judged = {leaf.path: leaf for leaf in programs.judged_leaves(y, ref)}
    assert all(leaf.ok for leaf in judged.values()), judged
    bias = judged["['b']"]
    assert np.abs(ref[0]).max() < 1e-5 * np.abs(ref[2]).max()  # its gradient: 0 but rounding
    assert bias.rel_fro_err is not None and bias.rel_fro_err < 1e-3


def randint_draws(params: dict, x: jax.Array, key: jax.Array) -> jax.Array:
    """Integers drawn at the default int width: 64 bits a value under x64, 32 without."""
    picks = jax.random.randint(jax.random.wrap_key_data(key), (x.shape[0],), 0, x.shape[1])
    return jnp.take_along_axis(x @ params["w"], picks[:, None], 1)


def test_a_program_whose_draws_still_differ_under_x64_is_detected() -> None:
    program = Program(function="test_references:randint_draws")
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    args = _args(x, np.asarray(jax.random.key_data(jax.random.key(3))))
    assert "under x64 it draws" in (references.differing_draws(program, args) or "")
    _, note = references.reference_for(program, {}, args, 0)
    assert note is not None and "not the same computation: under x64 it draws" in note


def test_only_a_program_whose_draws_change_under_x64_is_suspected() -> None:
    program = Program(function="test_references:dropout_grads")
    x = np.ones((4, 16), np.float32)
    args = _args(x, np.zeros(2, np.uint32))
    assert references.differing_draws(Program(function="test_references:unclean"), _args(x)) is None
    assert references.random_draws(program, args, False)  # dropout draws; unclean draws none


def picky(params: dict, x: jax.Array) -> jax.Array:
    """A program no reference can run: it refuses x64 and any matmul precision but the default
    (as a program tied to its device's kernels refuses the CPU)."""
    if jax.config.jax_enable_x64 or jax.config.jax_default_matmul_precision is not None:
        raise ValueError("this program runs only at the default precision")
    return jnp.tanh(x @ params["w"]) @ params["v"]


def picky_init(key: jax.Array, x: jax.ShapeDtypeStruct) -> dict:
    k1, k2 = jax.random.split(key)
    width = x.shape[-1]
    return {"w": jax.random.normal(k1, (width, width)), "v": jax.random.normal(k2, (width, 4))}


def test_without_any_reference_each_variant_is_still_compared_with_the_baseline(
    tmp_path: Path,
) -> None:
    config = tmp_path / "picky.yaml"
    config.write_text(
        "experiment: picky\nseed: 0\nbaseline: xla\n"
        "program:\n  function: test_references:picky\n  init: test_references:picky_init\n"
        "  inputs:\n    - {shape: [8, 16], dtype: float32}\n"
        "variants:\n  - {name: xla, mode: jit}\n"
        "  - name: xla_no_fusion\n    mode: jit\n"
        "    xla_options: {xla_disable_hlo_passes: 'fusion,priority-fusion'}\n"
    )
    exp = load(str(config)).experiment
    results = {}
    for v in exp.variants:
        subject = capture_variant.subject_of(exp, v)
        compiled = (
            jax.jit(subject.fn)
            .lower(*subject.placed.args)
            .compile(compiler_options=dict(v.xla_options))
        )
        ctx = Context(variant_dir=tmp_path / v.name, platform="cpu")
        (tmp_path / v.name).mkdir()
        assert capture_variant._judged(subject, compiled(*subject.placed.args), ctx) is None
        assert [f.probe for f in ctx.failures] == ["numerics"]  # accuracy: not measured (why)
        assert "runs only at the default precision" in ctx.failures[0].reason
        folder = VariantFolder(tmp_path / v.name)
        accuracy = run_files.load(run_files.NUMERICS, folder.numerics)
        assert all(leaf.ok is None and leaf.tolerance is None for leaf in accuracy.leaves)
        values = numerics_effect.read_outputs(
            folder.outputs, [leaf.kept for leaf in accuracy.leaves]
        )
        refs = numerics_effect.read_outputs(
            folder.outputs, [leaf.kept for leaf in accuracy.leaves], "r"
        )
        assert values is not None and refs is not None
        results[v.name] = numerics_effect.Result(accuracy, values, refs)
    found = numerics_effect.distances("xla", results["xla_no_fusion"], results["xla"], None)
    assert found.comparable, found.why
    (leaf,) = found.leaves
    assert leaf.vs_baseline is not None and leaf.allowed > 0


def plain(params: dict, x: jax.Array) -> jax.Array:
    """picky's computation, without its refusals: any reference runs it."""
    return jnp.tanh(x @ params["w"]) @ params["v"]


@pytest.mark.parametrize("max_flops, measured", [(1000.0, False), (1e12, True)])
def test_a_program_over_the_reference_budget_gets_none_and_is_still_compared(
    tmp_path: Path, max_flops: float, measured: bool
) -> None:
    """A call that costs more than measure.reference_max_flops (here 8·16·16·2 + 8·16·4·2 =
    5,120 FLOPs and more, against 1,000) gets no CPU reference: accuracy not measured, with the
    call's cost as the reason, and the outputs kept for the compiler-effect question. Under the
    budget the same program is judged against its reference."""
    config = tmp_path / "plain.yaml"
    config.write_text(
        "experiment: plain\nseed: 0\nbaseline: xla\n"
        "program:\n  function: test_references:plain\n  init: test_references:picky_init\n"
        "  inputs:\n    - {shape: [8, 16], dtype: float32}\n"
        f"measure: {{reference_max_flops: {max_flops}}}\n"
        "variants:\n  - {name: xla, mode: jit}\n"
    )
    exp = load(str(config)).experiment
    (v,) = exp.variants
    subject = capture_variant.subject_of(exp, v)
    ctx = capture_variant.Context(variant_dir=tmp_path / v.name, platform="cpu")
    (tmp_path / v.name).mkdir()
    judged = capture_variant._judged(subject, jax.jit(subject.fn)(*subject.placed.args), ctx)
    accuracy = run_files.load(run_files.NUMERICS, VariantFolder(tmp_path / v.name).numerics)
    if measured:
        assert judged is not None and not ctx.failures
        assert all(leaf.ok is not None for leaf in accuracy.leaves)
    else:
        assert judged is None and [f.probe for f in ctx.failures] == ["numerics"]
        assert "over measure.reference_max_flops" in ctx.failures[0].reason
        assert all(leaf.ok is None for leaf in accuracy.leaves)  # kept, unreferenced
