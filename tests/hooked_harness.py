"""`python -m harness` with one of its functions wrapped: the interrupt tests' way to make a
signal land at a known point, however fast or slow the machine. Test-only; the harness itself
has no hook for this.

    python tests/hooked_harness.py hold harness.study.run._stage timing [harness flags ...]
    python tests/hooked_harness.py sigint harness.study.runs.new_run - [harness flags ...]

`hold FN WORD` holds the process for a minute once FN has run with a first argument whose first
word is WORD (the stage line `-- timing ...` is printed by then), so a test that waits for that
line signals inside the stage. `sigint FN -` sends SIGINT to the process as FN is called,
before it does anything.
"""

from __future__ import annotations

import functools
import importlib
import os
import runpy
import signal
import sys
import time
from collections.abc import Callable
from typing import Any


def wrapped(action: str, fn: Callable[..., Any], word: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        if action == "sigint":
            os.kill(os.getpid(), signal.SIGINT)
        result = fn(*args, **kwargs)
        if action == "hold" and args and str(args[0]).split()[0] == word:
            time.sleep(60)
        return result

    return hooked


def main() -> None:
    action, target, word = sys.argv[1:4]
    if action not in ("hold", "sigint"):
        raise SystemExit(f"unknown action {action!r}")
    module_name, _, name = target.rpartition(".")
    module = importlib.import_module(module_name)
    setattr(module, name, wrapped(action, getattr(module, name), word))
    sys.argv = ["harness", *sys.argv[4:]]
    runpy.run_module("harness", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
