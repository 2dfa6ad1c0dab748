"""python -m harness.analyze --dump=DIR_OR_FILE --out=DIR [--module=REGEX] [--xplane=P --steps=N]

Analyses the HLO of any program (harness.analyze.dump) and, with a profile, attributes every
device event to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from absl import flags

from harness import cli, io
from harness.analyze import dump as analysis

FLAGS = flags.FLAGS


def define_flags() -> None:
    cli.define_string("dump", None, "XLA dump folder or one HLO text file.")
    cli.define_string("out", None, "Output folder; one subfolder per module.")
    cli.define_string("module", "", "Only modules whose key matches this regex.")
    cli.define_string("xplane", None, "A jax.profiler profile (.xplane.pb or its folder).")
    cli.define_integer("steps", None, "Steps the profile holds, when it has no step markers.")
    cli.define_enum("mode", "jit", ["jit", "eager"], "eager: one module per primitive.")


def main(argv: Sequence[str]) -> int:
    from harness.hlo.parser import ParseError
    from harness.profile.events import ProfileError

    cli.no_extra_arguments(argv)
    if not FLAGS.dump or not FLAGS.out:
        raise cli.UsageError("--dump and --out are required")
    dump, out = Path(FLAGS.dump), Path(FLAGS.out)
    try:
        pattern = re.compile(FLAGS.module) if FLAGS.module else None
    except re.error as e:
        raise cli.UsageError(
            f"--module={FLAGS.module!r} is not a regular expression: {e}"
        ) from None
    out = io.claim_output(out, "analyze")
    with io.writes_confined_to(out):
        try:
            results = analysis.analyze_dump(dump, out, pattern)
        except (ValueError, OSError) as e:
            msg = str(e) if isinstance(e, ParseError) or str(dump) in str(e) else f"{dump}: {e}"
            raise cli.UsageError(msg.splitlines()[0] if msg else f"{dump}: failed") from None
        print(analysis.format_table(results))
        if FLAGS.xplane is None:
            return 0
        xplane = Path(FLAGS.xplane)
        try:
            report = analysis.attach_profile(results, xplane, out, FLAGS.steps, FLAGS.mode)
        except (ValueError, OSError, ProfileError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise cli.UsageError(f"{xplane}: {first}") from None
    print(
        f"profile: {report.events_in_window} device events, matched {report.matched_fraction:.3f}, "
        f"{report.kernels_per_step:g} kernels and {report.device_ops_per_step:g} device ops a step, "
        f"device time {report.device_time_per_step_s * 1e3:.3f} ms a step; "
        f"{len(report.unmatched)} unmatched (see {out / 'kernels.json'})"
    )
    return 0


if __name__ == "__main__":
    define_flags()
    cli.start(main)
