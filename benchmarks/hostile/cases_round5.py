"""The issue "Nothing lost, round 5": the attacks that broke round 4, each as a case, and a new
attack of each class beside it (another file, format or mechanism).

- reads that skipped the one reader: a variant's outputs.npz (empty, cut short, arrays of
  another shape than numerics.json records, a zip bomb), the torch trace's gzip (a bomb),
  migrate's raw summary.json (a kernel file, a huge sparse file, bytes that are not UTF-8) and a
  huge timing.json;
- user code that outlives its variant, and a signal aimed at the supervisor
  (tests/test_containment.py runs the double-fork case itself);
- commands that rewrite a good run: reanalyze of a run whose raw inputs are gone.

Cases marked fast need no study (hand-made runs); the rest copy the battery's template run.
"""

from __future__ import annotations

import gzip
import json
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hostile.case import Attack, Case, Outcome, Sandbox
from hostile.readers_material import _manifest, _mini_run, _summary

RUN = "results/gelu/20260101-000000"


def _one_line(*words: str) -> Callable[[Outcome, Sandbox], str | None]:
    """A check: every line of stderr that says `error:` is one line holding every word."""

    def check(outcome: Outcome, _sandbox: Sandbox) -> str | None:
        errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        if not errors:
            return f"no error line: {outcome.stderr[-300:]!r}"
        missing = [w for w in words if w not in errors[0]]
        return f"error lacks {missing}: {errors[0][:300]!r}" if missing else None

    return check


def _warns(*words: str) -> Callable[[Outcome, Sandbox], str | None]:
    def check(outcome: Outcome, _sandbox: Sandbox) -> str | None:
        missing = [w for w in words if w not in outcome.stderr]
        return f"stderr lacks {missing}: {outcome.stderr[-300:]!r}" if missing else None

    return check


# --- outputs.npz: reanalyze of the template run ----------------------------------------------


def _bomb_npz(path: Path, inflated: int = 1 << 30) -> None:
    """An archive of a few MB whose member inflates to `inflated` bytes of zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("v0.npy", "w") as f:
        np.lib.format.write_array(f, np.zeros(inflated // 8, np.float64))


NPZ_DAMAGE: dict[str, Callable[[Path], None]] = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)]),
    "mismatched": lambda p: np.savez(p, v0=np.arange(7.0), r0=np.arange(5.0)),
    "bomb": _bomb_npz,
    # New in round 5: a member whose header states 10^12 values (numpy allocates them first).
    "lying_header": lambda p: _lying_header(p),
}


def _lying_header(path: Path) -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    text = (header.ljust(118) + "\n").encode()
    body = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + bytes(8)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("v0.npy", body)
        z.writestr("r0.npy", body)


def _outputs(damage: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        run = sb.copy_run(sb.root / RUN)
        found = sorted(run.glob("variants/*/outputs.npz"))
        if not found:
            raise RuntimeError("the template run kept no outputs.npz")
        NPZ_DAMAGE[damage](found[0])
        return Attack(
            argv=sb.harness("harness.reanalyze", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            timeout_s=180,
            replaceable=(run,),
            check=_warns("outputs.npz"),
        )

    return setup


# --- the torch trace's gzip -------------------------------------------------------------------

TRACE_READ = (
    "import sys\n"
    "from harness.frontends.torch.trace import load_chrome_trace\n"
    "from harness.profile.events import ProfileError\n"
    "try:\n"
    "    load_chrome_trace(sys.argv[1])\n"
    "except ProfileError as e:\n"
    "    print(f'error: {e}', file=sys.stderr)\n"
    "    sys.exit(2)\n"
)


def _trace(content: Callable[[], bytes]) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        path = sb.write("trace/profile_trace.json.gz", content())
        return Attack(
            argv=(sb.python, "-c", TRACE_READ, str(path)),
            timeout_s=30,
            check=_one_line("profile_trace.json.gz", "inflates to more than"),
        )

    return setup


def _gz(chunk: bytes, times: int) -> bytes:
    """One gzip member of `chunk` repeated `times` times, compressed as a stream."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([*(z.compress(chunk) for _ in range(times)), z.flush()])


def _gzip_bomb() -> bytes:
    """~1.5 MB of gzip that inflates to 1.5 GB of spaces (the attack of issue 59)."""
    return _gz(b" " * (16 << 20), 96)


def _gzip_nested_bomb() -> bytes:
    """New in round 5: a valid trace's start in one member, then a second member that
    inflates to 2 GB of list items."""
    return gzip.compress(b'{"traceEvents": [') + _gz(b"0," * (8 << 20), 128)


# --- migrate's summary.json and timing.json ------------------------------------------------------


def _migrate_summary(kind: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        run = _mini_run(sb, RUN)
        summary = run / "summary.json"
        summary.unlink()
        if kind == "proc_status":
            summary.symlink_to("/proc/self/status")
        elif kind == "huge":
            with summary.open("wb") as f:
                f.truncate(300 << 20)
        elif kind == "non_utf8":
            summary.write_bytes(b'{"schema_version": 3, "experiment": "\xff\xfe"}')
        else:  # new in round 5: a link to the supervisor's own environment
            summary.symlink_to("/proc/self/environ")
        return Attack(
            argv=sb.harness("harness.migrate", f"--run={run}"),
            timeout_s=60,
            check=_one_line("summary.json"),
            also_writes=(f"{RUN}/.lock",),  # the run's lock, taken before the read
        )

    return setup


def _migrate_timing(kind: str) -> Callable[[Sandbox], Attack]:
    """A 92 MB timing.json (refused by its size), or, new in round 5, one under the size bound
    whose rounds no timing stage records (refused by its count before a record is built)."""

    def setup(sb: Sandbox) -> Attack:
        run = _mini_run(sb, RUN, _summary(), _manifest())
        n = 12_000_000 if kind == "huge" else 2_000_000
        rounds = {
            "rounds": n,
            "target_batch_s": 0.01,
            "wall_s": 1.0,
            "orders": [["xla"]] * (n if kind == "huge" else 25_000),
            "variants": {},
        }
        sb.write(f"{RUN}/timing.json", json.dumps(rounds))
        return Attack(
            argv=sb.harness("harness.migrate", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0, 2}),
            timeout_s=60,
            replaceable=(run / "summary.json",),
            check=_warns("timing.json", "its rounds are not used"),
        )

    return setup


# --- reanalyze of a run whose raw inputs are gone ------------------------------------------------


def _unlink_tree(path: Path) -> None:
    for sub in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        sub.rmdir() if sub.is_dir() and not sub.is_symlink() else sub.unlink()
    path.rmdir()


def _file_for_folder(path: Path) -> None:
    _unlink_tree(path)
    path.write_text("a file\n")


RAW_DAMAGE: dict[str, Callable[[Path], None]] = {
    "variants_removed": lambda run: _unlink_tree(run / "variants"),
    "ir_removed": lambda run: _unlink_tree(sorted(run.glob("variants/*/ir"))[0]),
    "variant_folder_is_a_file": lambda run: _file_for_folder(run / "variants" / "xla"),
    # New in round 5: the rounds gone, every comparison and the noise floor would be empty.
    "timing_removed": lambda run: (run / "timing.json").unlink(),
}


def _reanalyze_damaged(damage: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        run = sb.copy_run(sb.root / RUN)
        RAW_DAMAGE[damage](run)
        return Attack(
            argv=sb.harness("harness.reanalyze", f"--run={run}"),
            timeout_s=180,
            check=_one_line("changed nothing" if damage != "timing_removed" else "would lose"),
            also_writes=(f"{RUN}/.lock",),
        )

    return setup


CASES = [
    *(
        Case(f"damaged_run/r5_outputs_npz_{d}", "damaged_run", _outputs(d), fast=False)
        for d in NPZ_DAMAGE
    ),
    Case("hangs/r5_torch_trace_gzip_bomb", "hangs", _trace(_gzip_bomb), fast=False),
    Case("hangs/r5_torch_trace_gzip_in_members", "hangs", _trace(_gzip_nested_bomb), fast=False),
    *(
        Case(f"hangs/r5_migrate_summary_{k}", "hangs", _migrate_summary(k), fast=True)
        for k in ("proc_status", "huge", "non_utf8", "proc_environ")
    ),
    *(
        Case(f"resources/r5_migrate_timing_{k}", "resources", _migrate_timing(k), fast=False)
        for k in ("huge", "many_rounds")
    ),
    *(
        Case(f"overwrites/r5_reanalyze_{d}", "overwrites", _reanalyze_damaged(d), fast=False)
        for d in RAW_DAMAGE
    ),
]
