"""The one CLI system: every entry point is an absl app whose errors are one line.

`start(main)` runs `main(argv)` under absl; a user's mistake (a ConfigError, a missing or
foreign file, a folder it may not write) prints `error: <what>` on one line and exits 2, an
interrupt exits 130 without a traceback, and `--verbosity=1` adds the traceback for anyone
debugging the harness itself.
"""

from __future__ import annotations

import difflib
import gc
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from absl import app, flags, logging

from harness.common.terminal import one_line
from harness.common.userfiles import Unreadable, check_flagfiles
from harness.config import ConfigError
from harness.store.io import Locked, NotOurs, OutsideOutput
from harness.store.records import SchemaError
from harness.store.runfolder import SUMMARY_FILE

USAGE_ERROR = 2
INTERRUPTED = 130


class UsageError(ValueError):
    """A command-line mistake: reported as one line, exit status 2."""


def _user_errors() -> tuple[type[BaseException], ...]:
    return (
        ConfigError,
        SchemaError,
        UsageError,
        Unreadable,
        Locked,
        NotOurs,
        OutsideOutput,
        FileNotFoundError,
        PermissionError,
    )


def _parser(known_only: bool) -> Callable[[list[str]], list[str]]:
    def parse(argv: list[str]) -> list[str]:
        try:
            check_flagfiles(argv)  # absl would block on a FIFO and read /dev/zero for ever
            return flags.FLAGS(argv, known_only=known_only)
        except (flags.Error, Unreadable) as e:
            print(f"error: {one_line(e)}", file=sys.stderr)
            sys.exit(USAGE_ERROR)

    return parse


def guarded(main: Callable[[Sequence[str]], int]) -> Callable[[Sequence[str]], int]:
    """Returns `main` with user errors as one line (status 2) and interrupts as status 130."""

    def run(argv: Sequence[str]) -> int:
        # Library INFO logs would bury the one-line errors; --verbosity=0 brings them back.
        if not flags.FLAGS["verbosity"].present:
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except _user_errors() as e:
            if logging.get_verbosity() >= 1:
                traceback.print_exc()
            # A config's mistakes come together (harness.config.experiment.ConfigErrors):
            # one `error:` line each.
            for one in getattr(e, "errors", (e,)):
                print(f"error: {one_line(one)}", file=sys.stderr)
            return USAGE_ERROR
        except OSError as e:  # disk full, read-only folder, a name too long
            if logging.get_verbosity() >= 1:
                traceback.print_exc()
            print(f"error: {one_line(e)}", file=sys.stderr)
            return USAGE_ERROR
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return INTERRUPTED

    return run


def start(main: Callable[[Sequence[str]], int], known_only: bool = False) -> None:
    """Runs `main` as an absl app and exits with its status."""
    body = guarded(main)

    def run(argv: list[str]) -> None:
        code = body(argv)
        # The work is done: a late Ctrl-C (the second of a double press) must not kill the
        # interpreter while it shuts down, which Python lets the default handler do.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # The interpreter's last collection would walk every object the run made, 0.3 s of a
        # 12 s study on a 2-core machine, only to free memory the process gives back anyway.
        gc.freeze()
        sys.exit(code)

    _adopt_entry_flags(main)
    try:
        app.run(run, flags_parser=_parser(known_only))
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)


def config_overrides(argv: Sequence[str]) -> list[str]:
    """Returns the --config.* overrides; any other leftover argument is a usage error."""

    extra = list(argv[1:])
    for arg in extra:
        if arg.startswith("--config."):
            continue
        if not arg.startswith("-"):
            problem = "unexpected positional argument; options look like --config.KEY=VALUE"
            raise ConfigError(f"argument {arg[:80]!r}", "", problem)
        name = arg.lstrip("-").split("=", 1)[0].split(".", 1)[0]
        hint = f" (did you mean --config.{arg.split('.', 1)[1]}?)" if "." in arg else ""
        if not hint or not difflib.get_close_matches(name, ["config"], n=1, cutoff=0.6):
            hint = ""
        raise ConfigError(
            f"flag {arg[:200]}",
            "",
            f"unknown flag{hint}; overrides look like --config.KEY=VALUE (see --helpfull)",
        )
    return extra


def no_extra_arguments(argv: Sequence[str]) -> None:
    """Raises UsageError for positional arguments an entry point does not take."""
    if len(argv) > 1:
        raise UsageError(f"unexpected argument {argv[1][:80]!r}; see --helpfull")


def run_folder(value: str, flag: str, need: str | tuple[str, ...] = SUMMARY_FILE) -> Path:
    """Returns the run folder a flag names, resolved; a UsageError for anything else.

    `latest` is a link to a sibling run; a link that leads out of its own folder (a planted
    `latest`) is refused, so nothing is ever written where the link points.
    """
    path = Path(value)
    if path.is_symlink() and path.resolve().parent != path.parent.resolve():
        raise UsageError(
            f"{flag}={value} is a link to {path.resolve()}, outside its own folder; "
            "name the run folder itself"
        )
    real = path.resolve()
    names = (need,) if isinstance(need, str) else need
    if not any((real / n).is_file() for n in names):
        raise UsageError(
            f"{flag}={value}: no {' or '.join(names)} there, not a finished run folder"
        )
    return real


def _declaring_module() -> str:
    """The module that called a `define_*` here, as absl names modules: `--help` lists the
    flags of the main module (by the path `python -m` ran, sys.argv[0]), and absl alone would
    name this module, harness.commands.cli, whose flags no `--help` lists. The first frame
    outside this module: a helper here that defines a command's flags is looked past."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    name = str(frame.f_globals.get("__name__", ""))
    return sys.argv[0] if name == "__main__" else name


def define_string(name: str, default: str | None, help_text: str) -> None:
    """Defines a string flag unless an entry point already has (tests run several in one process)."""
    if name not in flags.FLAGS:
        flags.DEFINE_string(name, default, help_text, module_name=_declaring_module())


def define_integer(name: str, default: int | None, help_text: str) -> None:
    if name not in flags.FLAGS:
        flags.DEFINE_integer(name, default, help_text, module_name=_declaring_module())


def define_enum(name: str, default: str, values: list[str], help_text: str) -> None:
    if name not in flags.FLAGS:
        flags.DEFINE_enum(name, default, values, help_text, module_name=_declaring_module())


def define_bool(name: str, default: bool, help_text: str) -> None:
    if name not in flags.FLAGS:
        flags.DEFINE_bool(name, default, help_text, module_name=_declaring_module())


ALLOW_LOSS_HELP = (
    "Write the rewritten summary.json even when it lacks a section, a variant or a variant's "
    "section the run's summary holds now (by default the command refuses and changes nothing)."
)


def define_rewrite_flags(run_help: str) -> None:
    """Defines the flags of a command that rewrites a finished run's summary.json (migrate,
    reanalyze): --run, its folder, and --allow_loss, the guard against losing what it holds."""
    define_string("run", "results/gelu/latest", run_help)
    define_bool("allow_loss", False, ALLOW_LOSS_HELP)


def _adopt_entry_flags(entry: Callable[..., object]) -> None:
    """Makes the flags of the module that defines `entry` key flags of the main module, so
    that `--help` lists them: `python -m harness.analyze` runs a thin __main__.py whose main
    and flags live in a library module (harness.commands.analyze)."""
    for flag in flags.FLAGS.get_key_flags_for_module(entry.__module__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
