"""python -m harness.commands.reanalyze --run=DIR: redo the analysis and report of a saved run.

No JAX runs: useful after the analyzers improve, or on a run captured on another machine
(an H200 run analyzed on a laptop).

The analysis reads each variant's raw captures, the folders its frontend's traits name
(`raw_inputs`, `profile_inputs`: XLA's dump and profiles, a compiler's working folder). An
exported copy (`harness.report.export`,
the committed references) leaves them out, and analysing it again would replace the sections
made from them with empty ones: the profile, the compile pipelines, the fingerprints. So a run
that lacks an input its own capture made is refused, naming what is missing, and nothing in it
changes; `make report RUN=...` re-renders such a copy from the sections it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from absl import flags

from harness import analyze
from harness.commands import cli
from harness.common import terminal
from harness.config.experiment import Experiment
from harness.config.schema import build_experiment
from harness.frontends import registry
from harness.records import losses, run_files
from harness.records.summary import load_summary, summary_json
from harness.store import io, rewrite
from harness.store.runfolder import IR_DIR, MANIFEST_FILE, RunFolder
from harness.study import run as study


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    workdir = cli.run_folder(flags.FLAGS.run, "--run", need=MANIFEST_FILE)
    manifest_path = RunFolder(workdir).manifest
    try:
        manifest = run_files.load(run_files.MANIFEST, manifest_path)
    except ValueError as e:  # SchemaError: unreadable, not JSON, not a manifest
        raise cli.UsageError(f"{manifest_path}: unreadable manifest ({e})") from None
    config = manifest.config
    if not config:
        raise cli.UsageError(f"{manifest_path}: unreadable manifest (it holds no config)")
    exp = build_experiment(config, str(manifest_path))
    before = _summary_now(workdir)
    missing = missing_inputs(workdir, exp, _captured(before))
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise cli.UsageError(
            f"{workdir}: lacks {', '.join(missing[:3])}{more} that its capture wrote (an "
            "exported copy, or damaged?); reanalyze needs the full run, and changed nothing; "
            "`make report RUN=...` re-renders this one"
        )
    with io.writes_confined_to(workdir), io.run_lock(workdir), rewrite.transaction(workdir) as t:
        # Built beside the old summary, which it replaces only when nothing held is lost;
        # refused, every file the analysis rewrote is put back (harness.store.rewrite).
        summary = analyze.analyze_run(workdir, exp)
        data = summary_json(summary)
        # A finished run's summary is kept whole; an interrupted one's is what analysis can
        # make of what was captured.
        finished = manifest.status in ("complete", "failed")
        gone = losses.lost(before, data) if before is not None and finished else []
        if gone and not flags.FLAGS.allow_loss:
            raise cli.UsageError(losses.refusal(f"{workdir}: reanalyze", gone))
        io.write_json(RunFolder(workdir).summary, data)
        study.write_report(workdir)
        t.commit()
    where = terminal.shown(RunFolder(workdir).summary)
    print(f"analyzed {len(summary.variants)} variants: {where}")
    return 0


def _summary_now(workdir: Path) -> dict[str, Any] | None:
    """The run's summary as it is, at this schema; None when it has none or it is unreadable
    (a run whose analysis never finished has nothing to lose)."""
    path = RunFolder(workdir).summary
    if not path.is_file():
        return None
    try:
        return summary_json(load_summary(path))
    except ValueError:
        return None


def _captured(summary: dict[str, Any] | None) -> frozenset[str]:
    """The variants the summary says were captured and analysed (status ok)."""
    variants = (summary or {}).get("variants") or {}
    return frozenset(
        name for name, v in variants.items() if (v.get("identity") or {}).get("status") == "ok"
    )


def missing_inputs(
    workdir: Path, exp: Experiment, captured: frozenset[str] = frozenset()
) -> list[str]:
    """The raw inputs (`variants/<name>/dump`, ...) a captured variant of `workdir` should have
    and lacks. A variant with an IR ladder (ir/, made from them) was captured, and so was one
    the summary (`captured`) says was: its folder (a folder, not a file or a link) and its
    ladder must be there, and the folders its frontend's traits name: `raw_inputs`,
    `compile_inputs` unless its mode runs op by op, and `profile_inputs` when the run
    profiled. A framework whose plug-in is not loaded here names none (registry.UNKNOWN)."""
    missing = []
    folder = RunFolder(workdir)
    for v in sorted(exp.variants, key=lambda v: v.name):
        vdir = folder.variant(v.name).root
        if v.name in captured and (vdir.is_symlink() or not vdir.is_dir()):
            what = "a folder" if not vdir.exists() else "a folder, not a file or a link"
            missing.append(f"{folder.relative(vdir)} ({what})")
            continue
        compiles = not v.mode_spec.expects_trace_error  # one refused while tracing has none
        if v.name in captured and compiles and not (vdir / IR_DIR).is_dir():
            missing.append(folder.relative(vdir / IR_DIR))
            continue
        if not (vdir / IR_DIR).is_dir():
            continue
        traits = registry.traits(v.framework)
        needs = (
            traits.raw_inputs
            + (() if v.mode_spec.op_by_op else traits.compile_inputs)
            + (traits.profile_inputs if exp.profile.enabled else ())
        )
        missing += [folder.relative(vdir / n) for n in needs if not (vdir / n).is_dir()]
    return missing


def define_flags() -> None:
    cli.define_rewrite_flags("The run folder to analyze again.")


def run() -> None:
    """Defines the flags and runs the command (also `python -m harness.reanalyze`)."""
    define_flags()
    cli.start(main)


if __name__ == "__main__":
    run()
