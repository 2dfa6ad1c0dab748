"""One reader: every file the harness reads that it did not write in the same process goes
through harness.common.userfiles (a regular file only, never blocking, bounded per kind, no link out
of its tree, archives bounded by what they inflate to). This walks harness/'s source and fails on
any other `open(`, `read_text`, `read_bytes`, `json.load(s)`, `np.load`, or use of `gzip`,
`zipfile`, `yaml` or `pickle`; a planted bypass shows that it can fail."""

from __future__ import annotations

import ast
import os
import shutil
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
    ("harness/program/hosts.py", "available_memory"): "the kernel's /proc/meminfo",
    ("harness/capture/hostmem.py", "usage"): "the kernel's /proc/self/status",
    ("harness/capture/hostmem.py", "_number"): "the kernel's cgroup files",
    ("harness/capture/hostmem.py", "cgroup_memory"): "the kernel's /proc/self/cgroup",
    ("harness/capture/hostmem.py", "_reclaimable"): "the kernel's cgroup memory.stat",
    ("harness/study/workerproc.py", "process_state"): "the kernel's /proc/<pid>/stat of its worker",
    (
        "harness/study/containment.py",
        "_environ",
    ): "the kernel's /proc/<pid>/environ: which processes carry a worker's marker",
    (
        "harness/study/worker.py",
        "process_started",
    ): "the kernel's /proc/self/stat and /proc/uptime: when the worker process started",
    (
        "harness/capture/xla_names.py",
        "known",
    ): "the installed jaxlib's own shared library, mapped read-only to find XLA's option names "
    "after XLA refused one; never a file a user or a run put there",
    # JSON parsed from what no file holds: a pipe, a key-value store, text built in memory.
    ("harness/store/records.py", "loads"): "the typed JSON load itself, over bytes the one "
    "reader returned: bounded depth, no NaN, no number too large",
    ("harness/common/forked.py", "_join"): "a forked child's result on its pipe",
    ("harness/capture/distributed.py", "next_job"): "jax.distributed's key-value store",
    ("harness/capture/distributed.py", "agree"): "jax.distributed's key-value store",
    ("harness/study/worker.py", "wait"): "the supervisor's job on the worker's stdin",
    ("harness/study/worker.py", "main"): "the supervisor's jobs on the worker's stdin",
    ("harness/study/workerproc.py", "_event"): "the worker's events on its private pipe",
    ("harness/profile/events.py", "events_to_json"): "a round trip of records built in memory",
    ("harness/hlo/instruction.py", "unquote"): "a JSON attribute inside IR text the "
    "one reader returned",
    ("harness/hlo/instruction.py", "parse_json_config"): "a JSON attribute inside IR text the one "
    "reader returned",
    (
        "harness/frontends/torch/inductor/trace_log.py",
        "read_trace_records",
    ): "a record's JSON inside a TORCH_TRACE log the one reader returned",
    (
        "harness/frontends/torch/inductor/trace_log.py",
        "_json_or_none",
    ): "a payload inside a TORCH_TRACE log the one reader returned",
    (
        "harness/frontends/torch/inductor/artifacts.py",
        "parse_stack_traces",
    ): "an artifact's JSON inside a TORCH_TRACE log the one reader returned",
    (
        "harness/frontends/torch/inductor/artifacts.py",
        "graph_from_frame",
    ): "an artifact's JSON inside a TORCH_TRACE log the one reader returned",
    # Writers and parsers of text already read.
    ("harness/records/run_files.py", "write"): "gzip.compress of the timeline it writes",
    ("harness/store/io.py", "gzip_in_place"): "gzip.compress of the dumps and IR it keeps "
    "compressed, read back through the one reader",
    ("harness/config/load.py", "safe_yaml"): "YAML's safe loader over a config's text the one "
    "reader returned, its size and depth checked first",
}

# Modules that read files, or unpack what a file holds: any use outside the reader is a bypass.
READER_MODULES = (
    "gzip",
    "zipfile",
    "yaml",
    "pickle",
    "shelve",
    "marshal",
    "tarfile",
    "bz2",
    "lzma",
)

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
        if func.attr in ("load", "loads") and owner == "json":
            return f"json.{func.attr}("
        if func.attr in ("load", "fromfile", "loadtxt", "genfromtxt", "memmap") and owner in (
            "np",
            "numpy",
        ):
            return f"{owner}.{func.attr}("
        if owner in READER_MODULES:
            return f"{owner}.{func.attr}("
        root = _root_name(func)
        if root in READER_MODULES:  # yaml.constructor.X(...), np.lib.format.read_array(...)
            return f"{root}.…{func.attr}("
        if root in ("np", "numpy") and func.attr in ("read_array", "open_memmap"):
            return f"{root}.…{func.attr}("
    return None


def _root_name(node: ast.expr) -> str:
    """The name an attribute chain starts from (`a` of `a.b.c`); "" for any other start."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _imports(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """`from gzip import open`-style imports of a reader module's names: each would make a
    bypass that no call's owner names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in READER_MODULES:
            found.append((node, f"from {node.module} import"))
        if isinstance(node, ast.ImportFrom) and node.module in ("numpy", "json"):
            for alias in node.names:
                if alias.name in ("load", "loads", "fromfile", "loadtxt", "genfromtxt", "memmap"):
                    found.append((node, f"from {node.module} import {alias.name}"))
    return found


def bypasses(source: str, rel: str) -> list[str]:
    """Every read in `source` (module `rel`) that bypasses the one reader and is not allowed."""
    tree = ast.parse(source, filename=rel)
    owner = _enclosing(tree)
    found = []
    calls = [(n, _bypass(n)) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for node, how in [*calls, *_imports(tree)]:
        if how is None:
            continue
        where = owner.get(node, "<module>")
        if rel == "harness/common/userfiles.py" or (rel, where) in ALLOWED:
            continue
        found.append(f"{rel}:{node.lineno} {where}: {how}")  # type: ignore[attr-defined]
    return sorted(found, key=lambda f: int(f.split(":")[1].split()[0]))


def harness_bypasses(root: Path = REPO) -> list[str]:
    """The bypasses of the one reader in `root`/harness (the checkout's own by default)."""
    found = []
    for path in sorted((root / "harness").rglob("*.py")):
        rel = str(path.relative_to(root))
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
        "json.loads(f.read())",
        "os.open(p, 0)",
        "np.load(p)",
        "numpy.load(p, allow_pickle=True)",
        "gzip.open(p)",
        "gzip.decompress(p)",
        "zipfile.ZipFile(p)",
        "yaml.safe_load(p)",
        "pickle.loads(p)",
        "np.lib.format.read_array(f)",
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


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import numpy as np\n\n\ndef arrays(p):\n    return np.load(p)\n", "5 arrays: np.load("),
        (
            "import gzip\n\n\ndef inflate(p):\n    return gzip.open(p).read()\n",
            "5 inflate: gzip.open(",
        ),
        ("from gzip import open as gz\n", "1 <module>: from gzip import"),
        ("from numpy import load\n", "1 <module>: from numpy import load"),
    ],
    ids=["np.load", "gzip.open", "from-gzip", "from-numpy"],
)
def test_a_new_module_planting_an_archive_read_is_caught(source: str, found: str) -> None:
    """A module the allowlist has never heard of (harness/report/new_module.py) that reads an
    archive its own way fails the walk, as an `open(` does."""
    rel = "harness/report/new_module.py"
    assert bypasses(source, rel) == [f"{rel}:{found}"]


def test_a_planted_np_load_in_a_real_file_fails_the_walk(tmp_path: Path) -> None:
    """The walk over harness/ fails once a real module of it holds an `np.load`: planted in a
    copy, never in the checkout, whose other tests walk it at the same time."""
    shutil.copytree(HARNESS, tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    planted = tmp_path / "harness" / "report" / "_planted_np_load.py"
    planted.write_text("import numpy as np\n\n\ndef arrays(p):\n    return np.load(p)\n")
    assert harness_bypasses(tmp_path) == ["harness/report/_planted_np_load.py:5 arrays: np.load("]


# --- archives: bounded by what they inflate to --------------------------------------------------


def _npz(path: Path, **arrays: object) -> Path:
    import numpy as np

    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]
    return path


def _bomb_npz(path: Path) -> Path:
    """An archive of a few kB whose one member inflates to 64 MiB of zeros."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("v0.npy", "w") as f:
        np.lib.format.write_array(f, np.zeros(8 << 20, np.float64))
    return path


def _lying_header(path: Path) -> Path:
    """A member whose .npy header states 10^12 values but holds eight bytes of them."""
    import zipfile

    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    body = b"\x93NUMPY\x01\x00" + len(header.ljust(118) + "\n").to_bytes(2, "little")
    body += (header.ljust(118) + "\n").encode() + bytes(8)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("v0.npy", body)
    return path


def _pickled(path: Path) -> Path:
    import numpy as np

    np.savez(path, v0=np.array([{"a": 1}], dtype=object))
    return path


NPZ_DOORS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty": (lambda p: (p.write_bytes(b""), p)[1], "not a NumPy archive"),
    "truncated": (
        lambda p: (p.write_bytes(_npz(p, v0=[1.0, 2.0]).read_bytes()[:100]), p)[1],
        "not a NumPy archive",
    ),
    "bomb": (_bomb_npz, "would inflate to more than"),
    "lying_header": (_lying_header, "header states 1000000000000 values"),
    "pickle": (_pickled, "never unpickled"),
    "wrong_shape": (lambda p: _npz(p, v0=[1.0, 2.0, 3.0]), "its record says (2,)"),
    "missing": (lambda p: _npz(p, r0=[1.0, 2.0]), "holds no array 'v0'"),
}


@pytest.mark.parametrize("door", list(NPZ_DOORS))
def test_an_npz_is_refused_in_one_line_before_it_inflates(tmp_path: Path, door: str) -> None:
    make, words = NPZ_DOORS[door]
    path = make(tmp_path / "outputs.npz")
    with pytest.raises(userfiles.Unreadable) as refused:
        userfiles.read_npz(path, inflated=16 << 20, within=tmp_path, shapes={"v0": (2,)})
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_good_npz_is_read_with_its_shapes(tmp_path: Path) -> None:
    import numpy as np

    path = _npz(tmp_path / "o.npz", v0=np.arange(6.0).reshape(2, 3), i0=np.arange(2))
    got = userfiles.read_npz(path, shapes={"v0": (2, 3), "i0": (2,)})
    assert np.array_equal(got["v0"], np.arange(6.0).reshape(2, 3))  # type: ignore[arg-type]


def test_a_gzip_bomb_stops_at_its_bound(tmp_path: Path) -> None:
    import gzip

    (tmp_path / "t.json.gz").write_bytes(gzip.compress(bytes(64 << 20)))
    with pytest.raises(userfiles.Unreadable, match="inflates to more than 1048576 bytes"):
        userfiles.read_gzip(tmp_path / "t.json.gz", inflated=1 << 20)
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"{}" * 5000)[:30])
    with pytest.raises(userfiles.Unreadable, match=r"cut short|not a readable gzip"):
        userfiles.read_gzip(tmp_path / "cut.gz")
    (tmp_path / "ok.gz").write_bytes(gzip.compress(b"{}"))
    assert userfiles.read_gzip(tmp_path / "ok.gz") == b"{}"
