"""python -m harness.analyze --dump=DIR_OR_FILE --out=DIR [--module=REGEX]
    [--xplane=P [--steps=N]] [--ceilings=ceilings.json]

Analyses the HLO of any program (harness.program) and, with a profile, attributes every
device event of the analysed modules to a cluster; writes report.md and report.html (clusters
ranked, rolled up by source line and named scope, roofline, top kernels, unfused ops) beside
the JSON files. Run through harness/analyze/__main__.py, its documented entry point. This
module only reads the flags into AnalyzeOptions; harness.program.standalone does the work.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness.commands import cli
from harness.common.textsafety import UnsafePattern, user_pattern
from harness.program.standalone import (
    AnalyzeOptions,
    InputError,
    analyse,
    check_inputs,
    closing_lines,
    read_ceilings,
)
from harness.store import io
from harness.study import lifecycle

FLAGS = flags.FLAGS


def define_flags() -> None:
    cli.define_string("dump", None, "XLA dump folder or one HLO text file.")
    cli.define_string("out", None, "Output folder; one subfolder per module.")
    cli.define_string("module", "", "Only modules whose key matches this regex.")
    cli.define_string("xplane", None, "A jax.profiler profile (.xplane.pb or its folder).")
    # One line each in --help (absl wraps at 80 columns): the README says the rest.
    cli.define_integer("steps", None, "Steps the profile covers, if it has no step markers.")
    cli.define_string("ceilings", None, "A run's ceilings.json: the roofline's roofs.")
    cli.define_enum("mode", "jit", ["jit", "eager"], "eager: one module per primitive.")


def options_from_flags() -> AnalyzeOptions:
    """The flags checked, in the order a user reads their errors, into AnalyzeOptions."""
    if FLAGS.steps is not None and FLAGS.steps <= 0:
        raise cli.UsageError(f"--steps must be a positive integer, got {FLAGS.steps}")
    if FLAGS.steps is not None and FLAGS.xplane is None:
        raise cli.UsageError("--steps needs --xplane (the profile whose steps it counts)")
    try:
        check_inputs(Path(FLAGS.dump), Path(FLAGS.xplane) if FLAGS.xplane else None)
        pattern = user_pattern(FLAGS.module) if FLAGS.module else None
    except UnsafePattern as e:
        raise cli.UsageError(f"--module={FLAGS.module!r}: {e}") from None
    except InputError as e:
        raise cli.UsageError(str(e)) from None
    try:
        ceilings = read_ceilings(Path(FLAGS.ceilings)) if FLAGS.ceilings else None
    except InputError as e:
        raise cli.UsageError(str(e)) from None
    return AnalyzeOptions(FLAGS.module, pattern, FLAGS.steps, FLAGS.mode, ceilings)


def main(argv: Sequence[str]) -> int:
    cli.no_extra_arguments(argv)
    # A short-lived process over millions of parsed objects that form almost no cycles: the
    # cyclic collector's full passes cost about 0.5 s on a 48-block train step, for nothing.
    gc.disable()
    if not FLAGS.dump or not FLAGS.out:
        raise cli.UsageError("--dump and --out are required")
    options = options_from_flags()
    dump, xplane = Path(FLAGS.dump), Path(FLAGS.xplane) if FLAGS.xplane else None
    # The dump, the profile and the ceilings are read, never inside what is claimed (emptied).
    inputs = tuple(Path(f) for f in (FLAGS.dump, FLAGS.xplane, FLAGS.ceilings) if f)
    manifest = {
        "kind": "analyze",
        "dump": str(dump),
        "module": FLAGS.module,
        "xplane": FLAGS.xplane,
        "ceilings": FLAGS.ceilings,
    }
    with (
        io.own_output(Path(FLAGS.out), "analyze", inputs) as out,
        lifecycle.running(out, manifest, faults=(Exception,)) as run,
    ):
        try:
            result = analyse(dump, xplane, out, options)
        except InputError as e:
            raise cli.UsageError(str(e)) from None
        run.settle("complete")
    if run.stopped is not None:
        if run.stopped.status == "interrupted":
            print("interrupted", file=sys.stderr)
            return run.stopped.exit_code
        raise run.stopped.error  # recorded in the manifest; the CLI says it in one line
    for line in closing_lines(result, out):
        print(line)
    return 0


def run() -> None:
    """Defines the flags and runs the command (`python -m harness.analyze`)."""
    define_flags()
    cli.start(main)
