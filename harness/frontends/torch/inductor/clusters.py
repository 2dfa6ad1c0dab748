"""The device-executed units ("clusters") of one Inductor graph, and where each FX node went.

Every kernel Inductor generated (`triton_*` on the GPU, `cpp_*` on the CPU) is one cluster,
named by the kernel. Every extern call in the wrapper (`extern_kernels.mm`, `addmm`, `bmm`,
...) is one cluster of kind "library", named by its provenance handle
(`extern_kernels.mm:1`: the call's 1-based position among the wrapper's launches), so two
GEMMs in one graph stay apart. ATen fallbacks (`torch.ops.aten.sort.default(...)`) are kind
"fallback". Clusters are `harness.hlo.clusters.Cluster` objects, so the report's cluster
tables and the matcher read them unchanged.

Which FX nodes a cluster holds, in order of preference:
1. the provenance mapping (`cppCodeToPost[handle]`: post-grad node names);
2. a Triton kernel's `# Graph fragment:` comment (the post-grad nodes it computes);
3. an extern call's `Original ATen: [aten.mm]` comment: the next unclaimed node of that op.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from harness.frontends.torch.inductor.artifacts import (
    FxGraph,
    FxNode,
    InductorGraph,
    KernelCall,
    KernelDef,
)
from harness.hlo.clusters import Cluster

DTYPE_BYTES = {
    "f64": 8,
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "i64": 8,
    "i32": 4,
    "i16": 2,
    "i8": 1,
    "u8": 1,
    "u16": 2,
    "u32": 4,
    "u64": 8,
    "b8": 1,
    "c64": 8,
    "c128": 16,
    "c32": 4,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1,
}
_SHAPE = re.compile(r"^([a-z0-9]+)\[([^\]]*)\]$")


def shape_bytes(shape: str) -> int:
    """Bytes of an FX shape text (`bf16[8192, 8192]` -> 134217728); 0 when symbolic or unknown."""
    match = _SHAPE.match(shape)
    if not match or match.group(1) not in DTYPE_BYTES:
        return 0
    dims = [d.strip() for d in match.group(2).split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return 0
    return DTYPE_BYTES[match.group(1)] * math.prod(int(d) for d in dims)


def launcher_op(kind: str, name: str, target: str) -> str:
    """The torch.profiler CPU op that runs a cluster: the op that launches its GPU work, or
    (on the CPU) the op whose duration is the work itself.

    Triton kernels run under a record_function named after the kernel; C++ kernels (with
    `cpp.enable_kernel_profile`) under `graph_<N>_<kernel>`, which `strip_graph_prefix`
    undoes; `extern_kernels.mm` calls `aten::mm`; a fallback `aten.sort.default` is `aten::sort`.
    """
    if kind == "library" and target.startswith("extern_kernels."):
        return "aten::" + target.removeprefix("extern_kernels.")
    if kind == "fallback":
        parts = target.split(".")
        return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else target
    return name


_GRAPH_PREFIX = re.compile(r"^graph_(\d+)_")


def strip_graph_prefix(op: str) -> tuple[str, int | None]:
    """`graph_0_cpp_fused_gelu_0` -> (`cpp_fused_gelu_0`, 0); other names -> (name, None)."""
    match = _GRAPH_PREFIX.match(op)
    return (op[match.end() :], int(match.group(1))) if match else (op, None)


def _epilogue(call: KernelCall) -> str:
    op = call.target.removeprefix("extern_kernels.")
    if op in ("mm", "bmm", "_int_mm", "_scaled_mm"):
        return "DEFAULT"
    if op in ("addmm", "baddbmm"):
        return "BIAS"
    if op == "_addmm_activation":
        return "BIAS_GELU" if "use_gelu=True" in call.arguments else "BIAS_RELU"
    return ""


def _call_name(call: KernelCall) -> str:
    if call.kind in ("triton", "cpp"):
        return call.target
    return call.handle or f"{call.target}:{call.order}"


def cluster_nodes(graph: InductorGraph) -> dict[str, tuple[str, ...]]:
    """Return cluster name -> the post-grad FX node names it holds (see the module docstring)."""
    sites = _sites(graph)
    kernels = {k.name: k for k in graph.kernels}
    held = {name: _recorded_nodes(graph, kernels, name, calls) for name, calls in sites.items()}
    if graph.graph is not None:
        _claim_extern_nodes(graph.graph, sites, held)
    return held


def _sites(graph: InductorGraph) -> dict[str, list[KernelCall]]:
    """Each cluster's calls by its name, in the order of its first launch."""
    sites: dict[str, list[KernelCall]] = {}
    for call in graph.calls:
        sites.setdefault(_call_name(call), []).append(call)
    return sites


def _recorded_nodes(
    graph: InductorGraph, kernels: dict[str, KernelDef], name: str, calls: list[KernelCall]
) -> tuple[str, ...]:
    """The nodes Inductor recorded for a cluster: its calls' provenance, else (a Triton
    kernel) the nodes its source fragment names."""
    prov = graph.provenance
    nodes: list[str] = []
    for call in calls:
        if prov is not None and call.handle in prov.code_to_post:
            nodes.extend(prov.code_to_post[call.handle])
    if not nodes and calls[0].kind == "triton" and name in kernels:
        nodes.extend(kernels[name].fragment_nodes)
    return tuple(dict.fromkeys(nodes))


def _claim_extern_nodes(
    fx: FxGraph, sites: dict[str, list[KernelCall]], held: dict[str, tuple[str, ...]]
) -> None:
    """Gives each library or fallback call that holds no node yet the first unclaimed FX node
    of its op (`_ops_of`), in launch order: no provenance names them."""
    claimed = {n for ns in held.values() for n in ns}
    for name, calls in sites.items():
        if held[name] or calls[0].kind not in ("library", "fallback"):
            continue
        node = next(
            (
                n
                for op in _ops_of(calls[0])
                for n in fx.nodes
                if n.name not in claimed and n.op == op
            ),
            None,
        )
        if node is not None:
            held[name] = (node.name,)
            claimed.add(node.name)


def _ops_of(call: KernelCall) -> list[str]:
    """The FX ops an extern/fallback call may hold, best first: its own op, then the ops of
    its `Original ATen` comment (which names the op it replaced, e.g. `aten.add` for addmm)."""
    own = (
        "aten." + call.target.removeprefix("extern_kernels.")
        if call.kind == "library"
        else ".".join(call.target.split(".")[:2])
    )
    return list(dict.fromkeys([own, *(a for a in call.original_aten if a.startswith("aten."))]))


def _outputs(fx: FxGraph | None, members: Sequence[str]) -> list[FxNode]:
    """The member nodes whose value leaves the cluster (used outside it or returned)."""
    if fx is None:
        return []
    inside = set(members)
    used_outside = {a for n in fx.nodes if n.name not in inside for a in n.args}
    by_name = {n.name: n for n in fx.nodes}
    outs = [by_name[m] for m in members if m in by_name and (m in used_outside or m in fx.outputs)]
    if not outs:
        present = [by_name[m] for m in members if m in by_name]
        outs = present[-1:]
    return sorted(outs, key=lambda n: list(by_name).index(n.name))


def _shape_text(shapes: Sequence[str]) -> str:
    if len(shapes) == 1:
        return shapes[0]
    return f"({', '.join(shapes)})" if shapes else ""


def graph_clusters(graph: InductorGraph) -> tuple[Cluster, ...]:
    """Return the clusters of one Inductor graph, in launch order (first launch of each)."""
    fx = graph.graph
    by_name = {n.name: n for n in fx.nodes} if fx is not None else {}
    kernels = {k.name: k for k in graph.kernels}
    held = cluster_nodes(graph)
    return tuple(
        _cluster(graph, name, calls[0], held.get(name, ()), by_name, kernels.get(calls[0].target))
        for name, calls in _sites(graph).items()
    )


def _cluster(
    graph: InductorGraph,
    name: str,
    call: KernelCall,
    members: Sequence[str],
    by_name: dict[str, FxNode],
    kernel: KernelDef | None,
) -> Cluster:
    """One cluster: its first call, the FX nodes it holds (`members`) and its kernel's source."""
    nodes = [by_name[m] for m in members if m in by_name]
    shapes = [n.shape for n in _outputs(graph.graph, members)]
    return Cluster(
        name=name,
        computation=graph.key,
        kind=call.kind,
        backend_kind=(kernel.heuristic or kernel.kind) if kernel else "",
        target="" if call.kind in ("triton", "cpp") else call.target,
        epilogue=_epilogue(call) if call.kind == "library" else "",
        member_opcodes=tuple(sorted(Counter(n.op for n in nodes).items())),
        source_ops=tuple(sorted(by_name[m].label if m in by_name else m for m in members)),
        source_locations=_locations(graph, name, nodes),
        output_shape=_shape_text(shapes),
        output_bytes=sum(shape_bytes(s) for s in shapes),
    )


def _locations(graph: InductorGraph, name: str, nodes: Sequence[FxNode]) -> tuple[str, ...]:
    """The source lines of a cluster: its calls' stack traces and its nodes' own."""
    handles = [c.handle for c in graph.calls if _call_name(c) == name and c.handle]
    locations = {loc for h in handles for loc in graph.stack_traces.get(h, ())}
    locations |= {n.location for n in nodes if n.location}
    return tuple(sorted(locations))


def reverse_map(
    graph: InductorGraph, clusters: Sequence[Cluster] | None = None
) -> dict[str, list[str]]:
    """Map each FX node (`"mm (aten.mm.default)"`) to the clusters holding it.

    Keys are the post-grad graph's call nodes (the ATen graph's when no post-grad graph is
    known), plus provenance-only node names; placeholders are left out. A node no cluster
    holds maps to [] ("folded away": removed, or computed by a kernel without provenance).
    The shape matches XLA's fusions.json `reverse_map`, so the fusion-map plot reads it.
    """
    clusters = graph_clusters(graph) if clusters is None else clusters
    names = {c.name for c in clusters}
    holders: dict[str, list[str]] = {}
    for cname, members in cluster_nodes(graph).items():
        if cname in names:
            for m in members:
                holders.setdefault(m, []).append(cname)
    fx = graph.graph
    nodes = list(fx.nodes) if fx is not None else []
    known = {n.name for n in nodes}
    out = {n.label: holders.get(n.name, []) for n in nodes}
    for extra in holders:
        if extra not in known:
            out[extra] = holders[extra]
    return out


def clusters_by_graph(graphs: Iterable[InductorGraph]) -> dict[str, tuple[Cluster, ...]]:
    """Return graph key (AOT id) -> its clusters: the matcher's `clusters_by_graph`."""
    return {g.key: graph_clusters(g) for g in graphs}


def fusions_document(graphs: Iterable[InductorGraph]) -> dict[str, Any]:
    """Return the fusions.json payload for torch: one entry per compiled graph, shaped like
    XLA's (`modules[].module/path/clusters/reverse_map/folded_away`), plus compile id,
    device and the reader's notes."""
    modules = []
    for g in graphs:
        clusters = graph_clusters(g)
        rmap = reverse_map(g, clusters)
        modules.append(
            {
                "module": g.key,
                "path": g.path,
                "compile_id": g.compile_id,
                "device": g.device,
                "clusters": [c.to_json() for c in clusters],
                "reverse_map": rmap,
                "folded_away": sorted(k for k, v in rmap.items() if not v),
                "notes": list(g.notes),
            }
        )
    return {"modules": modules}


def summary(clusters: Iterable[Cluster]) -> dict[str, Any]:
    """The cluster keys of the harness summary for torch: Inductor kernels count as fusions."""
    clusters = list(clusters)
    return {
        "fusion_count": sum(c.kind in ("triton", "cpp") for c in clusters),
        "cluster_count": len(clusters),
        "library_calls": [
            {"target": c.target, "epilogue": c.epilogue} for c in clusters if c.is_library
        ],
    }
