"""One child process measured: its wall time and the peak resident memory of its own address
space, with the time and peak after each stage of `python -m harness.analyze`.

A child's `ru_maxrss` counts the memory of the parent it was forked from (the kernel carries the
old address space's high-water mark across exec), so a parent holding a large profile makes
every child look large: the child reports its own `VmHWM` instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

# Runs a module as `python -m` does and prints, at exit, the peak resident memory of its own
# address space (VmHWM): a child's ru_maxrss counts the parent's memory it was forked with.
PEAK = (
    "import atexit,runpy,sys,time\n"
    "def status(key):\n"
    " return open('/proc/self/status').read().split(key + ':')[1].split()[0]\n"
    "atexit.register(lambda: print('VmHWM_kB', status('VmHWM'), file=sys.stderr))\n"
    "import harness.program.dump as d, harness.program.standalone as a\n"
    "import harness.records.events_file as e\n"
    "began = time.perf_counter()\n"
    "def staged(module, name):\n"
    " fn = getattr(module, name)\n"
    " def run(*args, **kw):\n"
    "  out = fn(*args, **kw)\n"
    "  print('stage', name, round(time.perf_counter() - began, 1), 's HWM', status('VmHWM'),"
    " 'RSS', status('VmRSS'), file=sys.stderr)\n"
    "  return out\n"
    " setattr(module, name, run)\n"
    "for m, n in ((d, 'read_table'), (d, 'match_table'), (e, 'write'),"
    " (a, 'analyse_modules'), (a, 'write_timeline'), (a, 'dump_memory')):\n"
    " staged(m, n)\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def measured(argv: list[str]) -> dict:
    """Runs a command; its wall seconds, its own peak resident memory (MB), exit code, output."""
    with tempfile.TemporaryFile("w+") as printed:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=printed, stderr=subprocess.STDOUT)
        _, status, _ = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        printed.seek(0)
        text = printed.read()
        found = [line.split()[1] for line in text.splitlines() if line.startswith("VmHWM_kB ")]
        return {
            "wall_s": round(wall, 2),
            "peak_rss_mb": round(int(found[-1]) / 1024, 1) if found else None,
            "rc": os.waitstatus_to_exitcode(status),
            "stages": [line for line in text.splitlines() if line.startswith("stage ")],
            "tail": text[-300:],
        }


def module_measured(module: str, *args: str) -> dict:
    """`python -m module args...`, measured (`measured`), with each analyze stage's time."""
    return measured([sys.executable, "-c", PEAK, module, *args])
