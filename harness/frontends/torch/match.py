"""Attribute every device event of a torch.profiler trace to a torch cluster.

The torch counterpart of `harness.match.match.match_events`: the same `MatchReport`, built
with the same counting (kernels, device ops, transfers and busy time per step), so the
summary keys of JAX and torch variants are identical. Input: the rows of
`harness.frontends.torch.trace.read_torch_trace` and, per Inductor graph (keyed by AOT id,
`0_inference`), the clusters of `harness.frontends.torch.inductor.clusters.graph_clusters`.

Rules (`rule` in each Attribution), mode "compile":

- `inductor_kernel`: the kernel's name is an Inductor kernel of the graph
  (`triton_poi_fused_add_gelu_0`; on the CPU the op `graph_0_cpp_fused_gelu_0` with its
  `graph_<N>_` prefix removed).
- `extern_call`: the event was launched under the graph's direct child op that runs an
  extern call (`aten::mm` for `extern_kernels.mm`; cuBLAS `nvjet_*`, `sm90_xmma_*`,
  `cutlass*` kernels have no Inductor name). The n-th `aten::mm` of one graph call is the
  n-th `extern_kernels.mm` of the wrapper. `memset_for_gemm`: a memset launched there
  (cuBLAS clears its workspace before the GEMM). `extern_transfer`: a memcpy launched there.
- `inductor_launcher`: a kernel whose name is not a cluster but which ran under a kernel's
  launcher op (the op is named after the Inductor kernel).
- `graph_replay`: launched by the graph call itself, under no ATen op: the graph ran as a
  replayed CUDA graph (`mode="reduce-overhead"`), so its extern GEMM has no `aten::mm`. The
  kernel (or the memset before it) is the graph's extern call when the graph has exactly one;
  otherwise it stays unmatched (`unknown_kernel`), since the replay does not say which.
- `cudagraph_input_copy`: a copy kernel launched by `aten::_foreach_copy_`/`aten::copy_`
  inside the graph call, where no cluster runs that op: CUDA graph trees copy each input into
  the graph's static buffer before the replay. Its cluster is `cudagraph_input_copy`, a cost
  of the runtime that no Inductor kernel accounts for.
- `outside_graph`: launched by an ATen op outside every `## Call CompiledFxGraph`: eager
  code at a graph break (the `.item()` copy) or around the compiled function. Matched to
  that op, module "eager", as eager mode does.

Which graph: the event's `Torch-Compiled Region: <compile id>` through
`graph_by_compile_id` (from the TORCH_TRACE log); else the graph whose kernel name it is,
when only one graph has that name; else unmatched (`ambiguous_graph`), since a recompile
generates the same kernel names again.

Mode "eager": every event is its launching ATen op's (`aten::mm`, `aten::add`, `aten::gelu`),
module "eager" (`eager_op`, `eager_memset`, `eager_transfer`), like XLA eager's
one-module-per-primitive. Events without a launching op are unmatched (`no_launcher`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.frontends.torch.inductor.clusters import launcher_op, strip_graph_prefix
from harness.frontends.torch.trace import TorchDeviceEvent, TorchTrace
from harness.hlo.clusters import Cluster
from harness.match.match import (
    Attribution,
    ClusterLike,
    MatchReport,
    report_of,
    step_count,
)

TorchMode = Literal["compile", "eager"]
EAGER_MODULE = "eager"
KERNEL_KINDS = ("triton", "cpp")
CUDAGRAPH_COPY = "cudagraph_input_copy"
COPY_OPS = ("aten::_foreach_copy_", "aten::copy_")


def match_torch_events(
    events: TorchTrace | Sequence[TorchDeviceEvent],
    clusters_by_graph: Mapping[str, Sequence[ClusterLike]],
    steps: int | None = None,
    mode: TorchMode = "compile",
    graph_by_compile_id: Mapping[str, str] | None = None,
) -> MatchReport:
    """Return the attribution report for the steady window of a torch trace.

    The window is every event with a step when the trace had `ProfilerStep#N` markers,
    else the whole trace, and then `steps` (how many calls it covers) must be given.
    """
    if mode not in ("compile", "eager"):
        raise ValueError(f"mode must be 'compile' or 'eager', got {mode!r}")
    rows = list(events.events if isinstance(events, TorchTrace) else events)
    marked = any(r.event.step is not None for r in rows)
    window = [r for r in rows if r.event.step is not None] if marked else rows
    plain = [r.event for r in window]
    n_steps, notes = step_count(len({e.step for e in plain}), len(plain), marked, steps)
    by_compile = dict(graph_by_compile_id or {})
    if mode == "eager":
        attributions = tuple(_attribute_eager(r) for r in window)
    else:
        attributions = tuple(_attribute_compiled(r, clusters_by_graph, by_compile) for r in window)
        notes = (*notes, *_never_ran(attributions, clusters_by_graph))
    if isinstance(events, TorchTrace):
        notes = (*notes, *events.notes)
    return report_of(plain, attributions, n_steps, marked, len(rows) - len(window), notes)


def _primitive(op: str) -> str:
    return op.split("::", 1)[-1]


def _to_op(row: TorchDeviceEvent, rule: str, why: str) -> Attribution:
    """An event matched to the ATen op that launched (or is) it, module "eager"."""
    op = row.cpu_op or ""
    return Attribution(row.event, True, rule, why, EAGER_MODULE, op, _primitive(op))


def _attribute_eager(row: TorchDeviceEvent) -> Attribution:
    e = row.event
    if row.cpu_op is None:
        return Attribution(e, False, "no_launcher", _no_launcher(row), None)
    rule = {"memset": "eager_memset", "memcpy": "eager_transfer"}.get(e.kind, "eager_op")
    what = {"memset": "memset", "memcpy": f"Memcpy{e.direction or ''}"}.get(e.kind, e.kind)
    how = "ran as" if e.kind == "host_thunk" else "launched by"
    return _to_op(row, rule, f"{what} {e.name} {how} {row.cpu_op}: one eager ATen op")


def _no_launcher(row: TorchDeviceEvent) -> str:
    return (
        f"{row.event.kind} {row.event.name}: no CPU op launched it (the trace has no "
        f"External id or correlation linking it to one)"
    )


@dataclass(frozen=True)
class _Candidates:
    """The graphs an event of a compiled graph can belong to (`_candidate_graphs`)."""

    keys: Sequence[str]
    clusters: Mapping[str, Sequence[ClusterLike]]  # every graph's clusters, by graph key
    scope: str  # how the keys were narrowed, for the sentence: "" where they were not


def _attribute_compiled(
    row: TorchDeviceEvent,
    clusters_by_graph: Mapping[str, Sequence[ClusterLike]],
    graph_by_compile_id: Mapping[str, str],
) -> Attribution:
    if not row.in_compiled_graph:
        return _outside_graph(row)
    candidates, scope = _candidate_graphs(row, clusters_by_graph, graph_by_compile_id)
    g = _Candidates(candidates, clusters_by_graph, scope)
    if row.event.kind in ("kernel", "host_thunk"):
        named = _by_kernel_name(row, g)
        if named is not None:
            return named
    op = strip_graph_prefix(row.graph_op or "")[0]
    launched = _by_launching_op(row, op, g)
    if launched is not None:
        return launched
    replayed = _replayed(row, op, g)
    if replayed is not None:
        return replayed
    e = row.event
    graph = ", ".join(candidates) or "none"
    return Attribution(
        e,
        False,
        "unknown_kernel",
        f"{e.kind} {e.name} launched by {row.graph_op or row.cpu_op} in graph(s) {graph}"
        f"{scope}: no cluster of that name or launched by that op",
        candidates[0] if len(candidates) == 1 else None,
    )


def _outside_graph(row: TorchDeviceEvent) -> Attribution:
    """An event of no compiled graph: eager code at a graph break or around the function."""
    e = row.event
    if row.cpu_op is None:
        return Attribution(e, False, "no_launcher", _no_launcher(row), None)
    where = (
        f"inside compiled region {row.compile_region} but outside its graph: eager code "
        f"at a graph break"
        if row.compile_region
        else "outside every compiled region: eager code around the compiled function"
    )
    return _to_op(row, "outside_graph", f"{e.kind} {e.name} launched by {row.cpu_op} {where}")


def _by_kernel_name(row: TorchDeviceEvent, g: _Candidates) -> Attribution | None:
    """The attribution of a kernel named as one cluster of the candidate graphs (ambiguous
    where several are), or None where none is."""
    e = row.event
    base, _ = strip_graph_prefix(e.name)
    hits = [
        (key, c)
        for key in g.keys
        for c in g.clusters.get(key, ())
        if c.kind in KERNEL_KINDS and c.name == base
    ]
    if len(hits) > 1:
        return _ambiguous(row, [k for k, _ in hits])
    if not hits:
        return None
    key, c = hits[0]
    why = f"kernel {e.name} is {c.kind} kernel {c.name} of graph {key}{g.scope}"
    return Attribution(e, True, "inductor_kernel", why, key, c.name)


def _by_launching_op(row: TorchDeviceEvent, op: str, g: _Candidates) -> Attribution | None:
    """The attribution of an event by the graph op that launched it: the n-th call of `op`
    is the n-th cluster launched as `op` (ambiguous over several graphs, unknown past the
    last), or None where no candidate graph launches `op`."""
    launched = _launched_by(op, g.keys, g.clusters)
    if len(launched) > 1:
        return _ambiguous(row, list(launched))
    if not launched:
        return None
    e = row.event
    ((key, owners),) = launched.items()
    index = row.graph_op_ordinal or 0
    if index >= len(owners):
        return Attribution(
            e,
            False,
            "unknown_call",
            f"{e.kind} {e.name} ran under call {index + 1} of {op} in graph {key}, which "
            f"has only {len(owners)} cluster(s) launched as {op}",
            key,
        )
    c = owners[index]
    return Attribution(e, True, *_launch_rule(row, c, op, key, g.scope), key, c.name)


def _replayed(row: TorchDeviceEvent, op: str, g: _Candidates) -> Attribution | None:
    """Returns the attribution of an event a CUDA-graph replay launched (see `graph_replay`
    and `cudagraph_input_copy` above), or None when the event is not one or cannot be told."""
    e = row.event
    if len(g.keys) != 1:
        return None
    (key,) = g.keys
    if op in COPY_OPS and e.kind == "kernel":
        why = (
            f"kernel {e.name[:80]} launched by {op} inside the call of graph {key}{g.scope}: CUDA "
            f"graph trees copy each input into the graph's static buffer before the replay"
        )
        return Attribution(e, True, "cudagraph_input_copy", why, key, CUDAGRAPH_COPY)
    if row.graph_op is not None or e.kind not in ("kernel", "memset"):
        return None
    libraries = [c for c in g.clusters.get(key, ()) if c.kind == "library"]
    if len(libraries) != 1:
        return None
    (c,) = libraries
    why = (
        f"{e.kind} {e.name[:80]} launched by the replay of graph {key}'s CUDA graph{g.scope}, "
        f"under no ATen op: the graph's only extern call, {c.target or c.name}"
    )
    return Attribution(e, True, "graph_replay", why, key, c.name)


def _launched_by(
    op: str, candidates: Sequence[str], clusters_by_graph: Mapping[str, Sequence[ClusterLike]]
) -> dict[str, list[ClusterLike]]:
    """Returns graph -> its clusters that run as CPU op `op`, in launch order (graphs with none
    left out): the n-th `aten::mm` of a graph call is the n-th of these."""
    out = {}
    for key in candidates:
        owners = [
            c
            for c in clusters_by_graph.get(key, ())
            if launcher_op(c.kind, c.name, c.target or "") == op
        ]
        if owners:
            out[key] = owners
    return out


def _launch_rule(
    row: TorchDeviceEvent, c: ClusterLike, op: str, key: str, scope: str
) -> tuple[str, str]:
    """Returns (rule, reason) for an event launched under the op that runs cluster `c`."""
    e = row.event
    where = f"({c.name}, graph {key}{scope})"
    nth = f"call {(row.graph_op_ordinal or 0) + 1} of {op}"
    if c.kind in KERNEL_KINDS:
        return "inductor_launcher", f"{e.kind} {e.name} ran under launcher {op} {where}"
    target = c.target or c.name
    if e.kind == "memset":
        return (
            "memset_for_gemm",
            f"memset launched by {nth} before its library kernel: {target} {where}",
        )
    if e.kind == "memcpy":
        return "extern_transfer", f"Memcpy{e.direction or ''} launched by {nth}: {target} {where}"
    return "extern_call", f"{e.kind} {e.name} launched by {nth}: extern call {target} {where}"


def _candidate_graphs(
    row: TorchDeviceEvent,
    clusters_by_graph: Mapping[str, Sequence[ClusterLike]],
    graph_by_compile_id: Mapping[str, str],
) -> tuple[list[str], str]:
    """Returns the graphs the event can belong to and a note saying how they were chosen."""
    region = row.compile_region
    if region is not None and graph_by_compile_id.get(region) in clusters_by_graph:
        return [graph_by_compile_id[region]], f", compile {region}"
    _, hint = strip_graph_prefix(row.graph_op or row.event.name)
    if hint is not None:
        hinted = [k for k in clusters_by_graph if k.split("_", 1)[0] == str(hint)]
        if len(hinted) == 1:
            return hinted, f", graph_{hint} prefix"
    return list(clusters_by_graph), ""


def _ambiguous(row: TorchDeviceEvent, graphs: Sequence[str]) -> Attribution:
    e = row.event
    return Attribution(
        e,
        False,
        "ambiguous_graph",
        f"{e.kind} {e.name} (compile region {row.compile_region}) could belong to graphs "
        f"{sorted(set(graphs))}; pass graph_by_compile_id (TorchTraceFacts.graph_by_compile_id "
        f"from the TORCH_TRACE log) to tell them apart",
        None,
    )


def _never_ran(
    attributions: Sequence[Attribution], clusters_by_graph: Mapping[str, Sequence[ClusterLike]]
) -> tuple[str, ...]:
    """Notes for clusters of graphs that ran in the window but never showed up in it."""
    seen = {(a.module, a.cluster) for a in attributions if a.matched}
    ran = {a.module for a in attributions if a.matched}
    return tuple(
        f"cluster {c.name} ({c.kind}) of graph {key} never appears in the window"
        + (
            ": Inductor's C++ kernels are visible only with cpp.enable_kernel_profile"
            if c.kind == "cpp"
            else ""
        )
        for key, cs in clusters_by_graph.items()
        if key in ran
        for c in cs
        if (key, c.name) not in seen
    )


def eager_clusters(events: TorchTrace | Sequence[TorchDeviceEvent]) -> tuple[Cluster, ...]:
    """Return one cluster per eager ATen op that launched work (kind "aten_op"), in first-run
    order: the torch eager counterpart of XLA eager's per-primitive modules."""
    rows = events.events if isinstance(events, TorchTrace) else events
    ops = list(dict.fromkeys(r.cpu_op for r in rows if r.cpu_op and not r.in_compiled_graph))
    return tuple(
        Cluster(
            name=op,
            computation=EAGER_MODULE,
            kind="aten_op",
            backend_kind="",
            target=op,
            epilogue="",
            member_opcodes=((op.replace("::", "."), 1),),
            source_ops=(op,),
            source_locations=(),
            output_shape="",
            output_bytes=0,
        )
        for op in ops
    )
