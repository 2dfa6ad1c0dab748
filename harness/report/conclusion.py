"""The terminal's last lines: the run's conclusion, so a user sees it without opening the report.

Either the top findings (the same ranked list the report leads with, read from summary.json's
`findings`), one line each, or the one line that says the run could not resolve differences,
with its evidence; then the numerics, which rest on no timing: each dtype's accuracy once, and
each variant whose result a compiler choice moved.
"""

from __future__ import annotations

from pathlib import Path

from harness import saved
from harness.records import invocations
from harness.report import unresolved
from harness.store.runfolder import DUMP_DIR, TORCH_DIR, RunFolder

TOP = 3  # findings printed; the report has the rest


def conclusion_lines(run: saved.SavedRun, top: int = TOP) -> list[str]:
    """Returns the lines that end the terminal's output for this run."""
    left_out = unresolved.not_timed_line(run.summary)
    not_timed = [f"not timed: {left_out}"] if left_out else []
    line = unresolved.unresolved_line(run.summary)
    if line is not None:
        first, *others = retime_commands(run)
        return [
            f"could not resolve: {line}",
            f"time it again later: {first}",
            *(f"  or: {c}" for c in others),
            *not_timed,
            *numerics_lines(run),  # the numerics rest on no timing
        ]
    if run.summary.findings is None:
        return [f"findings: not recorded (`python -m harness.commands.migrate --run={run.path}`)"]
    found = run.summary.findings.timing
    if not found:
        return [nothing_found_line(run), *not_timed, *numerics_lines(run)]
    out = [f"finding {i}: {f.what}" for i, f in enumerate(found[:top], 1)]
    if len(found) > top:
        out.append(f"and {len(found) - top} more findings in the report")
    return [*out, *not_timed, *numerics_lines(run)]


def nothing_found_line(run: saved.SavedRun) -> str:
    """The line for a run with no timing finding, from the same statuses the `failed
    variants:` line reads: "no resolvable difference" only between variants that were timed."""
    variants = run.summary.variants.values()
    failed = sum(v.identity.status == "failed" for v in variants)
    timed = sum(v.timing.step_s is not None for v in variants)
    if timed < 2:
        return f"findings: nothing to compare: {timed} of {len(variants)} variants timed" + (
            f" ({failed} failed)" if failed else ""
        )
    if failed:
        return (
            f"findings: no resolvable difference between the {timed} variants timed "
            f"({failed} failed, so not compared)"
        )
    return "findings: no resolvable difference between the variants in this run"


def numerics_lines(run: saved.SavedRun) -> list[str]:
    """Each dtype's accuracy once, then each variant whose result a compiler choice moved."""
    f = run.summary.findings
    if f is None:
        return []
    moved = [e for e in f.effects if e.verdict == "changes"]
    same = len(f.effects) - len(moved)
    out = [f"numerics: {a.what}" for a in f.numerics]
    out += [f"numerics: {e.what}" for e in moved]
    if same:
        which = "1 variant computes" if same == 1 else f"{same} variants compute"
        out.append(f"numerics: {which} the baseline's result within rounding")
    return out


def retimable(run: saved.SavedRun) -> bool:
    """True for a run folder as the study left it: an exported copy (no variant keeps its
    `dump/` or `torch/`) cannot be timed again, and its path is another machine's."""
    return any(
        (RunFolder(run.path).variant(v.name).root / d).is_dir()
        for v in run.variants
        for d in (DUMP_DIR, TORCH_DIR)
    )


def retime_commands(run: saved.SavedRun) -> list[str]:
    """Returns the commands that time this saved run again (timing.only): its config and
    overrides, as it was started, resumed by its id; the form its user started it with first
    (harness.records.invocations)."""
    return invocations.resume_commands(
        run.manifest, run.path, drop=("timing.only",), extra=("--config.timing.only=true",)
    )


def conclusion(workdir: Path) -> list[str]:
    """Returns the conclusion of the run folder `workdir` (none when it has no summary)."""
    try:
        return conclusion_lines(saved.load_run(workdir))
    except (OSError, ValueError):
        return []
