"""Analyse the HLO of any program: `python -m harness.analyze --dump=DIR_OR_FILE --out=DIR`.

For each module in an XLA dump folder (or a single HLO text file) writes
`<out>/<module>/fusions.json` and `cost.json` and prints one table row per module.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from absl import app, flags

from harness.hlo.analysis import analyze_modules
from harness.hlo.parser import HloModule, ParseError, parse_file

_DUMP_NAME = re.compile(r"^(module_\d+\.[^.]+(?:\.[^.]+)*?)\.(.+)$")
_PASS_FILE = re.compile(r"\.\d{4}\.[^.]+\.after_")


@dataclass(frozen=True)
class ModuleFiles:
    """The files that describe one module: its optimized HLO and, if dumped, the input HLO."""

    key: str
    after: Path
    before: Path | None


@dataclass(frozen=True)
class ModuleResult:
    """What the CLI learned about one module (the summary analyze_modules returned)."""

    key: str
    out_dir: Path
    summary: dict[str, Any]


def _is_hlo(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(9) == b"HloModule"
    except OSError:
        return False


def find_modules(dump: Path) -> list[ModuleFiles]:
    """The modules under `dump`: per XLA module the after-optimizations file (falling back to
    before_optimizations), plus any other `HloModule` text file as its own module.

    Raises ValueError naming the path when it does not exist or holds no HLO module.
    """
    if not dump.exists():
        raise ValueError(f"{dump}: no such file or directory")
    if dump.is_file():
        if not _is_hlo(dump):
            raise ValueError(f"{dump}: not an HLO text module (no `HloModule` header)")
        return [ModuleFiles(dump.stem, dump, None)]
    groups: dict[str, dict[str, Path]] = {}
    loose: list[ModuleFiles] = []
    for path in sorted(p for p in dump.iterdir() if p.is_file()):
        if _PASS_FILE.search(path.name) or not _is_hlo(path):
            continue
        m = _DUMP_NAME.match(path.name)
        rest = m.group(2) if m else ""
        if m and rest.endswith("after_optimizations.txt"):
            groups.setdefault(m.group(1), {})["after"] = path
        elif m and rest == "before_optimizations.txt":
            groups.setdefault(m.group(1), {})["before"] = path
        elif not m:
            loose.append(ModuleFiles(path.stem, path, None))
    found = [
        ModuleFiles(key, files.get("after", files.get("before")), files.get("before"))
        for key, files in sorted(groups.items())
    ]
    found.extend(loose)
    if not found:
        raise ValueError(f"{dump}: no HLO modules found")
    return found


def attach_profile(results: list[ModuleResult], xplane: Path | None) -> list[ModuleResult]:
    """Extension point for matching profiled kernels (an `--xplane=FILE`) to clusters.

    Not implemented: returns `results` unchanged. A profile matcher should read the xplane,
    join kernel `hlo_op` stats to cluster names in `<out_dir>/fusions.json` and return
    results with the matched timings added.
    """
    del xplane
    return results


def analyze_dump(dump: Path, out: Path, module_re: str = "") -> list[ModuleResult]:
    """Analyse every (matching) module under `dump`, writing one folder per module in `out`."""
    pattern = re.compile(module_re) if module_re else None
    results: list[ModuleResult] = []
    for files in find_modules(dump):
        if pattern is not None and not pattern.search(files.key):
            continue
        after: HloModule = parse_file(files.after)
        before = [parse_file(files.before)] if files.before and files.before != files.after else []
        out_dir = out / files.key
        results.append(ModuleResult(files.key, out_dir, analyze_modules([after], before, out_dir)))
    if not results:
        raise ValueError(f"{dump}: no module matches --module={module_re!r}")
    return results


def format_table(results: list[ModuleResult]) -> str:
    """A short text table: module, cluster count, fusions, library calls with epilogues."""
    rows = [f"{'module':48} {'clusters':>8} {'fusions':>7}  library calls"]
    for r in results:
        calls = ", ".join(
            c["target"] + (f" ({c['epilogue']})" if c["epilogue"] else "")
            for c in r.summary["library_calls"]
        )
        rows.append(
            f"{r.key[:48]:48} {r.summary['cluster_count']:>8} {r.summary['fusion_count']:>7}  {calls or '-'}"
        )
    return "\n".join(rows)


FLAGS = flags.FLAGS
flags.DEFINE_string("dump", None, "XLA dump folder or one HLO text file.")
flags.DEFINE_string("out", None, "Output folder; one subfolder per module.")
flags.DEFINE_string("module", "", "Only modules whose key matches this regex.")


def run(dump: Path, out: Path, module_re: str) -> int:
    """CLI body: analyse, print the table; bad input gives one stderr line and status 2."""
    try:
        results = attach_profile(analyze_dump(dump, out, module_re), None)
    except (ValueError, OSError, re.error) as e:
        msg = str(e) if isinstance(e, ParseError) or str(dump) in str(e) else f"{dump}: {e}"
        print(msg.splitlines()[0] if msg else f"{dump}: failed", file=sys.stderr)
        return 2
    print(format_table(results))
    return 0


def main(argv: list[str]) -> int:
    del argv
    if not FLAGS.dump or not FLAGS.out:
        print("--dump and --out are required", file=sys.stderr)
        return 2
    return run(Path(FLAGS.dump), Path(FLAGS.out), FLAGS.module)


if __name__ == "__main__":
    app.run(main)
