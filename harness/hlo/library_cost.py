"""Cost models of library custom-calls that are no GEMM: cuDNN's fused attention.

`harness.hlo.cost` counts cuBLAS/oneDNN GEMM calls from their dimension numbers; a fused
attention call (`__cudnn$fmha*`) hides two GEMMs and a softmax behind one opaque target, so
without a model it costs 0 FLOPs and its time has nothing to be held to. The model here reads
the call's operand shapes and its `cudnn_fmha_backend_config`:

- score elements: B·H·S_q·S_kv, from `intermediate_tensor_shape` ([B, H, S_q, S_kv], the
  first GEMM's output); the head sizes D (query/key) and D_v (value) are the query's and
  value's elements over B·H·S_q and B·H·S_kv, so any operand layout reads the same.
- forward: Q·Kᵀ and P·V, 2·scores·(D + D_v) FLOPs, i.e. 4·B·H·S_q·S_kv·D when D_v = D.
- backward (`...Backward`): flash attention does not keep P, so its backward recomputes
  S = Q·Kᵀ and then runs four more GEMMs, dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K and dK = dSᵀ·Q:
  2·scores·(3·D + 2·D_v) FLOPs, 2.5× the forward's GEMM work when D_v = D (the standard count
  for flash attention's backward with recompute).
- a causal mask (`mask_type` CAUSAL or PADDING_CAUSAL, or `is_causal_mask`) halves the score
  work: the kernels skip the key blocks above the diagonal. The diagonal blocks are computed
  in full, so the true figure is slightly above half; half is the convention.
- FLOPs are the GEMM work alone, what the tensor-core ceiling holds the call to. The softmax
  costs 1 transcendental (its exp) per score element computed, forward and again in the
  backward's recompute; dropout adds 1 transcendental per score element (its random number,
  as `rng` counts in harness.hlo.cost). The scale, max, subtract, sum and divide (a few flops a
  score, under 5% of the GEMM work at D ≥ 64) are left out, and so is the bias add.
- a sliding window (`sliding_window_length` > 0) is not modelled: it is counted by its mask
  alone, and a note says so.
- bytes are not modelled here: harness.hlo.cost charges the call's operands and outputs (the
  score tensor never reaches memory), its u8 workspace excluded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.hlo.shapes import ArrayShape

ATTENTION_PREFIXES = ("__cudnn$fmha", "__cudnn$fhma")  # older XLA spelled it "fhma"
CAUSAL_MASKS = frozenset({"CAUSAL", "PADDING_CAUSAL"})
BACKWARD_MULTIPLE = 2.5  # backward GEMM work over the forward's, when D_v = D (see above)


@dataclass(frozen=True)
class Attention:
    """One fused attention call's dimensions and options, as its config states them."""

    batch_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    value_dim: int
    backward: bool
    causal: bool
    dropout: bool
    window: int = 0
    batch: tuple[int, ...] = ()  # the score tensor's leading dimensions (B, H), for the notes

    @property
    def scores(self) -> float:
        """Score elements computed: B·H·S_q·S_kv, halved under a causal mask."""
        full = float(self.batch_heads * self.q_len * self.kv_len)
        return full / 2 if self.causal else full

    @property
    def flops(self) -> float:
        """GEMM FLOPs: 2·scores·(D + D_v) forward, 2·scores·(3·D + 2·D_v) backward."""
        d, dv = self.head_dim, self.value_dim
        return 2.0 * self.scores * ((3 * d + 2 * dv) if self.backward else (d + dv))

    @property
    def transcendentals(self) -> float:
        """The softmax's exp per score (recomputed in the backward), plus dropout's RNG."""
        return self.scores * (2.0 if self.dropout else 1.0)

    def formula(self) -> str:
        """The count in words, for the cost notes."""
        what = "backward" if self.backward else "forward"
        gemms = (
            f"2·scores·(3·{self.head_dim}+2·{self.value_dim})"
            if self.backward
            else f"2·scores·({self.head_dim}+{self.value_dim})"
        )
        mask = ", causal: half the scores" if self.causal else ""
        return (
            f"cuDNN attention {what}: scores = "
            f"{'·'.join(map(str, self.batch or (self.batch_heads,)))}·{self.q_len}·{self.kv_len}"
            f"{mask}; {gemms} FLOPs"
        )


def is_attention(target: str) -> bool:
    """True for cuDNN's fused attention targets, forward and backward, every variant."""
    return target.startswith(ATTENTION_PREFIXES)


def _ints(values: Any) -> tuple[int, ...] | None:
    """A JSON list of integers (XLA writes int64 fields as strings), or None."""
    if not isinstance(values, list):
        return None
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        return None


def read_attention(
    target: str, config: Mapping[str, Any], operands: Sequence[ArrayShape | None]
) -> tuple[Attention | None, str]:
    """The attention call's dimensions from its backend config and operand shapes (query,
    key, value first), or (None, why) when they cannot be read."""
    fmha = config.get("cudnn_fmha_backend_config")
    if not isinstance(fmha, Mapping):
        return None, "no cudnn_fmha_backend_config"
    inter = fmha.get("intermediate_tensor_shape")
    dims = _ints(inter.get("dimensions")) if isinstance(inter, Mapping) else None
    if dims is None or len(dims) < 3 or min(dims) <= 0:
        return None, "no readable intermediate_tensor_shape"
    q = operands[0] if operands else None
    v = operands[2] if len(operands) > 2 else None
    if q is None or v is None:
        return None, "query or value operand shape unknown"
    batch_heads, q_len, kv_len = math.prod(dims[:-2]), dims[-2], dims[-1]
    if q.elements % (batch_heads * q_len) or v.elements % (batch_heads * kv_len):
        return None, f"operand shapes do not divide by the scores {list(dims)}"
    mask = str(fmha.get("mask_type") or "NO_MASK")
    rate = fmha.get("dropout_rate")
    window = fmha.get("sliding_window_length")
    return (
        Attention(
            batch_heads=batch_heads,
            q_len=q_len,
            kv_len=kv_len,
            head_dim=q.elements // (batch_heads * q_len),
            value_dim=v.elements // (batch_heads * kv_len),
            backward="Backward" in target,
            causal=mask in CAUSAL_MASKS or fmha.get("is_causal_mask") is True,
            dropout="Dropout" in target
            or (isinstance(rate, int | float | str) and _positive(rate)),
            window=int(window) if isinstance(window, int) and window > 0 else 0,
            batch=dims[:-2],
        ),
        "",
    )


def _positive(value: int | float | str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False


@dataclass(frozen=True)
class LibraryCost:
    """A library call's modelled work; `costed` is False when its shapes could not be read
    (the notes say why, and the caller lists the call as uncosted)."""

    flops: float
    transcendentals: float
    notes: tuple[str, ...]
    costed: bool


def attention_cost(
    name: str, target: str, config: Mapping[str, Any], operands: Sequence[ArrayShape | None]
) -> LibraryCost | None:
    """The work of a cuDNN attention call, or None when `target` is no attention call."""
    if not is_attention(target):
        return None
    found, why = read_attention(target, config, operands)
    if found is None:
        return LibraryCost(0.0, 0.0, (f"{name}: custom-call {target} not costed ({why})",), False)
    notes = [f"{name}: {found.formula()}"]
    if found.window:
        notes.append(
            f"{name}: sliding window {found.window} not modelled (counted by its mask alone)"
        )
    return LibraryCost(found.flops, found.transcendentals, tuple(notes), True)
