"""The package layout is the architecture: imports flow one way, and nothing imports in a cycle.

Every `import` in harness/ counts, function-level ones included. The pure libraries sit below
the stages; the stages (variants → capture → timing → analyze → report, then the analyzer of any
program's dump, anydump) import only libraries and earlier stages, and the report and anydump
none of the stages that run JAX; the orchestrator (the run, the worker and the entry points)
sits on top.
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
    "harness.lifecycle",  # the run lifecycle of the study, the search and analyze (issue 26)
    "harness.forked",
    "harness.records",
    "harness.summary",
    "harness.summary_memory",  # the memory section and its migration (issue 28)
    "harness.summary_findings",  # the findings section and its migration (issue 25)
    "harness.summary_noise",  # what a run can resolve: the A/A floor, the spread (issues 24, 38)
    "harness.summary_numerics",  # the per-leaf numerics records and findings (issue 41)
    "harness.numerics_effect",  # kept outputs, distances and the compiler-effect estimate
    "harness.fmt",  # number formatting, shared by the rules' sentences and the report
    "harness.summary_processes",  # the records of a study across processes (issue 31)
    "harness.summary_comm",  # the comm section, apart for summary.py's size
    "harness.summary_v1",  # the migrations of versions 1 and 2
    "harness.summary_doc",  # results/README.md's generated key tables
    "harness.runfolder",  # every path of a run folder (issue 26)
    "harness.run_records",  # the records of the run folder's other files (issue 26)
    "harness.ladder",
    "harness.stats",
    "harness.precision",
    "harness.cli",
    "harness.commands",  # the commands printed for a user to paste (issue 42)
    "harness.textsafety",
    "harness.terminal",
    "harness.userfiles",
    "harness.ownership",
    "harness.machine_state",
    "harness.summary_probes",
    "harness.summary_rounds",
    "harness.summary_v3",
    "harness.resolution",
    "harness.config",
    "harness.hlo",
    "harness.profile",
    "harness.match",
    "harness.inductor",
    # A frontend's modes and traits, and the registry (issue 30): what the config, the
    # analysis and the report read about a framework, with no JAX. The built-in frontends
    # below them are a stage.
    "harness.frontends.modes",
    "harness.frontends.registry",
)
STAGES = (
    "harness.variants",
    "harness.capture",
    "harness.timing",
    "harness.analyze",
    # The built-in frontends (jax, torch): each delegates to the capture, the timing and the
    # analysis of its framework; the harness reaches them through the registry alone.
    "harness.frontends",
    "harness.report",
    # Any program's dump and profile (python -m harness.analyze): a product over the study's
    # analysis and report, which share their ranking and tables with it and never import it.
    "harness.anydump",
)
RUNS_JAX = (
    "harness.variants",
    "harness.capture",
    "harness.timing",
    "harness.frontends.jax",
    "harness.frontends.torch",
)
# Packages that only read files: they import no stage that runs JAX.
READS_ONLY = ("harness.report", "harness.anydump")
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


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


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
            elif _within(src, READS_ONLY) and _within(dst, RUNS_JAX):
                out.append(f"{src} only reads files but imports {dst}, a stage that runs JAX")
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
        "harness.report.plots only reads files but imports harness.capture.variant, a stage "
        "that runs JAX" in bad
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


# The modules of the splits of issue 30, each with the layer it must sit in.
SPLIT_MODULES = {
    "harness.hlo.instruction": ("lib", 0),
    "harness.hlo.parser": ("lib", 0),
    "harness.hlo.clusters": ("lib", 0),
    "harness.hlo.after_index": ("lib", 0),
    "harness.hlo.reverse_map": ("lib", 0),
    "harness.config.experiment": ("lib", 0),
    "harness.config.validate": ("lib", 0),
    "harness.config.callables": ("lib", 0),
    "harness.config.schema": ("lib", 0),
    "harness.analyze.program": ("stage", STAGES.index("harness.analyze") + 1),
    "harness.analyze.sources": ("stage", STAGES.index("harness.analyze") + 1),
    "harness.analyze.module_analysis": ("stage", STAGES.index("harness.analyze") + 1),
    "harness.report.cluster_tables": ("stage", STAGES.index("harness.report") + 1),
    "harness.anydump": ("stage", STAGES.index("harness.anydump") + 1),
    "harness.anydump.dump": ("stage", STAGES.index("harness.anydump") + 1),
    "harness.anydump.analysis": ("stage", STAGES.index("harness.anydump") + 1),
    "harness.anydump.report": ("stage", STAGES.index("harness.anydump") + 1),
    "harness.anydump.main": ("stage", STAGES.index("harness.anydump") + 1),
}


def test_the_split_modules_exist_in_their_layers() -> None:
    assert set(SPLIT_MODULES) <= set(modules())
    assert {name: layer(name) for name in SPLIT_MODULES} == SPLIT_MODULES


def test_the_study_never_imports_the_any_dump_analyzer() -> None:
    """analyze/ and report/ hold the study's product: the any-dump analyzer reads them, never
    the other way round (the thin `python -m harness.analyze` entry point aside)."""
    g = graph()
    study = [n for n in g if _within(n, ("harness.analyze", "harness.report"))]
    assert study
    users = {
        (src, dst)
        for src in study
        for dst in g[src]
        if _within(dst, ("harness.anydump",)) and layer(src)[0] != "top"
    }
    assert users == set()
    assert "harness.anydump.main" in g["harness.analyze.__main__"]


@pytest.mark.parametrize(
    ("src", "dst", "message"),
    [
        (
            "harness.analyze.module_analysis",
            "harness.anydump.analysis",
            "stage harness.analyze.module_analysis imports the later stage "
            "harness.anydump.analysis",
        ),
        (
            "harness.report.cluster_tables",
            "harness.anydump.report",
            "stage harness.report.cluster_tables imports the later stage harness.anydump.report",
        ),
        (
            "harness.anydump.dump",
            "harness.capture.variant",
            "harness.anydump.dump only reads files but imports harness.capture.variant, a stage "
            "that runs JAX",
        ),
        (
            "harness.hlo.reverse_map",
            "harness.analyze.program",
            "library harness.hlo.reverse_map imports the stage harness.analyze.program",
        ),
        (
            "harness.config.validate",
            "harness.anydump.main",
            "library harness.config.validate imports the stage harness.anydump.main",
        ),
    ],
    ids=["analyze_to_anydump", "report_to_anydump", "anydump_to_jax", "hlo_up", "config_up"],
)
def test_a_planted_upward_import_between_the_new_modules_fails(
    src: str, dst: str, message: str
) -> None:
    g = graph()
    assert message not in violations(g)
    g[src] = g[src] | {dst}
    assert message in violations(g)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("harness.hlo.instruction", "harness.hlo.parser"),
        ("harness.hlo.clusters", "harness.hlo.reverse_map"),
        ("harness.config.experiment", "harness.config.schema"),
        ("harness.analyze.program", "harness.analyze.module_analysis"),
    ],
)
def test_a_planted_import_back_into_a_split_makes_a_cycle(src: str, dst: str) -> None:
    g = graph()
    assert dst not in g[src]
    g[src] = g[src] | {dst}
    assert any(src in c and dst in c for c in cycles(g))


@pytest.mark.parametrize("entry", ["harness.report.__main__", "harness.analyze.__main__"])
def test_entry_points_inside_stage_packages_are_on_top(entry: str) -> None:
    assert layer(entry) == ("top", 99)


BUILTIN_FRONTENDS = ("harness.frontends.jax", "harness.frontends.torch")


def test_the_frontends_registry_is_a_library_and_the_builtins_a_stage() -> None:
    assert layer("harness.frontends.registry") == ("lib", 0)
    assert layer("harness.frontends.modes") == ("lib", 0)
    rank = STAGES.index("harness.frontends") + 1
    assert rank == STAGES.index("harness.analyze") + 2  # after the analysis they delegate to
    assert {layer(m) for m in BUILTIN_FRONTENDS} == {("stage", rank)}
    assert "harness.frontends.registry" in graph()["harness.config.experiment"]


def test_only_the_registry_names_the_builtin_frontends() -> None:
    """The harness asks the registry for a frontend by name: no module outside
    harness/frontends imports jax's or torch's (the registry loads them by name)."""
    g = graph()
    users = {
        (src, dst)
        for src, targets in g.items()
        for dst in targets
        if dst in BUILTIN_FRONTENDS and not _within(src, ("harness.frontends",))
    }
    assert users == set()
    assert all(dst not in g["harness.frontends.registry"] for dst in BUILTIN_FRONTENDS)


@pytest.mark.parametrize(
    ("src", "dst", "message"),
    [
        (
            "harness.frontends.registry",
            "harness.frontends.jax",
            "library harness.frontends.registry imports the stage harness.frontends.jax",
        ),
        (
            "harness.frontends.modes",
            "harness.capture.variant",
            "library harness.frontends.modes imports the stage harness.capture.variant",
        ),
        (
            "harness.frontends.torch",
            "harness.report.data",
            "stage harness.frontends.torch imports the later stage harness.report.data",
        ),
        (
            "harness.analyze.sections",
            "harness.frontends.jax",
            "stage harness.analyze.sections imports the later stage harness.frontends.jax",
        ),
        (
            "harness.report.plots",
            "harness.frontends.torch",
            "harness.report.plots only reads files but imports harness.frontends.torch, a stage "
            "that runs JAX",
        ),
    ],
    ids=["registry_up", "modes_up", "frontend_to_report", "analyze_to_frontend", "report_to_torch"],
)
def test_a_planted_import_around_the_frontends_fails(src: str, dst: str, message: str) -> None:
    g = graph()
    assert message not in violations(g)
    g[src] = g[src] | {dst}
    assert message in violations(g)
