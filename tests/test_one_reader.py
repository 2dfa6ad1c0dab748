"""One reader: every file the harness reads that it did not write in the same process goes
through harness.common.userfiles (a regular file only, never blocking, bounded per kind, no link out
of its tree). This walks harness/'s source and fails on any other `open(`, `read_text`,
`read_bytes` or `json.load`; a planted bypass shows that it can fail."""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO

from harness.common import userfiles

HARNESS = REPO / "harness"

# (module, function) pairs that may read a file themselves, and why. Nothing else may.
ALLOWED: dict[tuple[str, str], str] = {
    ("harness/common/userfiles.py", "_open"): "the one reader itself",
    ("harness/store/io.py", "_replacing"): "fsyncs the temporary file it has just written",
    ("harness/store/io.py", "run_lock"): "opens the run's lock to flock it; never reads it",
    (
        "harness/capture/turn.py",
        "_open",
    ): "opens the session's device lock files (its private folder, no link followed) to flock "
    "them; never reads them",
    (
        "harness/store/ownership.py",
        "digest",
    ): "hashes a file lstat found regular, without following a link, "
    "in 1 MiB blocks (opened non-blocking)",
    ("harness/timing/machine.py", "_cpu_ticks"): "the kernel's /proc/stat",
    ("harness/capture/hostmem.py", "usage"): "the kernel's /proc/self/status",
    ("harness/capture/hostmem.py", "_number"): "the kernel's cgroup files",
    ("harness/capture/hostmem.py", "cgroup_memory"): "the kernel's /proc/self/cgroup",
    ("harness/capture/hostmem.py", "_reclaimable"): "the kernel's cgroup memory.stat",
    ("harness/study/workerproc.py", "process_state"): "the kernel's /proc/<pid>/stat of its worker",
    (
        "harness/study/worker.py",
        "process_started",
    ): "the kernel's /proc/self/stat and /proc/uptime: when the worker process started",
    (
        "harness/capture/xla_names.py",
        "known",
    ): "the installed jaxlib's own shared library, mapped read-only to find XLA's option names "
    "after XLA refused one; never a file a user or a run put there",
}

READ_ATTRS = ("read_text", "read_bytes")


def _enclosing(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node's innermost enclosing function name ("<module>" at the top)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            )
            owner[child] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return owner


def _bypass(call: ast.Call) -> str | None:
    """What the call reads a file with, when it is not harness.common.userfiles; else None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        return "open("
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        if func.attr == "open" and owner not in ("userfiles",):
            return f"{owner or '<expr>'}.open("
        if func.attr == "from_file":  # jax.profiler.ProfileData.from_file reads a path
            return ".from_file("
        if func.attr in READ_ATTRS and owner != "userfiles":
            return f".{func.attr}("
        if func.attr == "load" and owner == "json":
            return "json.load("
    return None


def bypasses(source: str, rel: str) -> list[str]:
    """Every read in `source` (module `rel`) that bypasses the one reader and is not allowed."""
    tree = ast.parse(source, filename=rel)
    owner = _enclosing(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        how = _bypass(node)
        if how is None:
            continue
        where = owner.get(node, "<module>")
        if rel == "harness/common/userfiles.py" or (rel, where) in ALLOWED:
            continue
        found.append(f"{rel}:{node.lineno} {where}: {how}")
    return found


def harness_bypasses() -> list[str]:
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        found += bypasses(userfiles.read_text(path, userfiles.PYTHON), rel)
    return found


def test_every_read_in_the_harness_goes_through_the_one_reader() -> None:
    assert harness_bypasses() == []


@pytest.mark.parametrize(
    "planted",
    [
        "Path(p).read_text()",
        "p.read_bytes()",
        "open(p)",
        "p.open('rb')",
        "json.load(f)",
        "os.open(p, 0)",
    ],
)
def test_a_planted_bypass_is_caught(planted: str) -> None:
    source = (
        f"import json, os\nfrom pathlib import Path\n\n\ndef sneaky(p, f):\n    return {planted}\n"
    )
    assert bypasses(source, "harness/report/sneaky.py") == [
        f"harness/report/sneaky.py:6 sneaky: {_bypass(ast.parse(planted).body[0].value)}"  # type: ignore[attr-defined]
    ]
    assert (
        bypasses("from harness import userfiles\nuserfiles.read_text('x')\n", "harness/a.py") == []
    )


def test_every_allowed_exception_still_exists() -> None:
    """An allowlist entry whose function is gone would silently allow a new one of that name."""
    for rel, function in ALLOWED:
        tree = ast.parse((REPO / rel).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert function in names, (rel, function)


# --- what the reader refuses, for every kind ---------------------------------------------------

KINDS = [
    userfiles.CONFIG,
    userfiles.CEILINGS,
    userfiles.INDEX_ROW,
    userfiles.MANIFEST,
    userfiles.SUMMARY,
    userfiles.RECORD,
    userfiles.IR_TEXT,
    userfiles.DUMP,
    userfiles.PROFILE,
    userfiles.CACHE,
    userfiles.PYTHON,
]


# Each makes a file inside tmp/run, the tree the reader is pointed at.


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "run" / "f")
    return tmp / "run" / "f"


def _dev_zero(tmp: Path) -> Path:
    (tmp / "run" / "z").symlink_to("/dev/zero")
    return tmp / "run" / "z"


def _sparse(tmp: Path) -> Path:
    with (tmp / "run" / "s").open("wb") as f:  # a 6 GB hole: no disk, but st_size says 6 GB
        f.truncate(6 << 30)
    return tmp / "run" / "s"


def _link_out(tmp: Path) -> Path:
    (tmp / "elsewhere.json").write_text("{}")
    (tmp / "run" / "x").symlink_to(tmp / "elsewhere.json")
    return tmp / "run" / "x"


DOORS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (_fifo, "FIFO"),
    "dev_zero": (_dev_zero, "kernel file"),
    "sparse": (_sparse, "the bound for a"),
    "link_out": (_link_out, "link out of"),
}


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_refuses_every_door_in_one_line(
    tmp_path: Path, door: str, kind: userfiles.Kind
) -> None:
    make, words = DOORS[door]
    (tmp_path / "run").mkdir()
    path = make(tmp_path)
    result: list[BaseException] = []

    def read() -> None:
        try:
            userfiles.read_bytes(path, kind, within=tmp_path / "run")
        except BaseException as e:
            result.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the read blocked"
    assert isinstance(result[0], userfiles.Unreadable), result
    message = str(result[0])
    assert words in message and "\n" not in message
    if door == "sparse":
        assert f"{kind.bound} bytes, the bound for a {kind.name}" in message


def test_a_link_inside_its_tree_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").symlink_to("a.json")
    assert userfiles.read_bytes(tmp_path / "b.json", userfiles.RECORD, within=tmp_path) == b"{}"


def test_read_head_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    with pytest.raises(userfiles.Unreadable, match="FIFO"):
        userfiles.read_head(_fifo(tmp_path), 9)
    (tmp_path / "m.txt").write_text("HloModule x\n")
    assert userfiles.read_head(tmp_path / "m.txt", 9) == b"HloModule"
