"""The entry point: wires absl flags to run(config, workdir). Nothing else happens here."""

from __future__ import annotations

import difflib
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
        if arg.startswith("--config."):
            continue
        if not arg.startswith("-"):
            problem = "unexpected positional argument; options look like --config.KEY=VALUE"
            raise ConfigError(f"argument {arg!r}", "", problem)
        name = arg.lstrip("-").split("=", 1)[0].split(".", 1)[0]
        hint = f" (did you mean --config.{arg.split('.', 1)[1]}?)" if "." in arg else ""
        if not hint or not difflib.get_close_matches(name, ["config"], n=1, cutoff=0.6):
            hint = ""
        raise ConfigError(
            f"flag {arg}",
            "",
            f"unknown flag{hint}; overrides look like --config.KEY=VALUE (see --helpfull)",
        )
    return extra


def _resume_dir(root: Path, experiment: str, run_id: str) -> Path:
    """Returns the folder of run `run_id`; a ConfigError names the flag and the runs that exist."""
    from harness import io
    from harness.config import ConfigError
    from harness.config.schema import validate_name

    source = f"flag --resume={run_id}"
    validate_name(source, "resume", run_id)
    try:
        workdir = io.confined(root, experiment, run_id)
    except ValueError as e:
        raise ConfigError(source, "resume", str(e)) from e
    if not (workdir / "manifest.json").is_file():
        parent = root / experiment
        runs = (
            sorted(
                p.name for p in parent.iterdir() if p.is_dir() and (p / "manifest.json").is_file()
            )
            if parent.is_dir()
            else []
        )
        listed = ", ".join(runs[-10:]) if runs else "none yet"
        raise ConfigError(
            source, "resume", f"no run {run_id!r} under {parent}; runs there: {listed}"
        )
    return workdir


def _check_same_config(workdir: Path, run_id: str, config: Any) -> None:
    """Refuses to resume a run with a config other than the one it started with."""
    import json

    from harness import io
    from harness.config import ConfigError
    from harness.config.schema import to_plain

    source = f"flag --resume={run_id}"
    try:
        before = io.read_json(workdir / "manifest.json").get("config")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(
            source, "resume", f"{workdir / 'manifest.json'} is unreadable: {e}"
        ) from e
    now = json.loads(json.dumps(to_plain(config.experiment)))
    diff = _first_difference(before, now, "")
    if before is not None and diff is not None:
        raise ConfigError(
            source,
            diff or "<config>",
            "differs from the config the run started with; resume with the same config and "
            "overrides (see its manifest.json), or start a new run",
        )


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    """Returns the dotted key where two plain values first differ, or None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            found = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else path


def main(argv: Sequence[str]) -> int:
    from harness import io, run
    from harness.config import ConfigError, load
    from harness.config.load import blame

    # Library INFO logs (jax probing for backends) would bury the one-line errors; --verbosity=0
    # brings them back, --verbosity=1 adds tracebacks to config errors.
    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    try:
        config = load(_CONFIG.value, _overrides(argv))
        root = Path(_RESULTS.value)
        if _RESUME.value:
            workdir = _resume_dir(root, config.experiment.experiment, _RESUME.value)
            _check_same_config(workdir, _RESUME.value, config)
        try:
            run.preflight(config.experiment)
        except ConfigError as e:
            raise blame(config.path, config.overrides, e) from e
        if not _RESUME.value:
            try:
                workdir = io.new_run_dir(root, config.experiment.experiment)
            except (OSError, ValueError) as e:
                raise ConfigError(f"flag --results_root={root}", "experiment", str(e)) from e
    except (ConfigError, ValueError) as e:
        # One line by default; --verbosity=1 adds the traceback above it.
        if logging.get_verbosity() >= 1:
            traceback.print_exc()
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
