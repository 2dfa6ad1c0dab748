"""A captured torch.compile read back: the TORCH_TRACE facts and the graphs of each call.

The capture writes Inductor's debug folder and the TORCH_TRACE log of one variant, and records
which Dynamo compile ids its first call and its new-shape call produced (torch.json). This
module reads both and splits the graphs by call, so the ladder, fusions.json and the profile
matcher all see the first call's graphs, and the recompile is compared with them. Pure: no
torch import, no writes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.frontends.torch.inductor.artifacts import (
    ArtifactError,
    InductorGraph,
    find_graph_dirs,
    link_trace,
    read_graph_dir,
)
from harness.frontends.torch.inductor.clusters import graph_clusters
from harness.frontends.torch.inductor.trace_log import FrameCompile, TorchTraceFacts, read_trace_log


@dataclass(frozen=True)
class InductorArtifacts:
    """One variant's compile artifacts: the log's facts (None when unreadable), every graph
    Inductor compiled (linked to the log), and what could not be read."""

    facts: TorchTraceFacts | None
    graphs: tuple[InductorGraph, ...]
    notes: tuple[str, ...] = ()

    def frames(self, ids: Iterable[str]) -> tuple[FrameCompile, ...]:
        """The main session's compiles among `ids`, in `ids` order."""
        if self.facts is None:
            return ()
        found = {f.compile_id: f for f in self.facts.main.frames}
        return tuple(found[c] for c in ids if c in found)

    def graphs_of(self, ids: Sequence[str]) -> tuple[InductorGraph, ...]:
        """The graphs compiled by the compiles `ids`, in compile order.

        Without ids (an older capture) or without compile ids on the graphs (no log), every
        graph is returned.
        """
        if not ids or not any(g.compile_id for g in self.graphs):
            return self.graphs
        order = {c: i for i, c in enumerate(ids)}
        chosen = [g for g in self.graphs if g.compile_id in order]
        return tuple(sorted(chosen, key=lambda g: (order[g.compile_id or ""], g.index or 0)))


def read_captured(debug_dir: Path, trace_dir: Path) -> InductorArtifacts:
    """Returns what Inductor's debug folder and the TORCH_TRACE log (file or folder) hold."""
    notes: list[str] = []
    facts = None
    try:
        facts = read_trace_log(trace_dir)
    except ArtifactError as e:
        notes.append(f"TORCH_TRACE log unreadable: {e}")
    graphs: tuple[InductorGraph, ...] = ()
    try:
        graphs = tuple(read_graph_dir(p) for p in find_graph_dirs(debug_dir))
    except ArtifactError as e:
        notes.append(f"Inductor debug folder unreadable: {e}")
    if facts is not None and graphs:
        graphs = link_trace(graphs, facts)
    return InductorArtifacts(facts, graphs, tuple(notes))


_SYMBOL = re.compile(r"\b[a-z]*s\d+\b")


def symbolic(graphs: Iterable[InductorGraph]) -> bool | None:
    """Returns whether any graph has a symbolic size (`f32[s77, 32]`), None without graphs."""
    shapes = [
        n.shape
        for g in graphs
        if g.graph is not None
        for n in (*g.graph.inputs, *g.graph.nodes)
        if n.shape
    ]
    if not shapes:
        return None
    return any(_SYMBOL.search(s.split("[", 1)[-1]) for s in shapes)


def structure(graphs: Iterable[InductorGraph]) -> list[tuple[object, ...]]:
    """Returns the graphs' cluster structure (kind, backend kind, target, epilogue, ops), so a
    recompile can be told apart from a same-structure compile for a new shape."""
    return sorted(
        (c.kind, c.backend_kind, c.target, c.epilogue, c.member_opcodes)
        for g in graphs
        for c in graph_clusters(g)
    )


_KERNEL_INDEX = re.compile(r"\b((?:triton|cpp)_\w+?)_\d+\b")
_COMMENT = re.compile(r"^\s*#.*$", re.MULTILINE)
_PATHS = re.compile(r"['\"]/[^'\"]*['\"]")
_HASHES = re.compile(r"\b[a-z0-9]{40,}\b")


def normalized_code(text: str) -> str:
    """Returns generated code without comments, paths, hashes or kernel numbers, so the same
    program compiled in two variants (or two processes) reads the same."""
    text = _COMMENT.sub("", text)
    text = _PATHS.sub("'<path>'", text)
    text = _HASHES.sub("<hash>", text)
    text = _KERNEL_INDEX.sub(r"\1_N", text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class TorchFingerprint:
    """The identity of the program Inductor generated: equal digests, same program."""

    digest: str
    graph: str | None
    launches: str
    code: str


def fingerprint(
    graphs: Sequence[InductorGraph], runtime: Sequence[str] = ()
) -> TorchFingerprint | None:
    """Returns the fingerprint of the graphs: their post-grad (else AOT) graphs' ops and
    shapes, the wrapper's launch sequence, and the normalized kernel sources.

    `runtime` names what runs the wrapper after code generation (`cudagraphs`): the same code
    replayed as a CUDA graph is another program on the timeline (it copies its inputs into
    static buffers first), as a GPU command buffer is for XLA."""
    if not graphs:
        return None
    fx = [
        "\n".join(f"{n.target} {n.shape} {len(n.args)}" for n in g.graph.nodes)
        for g in graphs
        if g.graph is not None
    ]
    launches = [" ".join(_KERNEL_INDEX.sub(r"\1_N", c.target) for c in g.calls) for g in graphs]
    code = [normalized_code(k.source) for g in graphs for k in g.kernels]
    graph = _digest(fx) if fx else None
    launch = _digest([*launches, *runtime])
    source = _digest(code)
    return TorchFingerprint(_digest([graph or "", launch, source]), graph, launch, source)
