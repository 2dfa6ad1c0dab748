"""The package layout is the architecture: imports flow one way, and nothing imports in a cycle.

Every `import` in harness/ counts, function-level ones included. The rules are over folders,
bottom first (LAYERS): a module imports its own folder and the folders below it, never one
above. The pure libraries (common, store, the records) sit at the bottom; the stages
(config -> variants -> capture -> timing -> findings -> analyze -> report) above them; the
frontends above the stages they delegate to; the study, the search and the commands on top.
An entry point (a package's `__main__`, the kept `python -m harness.migrate` and
`harness.reanalyze`) sits above everything.
"""

from __future__ import annotations

import ast
import collections
import functools
from pathlib import Path

import pytest
from conftest import REPO

HARNESS = REPO / "harness"

# Bottom first. Folders in one tuple share a rank and may import each other (the cycle
# check still holds between their modules).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness",),  # the package's own __init__: a docstring
    ("harness.common",),  # stats, fmt, precision, text safety, the user's files, forked maps
    ("harness.store",),  # typed JSON, atomic io, the run folder's paths, ownership
    # The frontends' contract, data only: modes, traits, the registry, roles. Below the
    # records, whose oldest migration derives a variant's roles from its mode.
    (
        "harness.frontends.__init__",
        "harness.frontends.contract",
        "harness.frontends.modes",
        "harness.frontends.registry",
        "harness.frontends.roles",
    ),
    ("harness.records",),  # every record of a run, and its migrations
    ("harness.config",),
    ("harness.saved",),  # a saved run read back: the one view the rules and the report read
    ("harness.hlo", "harness.profile"),  # the readers of XLA's text and of a profile
    ("harness.match",),
    # The program analysis of one dump and profile: clusters, steps, sources, roofline, the
    # ranking and the timeline. The study's analysis and `python -m harness.analyze` both call it.
    ("harness.program",),
    ("harness.variants",),
    ("harness.capture",),
    ("harness.timing",),
    ("harness.findings",),  # the rules: conclusions over the summary
    ("harness.analyze",),  # the study's analysis, which calls the rules
    ("harness.frontends.jax", "harness.frontends.torch"),  # each delegates to the stages
    ("harness.report",),
    # The program analysis written into a folder, with its report: what `python -m
    # harness.analyze` runs. Above the report, whose tables and figures it draws with.
    ("harness.program.report", "harness.program.standalone"),
    ("harness.study",),  # the supervisor, its workers, process groups and the lifecycle
    ("harness.search",),  # a search runs studies
    ("harness.commands",),  # one module per entry point, and the CLI plumbing
)
# The modules a user runs with `python -m`: above every layer.
ENTRY_POINTS = ("harness.__main__", "harness.migrate", "harness.reanalyze")
# Folders that run JAX (or torch): the report and the program analysis only read files and never
# import them.
RUNS_JAX = (
    "harness.variants",
    "harness.capture",
    "harness.timing",
    "harness.frontends.jax",
    "harness.frontends.torch",
)
READS_ONLY = ("harness.report", "harness.program")
# The report renders the findings the analysis made; it never makes them. So no report
# module imports the rules, the IR readers (the HLO parser, Inductor's artifacts) or the
# profile readers (the profile and its match).
REPORT_NEVER_IMPORTS = (
    "harness.findings",
    "harness.hlo",
    "harness.frontends.torch.inductor",
    "harness.profile",
    "harness.match",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    """True for the test of `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`), exactly."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The import statements inside an `if TYPE_CHECKING:` body (its `else:` runs, so it
    counts). Python never runs them: they name the records a signature is typed with, and
    `type_checking_names_are_annotations_only` checks that nothing else uses those names."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                skipped.update(
                    n for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)
                )
    return skipped


def type_checking_misuse(tree: ast.Module) -> list[str]:
    """The names imported under `if TYPE_CHECKING:` that the module uses outside an
    annotation (a call, a default, a base class, isinstance): each would be a runtime import
    the layer check did not see. Annotations are never evaluated, since each such module
    starts with `from __future__ import annotations` (also checked)."""
    skipped = type_checking_only(tree)
    names = {
        (a.asname or a.name).split(".")[0]
        for node in skipped
        for a in node.names  # type: ignore[attr-defined]
    }
    if not names:
        return []
    out = []
    future = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    if not future:
        out.append("imports under TYPE_CHECKING without `from __future__ import annotations`")
    annotations: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            annotations.update(ast.walk(node.annotation))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            annotations.update(ast.walk(node.returns))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and node.id in names
            and node not in annotations
            and not isinstance(node.ctx, ast.Store)
        ):
            out.append(f"{node.id} (line {node.lineno}) is used outside an annotation")
    return out


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Returns the harness modules `path` imports anywhere in its body, but for those under
    `if TYPE_CHECKING:` (never run; `type_checking_misuse` keeps them annotation-only)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    skipped = type_checking_only(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
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


def folder_of(name: str) -> str:
    """The LAYERS entry a module belongs to: the longest folder prefix that names one."""
    if name == "harness.frontends":
        return "harness.frontends.__init__"
    best = ""
    for folders in LAYERS:
        for f in folders:
            if f == "harness":
                continue
            if _within(name, (f,)) and len(f) > len(best):
                best = f
    if best:
        return best
    if name == "harness":
        return "harness"
    raise AssertionError(f"{name} belongs to no folder of LAYERS: add its folder to test_layers.py")


def layer(name: str) -> int:
    """The module's rank: its folder's place in LAYERS; an entry point is above them all."""
    if name in ENTRY_POINTS or name.endswith(".__main__"):
        return len(LAYERS)
    folder = folder_of(name)
    return next(i for i, folders in enumerate(LAYERS) if folder in folders)


def violations(g: dict[str, set[str]]) -> list[str]:
    out = []
    for src, targets in sorted(g.items()):
        rank = layer(src)
        for dst in sorted(targets):
            if layer(dst) > rank:
                out.append(f"{src} imports {dst}, a folder above its own")
            elif _within(src, READS_ONLY) and _within(dst, RUNS_JAX):
                out.append(f"{src} only reads files but imports {dst}, a folder that runs JAX")
    return out


def reach(g: dict[str, set[str]], src: str) -> dict[str, str]:
    """Every module `src` imports, directly or through others (function-level imports count
    as everywhere), each with the module it was first reached from (breadth first, so the
    chain back to `src` is a shortest one)."""
    via: dict[str, str] = {}
    todo = collections.deque([src])
    while todo:
        here = todo.popleft()
        for dst in sorted(g.get(here, ())):
            if dst != src and dst not in via:
                via[dst] = here
                todo.append(dst)
    return via


def chain(via: dict[str, str], src: str, dst: str) -> list[str]:
    """The modules between `src` and `dst` on the path `reach` found."""
    out: list[str] = []
    while via[dst] != src:
        dst = via[dst]
        out.append(dst)
    return out[::-1]


def conclusions_in_the_report(g: dict[str, set[str]]) -> list[str]:
    """The report modules (entry points aside) that import a rule, an IR reader or a profile
    reader, directly or through any chain of imports (a record module that loads the HLO
    parser at import loads it into every report module that reads the record)."""
    out = []
    for src in sorted(g):
        if not src.startswith("harness.report") or layer(src) == len(LAYERS):
            continue
        via = reach(g, src)
        for dst in sorted(via):
            if _within(dst, REPORT_NEVER_IMPORTS):
                through = chain(via, src, dst)
                out.append(
                    f"the report {src} imports {dst}"
                    + (f" (through {' -> '.join(through)})" if through else "")
                )
    return out


def test_every_module_belongs_to_a_layer() -> None:
    for name in modules():
        layer(name)


def test_the_import_graph_is_acyclic() -> None:
    assert cycles(graph()) == []


def test_imports_flow_one_way() -> None:
    assert violations(graph()) == []


def test_the_top_level_holds_only_entry_points() -> None:
    """harness/ itself holds the package, `python -m harness` and the two commands a saved
    report names; everything else lives in a folder that says what it is."""
    loose = sorted(p.name for p in HARNESS.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "migrate.py", "reanalyze.py"]


def test_no_module_is_over_800_lines() -> None:
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert {n: k for n, k in long.items() if k > 800} == {}


def test_type_checking_imports_are_annotations_only() -> None:
    """An import the layer check skips (under `if TYPE_CHECKING:`) types signatures only."""
    found = {
        name: bad
        for name, path in modules().items()
        if (bad := type_checking_misuse(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_type_checking_skip_cannot_hide_a_runtime_import(tmp_path: Path) -> None:
    """The `else:` of `if TYPE_CHECKING:` and an import outside it count; a skipped name
    used at runtime, or annotations evaluated at import, are named."""
    src = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from harness.report.data import RunData\n"
        "else:\n"
        "    from harness.report import doc\n"
        "def f(x: RunData) -> RunData:\n"
        "    return x\n"
    )
    tree = ast.parse(src)
    assert type_checking_misuse(tree) == []
    skipped = type_checking_only(tree)
    assert [n.module for n in skipped] == ["harness.report.data"]  # type: ignore[attr-defined]
    runtime = src + "def g() -> object:\n    return RunData()\n"
    assert type_checking_misuse(ast.parse(runtime)) == [
        "RunData (line 10) is used outside an annotation"
    ]
    eager = src.replace("from __future__ import annotations\n", "")
    assert type_checking_misuse(ast.parse(eager)) == [
        "imports under TYPE_CHECKING without `from __future__ import annotations`"
    ]
    # The else-branch import is still an edge of the graph.
    path = tmp_path / "planted.py"
    path.write_text(src)
    assert imports_of(path, "harness.common.planted", set(modules())) == {"harness.report.doc"}


def test_the_checks_can_fail() -> None:
    """A planted cycle and a planted upward import are both caught."""
    g = graph()
    g["harness.hlo.parser"] = g["harness.hlo.parser"] | {"harness.hlo.clusters"}
    assert any("harness.hlo.parser" in c for c in cycles(g))
    g["harness.report.plots"] = g["harness.report.plots"] | {"harness.capture.variant"}
    g["harness.config.schema"] = g["harness.config.schema"] | {"harness.report.sections"}
    bad = violations(g)
    assert (
        "harness.report.plots only reads files but imports harness.capture.variant, a folder "
        "that runs JAX" in bad
    )
    assert "harness.config.schema imports harness.report.sections, a folder above its own" in bad


def test_the_report_imports_no_rule_no_ir_reader_and_no_profile_reader() -> None:
    assert conclusions_in_the_report(graph()) == []


def test_the_report_check_can_fail() -> None:
    """A report module planted with an import of the rules, the HLO parser or the profile
    is named; the records (the gaps' among them) stay allowed."""
    g = graph()
    g["harness.report.findings"] = g["harness.report.findings"] | {"harness.findings.timing"}
    g["harness.report.observations"] = g["harness.report.observations"] | {"harness.hlo.parser"}
    g["harness.report.sections"] = g["harness.report.sections"] | {"harness.profile.events"}
    found = conclusions_in_the_report(g)
    assert "the report harness.report.findings imports harness.findings.timing" in found
    assert "the report harness.report.observations imports harness.hlo.parser" in found
    assert "the report harness.report.sections imports harness.profile.events" in found
    assert "harness.records.gaps" in g["harness.report.gaps"]


def test_the_report_check_follows_imports_through_other_modules() -> None:
    """The record module the report reads a ranking through (harness.records.program; once
    harness.program.record, which loaded the HLO parser, cost model and reverse map into every
    report module): an import two steps away is named with the chain that makes it."""
    g = graph()
    assert "harness.records.program" in g["harness.report.ranking"]
    g["harness.records.program"] = g["harness.records.program"] | {"harness.hlo.reverse_map"}
    found = conclusions_in_the_report(g)
    assert (
        "the report harness.report.ranking imports harness.hlo.reverse_map "
        "(through harness.records.program)" in found
    )
    assert any(
        m.startswith("the report harness.report.markdown imports harness.hlo.") for m in found
    )


def test_the_study_and_the_command_call_one_program_analysis() -> None:
    """The study's ranking and `python -m harness.analyze` rank a module through the same wing,
    harness/program/; the study never imports the command's own top (its folder and report)."""
    g = graph()
    assert "harness.program.module_analysis" in g["harness.analyze.ranking"]
    assert "harness.program.standalone" in g["harness.commands.analyze"]
    study = [n for n in g if _within(n, ("harness.analyze", "harness.report"))]
    assert study
    users = {
        (src, dst)
        for src in study
        for dst in g[src]
        if _within(dst, ("harness.program.report", "harness.program.standalone"))
        and layer(src) < len(LAYERS)
    }
    assert users == set()
    assert "harness.commands.analyze" in g["harness.analyze.__main__"]


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("harness.program.module_analysis", "harness.analyze.ranking"),
        ("harness.program.dump", "harness.program.report"),
        ("harness.report.cluster_tables", "harness.program.report"),
        ("harness.hlo.reverse_map", "harness.program.record"),
        ("harness.config.validate", "harness.commands.analyze"),
        ("harness.records.summary", "harness.config.experiment"),
        ("harness.common.stats", "harness.store.io"),
        ("harness.findings.memory", "harness.analyze.memory"),
        ("harness.study.lifecycle", "harness.commands.cli"),
        ("harness.frontends.registry", "harness.frontends.jax"),
        ("harness.frontends.modes", "harness.capture.variant"),
        ("harness.frontends.torch", "harness.report.sections"),
        ("harness.analyze.sections", "harness.frontends.jax"),
    ],
)
def test_a_planted_upward_import_fails(src: str, dst: str) -> None:
    g = graph()
    message = f"{src} imports {dst}, a folder above its own"
    assert message not in violations(g)
    g[src] = g[src] | {dst}
    assert message in violations(g)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("harness.program.report", "harness.capture.variant"),
        ("harness.report.plots", "harness.frontends.torch"),
    ],
)
def test_a_planted_import_of_jax_into_a_reader_fails(src: str, dst: str) -> None:
    g = graph()
    message = f"{src} only reads files but imports {dst}, a folder that runs JAX"
    assert message not in violations(g)
    g[src] = g[src] | {dst}
    assert message in violations(g)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("harness.hlo.instruction", "harness.hlo.parser"),
        ("harness.hlo.clusters", "harness.hlo.reverse_map"),
        ("harness.config.experiment", "harness.config.schema"),
        ("harness.program.record", "harness.program.module_analysis"),
    ],
)
def test_a_planted_import_back_into_a_split_makes_a_cycle(src: str, dst: str) -> None:
    g = graph()
    assert dst not in g[src]
    g[src] = g[src] | {dst}
    assert any(src in c and dst in c for c in cycles(g))


@pytest.mark.parametrize(
    "entry", ["harness.report.__main__", "harness.analyze.__main__", "harness.migrate"]
)
def test_entry_points_are_on_top(entry: str) -> None:
    assert layer(entry) == len(LAYERS)


BUILTIN_FRONTENDS = ("harness.frontends.jax", "harness.frontends.torch")


def test_only_the_registry_reaches_the_builtin_frontends() -> None:
    """The harness asks the registry for a frontend by name: no module outside a frontend's
    own folder imports it (the registry loads them by name)."""
    g = graph()
    users = {
        (src, dst)
        for src, targets in g.items()
        for dst in targets
        if _within(dst, BUILTIN_FRONTENDS) and not _within(src, BUILTIN_FRONTENDS)
    }
    assert users == set()
    assert "harness.frontends.registry" in g["harness.config.experiment"]


def test_only_the_torch_frontend_names_torch() -> None:
    """PyTorch's code lives in harness/frontends/torch/: no module elsewhere imports torch
    or a module of that folder (the names of torch as data, a mode or a field, aside)."""
    g = graph()
    outside = {
        (src, dst)
        for src, targets in g.items()
        for dst in targets
        if _within(dst, ("harness.frontends.torch",))
        and not _within(src, ("harness.frontends.torch",))
    }
    assert outside == set()
    importers = set()
    for name, path in modules().items():
        if _within(name, ("harness.frontends.torch",)):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Import)
                and any(a.name.split(".")[0] == "torch" for a in node.names)
            ) or (
                isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch"
            ):
                importers.add(name)
    assert importers == set()


def test_paths_from_a_module_file_reach_the_repository() -> None:
    """A module that finds the repository from its own path counts its folders: a worker
    started from anywhere else finds no `harness` where nothing is installed (the H200)."""
    import importlib

    from harness.config import callables
    from harness.study import workerproc

    assert (workerproc.REPO / "pyproject.toml").is_file()
    assert (Path(callables.REPO_ROOT) / "pyproject.toml").is_file()
    assert importlib.import_module("harness.config.load").CONFIG_DIR == REPO / "configs"
    found = []
    for name, path in modules().items():
        for line in path.read_text().splitlines():
            if "__file__" in line and ("parents[" in line or "dirname(" in line):
                found.append(name)
    assert sorted(found) == [
        "harness.config.callables",
        "harness.config.load",
        "harness.study.runs",
        "harness.study.workerproc",
    ]


# Each built-in frontend's capture: JAX's is the capture stage (XLA's pipeline, which JAX
# feeds directly), PyTorch's is its own folder.
CAPTURE_OF = {
    "harness.frontends.jax": ("harness.frontends.jax", "harness.capture"),
    "harness.frontends.torch": ("harness.frontends.torch",),
}
# The frameworks a variant runs in. jaxlib's profile reader (harness.profile) reads files, as
# the supervisor's analysis does; it runs nothing.
FRAMEWORKS = ("jax", "flax", "torch")
TOY = REPO / "tests" / "toy_frontend.py"


def captures_reached(g: dict[str, set[str]]) -> list[str]:
    """Each built-in frontend's module that reaches another frontend's capture."""
    out = []
    for frontend in CAPTURE_OF:
        others = tuple(p for f, ps in CAPTURE_OF.items() if f != frontend for p in ps)
        for src in sorted(m for m in g if _within(m, (frontend,))):
            via = reach(g, src)
            out += [f"{src} imports {dst}" for dst in sorted(via) if _within(dst, others)]
    return out


@functools.cache
def frameworks_of(path: Path) -> frozenset[str]:
    """The frameworks (FRAMEWORKS) a file imports anywhere in its body, but for imports under
    TYPE_CHECKING and fallbacks (an `except ImportError:` body: harness.profile.events takes
    jax.profiler's ProfileData only where jaxlib does not hold it)."""
    tree = ast.parse(path.read_text())
    skipped = type_checking_only(tree)
    for handler in ast.walk(tree):
        if isinstance(handler, ast.ExceptHandler) and ast.unparse(handler.type or "") in (
            "ImportError",
            "ModuleNotFoundError",
        ):
            skipped.update(n for stmt in handler.body for n in ast.walk(stmt))
    found = set()
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return frozenset(found & set(FRAMEWORKS))


def frameworks_reached(g: dict[str, set[str]], path: Path, name: str) -> dict[str, set[str]]:
    """The frameworks that importing `path` loads, by the module (it, or a harness module
    it reaches) that imports each."""
    paths = modules()
    found = {name: frameworks_of(path)}
    for dst in reach({**g, name: imports_of(path, name, set(paths))}, name):
        found[dst] = frameworks_of(paths[dst])
    return {m: f for m, f in found.items() if f}


def test_the_contract_sits_below_every_stage_and_framework() -> None:
    """Context, Captured and analytic_flops are the contract's: the registry is typed with
    them, and the contract imports nothing of the harness, nor a framework, when it runs."""
    g = graph()
    assert g["harness.frontends.contract"] == set()
    assert frameworks_reached(g, modules()["harness.frontends.contract"], "contract") == {}
    typed_with = {
        n.module
        for n in type_checking_only(ast.parse(modules()["harness.frontends.registry"].read_text()))
        if isinstance(n, ast.ImportFrom)
    }
    assert "harness.frontends.contract" in typed_with
    assert not any(_within(m or "", ("harness.capture",)) for m in typed_with)


def test_no_frontend_imports_another_s_capture() -> None:
    """PyTorch's frontend reaches none of JAX's capture (its Context and Captured are the
    contract's), JAX's none of PyTorch's; a planted import is caught."""
    g = graph()
    assert captures_reached(g) == []
    g["harness.frontends.torch.capture"] |= {"harness.capture.variant"}
    assert "harness.frontends.torch.capture imports harness.capture.variant" in captures_reached(g)


def test_the_numpy_toy_frontend_imports_no_framework() -> None:
    """The plain NumPy frontend (tests/toy_frontend.py) needs the contract, not JAX: it
    imports no framework, directly or through the harness modules it reaches, function-level
    imports included. A planted import of JAX's expression is caught."""
    g = graph()
    assert frameworks_reached(g, TOY, "toy_frontend") == {}
    g["harness.variants.accuracy"] |= {"harness.variants.expression"}
    planted = frameworks_reached(g, TOY, "toy_frontend")
    assert list(planted) == ["harness.variants.expression"]
    assert "jax" in planted["harness.variants.expression"]
