"""Analyse the HLO of any program: `python -m harness.analyze --dump=DIR_OR_FILE --out=DIR`.

For each module in an XLA dump folder (or a single HLO text file) writes
`<out>/<module>/fusions.json` and `cost.json` and prints one table row per module.
With `--xplane=FILE_OR_PROFILE_DIR` it also attributes every device event of that profile to
a cluster of those modules and writes `<out>/kernels.json` (the whole profile is the window;
`--steps` says how many steps it holds unless the profile marks them).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from absl import app, flags

from harness import io
from harness.hlo.analysis import analyze_modules
from harness.hlo.clusters import find_clusters
from harness.hlo.parser import HloModule, ParseError, parse_file
from harness.match.match import MatchReport, kernels_document, match_events
from harness.profile.events import find_xplane, read_device_events

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
    module: str = ""


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


def attach_profile(
    results: list[ModuleResult], xplane: Path, out: Path, steps: int | None, mode: str
) -> MatchReport:
    """Attributes the profile's device events to the clusters of the analysed modules.

    Clusters are keyed by module name and by (name, XLA module number), which the profile
    calls program_id, so a recompiled module with the same name is told apart.
    """
    clusters: dict[Any, tuple[Any, ...]] = {}
    for r in results:
        found = (
            find_clusters(parse_file(r.out_dir / "hlo.txt"))
            if (r.out_dir / "hlo.txt").exists()
            else ()
        )
        clusters.setdefault(r.module, found)
        number = re.match(r"^module_(\d+)\.", r.key)
        if number:
            clusters[(r.module, int(number.group(1)))] = found
    path = find_xplane(xplane) if xplane.is_dir() else xplane
    events = read_device_events(path)
    marked = any(e.step is not None for e in events)
    report = match_events(events, clusters, steps=None if marked else (steps or 1), mode=mode)
    io.write_json(out / "kernels.json", kernels_document(report, profile=str(path)))
    return report


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
        summary = analyze_modules([after], before, out_dir)
        io.copy_file(files.after, out_dir / "hlo.txt")
        results.append(ModuleResult(files.key, out_dir, summary, after.name))
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
flags.DEFINE_string("xplane", None, "A jax.profiler profile (.xplane.pb or its folder) to match.")
flags.DEFINE_integer("steps", None, "Steps the profile holds, when it has no step markers.")
flags.DEFINE_enum("mode", "jit", ["jit", "eager"], "eager: one module per primitive.")


def run(
    dump: Path,
    out: Path,
    module_re: str,
    xplane: Path | None = None,
    steps: int | None = None,
    mode: str = "jit",
) -> int:
    """CLI body: analyse, print the table; bad input gives one stderr line and status 2."""
    try:
        results = analyze_dump(dump, out, module_re)
    except (ValueError, OSError, re.error) as e:
        msg = str(e) if isinstance(e, ParseError) or str(dump) in str(e) else f"{dump}: {e}"
        print(msg.splitlines()[0] if msg else f"{dump}: failed", file=sys.stderr)
        return 2
    print(format_table(results))
    if xplane is None:
        return 0
    try:
        report = attach_profile(results, xplane, out, steps, mode)
    except (ValueError, OSError) as e:
        print(
            f"{xplane}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr
        )
        return 2
    print(
        f"profile: {report.events_in_window} device events, matched {report.matched_fraction:.3f}, "
        f"{report.kernels_per_step:g} kernels and {report.device_ops_per_step:g} device ops a step, "
        f"device time {report.device_time_per_step_s * 1e3:.3f} ms a step; "
        f"{len(report.unmatched)} unmatched (see {out / 'kernels.json'})"
    )
    return 0


def main(argv: list[str]) -> int:
    del argv
    if not FLAGS.dump or not FLAGS.out:
        print("--dump and --out are required", file=sys.stderr)
        return 2
    xplane = Path(FLAGS.xplane) if FLAGS.xplane else None
    return run(Path(FLAGS.dump), Path(FLAGS.out), FLAGS.module, xplane, FLAGS.steps, FLAGS.mode)


if __name__ == "__main__":
    app.run(main)
