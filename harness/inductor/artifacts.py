"""Read what torch.compile wrote: Inductor's debug folder and the TORCH_TRACE log.

Two sources, one model:

- **Debug folder** (`TORCH_COMPILE_DEBUG=1` or `torch._inductor.config.trace.enabled`): one
  `model__<N>_<kind>_<N>.<n>/` folder per compiled graph, holding `output_code.py` (the wrapper
  that launches every kernel, with each Triton/C++ kernel's source), `fx_graph_readable.py`
  (the ATen graph Inductor was given), `fx_graph_transformed.py` (the post-grad graph; torch
  2.13 writes it, 2.11 does not), `ir_pre_fusion.txt`, `ir_post_fusion.txt` and, with
  provenance tracking on, `inductor_provenance_tracking_node_mappings.json`.
- **TORCH_TRACE log** (the file tlparse reads): one glog-prefixed line per record, a JSON
  object whose first key names the record (`dynamo_start`, `compilation_metrics`,
  `chromium_event`, `artifact`, `inductor_output_code`, ...), followed by the record's
  payload as tab-indented lines. It holds the same output code, post-grad graph and
  provenance per compile, plus what the folder lacks: compile ids, graph breaks, recompile
  reasons, guard counts and the compile-time phases.

Nothing here imports torch: the files are text and JSON. Errors name the file and line.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

OUTPUT_CODE = "output_code.py"
FX_READABLE = "fx_graph_readable.py"
FX_TRANSFORMED = "fx_graph_transformed.py"
IR_PRE = "ir_pre_fusion.txt"
IR_POST = "ir_post_fusion.txt"
PROVENANCE = "inductor_provenance_tracking_node_mappings.json"


class ArtifactError(ValueError):
    """An Inductor artifact or TORCH_TRACE log that cannot be read; names the file (and line)."""


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


_AOT_ID = re.compile(r"^# AOT ID: \['([^']+)'")
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
    aot_id = next((m.group(1) for ln in lines[:5] if (m := _AOT_ID.match(ln))), None)
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


def handle_name(handle: str) -> str:
    """`extern_kernels.mm:1` -> `extern_kernels.mm`."""
    return handle.rsplit(":", 1)[0] if re.search(r":\d+$", handle) else handle


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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ArtifactError(f"{path}: cannot read ({err})") from err


def read_graph_dir(path: Path | str) -> InductorGraph:
    """Return one graph from its Inductor debug folder (`model__0_inference_0.0/`).

    `output_code.py` is required; every other file is optional and its absence is a note.
    """
    folder = Path(path)
    code_path = folder / OUTPUT_CODE
    if not code_path.is_file():
        raise ArtifactError(f"{folder}: no {OUTPUT_CODE} in this Inductor debug folder")
    code = parse_output_code(_read_text(code_path), str(code_path))
    notes: list[str] = []
    graphs: dict[str, FxGraph | None] = {}
    for name in (FX_TRANSFORMED, FX_READABLE):
        file = folder / name
        graphs[name] = parse_fx_graph(_read_text(file), str(file)) if file.is_file() else None
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
            data = json.loads(_read_text(prov_path))
        except json.JSONDecodeError as err:
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
        ir_post_fusion=_read_text(ir_post) if ir_post.is_file() else "",
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


# --------------------------------------------------------------------------------------------
# TORCH_TRACE logs


@dataclass(frozen=True)
class TraceRecord:
    """One structured-trace record: its kind (the JSON's first key), metadata and payload."""

    line: int
    kind: str
    meta: Mapping[str, Any]
    payload: str

    @property
    def compile_id(self) -> str | None:
        frame, attempt = self.meta.get("frame_id"), self.meta.get("frame_compile_id")
        return None if frame is None or attempt is None else f"{frame}/{attempt}"

    @property
    def body(self) -> Any:
        """The value under the record's kind key (`{"name": ...}` for artifacts)."""
        return self.meta.get(self.kind)


_GLOG = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ \S+\] (\{.*)$")


def read_trace_records(path: Path | str) -> tuple[TraceRecord, ...]:
    """Return the records of a TORCH_TRACE log, in file order.

    A record is a glog-prefixed line holding a JSON object, followed by its payload as
    lines starting with a tab. Lines of neither form are skipped; a file with no record at
    all, or a record line whose JSON is broken, raises ArtifactError naming file and line.
    """
    file = Path(path)
    text = _read_text(file)
    records: list[TraceRecord] = []
    current: tuple[int, str, dict[str, Any]] | None = None
    payload: list[str] = []

    def flush() -> None:
        if current is not None:
            records.append(TraceRecord(current[0], current[1], current[2], "\n".join(payload)))

    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("\t"):
            if current is not None:
                payload.append(line[1:])
            continue
        match = _GLOG.match(line)
        if not match:
            continue
        flush()
        payload = []
        try:
            meta = json.loads(match.group(1))
        except json.JSONDecodeError as err:
            raise ArtifactError(f"{file}:{number}: record is not JSON ({err})") from err
        if not isinstance(meta, dict) or not meta:
            raise ArtifactError(f"{file}:{number}: record is not a JSON object")
        current = (number, next(iter(meta)), meta)
    flush()
    if not records:
        raise ArtifactError(f"{file}: no TORCH_TRACE records (not a structured trace log)")
    return tuple(records)


@dataclass(frozen=True)
class GraphBreak:
    """One graph break Dynamo logged: where, why, and whether its frame still made a graph.

    `reason` is the headline (`Unsupported Tensor.item() call with
    capture_scalar_outputs=False`); `detail` the full text with explanation and hints.
    """

    compile_id: str
    reason: str
    location: str | None
    detail: str
    graph_emitted: bool


@dataclass(frozen=True)
class CompileTimes:
    """Where compile time went, in seconds (None: not in the log).

    Phases nest: total ⊃ Dynamo tracing + guards + backend; backend = AOTAutograd ⊃
    Inductor ⊃ kernel compile (Triton on the GPU, the C++ compiler on the CPU). `aot_s` and
    `inductor_s` are exclusive (their nested phase removed), so the fields add up to at
    most `total_s`. `autotune_s` is Triton's launch-config benchmarking, which runs at the
    first call, outside the compile.
    """

    total_s: float | None
    dynamo_tracing_s: float | None
    guards_s: float | None
    aot_s: float | None
    inductor_s: float | None
    kernel_compile_s: float | None
    autotune_s: float | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FrameCompile:
    """One Dynamo compile (`compile_id` "frame/n"): what it traced, guarded and produced."""

    compile_id: str
    function: str | None
    location: str | None
    graph_emitted: bool
    graph_op_count: int | None
    guard_count: int | None
    recompile_reason: str | None
    restart_reasons: tuple[str, ...]
    fail_reason: str | None
    graph_breaks: tuple[GraphBreak, ...]
    aot_ids: tuple[str, ...]
    phases_s: Mapping[str, float]
    metrics: Mapping[str, Any]
    artifacts: Mapping[str, str]

    @property
    def times(self) -> CompileTimes:
        return compile_times([self])

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "function": self.function,
            "location": self.location,
            "graph_emitted": self.graph_emitted,
            "graph_op_count": self.graph_op_count,
            "guard_count": self.guard_count,
            "recompile_reason": self.recompile_reason,
            "restart_reasons": list(self.restart_reasons),
            "fail_reason": self.fail_reason,
            "graph_breaks": [_break_json(b) for b in self.graph_breaks],
            "aot_ids": list(self.aot_ids),
            "phases_s": dict(self.phases_s),
            "times": self.times.to_json(),
        }


def _break_json(b: GraphBreak) -> dict[str, Any]:
    return {
        "compile_id": b.compile_id,
        "reason": b.reason,
        "location": b.location,
        "graph_emitted": b.graph_emitted,
    }


@dataclass(frozen=True)
class DynamoSession:
    """The compiles between two Dynamo resets (`torch._dynamo.explain` resets before and after
    it runs, so a process that explains and then compiles logs two sessions)."""

    frames: tuple[FrameCompile, ...]

    @property
    def graph_count(self) -> int:
        return sum(f.graph_emitted for f in self.frames)

    @property
    def graph_breaks(self) -> tuple[GraphBreak, ...]:
        """Breaks that split a graph (their frame emitted one), as `explain()` counts them."""
        return tuple(b for f in self.frames for b in f.graph_breaks if b.graph_emitted)

    @property
    def graph_break_count(self) -> int:
        return len(self.graph_breaks)

    @property
    def break_reasons(self) -> tuple[str, ...]:
        return tuple(b.reason for b in self.graph_breaks)

    @property
    def skipped_breaks(self) -> tuple[GraphBreak, ...]:
        """Breaks in frames that produced no graph: the op ran eagerly, nothing was split."""
        return tuple(b for f in self.frames for b in f.graph_breaks if not b.graph_emitted)

    @property
    def guard_count(self) -> int:
        """Guards installed over all frames (each compiled frame guards its own cache entry)."""
        return sum(f.guard_count or 0 for f in self.frames)

    @property
    def recompile_reasons(self) -> tuple[str, ...]:
        return tuple(f.recompile_reason for f in self.frames if f.recompile_reason)

    @property
    def inductor_ran(self) -> bool:
        return any("inductor_output_code" in f.artifacts for f in self.frames)

    @property
    def times(self) -> CompileTimes:
        return compile_times(self.frames)

    def frame(self, compile_id: str) -> FrameCompile | None:
        return next((f for f in self.frames if f.compile_id == compile_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "break_reasons": list(self.break_reasons),
            "skipped_breaks": [_break_json(b) for b in self.skipped_breaks],
            "guard_count": self.guard_count,
            "recompile_reasons": list(self.recompile_reasons),
            "inductor_ran": self.inductor_ran,
            "times": self.times.to_json(),
            "frames": [f.to_json() for f in self.frames],
        }


@dataclass(frozen=True)
class TorchTraceFacts:
    """What a TORCH_TRACE log says about compilation, split into Dynamo sessions."""

    path: str
    torch_version: str | None
    sessions: tuple[DynamoSession, ...]
    notes: tuple[str, ...] = ()

    @property
    def main(self) -> DynamoSession:
        """The last session that ran Inductor (the real compile), else the last session."""
        ran = [s for s in self.sessions if s.inductor_ran]
        return ran[-1] if ran else self.sessions[-1]

    @property
    def graph_by_compile_id(self) -> dict[str, str]:
        """compile id -> AOT id of the graph it produced (its forward graph), in the main session."""
        return {f.compile_id: aot for f in self.main.frames for aot in f.aot_ids[:1]}

    def to_json(self) -> dict[str, Any]:
        main = self.main
        return {
            "path": self.path,
            "torch_version": self.torch_version,
            "sessions": len(self.sessions),
            "main_session": self.sessions.index(main),
            **main.to_json(),
            "notes": list(self.notes),
        }


_BREAK_AT = re.compile(r"Graph break in user code at (.*):(\d+)")
_ENCOUNTERED = "Encountered graph break"


def break_headline(text: str) -> str:
    """The one-line reason of a graph break text (`Unsupported Tensor.item() call ...`)."""
    body = text.split("Graph Break Reason:", 1)[-1].split("User code traceback:", 1)[0]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(_ENCOUNTERED)]
    return (useful or lines or [text.strip()])[0]


def read_trace_log(path: Path | str) -> TorchTraceFacts:
    """Return the compile facts of a TORCH_TRACE log (a file, or a folder of `*.log` files:
    the newest one is read, as `tlparse --latest` does)."""
    file = _trace_file(Path(path))
    return trace_facts(read_trace_records(file), str(file))


def _trace_file(path: Path) -> Path:
    if path.is_file():
        return path
    if path.is_dir():
        logs = sorted(path.glob("*.log"), key=lambda p: (p.stat().st_mtime, p.name))
        if logs:
            return logs[-1]
        raise ArtifactError(f"{path}: no *.log TORCH_TRACE file in this folder")
    raise ArtifactError(f"{path}: no such TORCH_TRACE log")


class _Frame:
    """Mutable accumulator for one compile while the log is read."""

    def __init__(self, compile_id: str) -> None:
        self.compile_id = compile_id
        self.location: str | None = None
        self.function: str | None = None
        self.graph = False
        self.metrics: dict[str, Any] = {}
        self.runtime: dict[str, Any] = {}
        self.recompile: str | None = None
        self.breaks: list[tuple[str, str | None, str]] = []
        self.aot_ids: list[str] = []
        self.artifacts: dict[str, str] = {}
        self.open: dict[str, list[float]] = {}
        self.phases: Counter[str] = Counter()
        self.dynamo_begun = False

    def freeze(self) -> FrameCompile:
        m = self.metrics
        restart = tuple(break_headline(str(r)) for r in m.get("restart_reasons") or ())
        breaks = tuple(
            GraphBreak(self.compile_id, reason, loc, detail, self.graph)
            for reason, loc, detail in dict.fromkeys(self.breaks)
        )
        if not breaks and restart and self.graph:
            # Older logs carry no dynamo_graph_break_reason artifact: the restart reasons
            # of a frame that still made a graph are its breaks.
            breaks = tuple(GraphBreak(self.compile_id, r, None, r, True) for r in restart)
        # The runtime entry (2.11: autotuning at the first call) fills what the compile left None.
        merged = {**m, **{k: v for k, v in self.runtime.items() if m.get(k) is None}}
        metrics = {k: v for k, v in merged.items() if not k.endswith("_config")}
        return FrameCompile(
            compile_id=self.compile_id,
            function=self.function or _opt_str(m.get("co_name")),
            location=self.location or _code_location(m),
            graph_emitted=self.graph,
            graph_op_count=_opt_int(m.get("graph_op_count")),
            guard_count=_opt_int(m.get("guard_count")),
            recompile_reason=_opt_str(m.get("recompile_reason")) or self.recompile,
            restart_reasons=restart,
            fail_reason=_opt_str(m.get("fail_reason")),
            graph_breaks=breaks,
            aot_ids=tuple(dict.fromkeys(self.aot_ids)),
            phases_s=dict(self.phases),
            metrics=metrics,
            artifacts=dict(self.artifacts),
        )


def _opt_int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _opt_float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "None" else str(value)


def _code_location(metrics: Mapping[str, Any]) -> str | None:
    name, line = metrics.get("co_filename"), metrics.get("co_firstlineno")
    return f"{name}:{line}" if name and line is not None else None


def trace_facts(records: Iterable[TraceRecord], path: str = "") -> TorchTraceFacts:
    """Return the compile facts of parsed TORCH_TRACE records.

    Records are grouped by compile id. A `dynamo_start` (or the `dynamo` phase opening) for a
    compile id the current session already saw starts a new session: Dynamo was reset.
    """
    strings: dict[int, str] = {}
    sessions: list[dict[str, _Frame]] = [{}]
    version: str | None = None
    notes: list[str] = []

    def frame(cid: str) -> _Frame:
        return sessions[-1].setdefault(cid, _Frame(cid))

    for rec in records:
        body = rec.body
        cid = rec.compile_id
        if rec.kind == "str" and isinstance(body, list) and len(body) == 2:
            strings[_opt_int(body[1]) or 0] = str(body[0])
            continue
        if rec.kind == "chromium_event":
            event = _json_or_none(rec.payload)
            if not isinstance(event, dict):
                notes.append(f"{path}:{rec.line}: chromium event payload is not JSON")
                continue
            ecid = str((event.get("args") or {}).get("compile_id") or cid or "")
            if not ecid:
                continue
            if event.get("name") == "dynamo" and event.get("ph") == "B":
                if ecid in sessions[-1] and sessions[-1][ecid].dynamo_begun:
                    sessions.append({})
                frame(ecid).dynamo_begun = True
            _add_phase(frame(ecid), event)
            continue
        if (
            rec.kind == "artifact"
            and isinstance(body, dict)
            and body.get("name") == "torch_version"
        ):
            data = _json_or_none(rec.payload)
            version = str(data.get("pytorch_version")) if isinstance(data, dict) else version
            continue
        if cid is None:
            continue
        if rec.kind == "dynamo_start":
            current = sessions[-1].get(cid)
            if current is not None and current.location is not None:
                sessions.append({})
            f = frame(cid)
            stack = body.get("stack") if isinstance(body, dict) else None
            if isinstance(stack, list) and stack and isinstance(stack[-1], dict):
                top = stack[-1]
                name = strings.get(_opt_int(top.get("filename")) or -1, str(top.get("filename")))
                f.location, f.function = f"{name}:{top.get('line')}", str(top.get("name"))
            continue
        f = frame(cid)
        if rec.kind == "dynamo_output_graph":
            f.graph = True
            f.artifacts["dynamo_output_graph"] = rec.payload
        elif rec.kind == "compilation_metrics" and isinstance(body, dict):
            f.metrics = dict(body)
            version = version or _opt_str(body.get("pytorch_version"))
        elif rec.kind == "compilation_metrics_runtime" and isinstance(body, dict):
            f.runtime = {k: v for k, v in body.items() if v is not None}
        elif rec.kind == "inductor_output_code":
            f.artifacts["inductor_output_code"] = rec.payload
            match = _AOT_ID.match(rec.payload.splitlines()[0] if rec.payload else "")
            if match:
                f.aot_ids.append(match.group(1))
        elif rec.kind.startswith("aot_") and rec.kind.endswith("_graph"):
            f.artifacts[rec.kind] = rec.payload
        elif rec.kind == "dynamo_cpp_guards_str":
            f.artifacts["dynamo_cpp_guards_str"] = rec.payload
        elif rec.kind == "artifact" and isinstance(body, dict):
            name = str(body.get("name"))
            if name == "dynamo_graph_break_reason":
                at = _BREAK_AT.search(rec.payload)
                loc = f"{at.group(1)}:{at.group(2)}" if at else None
                f.breaks.append((break_headline(rec.payload), loc, rec.payload))
            elif name == "recompile_reasons":
                f.recompile = _recompile_text(rec.payload)
            else:
                f.artifacts[name] = rec.payload
    frozen = tuple(DynamoSession(tuple(f.freeze() for f in s.values())) for s in sessions if s)
    if not frozen:
        raise ArtifactError(f"{path}: the log holds no Dynamo compile")
    return TorchTraceFacts(path, version, frozen, tuple(notes))


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _recompile_text(payload: str) -> str:
    data = _json_or_none(payload)
    if isinstance(data, list):
        return "; ".join(str(x) for x in data)
    return str(data) if isinstance(data, str) else payload.strip()


def _add_phase(f: _Frame, event: Mapping[str, Any]) -> None:
    """Accumulates one chromium B/E (or X) event into the frame's phase durations."""
    name, ph, ts = str(event.get("name")), event.get("ph"), _opt_float(event.get("ts"))
    if ts is None:
        return
    if ph == "B":
        f.open.setdefault(name, []).append(ts)
    elif ph == "E" and f.open.get(name):
        f.phases[name] += (ts - f.open[name].pop()) * 1e-6
    elif ph == "X" and (dur := _opt_float(event.get("dur"))) is not None:
        f.phases[name] += dur * 1e-6


_KERNEL_COMPILE_PHASES = ("async_compile.precompile", "compile_file")


def compile_times(frames: Iterable[FrameCompile]) -> CompileTimes:
    """Return the compile-time breakdown summed over frames.

    Chromium phases are used when the log has them (`entire_frame_compile`,
    `bytecode_tracing`, `build_guards`, `backend_compile`, `inductor_compile`, the kernel
    compile, `CachingAutotuner.benchmark_all_configs`); otherwise the compilation-metrics
    fields (`entire_frame_compile_time_s`, `backend_compile_time_s`,
    `inductor_compile_time_s`, `triton_compile_time_us`, the autotune fields).
    """
    frames = list(frames)
    phases: Counter[str] = Counter()
    for f in frames:
        phases.update(f.phases_s)
    if phases.get("entire_frame_compile"):
        kernel = sum(phases.get(p, 0.0) for p in _KERNEL_COMPILE_PHASES)
        inductor = phases.get("inductor_compile")
        backend = phases.get("backend_compile")
        return CompileTimes(
            total_s=phases["entire_frame_compile"],
            dynamo_tracing_s=phases.get("bytecode_tracing"),
            guards_s=phases.get("build_guards"),
            aot_s=(backend - (inductor or 0.0)) if backend is not None else None,
            inductor_s=(inductor - kernel) if inductor is not None else None,
            kernel_compile_s=kernel if any(p in phases for p in _KERNEL_COMPILE_PHASES) else None,
            autotune_s=phases.get("CachingAutotuner.benchmark_all_configs"),
            source="chromium_events",
        )

    def total(key: str, scale: float = 1.0) -> float | None:
        values = [_opt_float(f.metrics.get(key)) for f in frames]
        present = [v * scale for v in values if v is not None]
        return sum(present) if present else None

    inductor = total("inductor_compile_time_s")
    backend = total("backend_compile_time_s")
    kernel = total("triton_compile_time_us", 1e-6)
    autotune = [
        v
        for v in (
            total("compile_time_autotune_time_us", 1e-6),
            total("runtime_triton_autotune_time_us", 1e-6),
        )
        if v is not None
    ]
    return CompileTimes(
        total_s=total("entire_frame_compile_time_s"),
        dynamo_tracing_s=None,
        guards_s=None,
        aot_s=(backend - (inductor or 0.0)) if backend is not None else None,
        inductor_s=(inductor - (kernel or 0.0)) if inductor is not None else None,
        kernel_compile_s=kernel,
        autotune_s=sum(autotune) if autotune else None,
        source="compilation_metrics",
    )
