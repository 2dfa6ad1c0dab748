"""Break the compile pause of a first-call (or recompile) profile down by XLA pipeline and pass.

XLA marks its work on the compiling host thread with nested TraceMe events:

- the client's compile call (`PjRtCpuClient::Compile` on CPU; on GPU the
  PjRt/StreamExecutor client's `...Client::Compile`, matched by COMPILE_ROOT_RE
  without a GPU profile to confirm it: the fixtures hold none of a compile);
- one event per pass pipeline, named `<pipeline> (<module>)` with a `module` stat;
- one event per pass (`algsimp`, `dce`, `layout-assignment`, ...) inside it;
  `HloPassFix` wrappers (e.g. `simplification`) contain a nested pipeline.

Nesting is recovered from time containment on one line. A *pass* is an event
whose parent is a pipeline and which contains no pipeline; a non-pipeline
event that contains a pipeline (a fixed-point wrapper) is listed with the
pipelines. Pass totals are therefore disjoint and sum to at most the compile
total; pipeline totals are inclusive and nest.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.profile.events import HOST_PLANE, ProfileError, load_profile
from harness.records.run_files import TimedName, TimedPass

# PjRtCpuClient::Compile (seen); the GPU clients' `...Client::Compile` (assumed, unverified)
# CPU: `PjRtCpuClient::Compile`. GPU (seen on an H200, jax 0.11.2):
# `PjRtStreamExecutorClient::CompileInternal` under `PJRT_Client_Compile`.
COMPILE_ROOT_RE = re.compile(r"^\w*(PjRt|Pjrt|StreamExecutor)\w*Client::Compile(Internal)?$")
PIPELINE_RE = re.compile(r"^(?P<pipeline>.+) \((?P<module>[^()]+)\)$")
# The GPU GEMM autotuner runs inside XLA's `config-assigner` pass (seen on an H200, jax 0.11.2:
# 958 of 1090 ms of the first compile), compiling and timing candidate kernels.
AUTOTUNE_RE = re.compile(r"autotun|^config-assigner$", re.IGNORECASE)
JAX_EVENTS = ("lower_sharding_computation", "backend_compile_and_load")


@dataclass(frozen=True)
class Span:
    """One host event placed in the nesting tree of its line."""

    name: str
    line: str
    start_ns: float
    end_ns: float
    module: str | None
    children: tuple[Span, ...] = field(default=(), repr=False)

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def self_ns(self) -> float:
        return self.duration_ns - sum(c.duration_ns for c in self.children)

    def walk(self) -> Iterable[Span]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True)
class CompileBreakdown:
    """Where the compile pause went, for one module (compile.json)."""

    path: str
    module: str | None
    compile_event: str | None
    total_compile_s: float
    top_level: tuple[TimedName, ...]
    pipelines: tuple[TimedName, ...]
    passes: tuple[TimedPass, ...]
    autotuning_s: float
    autotune_events: tuple[TimedName, ...]
    jax_events: tuple[TimedName, ...]
    notes: tuple[str, ...] = ()

    @property
    def passes_total_s(self) -> float:
        return sum(p.total_s for p in self.passes)

    def top_passes(self, n: int = 10) -> tuple[TimedPass, ...]:
        """Return the n passes with the most inclusive time."""
        return tuple(sorted(self.passes, key=lambda p: -p.total_s)[:n])

    def to_json(self) -> dict[str, Any]:
        """Return compile.json content."""
        data = asdict(self)
        data["passes_total_s"] = self.passes_total_s
        data["top_passes"] = [asdict(p) for p in self.top_passes()]
        return data


def compile_breakdown(xplane_path: Path | str, module_name: str | None = None) -> CompileBreakdown:
    """Return the compile breakdown of a first-call/recompile profile.

    With `module_name`, only compile calls that ran a pipeline for that module
    count (a first call also compiles small helper modules on some backends).
    A profile without any compile event gives a zero breakdown with a note,
    since a cached executable legitimately compiles nothing.
    """
    path = Path(xplane_path)
    spans = _host_spans(path)
    roots = _compile_roots(spans, module_name)
    notes = [] if roots else [_no_compile_note(module_name)]
    inside = [s for r in roots for s in r.walk()]
    pipelines, passes = _pipelines_and_passes(inside, module_name)
    autotune = _outermost([s for s in spans if AUTOTUNE_RE.search(s.name)])
    return CompileBreakdown(
        path=str(path),
        module=module_name,
        compile_event=roots[0].name if roots else None,
        total_compile_s=sum(r.duration_ns for r in roots) * 1e-9,
        top_level=_aggregate(c for r in roots for c in r.children),
        pipelines=_aggregate(pipelines),
        passes=_aggregate_passes(passes),
        autotuning_s=sum(s.duration_ns for s in autotune) * 1e-9,
        autotune_events=_aggregate(autotune),
        jax_events=_aggregate(s for s in spans if s.name in JAX_EVENTS),
        notes=tuple(notes),
    )


def _host_spans(path: Path) -> list[Span]:
    """Every host event of the profile at `path`, each line's nesting trees walked in
    order; raises ProfileError when the profile's content is malformed."""
    profile = load_profile(path)
    try:
        trees = [_nest(line_name, events) for line_name, events in _host_lines(profile)]
    except (UnicodeDecodeError, TypeError, ValueError) as err:
        raise ProfileError(f"{path}: profile content is malformed ({err})") from err
    return [s for tree in trees for root in tree for s in root.walk()]


def _compile_roots(spans: Sequence[Span], module_name: str | None) -> list[Span]:
    """The client's compile calls; with `module_name`, those that ran a pipeline for it."""
    roots = [s for s in spans if COMPILE_ROOT_RE.match(s.name)]
    if module_name is not None:
        roots = [r for r in roots if any(_is_pipeline(s, module_name) for s in r.walk())]
    return roots


def _no_compile_note(module_name: str | None) -> str:
    return (
        "no XLA compile event"
        + (f" for module {module_name}" if module_name else "")
        + " in this profile (cached executable, or a backend whose compile event is unknown)"
    )


def pipeline_name(span: Span) -> str | None:
    """Return `<pipeline>` for an event named `<pipeline> (<module>)`, else None."""
    match = PIPELINE_RE.match(span.name)
    if match is None or (span.module is not None and span.module != match["module"]):
        return None
    return match["pipeline"]


def _is_pipeline(span: Span, module_name: str | None) -> bool:
    match = PIPELINE_RE.match(span.name)
    if match is None or span.module is None:
        return False
    return module_name is None or match["module"] == module_name


def _pipelines_and_passes(
    inside: Sequence[Span], module_name: str | None
) -> tuple[list[Span], list[tuple[str, Span]]]:
    """Returns the pipeline spans and each pass span with the pipeline it ran in."""
    pipelines: list[Span] = []
    passes: list[tuple[str, Span]] = []
    for span in inside:
        if _is_pipeline(span, module_name):
            name = pipeline_name(span) or span.name
            pipelines.append(_renamed(span, name))
            for child in span.children:
                if any(_is_pipeline(s, module_name) for s in child.walk()):
                    # a fixed-point (HloPassFix) wrapper around a pipeline of the same name
                    pipelines.append(_renamed(child, f"{child.name} [fixed-point wrapper]"))
                else:
                    passes.append((name, child))
    return pipelines, passes


def _aggregate_passes(passes: Iterable[tuple[str, Span]]) -> tuple[TimedPass, ...]:
    count: dict[tuple[str, str], int] = defaultdict(int)
    total: dict[tuple[str, str], float] = defaultdict(float)
    own: dict[tuple[str, str], float] = defaultdict(float)
    for pipeline, s in passes:
        key = (pipeline, s.name)
        count[key] += 1
        total[key] += s.duration_ns * 1e-9
        own[key] += s.self_ns * 1e-9
    return tuple(
        sorted(
            (TimedPass(n, p, count[(p, n)], total[(p, n)], own[(p, n)]) for p, n in count),
            key=lambda t: (-t.total_s, t.pipeline, t.name),
        )
    )


def _renamed(span: Span, name: str) -> Span:
    return Span(name, span.line, span.start_ns, span.end_ns, span.module, span.children)


def _aggregate(spans: Iterable[Span]) -> tuple[TimedName, ...]:
    count: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    own: dict[str, float] = defaultdict(float)
    for s in spans:
        count[s.name] += 1
        total[s.name] += s.duration_ns * 1e-9
        own[s.name] += s.self_ns * 1e-9
    return tuple(
        sorted(
            (TimedName(n, count[n], total[n], own[n]) for n in count),
            key=lambda t: (-t.total_s, t.name),
        )
    )


def _outermost(spans: Sequence[Span]) -> list[Span]:
    ordered = sorted(spans, key=lambda s: (s.line, s.start_ns, -s.end_ns))
    out: list[Span] = []
    for s in ordered:
        if out and out[-1].line == s.line and s.end_ns <= out[-1].end_ns:
            continue
        out.append(s)
    return out


def _host_lines(profile: Any) -> Iterable[tuple[str, list[tuple[str, float, float, str | None]]]]:
    for plane in profile.planes:
        if plane.name != HOST_PLANE:
            continue
        for line in plane.lines:
            events = []
            for e in line.events:
                stats = {str(k): v for k, v in e.stats}
                module = stats.get("module")
                start = float(e.start_ns)
                events.append(
                    (
                        e.name,
                        start,
                        start + float(e.duration_ns),
                        None if module is None else str(module),
                    )
                )
            yield line.name, events


def _nest(line: str, events: Sequence[tuple[str, float, float, str | None]]) -> list[Span]:
    """Return the forest of spans on one line, nesting an event in the last one that contains it."""
    ordered = sorted(events, key=lambda e: (e[1], -e[2]))
    stack: list[tuple[tuple[str, float, float, str | None], list[Span]]] = []
    roots: list[Span] = []

    def close() -> None:
        (name, start, end, module), kids = stack.pop()
        span = Span(name, line, start, end, module, tuple(kids))
        (stack[-1][1] if stack else roots).append(span)

    for event in ordered:
        while stack and event[1] >= stack[-1][0][2]:
            close()
        if stack and event[2] > stack[-1][0][2]:
            # overlaps its would-be parent without nesting: treat as a sibling
            while stack and event[2] > stack[-1][0][2]:
                close()
        stack.append((event, []))
    while stack:
        close()
    return roots
