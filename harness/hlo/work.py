"""The kind of work a cluster does, from what the compiler made of it: how a difference is
grouped so that an engineer reads "loop fusions +1.1 ms, 4.7 GB more traffic" rather than a
list of cluster names (issue 60).

A kind is decided from the cluster's own record (fusions.json, or a ranking row where that is
all there is): its kind (`kLoop`, `kInput`, `kCustom`, `library`, an opcode such as `copy` or
`all-gather`), its backend kind and library target, and its member opcodes. It never reads a
cluster's name, which changes between compiles. The order of `KINDS` is the order a report
lists kinds of equal size in; `other` is last, and ends a list, never leads one.
"""

from __future__ import annotations

from collections.abc import Iterable

# id -> words, in the order of the list.
KINDS: dict[str, str] = {
    "library": "library GEMMs, convolutions and attention",
    "triton_gemm": "Triton GEMM fusions",
    "loop_fusion": "loop fusions",
    "reduction_fusion": "input/reduction fusions",
    "copies": "copies and dynamic slices",
    "collectives": "collectives",
    "control_flow": "control-flow overhead (loop and branch bookkeeping)",
    "host_calls": "host callbacks",
    "other": "other device work",
}
# Kinds whose time is moving bytes: their mechanism is traffic and bandwidth.
MEMORY_KINDS = ("loop_fusion", "reduction_fusion", "copies")
# Kinds whose time is arithmetic: their mechanism is FLOPs and rate.
COMPUTE_KINDS = ("library", "triton_gemm")

_COLLECTIVES = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "collective-permute",
    "all-to-all",
    "collective-broadcast",
    "send",
    "recv",
    "ragged-all-to-all",
)
_CONTROL = ("while", "conditional", "call", "partition-id", "replica-id")
# Data movement: a fusion of only these (and index arithmetic) copies bytes, computes nothing.
_MOVES = frozenset(
    {
        "copy",
        "dynamic-slice",
        "dynamic-update-slice",
        "transpose",
        "slice",
        "concatenate",
        "pad",
        "gather",
        "scatter",
        "reverse",
    }
)
_CARRIED = frozenset(
    {
        "bitcast",
        "broadcast",
        "reshape",
        "tuple",
        "get-tuple-element",
        "parameter",
        "constant",
        "iota",
        # the scalar index arithmetic a scan adds beside its slices (clamp the loop counter)
        "convert",
        "and",
        "clamp",
        "compare",
        "select",
        "add",
        "subtract",
    }
)
_SCALAR_CONTROL = frozenset({"compare", "and", "or", "not", "constant", "parameter", "convert"})
_LIBRARY_WORDS = ("gemm", "matmul", "cublas", "cudnn", "conv", "attention", "ynn", "onednn", "mm")


def _base(opcode: str) -> str:
    """`all-reduce-start` and `all-gather-done` are their collective."""
    for end in ("-start", "-done"):
        if opcode.endswith(end):
            return opcode[: -len(end)]
    return opcode


def kind_of(kind: str, target: str = "", backend: str = "", opcodes: Iterable[str] = ()) -> str:
    """Returns the id (a key of KINDS) of the work a cluster does.

    `kind` is the cluster's kind as fusions.json and ranking.json record it, `target` a library
    call's entry, `backend` a fusion's backend kind (`__triton_nested_gemm_fusion`), `opcodes`
    its member opcodes (empty where only a ranking row is known)."""
    ops = frozenset(_base(o) for o in opcodes)
    k, low_target, low_backend = _base(kind), target.lower(), backend.lower()
    return _non_fusion_kind(k, low_target, ops) or _fusion_kind(k, low_backend, ops)


def _non_fusion_kind(k: str, low_target: str, ops: frozenset[str]) -> str | None:
    """The work of a cluster that is no compute fusion (collectives, host calls, library
    calls, control flow, copies); None for the rest. Asked first: a fusion of copies is a
    copy, and a loop's condition kernel is control flow."""
    if k in _COLLECTIVES or ops & frozenset(_COLLECTIVES):
        return "collectives"
    if "callback" in low_target or k in ("infeed", "outfeed", "send-to-host", "recv-from-host"):
        return "host_calls"
    if k in ("library", "aten_op") or (k == "custom-call" and _library(low_target)):
        return "library" if _library(low_target) or "dot" in ops or not ops else "other"
    if k in _CONTROL:
        return "control_flow"
    if k in _MOVES or (ops and ops & _MOVES and ops <= _MOVES | _CARRIED):
        return "copies"
    if ops and ops <= _SCALAR_CONTROL and "compare" in ops:
        return "control_flow"  # a loop's condition kernel: a compare of the counter
    return None


def _fusion_kind(k: str, low_backend: str, ops: frozenset[str]) -> str:
    """The work of a compute cluster: a Triton GEMM, a reduction or a loop fusion, a bare
    dot or convolution (a library call), else other."""
    if "gemm" in low_backend or (k in ("kCustom", "triton") and ops & {"dot", "convolution"}):
        return "triton_gemm"
    if k == "kInput" or "reduce" in ops or "reduction" in low_backend:
        return "reduction_fusion"
    if k in ("kLoop", "kCustom", "triton") or k == "fusion":
        return "loop_fusion"
    if k in ("dot", "convolution"):
        return "library"
    return "other"


def _library(target: str) -> bool:
    return any(w in target for w in _LIBRARY_WORDS)


def words(kind: str) -> str:
    """The kind in a sentence ("loop fusions"); an unknown id is itself."""
    return KINDS.get(kind, kind)


def order(kind: str) -> int:
    """Where a kind sorts among equals: the issue's order, unknown kinds before `other`."""
    keys = list(KINDS)
    return keys.index(kind) if kind in KINDS else len(keys) - 1
