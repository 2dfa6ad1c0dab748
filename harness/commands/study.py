"""The entry point: wires absl flags to run(config, workdir). Nothing else happens here."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from absl import flags

from harness.commands import cli
from harness.config import load
from harness.search import run_search
from harness.study import group, run, runs
from harness.study.session import session as session_of

_CONFIG = flags.DEFINE_string(
    "config", "gelu.yaml", "Config file; a bare name is looked up in configs/."
)
_RESULTS = flags.DEFINE_string("results_root", "results", "Where run folders are created.")
_RESUME = flags.DEFINE_string("resume", None, "Run id of an interrupted run to complete.")


def main(argv: Sequence[str]) -> int:
    config = load(_CONFIG.value, cli.config_overrides(argv))
    root = runs.results_root(_RESULTS.value)
    workdir = runs.resume_dir(root, config, _RESUME.value) if _RESUME.value else None
    if config.experiment.search.base and _RESUME.value:
        raise cli.UsageError("--resume: a search is not resumable; start it again")
    with session_of(config) as session:
        if session.rank != 0:  # started by an external launcher: process 0 writes the run
            return group.follow(session.worker, config.experiment, sys.stdout)
        workdir = workdir or runs.new_run(root, config)
        if config.experiment.search.base:
            return run_search(config, workdir, session)
        return run.run(config, workdir, session, resume=bool(_RESUME.value))


def start() -> None:
    cli.start(main, known_only=True)


if __name__ == "__main__":
    sys.exit(start())
