"""The acceptance program of issue 58: a KV-cache decoder of our own
(benchmarks/programs/kv_decoder.py) as a `program:` study on the CPU.

A `lax.while_loop` whose stop the data decide (every sequence has emitted EOS), a
`lax.scan` over 2 stacked layers inside it, a `lax.cond` picking sampling or greedy from the
traced temperature, and top-2 of 4 experts; under `jax.enable_x64` it raises (int64 and int32
indices in one `dynamic_update_slice`). The study must count its FLOPs a call by the decode
steps the profile measured (within 3% of the hand count below, after optimization and
before), answer both numerics questions for every variant, and say no `differs` of the
nested scan.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import pytest
from conftest import REPO, run_harness

from benchmarks.programs import kv_decoder as dec
from harness.config import load
from harness.variants import program

pytestmark = pytest.mark.study
CONFIG = REPO / "benchmarks" / "programs" / "kv_decoder_cpu.yaml"
B = 4  # the config's batch


def _layer(tokens: int, scores: int) -> float:
    """One layer's FLOPs for `tokens` query positions and `scores` (query, key) pairs by hand:
    the q, k, v and output projections, scores and their weighted sum, the router and the two
    chosen experts' GEMMs (and their mix); then the elementwise work: the scores' scale, mask
    and softmax (max, subtract, sum, divide: about 6 a score), GELU's tanh form (7 an element:
    x³'s two multiplies, a multiply-add, the scale, add 1, halve, times x) and the two
    residual adds."""
    d, f, k = dec.WIDTH, dec.HIDDEN, dec.TOP
    gemm = (
        4 * 2 * tokens * d * d
        + 2 * 2 * scores * d
        + 2 * tokens * d * dec.EXPERTS
        + 2 * 2 * tokens * k * d * f
        + 2 * tokens * k * d
    )
    return gemm + 6 * scores + 7 * tokens * k * f + 2 * tokens * d


def hand_count(decode_steps: int) -> float:
    """A call's FLOPs: the prefill over the prompt, the unembedding of its last position, and
    each decode step's layers and unembedding."""
    prefill = dec.LAYERS * _layer(B * dec.PROMPT, B * dec.PROMPT * dec.LENGTH)
    step = dec.LAYERS * _layer(B, B * dec.LENGTH)
    unembed = 2 * B * dec.WIDTH * dec.VOCAB
    return prefill + unembed + decode_steps * (step + unembed)


def test_the_decoder_counts_its_measured_steps_and_answers_both_numerics_questions(
    tmp_path: Path,
) -> None:
    proc = run_harness(f"--config={CONFIG}", results_root=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = (tmp_path / "kv_decoder_cpu" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())

    # The decode steps this seed runs, from the program itself (it returns them).
    exp = load(str(CONFIG)).experiment
    p = exp.variant("xla").program
    args = program.args_for(p, exp.seed)
    _, steps, _ = jax.jit(dec.generate)(args.params, *args.inputs)
    steps = int(steps)
    assert 0 < steps < dec.NEW - 1  # it stopped early: the loop's count is the data's
    hand = hand_count(steps)

    for name, v in summary["variants"].items():
        cost = v["cost"]
        assert cost["flops"] == pytest.approx(hand, rel=0.03), name
        assert cost["flops_analytic"] == pytest.approx(hand, rel=0.03), name
        assert "measured a step (while." in cost["loop_counts"], name
        assert f" {steps})" in cost["loop_counts"], name
        numerics = v["numerics"]
        assert numerics["ok"] and numerics["rel_fro_err"] is not None, name
        assert "the float64 reference failed (TypeError" in numerics["reference_note"], name
        assert "the program in float32 on the CPU" in numerics["reference_note"], name

    findings = summary["findings"]
    assert {a["dtype"] for a in findings["numerics"]} == {"float32"}
    effects = {e["variant"]: e["verdict"] for e in findings["effects"]}
    others = set(summary["variants"]) - {summary["baseline"]}
    assert set(effects) == others and set(effects.values()) == {"same"}
    loops = [f for f in findings["control_flow"] if f["rule"] == "control_flow.loop"]
    assert loops and not [f for f in loops if f["verdict"] == "differs"]
    nested = [f for f in loops if "(a nested loop)" in f["what"]]
    assert nested and all(f"entered {steps} times a step" in f["what"] for f in nested)
    # The report says once that the figures rest on the measured count, and which reference.
    report = (run / "report.md").read_text()
    assert report.count("loops counted by the iterations the profile measured") == 1
    assert report.count("the program in float32 on the CPU") == 1
