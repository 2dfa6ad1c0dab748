"""The entry point: wires absl flags to run(config, workdir). Nothing else happens here."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from absl import app, flags, logging

_CONFIG = flags.DEFINE_string(
    "config", "gelu.yaml", "Config file; a bare name is looked up in configs/."
)
_RESULTS = flags.DEFINE_string("results_root", "results", "Where run folders are created.")
_RESUME = flags.DEFINE_string("resume", None, "Run id of an interrupted run to complete.")

USAGE_ERROR = 2


def _overrides(argv: Sequence[str]) -> list[str]:
    """Returns the --config.* overrides; any other leftover argument is a usage error."""
    from harness.config import ConfigError

    extra = list(argv[1:])
    for arg in extra:
        if not arg.startswith("--config."):
            raise ConfigError(
                f"flag {arg}",
                "",
                "unknown flag; overrides look like --config.KEY=VALUE (see --helpfull)",
            )
    return extra


def main(argv: Sequence[str]) -> int:
    from harness import io, run
    from harness.config import ConfigError, load

    try:
        config = load(_CONFIG.value, _overrides(argv))
        run.preflight(config.experiment)
        root = Path(_RESULTS.value)
        if _RESUME.value:
            workdir = io.confined(root, config.experiment.experiment, _RESUME.value)
            if not (workdir / "manifest.json").exists():
                raise ConfigError(f"flag --resume={_RESUME.value}", "", f"no run folder {workdir}")
        else:
            workdir = io.new_run_dir(root, config.experiment.experiment)
    except (ConfigError, ValueError) as e:
        if logging.get_verbosity() >= 1:
            raise
        print(f"error: {e}", file=sys.stderr)
        return USAGE_ERROR
    return run.run(config, workdir, resume=bool(_RESUME.value))


def _parse(argv: list[str]) -> list[str]:
    # Unknown --config.* flags are overrides, so absl parses only the flags it knows.
    try:
        return flags.FLAGS(argv, known_only=True)
    except flags.Error as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(USAGE_ERROR)


def start() -> None:
    app.run(lambda argv: sys.exit(main(argv)), flags_parser=_parse)
