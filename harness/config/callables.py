"""A program study's function and init, checked without importing them: each names a
callable the capture worker can import (`module:function` or `path/to/file.py:function`),
read with `ast` from the file it is found in, and a relative file path is made absolute.

The supervisor never imports the user's code, nor JAX: the worker does, in the repo root.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
import typing

from harness.common import userfiles
from harness.config.experiment import ConfigError, Experiment, Program
from harness.store.records import shown

# The folders the capture worker imports from: the repo root (its working folder and
# PYTHONPATH), the caller's PYTHONPATH and the installed packages. The caller's current folder
# is not among them unless it is the repo root, so a module found only there is refused.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A literal on the right of `name = ...` can never be called.
_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)


def split_callable(spec: str) -> tuple[str, str, bool]:
    """Returns (module or file, function name, whether it names a file) of `module:function`
    or `path/to/file.py:function`; raises ValueError for anything else."""
    where, sep, name = spec.rpartition(":")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    ok_module = is_file or all(part.isidentifier() for part in where.split("."))
    if not sep or not where or not name.isidentifier() or not ok_module:
        raise ValueError(
            f"{shown(spec)} is not module:function or path/to/file.py:function "
            "(e.g. examples.mlp:apply)"
        )
    return where, name, is_file


def import_roots() -> list[str]:
    """Returns the folders a `module:function` is looked up in: those the capture worker has."""
    cwd = os.getcwd()
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = [REPO_ROOT, *extra]
    for entry in sys.path:
        folder = os.path.abspath(entry or cwd)
        if (entry in ("", ".") or folder == cwd) and folder != REPO_ROOT:
            continue  # the caller's own folder: the worker runs in the repo root
        roots.append(folder)
    return list(dict.fromkeys(roots))


def module_file(module: str) -> str | None:
    """Returns the source file of a dotted module name under import_roots(), without importing
    anything (the supervisor never imports the user's code, nor JAX); None when absent."""
    parts = module.split(".")
    for root in import_roots():
        base = os.path.join(root, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _top_level(tree: ast.Module) -> typing.Iterator[ast.stmt]:
    """Yields a module's top-level statements, those inside top-level if/try blocks too."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [node.finalbody, *(h.body for h in node.handlers)]
            for block in reversed(blocks):
                stack.extend(reversed(block))


def definition_problem(path: str, name: str) -> str | None:
    """Returns why the file at `path` cannot provide a callable `name` at its top level, or None.

    Read with `ast`, not imported: a def, class, import or non-literal assignment of `name`
    passes (the worker imports it and checks that it is callable); a literal (`name = 3`) or
    no binding at all does not. A star import or a module `__getattr__` passes unchecked.
    """
    try:
        tree = ast.parse(userfiles.read_text(path, userfiles.PYTHON), filename=path)
    except userfiles.Unreadable as e:
        return f"cannot read {path}: {e}"
    except SyntaxError as e:
        return f"{path} does not parse: {e.msg} at line {e.lineno}"
    for node in _top_level(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in (name, "__getattr__"):
                return None
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name.split(".")[0]) == name:
                    return None
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if isinstance(node.value, _LITERALS):
                    kind = type(node.value).__name__.lower()
                    return f"`{name}` is a {kind} value at line {node.lineno}, not a function"
                return None
    return f"defines no top-level `{name}` ({path})"


def keywords_of(spec: str) -> tuple[frozenset[str], bool] | None:
    """Returns the keyword arguments the function `spec` names and whether it takes any
    (`**kwargs`), read with `ast` from its top-level `def`; None when that cannot be read (a
    class, an import, an assignment, a file that is not there: validate_callable says why)."""
    try:
        where, name, is_file = split_callable(spec)
        path = where if is_file else module_file(where)
        if path is None:
            return None
        tree = ast.parse(userfiles.read_text(path, userfiles.PYTHON), filename=path)
    except (ValueError, SyntaxError, userfiles.Unreadable):
        return None
    found = None
    for node in _top_level(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node  # the last binding is the one an import sees
        elif isinstance(node, ast.ClassDef | ast.Assign | ast.Import | ast.ImportFrom):
            found = None if _binds(node, name) else found
    if found is None:
        return None
    a = found.args
    return frozenset(x.arg for x in (*a.args, *a.kwonlyargs)), a.kwarg is not None


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.Import | ast.ImportFrom):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return False


def validate_callable(source: str, key: str, spec: str) -> None:
    """Checks that `spec` names a callable the capture worker can import, without importing it."""
    try:
        where, name, is_file = split_callable(spec)
    except ValueError as e:
        raise ConfigError(source, key, str(e)) from None
    if is_file:
        if not os.path.isfile(where):
            raise ConfigError(source, key, f"file {where} not found")
        path = where
    else:
        found = module_file(where)
        if found is None:
            raise ConfigError(
                source,
                key,
                f"module {where!r} not found in the repo root, PYTHONPATH or the installed "
                f"packages (where the capture worker imports from); add its folder to "
                f"PYTHONPATH, or name the file: path/to/{where.split('.')[-1]}.py:{name}",
            )
        path = found
    problem = definition_problem(path, name)
    if problem is not None:
        raise ConfigError(source, key, f"{where}: {problem}")


def resolve_program(e: Experiment) -> Experiment:
    """Returns `e` with a program named by a relative file path made absolute (from the
    current folder), so the worker, which runs in the repo root, finds the same file."""

    def absolute(spec: str) -> str:
        try:
            where, name, is_file = split_callable(spec)
        except ValueError:
            return spec  # validation says what is wrong
        return f"{os.path.abspath(where)}:{name}" if is_file else spec

    def fixed(p: Program) -> Program:
        return dataclasses.replace(p, function=absolute(p.function), init=absolute(p.init))

    if not e.program.enabled:
        return e
    return dataclasses.replace(
        e,
        program=fixed(e.program),
        variants=tuple(dataclasses.replace(v, program=fixed(v.program)) for v in e.variants),
    )
