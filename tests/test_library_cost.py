"""The cost model of cuDNN's fused attention calls (harness.hlo.library_cost), on hand-written
custom-call lines and on the H200 MLP-Mixer train step with cuDNN attention."""

from __future__ import annotations

import pytest
from hlo_helpers import FIXTURES

from harness.hlo.cost import module_cost
from harness.hlo.library_cost import BACKWARD_MULTIPLE
from harness.hlo.parser import parse_file, parse_module

B, S, H, D = 2, 128, 4, 64
QKV = f"bf16[{B},{S},{H},{D}]{{3,2,1,0}}"
MIXER = FIXTURES / "h200-jax0.11.2-programs" / "mixer_cmdbuf_cudnn" / "dump"


def _module(target: str, mask: str = "NO_MASK", extra: str = "", scores: str = "") -> str:
    """A module holding one attention custom-call over bf16 [B, S, H, D] query, key, value."""
    scores = scores or f'"{B}","{H}","{S}","{S}"'
    config = (
        '{"cudnn_fmha_backend_config":{"intermediate_tensor_shape":{"dimensions":['
        + scores
        + f']}},"mask_type":"{mask}","dropout_rate":0.0,"fmha_scale":0.125{extra}}}}}'
    )
    backward = "Backward" in target
    outs = (
        f"({QKV}, {QKV}, {QKV}, u8[1024]{{0}})"
        if backward
        else f"(bf16[{B},{H},{S},{D}]{{3,2,1,0}}, f32[{B},{H},{S}]{{2,1,0}}, u8[256]{{0}})"
    )
    operands = "%q, %k, %v, %o" if backward else "%q, %k, %v"
    return f"""HloModule attention

ENTRY %main (q: {QKV}, k: {QKV}, v: {QKV}, o: {QKV}) -> {QKV} {{
  %q = {QKV} parameter(0)
  %k = {QKV} parameter(1)
  %v = {QKV} parameter(2)
  %o = {QKV} parameter(3)
  %attn = {outs} custom-call({operands}), custom_call_target="{target}", backend_config={config}
  ROOT %r = {QKV} get-tuple-element(%attn), index=0
}}
"""


def _attention(text: str):
    cost = module_cost(parse_module(text))
    return next(c for c in cost.clusters if c.name == "attn"), cost


def test_forward_counts_both_gemms_of_every_score() -> None:
    attn, cost = _attention(_module("__cudnn$fmhaSoftmax"))
    assert attn.flops == 4 * B * H * S * S * D
    assert attn.library_flops == attn.flops
    assert attn.transcendentals == B * H * S * S  # the softmax's exp
    # q, k, v read; output and f32 softmax statistics written; the u8 workspace is not traffic
    assert attn.bytes == 3 * B * S * H * D * 2 + B * H * S * D * 2 + B * H * S * 4
    assert cost.uncosted == ()


def test_a_causal_mask_halves_the_score_work() -> None:
    full, _ = _attention(_module("__cudnn$fmhaSoftmax"))
    causal, _ = _attention(_module("__cudnn$fmhaSoftmax", mask="CAUSAL"))
    assert causal.flops == full.flops / 2
    assert causal.transcendentals == full.transcendentals / 2
    assert any("causal" in n for n in causal.notes)
    flagged, _ = _attention(_module("__cudnn$fmhaSoftmax", extra=',"is_causal_mask":true'))
    assert flagged.flops == full.flops / 2


def test_backward_is_the_stated_multiple_of_the_forward() -> None:
    fwd, _ = _attention(_module("__cudnn$fmhaSoftmax"))
    bwd, _ = _attention(_module("__cudnn$fmhaSoftmaxBackward"))
    assert bwd.flops == BACKWARD_MULTIPLE * fwd.flops
    causal, _ = _attention(_module("__cudnn$fmhaSoftmaxBackward", mask="PADDING_CAUSAL"))
    assert causal.flops == bwd.flops / 2


def test_dropout_variant_adds_one_random_number_a_score() -> None:
    plain, _ = _attention(_module("__cudnn$fmhaSoftmax"))
    dropout, _ = _attention(_module("__cudnn$fmhaSoftmaxDropout"))
    assert dropout.flops == plain.flops
    assert dropout.transcendentals == 2 * plain.transcendentals


def test_an_unreadable_config_is_listed_as_uncosted_with_the_reason() -> None:
    attn, cost = _attention(_module("__cudnn$fmhaSoftmax", scores='"2","4"'))
    assert attn.flops == 0
    assert cost.uncosted == (("custom-call:__cudnn$fmhaSoftmax", 1),)
    assert any("intermediate_tensor_shape" in n for n in attn.notes)


def test_mixer_cudnn_attention_is_costed_from_the_h200_dump() -> None:
    files = sorted(MIXER.glob("*jit_train_step.sm_9.0a_gpu_after_optimizations.txt"))
    if not files:
        pytest.skip(f"mixer fixture not found at {MIXER}")
    cost = module_cost(parse_file(files[0]))
    fwd = [c for c in cost.clusters if c.name.startswith("dot_product_attention_fwd")]
    bwd = [c for c in cost.clusters if c.name.startswith("dot_product_attention_bwd")]
    assert len(fwd) == len(bwd) == 3
    assert {c.flops for c in fwd} == {4 * 32 * 8 * 256 * 256 * 64}  # 4.29 GFLOP each
    assert {c.flops for c in bwd} == {2.5 * 4 * 32 * 8 * 256 * 256 * 64}
    assert cost.uncosted == ()
