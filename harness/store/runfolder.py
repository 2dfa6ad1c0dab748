"""The run folder's layout: every path a run writes, owned by two objects.

    RunFolder(root)          manifest.json, summary.json, timing.json, ceilings.json, ...
    RunFolder.variant(name)  variants/<name>/: result.json, fusions.json, ir/, profile/, ...

No other module spells a file name of the run folder: a writer asks the folder for the path
it writes, and a reader for the path it reads, so renaming a file is one line here and a
reader and its writer cannot drift apart. What each file holds is its record's
(harness.records.run_files, harness.records.summary); this module knows only where the files are. A library
layer: it imports nothing of the harness.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The run's own files, at its top level.
MANIFEST_FILE = "manifest.json"
SUMMARY_FILE = "summary.json"
TIMING_FILE = "timing.json"
CEILINGS_FILE = "ceilings.json"
SEARCH_FILE = "search.json"
PROCESSES_FILE = "processes.json"
REPORT_FILE = "report.md"  # a report page's name: the run's, and each variant's
REPORT_HTML = "report.html"
# The run's second page: what backs the leading page's findings (evidence, noise, memory, where
# the time goes, observations, environment), so the leading page stays one minute's read.
DETAILS_FILE = "details.md"
DETAILS_HTML = "details.html"
INDEX_HTML = "index.html"
VARIANTS_DIR = "variants"
PLOTS_DIR = "plots"
PROCESS_DIR = "processes"  # processes/p<rank>.json and faults.json, a study across processes
LOGS_DIR = "logs"  # each worker's stderr, bounded (harness.common.bounded.LOG_BYTES)
FAULTS_FILE = "faults.json"

# A variant's files, in variants/<name>/.
RESULT_FILE = "result.json"
TIMINGS_FILE = "timings.json"  # the capture's blocked latencies (not the run's timing.json)
FUSIONS_FILE = "fusions.json"
KERNELS_FILE = "kernels.json"  # the match's totals (every event until its version 2)
EVENTS_FILE = "events.parquet"  # every event of the steady window and its attribution
# A session of several hosts (python -m harness.analyze): the events as one dataset
# partitioned by host, events/host=<name>/part-0.parquet, where one host has EVENTS_FILE.
EVENTS_DIR = "events"
PASSES_FILE = "passes.json"
COMPILE_FILE = "compile.json"
COST_FILE = "cost.json"
RANKING_FILE = "ranking.json"
COMM_FILE = "comm.json"
MEMORY_FILE = "memory.json"
NUMERICS_FILE = "numerics.json"  # the capture's per-leaf errors against float64
OUTPUTS_FILE = "outputs.npz"  # the capture's kept result values (bounded)
DISTANCES_FILE = "distances.json"  # the analysis's per-leaf distances from the baseline
NUMERICS_PASS_FILE = "numerics_pass.json"  # the optional search for the pass that moved it
# The attributed timeline: Chrome trace JSON, gzipped, which Perfetto and chrome://tracing open.
TIMELINE_FILE = "timeline.perfetto.json.gz"
ANALYSIS_FILE = "analysis.json"  # `python -m harness.analyze`'s program analysis
TORCH_FILE = "torch.json"  # the PyTorch capture's facts
TORCH_TRACE_FILE = "torch_trace.json"  # torch.profiler's trace
RECOMPILE_FILE = "recompile.txt"
CALLBACK_OUTPUT_FILE = "callback_output.txt"  # what the variant's function printed (bounded)
EXPECTED_ERROR_FILE = "expected_error.txt"  # a refusal its mode expects, as it was raised
ERROR_FILE = "error.txt"  # the worker's traceback of a variant that failed
DUMP_DIR = "dump"
TORCH_DIR = "torch"  # torch.compile's working folder (its debug trace and cache)
IR_DIR = "ir"
PROFILE_DIR = "profile"
# The float64 references a study's variants share (harness.capture.reference): hidden, and
# removed when the study ends; a study killed before that leaves them in its own folder.
REFERENCES_DIR = ".references"
LATEST = "latest"  # <results_root>/<experiment>/latest, the link to the newest run

# The harness's own names at the top of a results root or a run: an experiment named one of
# them would make `R/index.html/` (and every later study of that root fail) or a run's file.
RESERVED_NAMES = frozenset(
    {
        MANIFEST_FILE,
        SUMMARY_FILE,
        TIMING_FILE,
        CEILINGS_FILE,
        SEARCH_FILE,
        PROCESSES_FILE,
        REPORT_FILE,
        REPORT_HTML,
        DETAILS_FILE,
        DETAILS_HTML,
        INDEX_HTML,
        VARIANTS_DIR,
        PLOTS_DIR,
        PROCESS_DIR,
        LOGS_DIR,
        FAULTS_FILE,
        RESULT_FILE,
        TIMINGS_FILE,
        FUSIONS_FILE,
        KERNELS_FILE,
        EVENTS_FILE,
        PASSES_FILE,
        COMPILE_FILE,
        COST_FILE,
        RANKING_FILE,
        COMM_FILE,
        MEMORY_FILE,
        TORCH_FILE,
        TORCH_TRACE_FILE,
        RECOMPILE_FILE,
        DUMP_DIR,
        TORCH_DIR,
        IR_DIR,
        PROFILE_DIR,
        LATEST,
    }
)
# The profile windows a capture records, each a folder of profile/.
PROFILE_WINDOWS = ("first_call", "recompile", "steady")


# The kinds of file the manifest counts a run folder's bytes by (`sizes`), in this order.
SIZE_KINDS = (
    "dumps",  # XLA's dump folder, torch.compile's working folder
    "ir",  # the IR ladder's own files (a file linked from the dump counts once, as a dump)
    "profiles",  # the profiler's windows, torch.profiler's trace
    "events",  # events.parquet and kernels.json
    "timeline",  # the attributed Perfetto timeline
    "logs",
    "records",  # every other JSON record, the kept outputs
    "reports",  # the pages, their plots, tlparse's
    "other",
)
_REPORT_FILES = frozenset({REPORT_FILE, REPORT_HTML, DETAILS_FILE, DETAILS_HTML, INDEX_HTML})


def size_kind(relative: str) -> str:
    """The kind (SIZE_KINDS) of the file at `relative` (a path inside a run folder, `/`-separated)."""
    parts = relative.split("/")
    name = parts[-1]
    inner = parts[2] if parts[0] == VARIANTS_DIR and len(parts) > 3 else None
    if inner in (DUMP_DIR, TORCH_DIR):
        return "dumps"
    if inner == IR_DIR:
        return "ir"
    if inner == PROFILE_DIR or name == TORCH_TRACE_FILE:
        return "profiles"
    if inner == "tlparse" or parts[0] == PLOTS_DIR or name in _REPORT_FILES:
        return "reports"
    if name in (EVENTS_FILE, KERNELS_FILE):
        return "events"
    if name == TIMELINE_FILE:
        return "timeline"
    if parts[0] == LOGS_DIR:
        return "logs"
    if name.endswith((".json", ".npz", ".txt")):
        return "records"
    return "other"


def sizes_by_kind(root: Path) -> dict[str, int]:
    """The bytes of every regular file under the run folder `root` by kind (SIZE_KINDS, each
    present), the manifest itself and the references the study deletes when it ends apart. A
    file linked twice (the IR ladder's links into the dump) counts once, under the kind of its
    first path in sorted order; links to other files are not followed."""
    sizes = dict.fromkeys(SIZE_KINDS, 0)
    seen: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(root):
        if Path(folder) == root:  # the float64 references, deleted when the study ends
            dirs[:] = [d for d in dirs if not d.startswith(REFERENCES_DIR)]
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if relative == MANIFEST_FILE:
                continue
            try:
                info = path.lstat()
            except OSError:  # removed while walking
                continue
            if not path.is_file() or path.is_symlink() or (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            sizes[size_kind(relative)] += info.st_size
    return sizes


def one_component(name: str) -> bool:
    """True for a name that is one path component: not empty, `.` or `..`, no slash."""
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def made_in_variant(name: str) -> bool:
    """True for an entry of a variant's folder that the harness makes: its records, dump, IR,
    profile, pages and tlparse, and the temporary files of an atomic write (io)."""
    temporary = name.startswith(".") and name.endswith((".tmp", ".link"))
    return name in RESERVED_NAMES or name == "tlparse" or temporary


def process_file(rank: int) -> str:
    """Returns the file name of one process's record in processes/."""
    return f"p{rank}.json"


def per_process(file: str, rank: int) -> str:
    """Returns the name of `file` as process `rank` writes it (timing.json -> timing-p1.json)."""
    return f"{file.removesuffix('.json')}-p{rank}.json"


def set_aside(file: str, stamp: str) -> str:
    """Returns the name a re-timing keeps an earlier `file` under (timing.before-<stamp>.json)."""
    return f"{file.removesuffix('.json')}.before-{stamp}.json"


class _InRoot:
    """A path directly in a folder object's root: `result = _InRoot(RESULT_FILE)` makes
    `folder.result` read `folder.root / "result.json"`, so each path is one line of the table
    and how a path is made is said once."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: VariantFolder | RunFolder, owner: type | None = None) -> Path:
        return folder.root / self.name


@dataclass(frozen=True)
class VariantFolder:
    """variants/<name>/ of a run folder: what the capture and the analysis write for one variant."""

    root: Path

    result = _InRoot(RESULT_FILE)
    timings = _InRoot(TIMINGS_FILE)
    fusions = _InRoot(FUSIONS_FILE)
    kernels = _InRoot(KERNELS_FILE)
    events = _InRoot(EVENTS_FILE)
    passes = _InRoot(PASSES_FILE)
    compiles = _InRoot(COMPILE_FILE)  # compile.json: the variant's compiles
    cost = _InRoot(COST_FILE)
    ranking = _InRoot(RANKING_FILE)
    comm = _InRoot(COMM_FILE)
    timeline = _InRoot(TIMELINE_FILE)
    memory = _InRoot(MEMORY_FILE)
    numerics = _InRoot(NUMERICS_FILE)
    outputs = _InRoot(OUTPUTS_FILE)
    distances = _InRoot(DISTANCES_FILE)
    numerics_pass = _InRoot(NUMERICS_PASS_FILE)
    torch = _InRoot(TORCH_FILE)
    dump = _InRoot(DUMP_DIR)
    ir = _InRoot(IR_DIR)
    profile = _InRoot(PROFILE_DIR)
    report = _InRoot(REPORT_FILE)
    report_html = _InRoot(REPORT_HTML)

    @property
    def name(self) -> str:
        return self.root.name

    def profile_window(self, window: str) -> Path:
        """Returns profile/<window>/ (one of PROFILE_WINDOWS)."""
        if window not in PROFILE_WINDOWS:
            raise ValueError(f"profile window must be one of {PROFILE_WINDOWS}, got {window!r}")
        return self.profile / window


@dataclass(frozen=True)
class RunFolder:
    """One run folder (results/<experiment>/<run id>/): the paths of every file a run writes."""

    root: Path

    manifest = _InRoot(MANIFEST_FILE)
    summary = _InRoot(SUMMARY_FILE)
    timing = _InRoot(TIMING_FILE)
    ceilings = _InRoot(CEILINGS_FILE)
    analysis = _InRoot(ANALYSIS_FILE)  # `python -m harness.analyze`'s (a study writes none)
    search = _InRoot(SEARCH_FILE)
    processes = _InRoot(PROCESSES_FILE)
    process_dir = _InRoot(PROCESS_DIR)
    variants_dir = _InRoot(VARIANTS_DIR)
    plots = _InRoot(PLOTS_DIR)
    report = _InRoot(REPORT_FILE)
    report_html = _InRoot(REPORT_HTML)
    details = _InRoot(DETAILS_FILE)
    details_html = _InRoot(DETAILS_HTML)
    index_html = _InRoot(INDEX_HTML)

    @property
    def faults(self) -> Path:
        return self.process_dir / FAULTS_FILE

    def timing_named(self, file: str) -> Path:
        """Returns a timing record of its own name (a search stage's timing-<n>.json)."""
        if "/" in file or not file.endswith(".json"):
            raise ValueError(f"a timing file is a .json name in the run folder, got {file!r}")
        return self.root / file

    def variant(self, name: str) -> VariantFolder:
        """Returns variants/<name>/; the name is a config's variant name, never a path."""
        if not one_component(name):
            raise ValueError(f"a variant name is one path component, got {name!r}")
        return VariantFolder(self.variants_dir / name)

    def relative(self, path: Path) -> str:
        """Returns `path` relative to the run folder, as the report's links write it."""
        return path.relative_to(self.root).as_posix()


def variant_page(name: str) -> str:
    """Returns a variant's report page relative to its run folder (its HTML is beside it)."""
    return f"{VARIANTS_DIR}/{name}/{REPORT_FILE}"


def stage_timing(stage: int) -> str:
    """Returns the timing record of a search's stage `stage` (timing-<stage>.json)."""
    return f"{TIMING_FILE.removesuffix('.json')}-{stage}.json"
