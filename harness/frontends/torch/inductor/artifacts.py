"""Read what torch.compile wrote into Inductor's debug folder, and build one graph from it.

The folder (`TORCH_COMPILE_DEBUG=1`, or `torch._inductor.config.trace.enabled` with
`trace.debug_dir`) holds one `model__<N>_<kind>_<N>.<n>/` folder per compiled graph:
`output_code.py` (the wrapper that launches every kernel, with each Triton/C++ kernel's
source), `fx_graph_readable.py` (the ATen graph Inductor was given),
`fx_graph_transformed.py` (the post-grad graph; torch 2.13 writes it, 2.11 does not),
`ir_pre_fusion.txt`, `ir_post_fusion.txt` and, with provenance tracking on,
`inductor_provenance_tracking_node_mappings.json`.

The TORCH_TRACE log (read by `harness.frontends.torch.inductor.trace_log`) holds the same output code,
post-grad graph and provenance per compile, plus the compile ids; `link_trace` adds what the
folder lacks, and `graphs_from_trace` builds the graphs from the log alone. Nothing here
imports torch: the files are text and JSON. Errors name the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.frontends.torch.inductor.trace_log import (
    AOT_ID_RE,
    ArtifactError,
    FrameCompile,
    TorchTraceFacts,
    read_text,
)
from harness.store.records import loads

OUTPUT_CODE = "output_code.py"
FX_READABLE = "fx_graph_readable.py"
FX_TRANSFORMED = "fx_graph_transformed.py"
IR_PRE = "ir_pre_fusion.txt"
IR_POST = "ir_post_fusion.txt"
PROVENANCE = "inductor_provenance_tracking_node_mappings.json"


# --------------------------------------------------------------------------------------------
# FX graphs (fx_graph_readable.py, fx_graph_transformed.py, TORCH_TRACE graph payloads)


@dataclass(frozen=True)
class FxNode:
    """One node of a printed FX graph: `name: "type" = target(args)`.

    `target` drops the `torch.ops.` prefix (`aten.mm.default`); placeholders have target
    "placeholder". `location` is the user's `file:line` from the `# File:` comment above the
    node, None under `# No stacktrace found`.
    """

    name: str
    target: str
    shape: str
    args: tuple[str, ...] = ()
    location: str | None = None
    function: str | None = None
    code: str | None = None

    @property
    def label(self) -> str:
        """`"mm (aten.mm.default)"`: the reverse map's key for this node."""
        return f"{self.name} ({self.target})" if self.target else self.name

    @property
    def op(self) -> str:
        """The op without its overload: `aten.mm.default` -> `aten.mm`."""
        parts = self.target.split(".")
        return ".".join(parts[:2]) if len(parts) >= 3 else self.target


@dataclass(frozen=True)
class FxGraph:
    """A printed FX graph: placeholders, call nodes in order, and the returned names."""

    source: str
    inputs: tuple[FxNode, ...]
    nodes: tuple[FxNode, ...]
    outputs: tuple[str, ...]

    def node(self, name: str) -> FxNode | None:
        return next((n for n in (*self.nodes, *self.inputs) if n.name == name), None)


_FILE_COMMENT = re.compile(r"^# File: (.*):(\d+) in (.*?), code: (.*)$")
_NODE_LINE = re.compile(r'^(\w+)(?:: "((?:[^"\\]|\\.)*)")?(?:\[num_users=\d+\])? = (.+)$')
_CALL = re.compile(r"^([\w.]+)\((.*)\)$", re.DOTALL)
_PARAM = re.compile(r'(\w+): "((?:[^"\\]|\\.)*)"')
_IDENT = re.compile(r"\b([A-Za-z_]\w*)\b")
_SHAPE = re.compile(r"^([A-Za-z0-9_]+\[[^\]]*\])")


def normalize_shape(text: str) -> str:
    """`bf16[8192, 8192][8192, 1]cuda:0` -> `bf16[8192, 8192]`; other texts unchanged."""
    match = _SHAPE.match(text)
    return match.group(1) if match else text


def parse_fx_graph(text: str, source: str = "") -> FxGraph:
    """Return the nodes of a printed FX graph (`GraphModule.print_readable` output).

    Exists because Inductor's per-node facts (the ATen target, the shape, the user's source
    line) are only written as this Python-like text.
    """
    inputs: list[FxNode] = []
    nodes: list[FxNode] = []
    outputs: tuple[str, ...] = ()
    known: set[str] = set()
    location = function = code = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("def forward("):
            for name, shape in _PARAM.findall(line):
                inputs.append(FxNode(name, "placeholder", normalize_shape(shape)))
                known.add(name)
            continue
        if line.startswith("# File:"):
            match = _FILE_COMMENT.match(line)
            if match:
                location = f"{match.group(1)}:{match.group(2)}"
                function, code = match.group(3), match.group(4)
            continue
        if line.startswith("# No stacktrace found"):
            location = function = code = None
            continue
        if line.startswith("return "):
            outputs = tuple(n for n in _IDENT.findall(line[len("return ") :]) if n in known)
            continue
        match = _NODE_LINE.match(line)
        if not match or line.startswith(("class ", "#")):
            continue
        name, shape, rhs = match.group(1), match.group(2) or "", match.group(3)
        rhs = rhs.split(";  ")[0].strip()
        call = _CALL.match(rhs)
        target = call.group(1).removeprefix("torch.ops.") if call else rhs
        arg_text = call.group(2) if call else rhs
        args = tuple(dict.fromkeys(n for n in _IDENT.findall(arg_text) if n in known))
        nodes.append(FxNode(name, target, normalize_shape(shape), args, location, function, code))
        known.add(name)
    return FxGraph(source, tuple(inputs), tuple(nodes), outputs)


# --------------------------------------------------------------------------------------------
# output_code.py


@dataclass(frozen=True)
class KernelDef:
    """One kernel Inductor generated: `name = async_compile.triton(...)` (or cpp_pybinding).

    `kind` is "triton" or "cpp" (other async_compile methods keep their own name).
    `heuristic` is Triton's launcher kind (pointwise, reduction, persistent_reduction,
    template, ...). `fragment_nodes` are the FX nodes its `# Graph fragment:` comment lists
    (GPU kernels only; CPU kernels carry no comment block).
    """

    name: str
    kind: str
    heuristic: str
    source_nodes: tuple[str, ...]
    original_aten: tuple[str, ...]
    fragment_nodes: tuple[str, ...]
    source: str
    line: int


@dataclass(frozen=True)
class KernelCall:
    """One launch site in the wrapper's `call()`, in execution order (1-based `order`).

    `target` is the called name: a kernel (`triton_poi_fused_add_gelu_0`), an extern kernel
    (`extern_kernels.mm`) or an ATen fallback (`aten.sort.default`). `handle` is the
    provenance debug handle the wrapper comment gives (`extern_kernels.mm:1`).
    """

    target: str
    kind: str
    order: int
    handle: str | None
    source_nodes: tuple[str, ...]
    original_aten: tuple[str, ...]
    arguments: str
    line: int


@dataclass(frozen=True)
class OutputCode:
    """The parsed wrapper module: its AOT id, device, kernels and launch sites."""

    aot_id: str | None
    device: str
    kernels: tuple[KernelDef, ...]
    calls: tuple[KernelCall, ...]


_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.(\w+)\(")
_SOURCE_NODES = re.compile(
    r"^#\s*Topologically Sorted Source Nodes: \[(.*?)\], Original ATen: \[(.*)\]"
)
_HANDLE = re.compile(r"^#\s*\[Provenance debug handles\] (\S+)")
_HEURISTIC = re.compile(r"@triton_heuristics\.(\w+)\(")
_FRAGMENT_NODE = re.compile(r"^#\s+%(\w+) : .*= call_function\[")
_EXTERN_CALL = re.compile(r"^(?:[\w, ]+ = )?(extern_kernels\.\w+)\((.*)$")
_RUN_CALL = re.compile(r"^(\w+)\.run\((.*)$")
_PLAIN_CALL = re.compile(r"^(\w+)\((.*)$")
_FALLBACK_CALL = re.compile(r"^(?:[\w, ]+ = )?torch\.ops\.(\w+\.\w+(?:\.\w+)?)\((.*)$")
_WRAPPER_END = re.compile(r"^(def get_args\(|def benchmark_compiled_module\(|if __name__)")
_KERNEL_KINDS = {"triton": "triton", "cpp_pybinding": "cpp", "cpp": "cpp"}


def _split_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parse_output_code(text: str, source: str = "") -> OutputCode:
    """Return the kernels and launch sites of an Inductor `output_code.py`.

    Kernel sources are skipped when looking for launches, so only wrapper code is scanned:
    every `extern_kernels.X(...)`, `<kernel>.run(...)`, `<cpp kernel>(...)` and
    `torch.ops.<ns>.<op>(...)` line, with the `Topologically Sorted Source Nodes` and
    `[Provenance debug handles]` comments just above it.
    """
    lines = text.splitlines()
    aot_id = next((m.group(1) for ln in lines[:5] if (m := AOT_ID_RE.match(ln))), None)
    kernels, wrapper = _kernel_defs(lines, source)
    names = {k.name: k for k in kernels}
    calls: list[KernelCall] = []
    pending_nodes: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    pending_handle: str | None = None
    for number, raw in wrapper:
        line = raw.strip()
        if _WRAPPER_END.match(raw):
            break
        if match := _SOURCE_NODES.match(line):
            pending_nodes = (_split_list(match.group(1)), _split_list(match.group(2)))
            continue
        if match := _HANDLE.match(line):
            pending_handle = match.group(1)
            continue
        launch = _launch(line, names)
        if launch is None:
            continue
        target, kind, args = launch
        calls.append(
            KernelCall(
                target=target,
                kind=kind,
                order=len(calls) + 1,
                handle=pending_handle,
                source_nodes=pending_nodes[0],
                original_aten=pending_nodes[1],
                arguments=args.strip().removesuffix(")").strip(),
                line=number,
            )
        )
        pending_nodes, pending_handle = ((), ()), None
    return OutputCode(aot_id, _device(text, kernels), tuple(kernels), tuple(calls))


def _launch(line: str, kernels: Mapping[str, KernelDef]) -> tuple[str, str, str] | None:
    """Returns (target, kind, argument text) when a wrapper line launches something."""
    if match := _EXTERN_CALL.match(line):
        return match.group(1), "library", match.group(2)
    match = _RUN_CALL.match(line) or _PLAIN_CALL.match(line)
    if match and match.group(1) in kernels:
        return match.group(1), kernels[match.group(1)].kind, match.group(2)
    if match := _FALLBACK_CALL.match(line):
        return match.group(1), "fallback", match.group(2)
    return None


def _device(text: str, kernels: Iterable[KernelDef]) -> str:
    if "device_str='cuda'" in text or "empty_strided_cuda(" in text:
        return "cuda"
    if "empty_strided_xpu(" in text or "device_str='xpu'" in text:
        return "xpu"
    if any(k.kind == "cpp" for k in kernels) or "empty_strided_cpu(" in text:
        return "cpu"
    return ""


def _kernel_defs(lines: list[str], source: str) -> tuple[list[KernelDef], list[tuple[int, str]]]:
    """Returns the kernel definitions and the remaining (wrapper) lines with 1-based numbers."""
    kernels: list[KernelDef] = []
    wrapper: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        match = _KERNEL_DEF.match(lines[i])
        if not match:
            wrapper.append((i + 1, lines[i]))
            i += 1
            continue
        start = i
        comments = []
        j = i - 1
        while j >= 0 and lines[j].startswith("#"):
            comments.insert(0, lines[j])
            j -= 1
        # The comment block describes the kernel, not the next launch: keep it off the wrapper.
        del wrapper[len(wrapper) - len(comments) :]
        # The source is a triple-quoted string; it ends on the line that closes it.
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("'''"):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            raise ArtifactError(
                f"{source or OUTPUT_CODE}:{start + 1}: kernel {match.group(1)} has no end"
            )
        i += 1
        kernels.append(_kernel_def(match.group(1), match.group(2), comments, body, start + 1))
    return kernels, wrapper


def _kernel_def(
    name: str, method: str, comments: list[str], body: list[str], line: int
) -> KernelDef:
    source_nodes: tuple[str, ...] = ()
    original: tuple[str, ...] = ()
    fragment: list[str] = []
    for comment in comments:
        if match := _SOURCE_NODES.match(comment):
            source_nodes, original = _split_list(match.group(1)), _split_list(match.group(2))
        elif match := _FRAGMENT_NODE.match(comment):
            fragment.append(match.group(1))
    text = "\n".join(body)
    heuristic = _HEURISTIC.search(text)
    return KernelDef(
        name=name,
        kind=_KERNEL_KINDS.get(method, method),
        heuristic=heuristic.group(1) if heuristic else "",
        source_nodes=source_nodes,
        original_aten=original,
        fragment_nodes=tuple(fragment),
        source=text,
        line=line,
    )


# --------------------------------------------------------------------------------------------
# Provenance


@dataclass(frozen=True)
class Provenance:
    """Inductor's provenance mapping: pre-grad nodes, post-grad nodes and kernel handles.

    Handles look like `triton_poi_fused_add_gelu_0:2` and `extern_kernels.mm:1`: the kernel
    name and the 1-based position of its launch in the wrapper.
    """

    pre_to_post: Mapping[str, tuple[str, ...]]
    post_to_pre: Mapping[str, tuple[str, ...]]
    code_to_post: Mapping[str, tuple[str, ...]]
    post_to_code: Mapping[str, tuple[str, ...]]


_PROVENANCE_KEYS = {
    "preToPost": "pre_to_post",
    "postToPre": "post_to_pre",
    "cppCodeToPost": "code_to_post",
    "postToCppCode": "post_to_code",
}


def parse_provenance(data: Any, source: str = PROVENANCE) -> Provenance:
    """Return the provenance mapping from the decoded JSON; ArtifactError if it is not one."""
    if not isinstance(data, dict):
        raise ArtifactError(f"{source}: expected a JSON object, got {type(data).__name__}")
    fields: dict[str, dict[str, tuple[str, ...]]] = {}
    for key, attr in _PROVENANCE_KEYS.items():
        table = data.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
            raise ArtifactError(f"{source}: {key!r} must map names to lists")
        fields[attr] = {str(k): tuple(str(x) for x in v) for k, v in table.items()}
    return Provenance(**fields)


_STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def parse_stack_traces(data: Any, source: str = "") -> dict[str, tuple[str, ...]]:
    """Return kernel handle -> user `file:line` locations from Inductor's kernel stack traces.

    The input is the `inductor_provenance_tracking_kernel_stack_traces` artifact (or the
    `inductor_provenance` compilation-metrics entry): handle -> list of traceback texts.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            raise ArtifactError(f"{source}: kernel stack traces are not JSON ({err})") from err
    if not isinstance(data, dict):
        raise ArtifactError(f"{source}: kernel stack traces must be a JSON object")
    out: dict[str, tuple[str, ...]] = {}
    for handle, traces in data.items():
        texts = traces if isinstance(traces, list) else [traces]
        found = [f"{f}:{n}" for t in texts for f, n, _ in _STACK_FRAME.findall(str(t))]
        out[str(handle)] = tuple(dict.fromkeys(found))
    return out


# --------------------------------------------------------------------------------------------
# One compiled graph


@dataclass(frozen=True)
class InductorGraph:
    """Everything known about one graph Inductor compiled.

    `key` is the AOT id (`0_inference`), the name the harness uses for the graph the way it
    uses module names for XLA. `post_grad` is the graph Inductor lowered (node names match
    the provenance mapping); `aot_graph` is the ATen graph it was given. Torch 2.11's debug
    folder has no post-grad graph; the TORCH_TRACE log does (`link_trace` adds it).
    """

    key: str
    path: str
    compile_id: str | None
    device: str
    kernels: tuple[KernelDef, ...]
    calls: tuple[KernelCall, ...]
    post_grad: FxGraph | None
    aot_graph: FxGraph | None
    provenance: Provenance | None
    stack_traces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ir_post_fusion: str = ""
    notes: tuple[str, ...] = ()

    @property
    def graph(self) -> FxGraph | None:
        """The post-grad graph when known, else the AOT graph."""
        return self.post_grad or self.aot_graph

    @property
    def index(self) -> int | None:
        """The number in the AOT id (`1_inference` -> 1): Inductor's graph counter."""
        match = re.match(r"^(\d+)_", self.key)
        return int(match.group(1)) if match else None


_DIR_AOT = re.compile(r"^model__(\d+_[a-z]+)_\d+\.\d+$")


def find_graph_dirs(root: Path | str) -> tuple[Path, ...]:
    """Return every folder under `root` (or `root` itself) holding an Inductor `output_code.py`."""
    path = Path(root)
    if not path.is_dir():
        raise ArtifactError(f"{path}: no such Inductor debug folder")
    found = {p.parent for p in path.rglob(OUTPUT_CODE)}
    return tuple(sorted(found, key=lambda p: (_dir_index(p.name), str(p))))


def _dir_index(name: str) -> int:
    match = re.match(r"^model__(\d+)_", name)
    return int(match.group(1)) if match else 1 << 30


def read_graph_dir(path: Path | str) -> InductorGraph:
    """Return one graph from its Inductor debug folder (`model__0_inference_0.0/`).

    `output_code.py` is required; every other file is optional and its absence is a note.
    """
    folder = Path(path)
    code_path = folder / OUTPUT_CODE
    if not code_path.is_file():
        raise ArtifactError(f"{folder}: no {OUTPUT_CODE} in this Inductor debug folder")
    code = parse_output_code(read_text(code_path), str(code_path))
    notes: list[str] = []
    graphs: dict[str, FxGraph | None] = {}
    for name in (FX_TRANSFORMED, FX_READABLE):
        file = folder / name
        graphs[name] = parse_fx_graph(read_text(file), str(file)) if file.is_file() else None
    if graphs[FX_TRANSFORMED] is None:
        notes.append(
            f"no {FX_TRANSFORMED} (torch before 2.13 does not write it): nodes are the "
            f"ATen graph's; nodes the post-grad passes replaced are missing unless the "
            f"TORCH_TRACE log is linked"
        )
    provenance = None
    prov_path = folder / PROVENANCE
    if prov_path.is_file():
        try:
            data = loads(read_text(prov_path), str(prov_path))  # the typed load
        except ValueError as err:
            raise ArtifactError(f"{prov_path}: not JSON ({err})") from err
        provenance = parse_provenance(data, str(prov_path))
    else:
        notes.append(
            f"no {PROVENANCE}: provenance tracking was off; kernels map to FX nodes "
            f"through the wrapper's comments only"
        )
    ir_post = folder / IR_POST
    dir_key = _DIR_AOT.match(folder.name)
    return InductorGraph(
        key=code.aot_id or (dir_key.group(1) if dir_key else folder.name),
        path=str(folder),
        compile_id=None,
        device=code.device,
        kernels=code.kernels,
        calls=code.calls,
        post_grad=graphs[FX_TRANSFORMED],
        aot_graph=graphs[FX_READABLE],
        provenance=provenance,
        ir_post_fusion=read_text(ir_post) if ir_post.is_file() else "",
        notes=tuple(notes),
    )


def read_graphs(
    root: Path | str, trace: TorchTraceFacts | None = None
) -> tuple[InductorGraph, ...]:
    """Return every graph of an Inductor debug folder, linked to a TORCH_TRACE log when given."""
    graphs = tuple(read_graph_dir(p) for p in find_graph_dirs(root))
    return link_trace(graphs, trace) if trace is not None else graphs


def link_trace(
    graphs: Iterable[InductorGraph], trace: TorchTraceFacts
) -> tuple[InductorGraph, ...]:
    """Return the graphs with what the TORCH_TRACE log adds: compile id, post-grad graph,
    kernel stack traces (user source lines per kernel), provenance if the folder had none.

    Graphs are paired with compiles by AOT id, in the log's main session.
    """
    frames = {aot: f for f in trace.main.frames for aot in f.aot_ids}
    out = []
    for g in graphs:
        frame = frames.get(g.key)
        if frame is None:
            out.append(replace(g, notes=(*g.notes, f"AOT id {g.key} not in {trace.path}")))
            continue
        built = graph_from_frame(frame, trace.path)
        notes = tuple(n for n in g.notes if not n.startswith(f"no {FX_TRANSFORMED}"))
        out.append(
            replace(
                g,
                compile_id=frame.compile_id,
                post_grad=g.post_grad or built.post_grad,
                aot_graph=g.aot_graph or built.aot_graph,
                provenance=g.provenance or built.provenance,
                stack_traces={**built.stack_traces, **g.stack_traces},
                notes=notes if (g.post_grad or built.post_grad) else g.notes,
            )
        )
    return tuple(out)


def graph_from_frame(frame: FrameCompile, source: str) -> InductorGraph:
    """Return the graph a TORCH_TRACE compile record holds (its output code and graphs)."""
    art = frame.artifacts
    if "inductor_output_code" not in art:
        raise ArtifactError(f"{source}: compile {frame.compile_id} ran no Inductor")
    where = f"{source}#{frame.compile_id}"
    code = parse_output_code(art["inductor_output_code"], where)
    provenance = None
    if "inductor_provenance_tracking_node_mappings" in art:
        try:
            data = json.loads(art["inductor_provenance_tracking_node_mappings"])
        except json.JSONDecodeError as err:
            raise ArtifactError(f"{where}: provenance mapping is not JSON ({err})") from err
        provenance = parse_provenance(data, where)
    traces: dict[str, tuple[str, ...]] = {}
    if "inductor_provenance_tracking_kernel_stack_traces" in art:
        traces = parse_stack_traces(art["inductor_provenance_tracking_kernel_stack_traces"], where)
    aot_text = next(
        (v for k, v in art.items() if k.startswith("aot_") and k.endswith("_graph")), None
    )
    post_text = art.get("inductor_post_grad_graph")
    return InductorGraph(
        key=code.aot_id or frame.compile_id,
        path=where,
        compile_id=frame.compile_id,
        device=code.device,
        kernels=code.kernels,
        calls=code.calls,
        post_grad=parse_fx_graph(post_text, where) if post_text else None,
        aot_graph=parse_fx_graph(aot_text, where) if aot_text else None,
        provenance=provenance,
        stack_traces=traces,
    )


def graphs_from_trace(trace: TorchTraceFacts) -> tuple[InductorGraph, ...]:
    """Return every Inductor graph of the log's main session, built from the log alone."""
    return tuple(
        graph_from_frame(f, trace.path)
        for f in trace.main.frames
        if "inductor_output_code" in f.artifacts
    )
