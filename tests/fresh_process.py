"""Code that must run where no threaded runtime is loaded: the forking paths (harness.common.forked,
the analyzer's reverse-map child) fork only a process without JAX or torch, and the test
process has JAX loaded. `in_fresh_process` runs a script body in a new interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def in_fresh_process(body: str, *args: str) -> str:
    """Runs `body` (dedented; `import os, sys` done, `sys.argv[1:]` = args) in an interpreter
    that has not imported JAX; returns its stdout. The body asserts what it tests, and a
    failure shows its traceback in the assertion message."""
    script = "import os, sys\n" + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "tests")))},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout
