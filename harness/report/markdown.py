"""write_report(workdir): report.md, details.md, their HTML, each variant's page, plots/ and the
indexes.

Reads only files in the run folder (and never imports jax), so a report can be rendered again
from a saved run at any time: `python -m harness.report --run=results/gelu/latest`. Its
conclusions are summary.json's `findings` (it reads no profile, and IR files only to show a
variant's first differing stage as a diff). It writes only its own outputs: report.md,
details.md, their .html, variants/<name>/report.md and .html, plots/, index.html in the run
folder, and,
for a study, the results index of its results root (`make index` rewrites that one). With
`tlparse` on the PATH it also writes tlparse's pages of each kept TORCH_TRACE log, under
variants/<name>/tlparse/.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import saved
from harness.common import userfiles
from harness.records.summary import Divergence
from harness.report import doc, index, plots, search, sections, stage_diff, variant_page
from harness.store import io, ownership
from harness.store.runfolder import (
    DETAILS_FILE,
    DETAILS_HTML,
    INDEX_HTML,
    MANIFEST_FILE,
    PLOTS_DIR,
    REPORT_FILE,
    REPORT_HTML,
    TORCH_DIR,
    TORCH_TRACE_FILE,
    VARIANTS_DIR,
    RunFolder,
)

MAX_STAGE_BYTES = 4_000_000  # of one stage's text read for its diff
TLPARSE_S = 120


# --- what a variant's page reads ---------------------------------------------------------------


def _read(path: Path, run: Path) -> str:
    """The stage file's first MAX_STAGE_BYTES, only inside the run (a FIFO is a ValueError)."""
    return userfiles.read_head(path, MAX_STAGE_BYTES, within=run).decode(errors="replace")


def _stage_files(run: saved.SavedRun, st: saved.Rung) -> list[Path]:
    path = run.path / st.path
    if not st.is_dir:
        return [path]
    return userfiles.files_in(path)  # by their names, kept compressed or not


def _no_diff(d: Divergence, why: str) -> variant_page.ShownDivergence:
    """The first divergence shown without a diff, and why there is none."""
    return variant_page.ShownDivergence(d.stage, d.against, d.detail, why_none=why)


def _named_pass_files(
    run: saved.SavedRun, d: Divergence, mine: saved.Rung, theirs: saved.Rung
) -> tuple[list[Path], list[Path]] | str:
    """The pair of pass files where the two first differ, as the analysis names them (the
    reference's, then the variant's), or why they cannot be shown."""
    if not d.files:
        return "The summary names no pair of pass files (it was made before it did)."
    left_files = [run.path / d.files[0]]
    right_files = [run.path / d.files[1]]
    # A summary can name any path: only a plain file of each side's own passes folder.
    for f, st in ((left_files[0], theirs), (right_files[0], mine)):
        if not userfiles.is_file(f) or f.parent != run.path / st.path:
            return "The pass files the summary names are not in the kept passes folders."
    return left_files, right_files


@dataclass(frozen=True)
class _Sides:
    """The two sides of a stage diff: the reference's files and the variant's, and the text
    read from each."""

    left_files: list[Path]
    right_files: list[Path]
    left: str
    right: str


def _read_sides(
    run: saved.SavedRun, d: Divergence, mine: saved.Rung, theirs: saved.Rung
) -> _Sides | str:
    """The diverging stage's files of both sides and their text, or why they cannot be shown;
    a file that cannot be read raises OSError or ValueError."""
    if d.stage == "passes":
        named = _named_pass_files(run, d, mine, theirs)
        if isinstance(named, str):
            return named
        left_files, right_files = named
    else:
        left_files, right_files = _stage_files(run, theirs), _stage_files(run, mine)
    return _Sides(
        left_files, right_files, _joined(left_files, run.path), _joined(right_files, run.path)
    )


def _diff_names(
    run: saved.SavedRun, sides: _Sides, mine: saved.Rung, theirs: saved.Rung
) -> tuple[list[str], list[str]]:
    """Each side's name in the diff's header and the path its link opens, both in the run
    folder: the files, or for a folder stage the folders."""
    firsts = (sides.left_files[0], sides.right_files[0])
    rel = [str(p.relative_to(run.path)) for p in firsts]
    # The links name the files on disk (`<name>.gz` where the capture compressed them).
    links = [str(userfiles.stored(p).relative_to(run.path)) for p in firsts]
    if len(sides.left_files) > 1 or len(sides.right_files) > 1:  # a folder stage: link the folders
        rel, links = [theirs.path, mine.path], [st.stored or st.path for st in (theirs, mine)]
    return rel, links


def read_divergence(
    run: saved.SavedRun, v: saved.SavedVariant
) -> variant_page.ShownDivergence | None:
    """The variant's first divergence with the diff of that stage's two files, read here."""
    d = v.summary.comparison.first_divergence
    if d is None or "baseline" in v.roles:
        return None
    ref = run.variant(d.against)
    if d.stage not in stage_diff.TEXT_STAGES or ref is None:
        return _no_diff(d, f"There is no stage file to diff: the difference is in the `{d.stage}`.")
    mine, theirs = v.stage(d.stage), ref.stage(d.stage)
    if mine is None or theirs is None or not (mine.exists and theirs.exists):
        return _no_diff(d, "The stage's files are not kept in this copy of the run.")
    try:
        sides = _read_sides(run, d, mine, theirs)
    except (OSError, ValueError) as e:  # a damaged pass file: the page says so
        return _no_diff(d, f"The stage's files could not be read: {e}")
    if isinstance(sides, str):
        return _no_diff(d, sides)
    rel, links = _diff_names(run, sides, mine, theirs)
    diff = stage_diff.stage_diff(
        d.stage, (f"{ref.name}: {rel[0]}", sides.left), (f"{v.name}: {rel[1]}", sides.right)
    )
    return variant_page.ShownDivergence(d.stage, d.against, d.detail, diff, (links[0], links[1]))


def _joined(files: list[Path], run: Path) -> str:
    """One file's text, or a folder's files one after another, each under its name."""
    if len(files) == 1:
        return _read(files[0], run)
    return "\n".join(f"// {p.name}\n{_read(p, run)}" for p in files)


def find_elsewhere(run: saved.SavedRun, v: saved.SavedVariant) -> variant_page.Elsewhere:
    """The variant's profile folder, traces Perfetto opens and TORCH_TRACE logs; runs
    tlparse on each log when `tlparse` is on the PATH."""
    folder = RunFolder(run.path).variant(v.name)
    vdir, profile = folder.root, folder.profile
    logdir = None
    perfetto: list[str] = []
    if profile.is_dir() and not profile.is_symlink():
        files = sorted(p for p in profile.rglob("*") if p.is_file() and not p.is_symlink())
        if any(p.name.endswith(".xplane.pb") for p in files):
            logdir = str(profile.relative_to(run.path))
        perfetto = [
            str(p.relative_to(run.path))
            for p in files
            if p.name in ("perfetto_trace.json.gz", TORCH_TRACE_FILE)
        ]
    trace_dir = vdir / TORCH_DIR / "trace"
    logs = (
        sorted(p for p in trace_dir.iterdir() if p.is_file() and p.suffix == ".log")
        if trace_dir.is_dir() and not trace_dir.is_symlink()
        else []
    )
    made, note = (None, "")
    if logs:
        made, note = run_tlparse(run.path, logs[0], vdir / "tlparse")
    return variant_page.Elsewhere(
        profile=logdir,
        perfetto=tuple(perfetto),
        torch_traces=tuple(str(p.relative_to(run.path)) for p in logs),
        tlparse=made,
        tlparse_note=note,
    )


def run_tlparse(run: Path, log: Path, out: Path) -> tuple[str | None, str]:
    """tlparse's index.html for `log` under `out` (made again when the log is newer),
    relative to the run; else None and why."""
    exe = shutil.which("tlparse")
    if exe is None:
        return None, "tlparse is not installed here, so its pages were not made."
    if out.is_symlink():
        return None, f"{out.name} is a link: tlparse's pages were not made."
    index_html = out / "index.html"
    if not (index_html.is_file() and index_html.stat().st_mtime >= log.stat().st_mtime):
        try:
            subprocess.run(
                [exe, str(log), "-o", str(out), "--no-browser", "--overwrite"],
                capture_output=True,
                timeout=TLPARSE_S,
                check=True,
            )
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"tlparse failed on the log ({type(e).__name__})."
    if not index_html.is_file():
        return None, "tlparse wrote no index.html."
    return str(index_html.relative_to(run)), ""


def page_folders(run: saved.SavedRun) -> dict[str, Path]:
    """Each variant's folder for its page, made when absent (a variant that never ran): only
    for a name that is one plain path component (a summary can name anything), and never
    through a link."""
    variants = RunFolder(run.path).variants_dir
    if variants.is_symlink():
        return {}
    out = {}
    for v in run.variants:
        name = v.name
        if name in ("", ".", "..") or "/" in name or "\\" in name or not name.isprintable():
            continue
        folder = variants / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        out[name] = folder
    return out


def page_inputs(run: saved.SavedRun, v: saved.SavedVariant) -> variant_page.PageInputs:
    """What one variant's page reads from the run folder."""
    return variant_page.PageInputs(
        divergence=read_divergence(run, v), elsewhere=find_elsewhere(run, v)
    )


# --- writing -----------------------------------------------------------------------------------


def render(
    run: saved.SavedRun,
    plot_outcomes: tuple[plots.PlotOutcome, ...],
    pages: frozenset[str] = frozenset(),
) -> tuple[str, str]:
    """Returns (markdown, html) of the leading page: two renderings of the same blocks."""
    return _rendered(sections.report_blocks(run, plot_outcomes, pages), run)


def render_details(run: saved.SavedRun) -> tuple[str, str]:
    """Returns (markdown, html) of the run's details page."""
    return _rendered(sections.details_blocks(run), run, ": details")


def _rendered(
    blocks: tuple[doc.Block, ...], run: saved.SavedRun, page: str = ""
) -> tuple[str, str]:
    title = f"{run.experiment} {run.run_id}{page}"
    return doc.to_markdown(blocks), doc.to_html(blocks, title)


def write_variant_pages(run: saved.SavedRun, folders: dict[str, Path]) -> None:
    """Writes variants/<name>/report.md and .html for each variant in `folders`."""
    for v in run.variants:
        folder = folders.get(v.name)
        if folder is None:
            continue
        for own in (REPORT_FILE, REPORT_HTML):
            if (folder / own).is_symlink():  # planted: replace the link, never write through it
                (folder / own).unlink()
        blocks = variant_page.page_blocks(v, run, page_inputs(run, v))
        io.write_text(folder / REPORT_HTML, doc.to_html(blocks, f"{v.name}: {run.run_id}"))
        io.write_text(folder / REPORT_FILE, doc.to_markdown(blocks))


def report_files(run: saved.SavedRun) -> list[str]:
    """Every file the report may write or remove in the run folder, relative to it."""
    rels = [REPORT_FILE, REPORT_HTML, DETAILS_FILE, DETAILS_HTML, INDEX_HTML]
    rels += [f"{PLOTS_DIR}/{name}.{ext}" for name in plots.PLOT_NAMES for ext in plots.FORMATS]
    for v in run.variants:
        rels += [f"{VARIANTS_DIR}/{v.name}/{page}" for page in (REPORT_FILE, REPORT_HTML)]
    return rels


def claim_report_files(root: Path, rels: list[str]) -> None:
    """Raises io.NotOurs, before anything is written, when one of the report's files in the
    folder is not one the harness recorded writing there (a user's report.md, index.html or
    plot in a folder it did not make, or one changed since). A run folder the harness made
    before it kept records (it holds a manifest.json, and no record) is its own."""
    legacy = (root / MANIFEST_FILE).is_file()
    for rel in rels:
        if "/../" in f"/{rel}/" or rel.startswith("/"):
            continue  # a variant named `..` in a summary: page_folders writes no page for it
        why = ownership.foreign_file(root, rel, legacy)
        if why is not None:
            raise io.NotOurs(
                f"{why}; the report replaces only files it wrote (move the file away, "
                "or name a run folder the harness made)"
            )


def plot_formats(run: saved.SavedRun) -> tuple[str, ...]:
    """PNG, which the report shows; SVG too when the run's config asks (`report.svg`)."""
    wanted = run.manifest.saved_config.flag("report", "svg")
    return ("png", "svg") if wanted is True else ("png",)


def write_search_report(workdir: Path) -> Path:
    """report.md, report.html and plots/search.png of a search's run folder."""
    record = search.load(workdir)
    folder = RunFolder(workdir)
    mine = [REPORT_FILE, REPORT_HTML, f"{PLOTS_DIR}/search.png"]
    claim_report_files(workdir, mine)
    plot = None
    if any(c.step_s is not None for c in record.candidates):
        figure = folder.plots / "search.png"
        plots.save_figure(search.figure(record), figure)
        plot = folder.relative(figure)
    blocks = search.blocks(record, f"Search: {workdir.parent.name} {workdir.name}", plot)
    io.write_text(folder.report_html, doc.to_html(blocks, workdir.name))
    io.write_text(folder.report, doc.to_markdown(blocks))
    io.write_json(workdir / ownership.FILES_RECORD, ownership.record_files(workdir, mine))
    return folder.report


def write_report(workdir: Path, results_root: Path | None = None) -> Path:
    """Writes report.md, report.html, each variant's page, plots/ and the run's index.html;
    with `results_root` (a study's, whose run this is), the results index there too. Returns
    report.md's path.

    Only a study names its results root: a command given a run folder (report, export,
    reanalyze) writes inside that folder alone, never into a folder above it.
    """
    folder = RunFolder(workdir)
    if folder.search.is_file() and not folder.summary.is_file():
        return write_search_report(workdir)
    run = saved.load_run(workdir)
    folder = RunFolder(run.path)
    own_files = (folder.report, folder.report_html, folder.details, folder.details_html)
    for own in (folder.plots, *own_files, folder.index_html):
        if own.is_symlink():  # planted: replace the link, never write through it
            own.unlink()
    mine = report_files(run)
    claim_report_files(run.path, mine)
    outcomes = plots.save_plots(run, folder.plots, plot_formats(run))
    folders = page_folders(run)
    write_variant_pages(run, folders)
    md, html = render_details(run)
    io.write_text(folder.details_html, html)
    io.write_text(folder.details, md)
    md, html = render(run, outcomes, frozenset(folders))
    io.write_text(folder.report_html, html)
    io.write_text(folder.report, md)
    index.write_run_index(run.path)
    io.write_json(run.path / ownership.FILES_RECORD, ownership.record_files(run.path, mine))
    if results_root is not None:
        with io.writes_confined_to(results_root):
            index.write_results_index(results_root, own=run.path)
    return folder.report
