"""The package layout is the architecture: imports flow one way, and nothing imports in a cycle.

Every `import` in harness/ counts, function-level ones included. The pure libraries sit below
the stages; the stages (variants → capture → timing → analyze → report) import only libraries
and earlier stages, and the report none of the stages that run JAX; the orchestrator (the run,
the worker and the entry points) sits on top.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from conftest import REPO

HARNESS = REPO / "harness"

LIBRARIES = (
    "harness.io",
    "harness.forked",
    "harness.records",
    "harness.summary",
    "harness.summary_memory",  # the memory section and its migration (issue 28)
    "harness.summary_findings",  # the findings section and its migration (issue 25)
    "harness.fmt",  # number formatting, shared by the rules' sentences and the report
    "harness.summary_processes",  # the records of a study across processes (issue 31)
    "harness.ladder",
    "harness.stats",
    "harness.precision",
    "harness.cli",
    "harness.textsafety",
    "harness.terminal",
    "harness.userfiles",
    "harness.ownership",
    "harness.machine_state",
    "harness.summary_probes",
    "harness.summary_v3",
    "harness.resolution",
    "harness.config",
    "harness.hlo",
    "harness.profile",
    "harness.match",
    "harness.inductor",
)
STAGES = (
    "harness.variants",
    "harness.capture",
    "harness.timing",
    "harness.analyze",
    "harness.report",
)
RUNS_JAX = ("harness.variants", "harness.capture", "harness.timing")
ORCHESTRATOR = (
    "harness.__main__",
    "harness.main",
    "harness.run",
    "harness.group",  # the supervisor's side of a group of processes (issue 31)
    "harness.workerproc",
    "harness.runs",
    "harness.worker",
    "harness.reanalyze",
    "harness.migrate",
    "harness.search",
)
# The report renders the findings the analysis made; it never makes them. So no report
# module imports the rules, the IR readers (the HLO parser, Inductor's artifacts) or the
# profile readers (the profile and its match), save summary.json's own record of the gaps.
REPORT_NEVER_IMPORTS = (
    "harness.analyze.rules",
    "harness.hlo",
    "harness.inductor",
    "harness.profile",
    "harness.match",
)
REPORT_RECORDS = ("harness.match.gaps",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Returns the harness modules `path` imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from pkg import sub` imports the submodule; `from pkg import name` the package.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for t in targets:
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != name:
                found.add(t)
    return found


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    mods = modules()
    known = set(mods)
    return {name: frozenset(imports_of(path, name, known)) for name, path in mods.items()}


def graph() -> dict[str, set[str]]:
    """The import graph, parsed once per session (each test may change its own copy)."""
    return {name: set(found) for name, found in _graph().items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Returns the strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def layer(name: str) -> tuple[str, int]:
    """Returns ("lib", 0), ("stage", i) or ("top", 99) for a module."""
    if name.endswith(".__main__") or any(
        name == o or name.startswith(o + ".") for o in ORCHESTRATOR
    ):
        return "top", 99
    for lib in LIBRARIES:
        if name == lib or name.startswith(lib + "."):
            return "lib", 0
    for i, stage in enumerate(STAGES, 1):
        if name == stage or name.startswith(stage + "."):
            return "stage", i
    if name == "harness":
        return "lib", 0
    raise AssertionError(f"{name} belongs to no layer: add it to test_layers.py")


def violations(g: dict[str, set[str]]) -> list[str]:
    out = []
    for src, targets in sorted(g.items()):
        kind, rank = layer(src)
        for dst in sorted(targets):
            dkind, drank = layer(dst)
            if kind == "top":
                continue
            if dkind == "top":
                out.append(f"{src} imports the orchestrator module {dst}")
            elif kind == "lib" and dkind != "lib":
                out.append(f"library {src} imports the stage {dst}")
            elif kind == "stage" and dkind == "stage" and drank > rank:
                out.append(f"stage {src} imports the later stage {dst}")
            elif src.startswith("harness.report") and any(
                dst == s or dst.startswith(s + ".") for s in RUNS_JAX
            ):
                out.append(f"the report {src} imports {dst}, a stage that runs JAX")
    return out


def conclusions_in_the_report(g: dict[str, set[str]]) -> list[str]:
    """The report modules (entry points aside) that import a rule, an IR reader or a profile
    reader."""
    out = []
    for src, targets in sorted(g.items()):
        if not src.startswith("harness.report") or layer(src)[0] == "top":
            continue
        for dst in sorted(targets - set(REPORT_RECORDS)):
            if any(dst == n or dst.startswith(n + ".") for n in REPORT_NEVER_IMPORTS):
                out.append(f"the report {src} imports {dst}")
    return out


def test_every_module_belongs_to_a_layer() -> None:
    for name in modules():
        layer(name)


def test_the_import_graph_is_acyclic() -> None:
    assert cycles(graph()) == []


def test_imports_flow_one_way() -> None:
    assert violations(graph()) == []


def test_the_checks_can_fail() -> None:
    """A planted cycle and a planted upward import are both caught."""
    g = graph()
    g["harness.hlo.parser"] = g["harness.hlo.parser"] | {"harness.hlo.clusters"}
    assert any("harness.hlo.parser" in c for c in cycles(g))
    g["harness.report.plots"] = g["harness.report.plots"] | {"harness.capture.variant"}
    g["harness.config.schema"] = g["harness.config.schema"] | {"harness.report.data"}
    bad = violations(g)
    assert (
        "the report harness.report.plots imports harness.capture.variant, a stage that runs JAX"
        in bad
    )
    assert "library harness.config.schema imports the stage harness.report.data" in bad


def test_the_report_imports_no_rule_no_ir_reader_and_no_profile_reader() -> None:
    assert conclusions_in_the_report(graph()) == []


def test_the_report_check_can_fail() -> None:
    """A report module planted with an import of the rules, the HLO parser or the profile
    is named; summary.json's own gap record stays allowed."""
    g = graph()
    g["harness.report.findings"] = g["harness.report.findings"] | {"harness.analyze.rules.timing"}
    g["harness.report.observations"] = g["harness.report.observations"] | {"harness.hlo.parser"}
    g["harness.report.sections"] = g["harness.report.sections"] | {"harness.profile.events"}
    assert conclusions_in_the_report(g) == [
        "the report harness.report.findings imports harness.analyze.rules.timing",
        "the report harness.report.observations imports harness.hlo.parser",
        "the report harness.report.sections imports harness.profile.events",
    ]
    assert "harness.match.gaps" in g["harness.report.gaps"]


@pytest.mark.parametrize("entry", ["harness.report.__main__", "harness.analyze.__main__"])
def test_entry_points_inside_stage_packages_are_on_top(entry: str) -> None:
    assert layer(entry) == ("top", 99)
