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

from absl import flags

from harness.commands import cli
from harness.common import terminal
from harness.config.experiment import Experiment
from harness.config.schema import build_experiment
from harness.frontends import registry
from harness.records import run_files
from harness.store import io
from harness.store.runfolder import IR_DIR, MANIFEST_FILE, RunFolder
from harness.study import run as study


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    workdir = cli.run_folder(flags.FLAGS.run, "--run", need=MANIFEST_FILE)
    manifest_path = RunFolder(workdir).manifest
    try:
        config = run_files.load(run_files.MANIFEST, manifest_path).config
    except ValueError as e:  # SchemaError: unreadable, not JSON, not a manifest
        raise cli.UsageError(f"{manifest_path}: unreadable manifest ({e})") from None
    if not config:
        raise cli.UsageError(f"{manifest_path}: unreadable manifest (it holds no config)")
    exp = build_experiment(config, str(manifest_path))
    missing = missing_inputs(workdir, exp)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise cli.UsageError(
            f"{workdir}: lacks {', '.join(missing[:3])}{more} that its capture wrote (an "
            "exported copy?); reanalyze needs the full run, `make report RUN=...` re-renders "
            "this one"
        )
    with io.writes_confined_to(workdir), io.run_lock(workdir):
        summary = study.finalize(workdir, exp)
        study.write_report(workdir)
    where = terminal.shown(RunFolder(workdir).summary)
    print(f"analyzed {len(summary.variants)} variants: {where}")
    return 0


def missing_inputs(workdir: Path, exp: Experiment) -> list[str]:
    """The raw inputs (`variants/<name>/dump`, ...) a captured variant of `workdir` should have
    and lacks. A variant with an IR ladder (ir/, made from them) was captured, and has the
    folders its frontend's traits name: `raw_inputs`, `compile_inputs` unless its mode runs op
    by op, and `profile_inputs` when the run profiled. A framework whose plug-in is not loaded
    here names none (registry.UNKNOWN)."""
    missing = []
    folder = RunFolder(workdir)
    for v in sorted(exp.variants, key=lambda v: v.name):
        vdir = folder.variant(v.name).root
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
    cli.define_string("run", "results/gelu/latest", "The run folder to analyze again.")


def run() -> None:
    """Defines the flags and runs the command (also `python -m harness.reanalyze`)."""
    define_flags()
    cli.start(main)


if __name__ == "__main__":
    run()
