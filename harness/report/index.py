"""results/index.html (every run, newest first) and a per-run folder index.html."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.common import fmt, userfiles
from harness.records import run_files
from harness.records.run_files import Environment, Manifest
from harness.records.summary import RunSummary, load_summary
from harness.report.doc import Bullets, Heading, Para, Table, literal, to_html
from harness.store import io
from harness.store.records import SchemaError
from harness.store.runfolder import INDEX_HTML, RunFolder

TOP_LIMIT = 200  # characters of the top finding a row shows
HEADLINE = 5  # cells of a row's headline: baseline step, verdict, first call, ok, top finding


@dataclass(frozen=True)
class RunRow:
    """One run as the results index lists it."""

    href: str
    experiment: str
    run_id: str
    started: str
    device: str
    status: str
    headline: tuple[str, ...]


@dataclass(frozen=True)
class SummaryPart:
    """What a run's index row takes from its summary.json, the one costly file to read."""

    experiment: str
    headline: tuple[str, ...]


def summary_part(summary: RunSummary) -> SummaryPart:
    """Returns the experiment and headline numbers: baseline step, verdict, first call, ok,
    and the run's top finding (summary.json's `findings.top`)."""
    variants = summary.variants
    base = variants.get(summary.baseline)
    top = summary.findings.top if summary.findings is not None else "not recorded"
    return SummaryPart(
        experiment=summary.experiment,
        headline=(
            fmt.step(base.timing.step_s, base.timing.step_ci95_s) if base else fmt.text(None),
            fmt.verdict(base.comparison.vs_lower_bound) if base else fmt.text(None),
            fmt.secs(base.compile.first_call_s) if base else fmt.text(None),
            str(sum(1 for r in variants.values() if r.ok)) + f"/{len(variants)}",
            top[:TOP_LIMIT] + ("…" if len(top) > TOP_LIMIT else ""),
        ),
    )


def run_row(root: Path, run: Path, part: SummaryPart, manifest: Manifest) -> RunRow:
    """Returns the index row of one run: date, device and its headline numbers."""
    env = manifest.environment or Environment()
    folder = RunFolder(run)
    report = folder.report_html if folder.report_html.exists() else folder.index_html
    return RunRow(
        href=f"{run.relative_to(root)}/{report.name}",
        experiment=part.experiment or run.parent.name,
        run_id=run.name,
        started=str(manifest.started or fmt.text(None)),
        device=f"{fmt.text(env.device_kind)} ({fmt.text(env.platform)})",
        status=str(manifest.status or fmt.text(None)),
        headline=part.headline,
    )


# A run's SummaryPart, kept in its folder by its own report: the index reads every run's
# summary otherwise, 25 ms each, which a results folder of a few hundred runs makes seconds.
PART_FILE = ".index-row.json"
PART_FORMAT = 2  # bump when summary_part changes what it makes


def _stamp(run: Path) -> list[int]:
    st = RunFolder(run).summary.stat()
    return [PART_FORMAT, st.st_mtime_ns, st.st_size]


def kept_part(run: Path) -> SummaryPart | None:
    """Returns the run's kept SummaryPart if made from its current summary.json, else None."""
    try:
        kept = io.read_json(run / PART_FILE, userfiles.INDEX_ROW, within=run)
        if kept["stamp"] != _stamp(run):
            return None
        return SummaryPart(str(kept["experiment"]), tuple(str(h) for h in kept["headline"]))
    except (OSError, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None  # read the summary again, which names what is wrong with it


def keep_part(run: Path, part: SummaryPart) -> None:
    """Keeps `part` beside the run's summary.json, stamped with that file's time and size."""
    with contextlib.suppress(OSError):  # a part that cannot be kept is only read again
        io.write_json(
            run / PART_FILE,
            {"stamp": _stamp(run), "experiment": part.experiment, "headline": part.headline},
        )


def find_runs(root: Path) -> list[Path]:
    """Returns every run folder (with summary.json) under root/<experiment>/, links skipped."""
    return sorted(
        (
            p
            for p in root.glob("*/*")
            if p.is_dir() and not p.is_symlink() and RunFolder(p).summary.is_file()
        ),
        key=lambda p: p.name,
        reverse=True,
    )


def results_index_html(rows: list[RunRow], skipped: list[str]) -> str:
    table = Table(
        (
            "run",
            "experiment",
            "started",
            "device",
            "status",
            "baseline step",
            "baseline vs lower bound",
            "first call",
            "variants ok",
            "top finding",
        ),
        tuple(
            # Every cell is the run's own text (a forged .index-row.json, a folder's name): as
            # text, never Markdown; the link's target is the folder's path, percent-encoded.
            (
                f"[{literal(r.run_id)}]({quote(r.href)})",
                *(literal(c) for c in (r.experiment, r.started, r.device, r.status)),
                *(literal(c) for c in (*r.headline, *[""] * HEADLINE)[:HEADLINE]),
            )
            for r in rows
        ),
    )
    blocks: list[Any] = [Heading(1, "Runs"), Para(f"{len(rows)} runs, newest first."), table]
    if skipped:
        blocks += [
            Para("Left out (their files could not be read):"),
            Bullets(tuple(literal(s) for s in skipped)),
        ]
    return to_html(tuple(blocks), "Runs", head=INDEX_MARK)


def _manifest(path: Path) -> Manifest:
    """Returns a run's manifest; one that is absent or damaged only blanks its row of the
    index of every run (the run's own report names what is wrong with it)."""
    try:
        found = run_files.load_if_present(run_files.MANIFEST, path, within=path.parent)
    except SchemaError:
        return Manifest()
    return found if found is not None else Manifest()


# The results index's own mark, in its <head>: the index replaces a root's index.html only when
# it carries it (or, written before the mark, the harness's doctype and title), never a page of
# the user's. The root keeps no file of its own beside the index.
INDEX_MARK = '<meta name="generator" content="harness results index">'


def _ours(root: Path) -> bool:
    """True when root/index.html is absent or the results index's own page."""
    page = root / INDEX_HTML
    if not page.exists() and not page.is_symlink():
        return True
    try:
        head = userfiles.read_head(page, 4096, within=root)
    except userfiles.Unreadable:  # a link, a FIFO, a folder: not the index's
        return False
    if page.is_symlink():
        return False
    legacy = head.startswith(b"<!doctype html>") and b"<title>Runs</title>" in head
    return INDEX_MARK.encode() in head or legacy


def write_results_index(root: Path, own: Path | None = None) -> Path | None:
    """Writes root/index.html listing every run under root; a run whose summary cannot be read
    is listed apart with the reason, never fatal to the others. The `own` run (the one being
    reported) keeps its row's summary part for the next index; no other run is written.

    Returns None, writing nothing, where root/index.html is not the index's own page (a user's):
    the index is a convenience, never worth a user's file."""
    if not _ours(root):
        return None
    rows, skipped = [], []
    for r in find_runs(root):
        part = kept_part(r)
        if part is None:
            try:
                part = summary_part(load_summary(RunFolder(r).summary, within=r))
            except SchemaError as e:  # every reader's one error: the run is listed apart
                skipped.append(f"{r.relative_to(root)}: {str(e)[:200]}")
                continue
            if own is not None and r.resolve() == own.resolve():
                keep_part(r, part)
        rows.append(run_row(root, r, part, _manifest(RunFolder(r).manifest)))
    return io.write_text(root / INDEX_HTML, results_index_html(rows, skipped))


def run_index_html(run: Path) -> str:
    """Returns the run folder's index page: report, plots, and each variant's files."""
    blocks: list[Any] = [
        Heading(1, f"Run folder {literal(run.name)}"),
        Para("[all runs](../../index.html)"),
    ]
    # Names of files in the folder are anyone's: shown as text, linked percent-encoded.
    top = [
        f"[{literal(p.name)}]({quote(p.name)})"
        for p in sorted(run.iterdir())
        if p.is_file() and not p.name.startswith(".") and p.name != INDEX_HTML
    ]
    blocks += [Heading(2, "Files"), Bullets(tuple(top))]
    plots = RunFolder(run).plots
    if plots.is_dir():
        blocks += [
            Heading(2, "Plots"),
            Bullets(
                tuple(
                    f"[{literal(p.name)}](plots/{quote(p.name)})"
                    for p in sorted(plots.iterdir())
                    if not p.name.startswith(".")
                )
            ),
        ]
    vdir = RunFolder(run).variants_dir
    if vdir.is_dir():
        blocks.append(Heading(2, "Variants"))
        for v in sorted(p for p in vdir.iterdir() if p.is_dir()):
            here = f"variants/{quote(v.name)}"
            items = [
                f"[{literal(p.name)}]({here}/{quote(p.name)}{'/' if p.is_dir() else ''})"
                for p in sorted(v.iterdir())
            ]
            ir = v / "ir"
            if ir.is_dir():
                items += [
                    f"[ir/{literal(p.name)}]({here}/ir/{quote(p.name)}{'/' if p.is_dir() else ''})"
                    for p in sorted(ir.iterdir())
                ]
            blocks += [Heading(3, literal(v.name)), Bullets(tuple(items))]
    return to_html(tuple(blocks), f"Run {run.name}")


def write_run_index(run: Path) -> Path:
    return io.write_text(RunFolder(run).index_html, run_index_html(run))
