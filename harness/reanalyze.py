"""python -m harness.reanalyze --run=DIR: redo the analysis and report of a saved run.

No JAX runs: useful after the analyzers improve, or on a run captured on another machine
(an H200 run analyzed on a laptop).
"""

from __future__ import annotations

from collections.abc import Sequence

from absl import flags

from harness import cli


def main(argv: Sequence[str]) -> int:
    from harness import io, run
    from harness.config.schema import build_experiment

    cli.no_extra_arguments(argv)
    workdir = cli.run_folder(flags.FLAGS.run, "--run", need="manifest.json")
    manifest_path = workdir / "manifest.json"
    try:
        manifest = io.read_json(manifest_path)
        config = manifest["config"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise cli.UsageError(f"{manifest_path}: unreadable manifest ({e})") from None
    exp = build_experiment(config, str(manifest_path))
    with io.writes_confined_to(workdir), io.run_lock(workdir):
        summary = run.finalize(workdir, exp)
        run.write_report(workdir)
    print(f"analyzed {len(summary.variants)} variants: {workdir / 'summary.json'}")
    return 0


def define_flags() -> None:
    cli.define_string("run", "results/gelu/latest", "The run folder to analyze again.")


if __name__ == "__main__":
    define_flags()
    cli.start(main)
