"""python -m harness.commands.compare --a=RUN --b=RUN [--out=DIR] (`make compare`): two runs
compared, into compare.md and compare.html."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness import saved
from harness.analyze import line_diff
from harness.commands import cli
from harness.common import terminal
from harness.findings import compare as rules
from harness.hlo.diverge import ladder_divergence
from harness.records.compare import FindingChange, LineChange
from harness.report import compare
from harness.store import io


def compare_runs(a: Path, b: Path, out: Path) -> tuple[Path, Path, tuple[FindingChange, ...]]:
    """Writes out/compare.md and out/compare.html for runs a and b; returns their paths and
    the findings of both runs as it lists them (`compared_lines` adds the lines diffed)."""
    md, html, found, _ = compared_lines(a, b, out)
    return md, html, found


def compared_lines(
    a: Path, b: Path, out: Path
) -> tuple[Path, Path, tuple[FindingChange, ...], tuple[LineChange, ...]]:
    """`compare_runs`, and the source lines diffed, the lines that moved first. The rules
    conclude (harness.findings.compare), the report renders (harness.report.compare)."""
    ra, rb = saved.load_run(a), saved.load_run(b)
    compared = rules.compare_runs(ra.summary, ra.manifest, rb.summary, rb.manifest)
    # Per source line and kind of work, with intervals: measured from each run's profiled
    # steps, so it is the analysis stage's, not a rule over the summaries.
    compared = dataclasses.replace(compared, lines=line_diff.compare_lines(a, b))
    divergences = {name: ladder_divergence(*irs) for name, irs in compare.ladders(ra, rb).items()}
    md, html = compare.write(ra, rb, compared, divergences, out)
    return md, html, compared.findings, compared.lines


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    a, b, out = flags.FLAGS.a, flags.FLAGS.b, flags.FLAGS.out
    if not a or not b:
        raise cli.UsageError("--a and --b are required")
    ra, rb = cli.run_folder(a, "--a"), cli.run_folder(b, "--b")
    out = out or str(compare.default_out(ra, rb))
    with io.own_output(Path(out), "compare", inputs=(ra, rb)) as target:
        md, html, found, lines = compared_lines(ra, rb, target)
    moved_lines = [
        f"{c.verdict}: `{c.variant}` {c.line} ({c.work}) {c.a_s * 1e3:.3f} -> {c.b_s * 1e3:.3f} ms"
        for c in lines
        if c.moved
    ]
    for c in found:
        print(terminal.shown(f"{c.status}: {c.subject} ({c.rule}): a {c.a}; b {c.b}"))
    for line in moved_lines:
        print(terminal.shown(line))
    print(f"comparison: {terminal.shown(md)}\nhtml:       {terminal.shown(html)}")
    return 0


def define_flags() -> None:
    """Flags are defined only by an entry point, so importing this module never clashes."""
    cli.define_string("a", None, "First run folder.")
    cli.define_string("b", None, "Second run folder.")
    cli.define_string(
        "out",
        None,
        "Folder for compare.md and compare.html (default: results/compare/"
        "<experiment>-<run id>_vs_<experiment>-<run id>-<digest of the two paths>, the two runs "
        "resolved).",
    )


if __name__ == "__main__":
    define_flags()
    cli.start(main)
