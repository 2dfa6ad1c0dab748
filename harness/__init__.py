"""XLA study harness: config -> variants -> capture -> analyze (hlo, profile, match) -> report."""

import importlib.abc
import importlib.machinery
import sys
import time
from typing import NoReturn

# When the harness was first imported: a run's breakdown counts its start-up (interpreter,
# config, the first worker and the preflight) from here, so its parts add up to the wall time.
STARTED = time.perf_counter()

# Every `python -m harness.X` a README, a report or a saved run has named since the first
# release that no longer runs there, and where it went (tests/test_moved_commands.py reads
# the git history for them). A module that is gone is answered by the finder below; one that
# is still a library module calls `moved` under its own `if __name__ == "__main__":`.
KEYTABLES = "run python -m harness.records.keytables results/README.md"
MOVED = {
    "harness.summary": KEYTABLES,
    "harness.summary_doc": KEYTABLES,
    "harness.summary_processes": KEYTABLES,
    "harness.records.processes": KEYTABLES,
    "harness.report.compare": "run python -m harness.commands.compare (the same flags)",
    "harness.report.export": "run python -m harness.commands.export (the same flags)",
    "harness.analysis": "run python -m harness.reanalyze --run=RUN",
    "harness.worker": "the worker is harness.study.worker, started by python -m harness",
    "harness.capture.xla_options": (
        "XLA options are checked by python -m harness --config=... (its config and preflight)"
    ),
    "harness.commands": "run python -m harness.commands.<name>: "
    "analyze, compare, export, migrate, reanalyze, report or study",
}


def moved(name: str) -> NoReturn:
    """Says in one line where the command `python -m name` went, and exits 2 (a usage error)."""
    sys.stderr.write(f"error: python -m {name} has moved: {MOVED[name]}\n")
    sys.exit(2)


class _MovedLoader(importlib.abc.Loader):
    """`python -m` of a module that is gone runs `moved`; an import of it fails as before."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module: object) -> None:  # pragma: no cover - create_module raised
        raise ModuleNotFoundError(str(module))

    def get_code(self, fullname: str) -> object:  # what runpy runs for `python -m`
        return _moved_main.__code__


def _moved_main() -> None:
    """The code `python -m` runs for a moved module: runpy's globals hold its `__spec__`."""
    import harness

    harness.moved(__spec__.name)  # type: ignore[name-defined]


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        # Last on sys.meta_path: asked only when no file answered, so a module still there
        # (harness.records.processes) is imported and run as itself.
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader())


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
