"""python -m harness.commands.reanalyze --run=DIR: redo the analysis and report of a saved run.

No JAX runs: useful after the analyzers improve, or on a run captured on another machine
(an H200 run analyzed on a laptop).

The analysis reads each variant's raw captures: XLA's dump (`dump/`), the profiles
(`profile/`) and torch's working folder (`torch/`). An exported copy (`harness.report.export`,
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
from harness.config.schema import build_experiment
from harness.records import run_files
from harness.store import io
from harness.store.runfolder import (
    DUMP_DIR,
    IR_DIR,
    MANIFEST_FILE,
    PROFILE_DIR,
    TORCH_DIR,
    RunFolder,
    VariantFolder,
)
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
    missing = missing_inputs(workdir, exp.profile.enabled)
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


# What a captured variant's folder holds that only the capture makes: the inputs of its
# analysis, beside the IR ladder (ir/) made from them.
RAW_INPUTS = (DUMP_DIR, PROFILE_DIR, TORCH_DIR)


def missing_inputs(workdir: Path, profiled: bool) -> list[str]:
    """The raw inputs (`variants/<name>/dump`, ...) a captured variant of `workdir` should have
    and lacks. A variant with an IR ladder was captured: a JAX one has `dump/` (and `profile/`
    when the run profiled), a torch one `torch/`."""
    missing = []
    folder = RunFolder(workdir)
    for vdir in sorted(p for p in folder.variants_dir.glob("*") if (p / IR_DIR).is_dir()):
        torch = VariantFolder(vdir).torch.is_file()
        needs = [
            n for n in RAW_INPUTS if (n == TORCH_DIR) == torch and (profiled or n != PROFILE_DIR)
        ]
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
