"""What one attack is, and how its outcome is judged.

A case prepares files in a sandbox of its own and names a command. The runner snapshots the
whole sandbox before and after the command and records:
- the exit code, and whether a Python traceback reached the terminal;
- every file changed or created outside the folder the command may write (`Attack.out`);
- every file that existed before and is gone or changed afterwards, outside `Attack.out`, or
  inside it when it is not listed in `Attack.replaceable` (so a command that empties a folder
  it did not make loses files, and is caught);
- whether it ended within its time limit.

A case holds when its exit code is one it allows, no traceback was printed, nothing changed
outside its output folder, nothing was lost, it ended in time, and its own `check` (if any)
found nothing wrong.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The classes of the issue "Nothing lost, round 3", in its order.
KINDS = (
    "deletes",  # commands that delete what they did not make
    "writes_outside",  # writes outside the output folder
    "overwrites",  # finished results overwritten
    "trusted_cache",  # caches used without checking them
    "damaged_run",  # one damaged run breaks the others
    "script",  # clickable script, raw escapes on the terminal
    "resources",  # a config the validator accepts exhausts the machine
    "fault_isolation",  # one variant's fault stops more than itself
    "hangs",  # hangs and unbounded reads
    "big_numbers",  # tracebacks from big numbers
    "quadratic",  # report stages that grow faster than their input
    "remote_content",  # HTML that fetches from the network (round 4)
)


@dataclass(frozen=True)
class Outcome:
    """What the runner saw of one command."""

    rc: int | None  # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float
    changed_outside: tuple[str, ...]  # paths relative to the sandbox
    lost: tuple[str, ...]

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stdout + self.stderr

    @property
    def timed_out(self) -> bool:
        return self.rc is None


@dataclass(frozen=True)
class Attack:
    """The command a case runs, and what it is allowed to do."""

    argv: tuple[str, ...]  # run with cwd = the sandbox's root
    out: Path | None = None  # the one folder it may write; None: it may write nothing
    expect_rc: frozenset[int] = frozenset({2})  # exit codes that count as holding
    timeout_s: float = 60.0
    env: dict[str, str] = field(default_factory=dict)
    replaceable: tuple[Path, ...] = ()  # files or folders under `out` it may replace or remove
    # Extra judgement of the outcome: returns what went wrong, or None.
    check: Callable[[Outcome, Sandbox], str | None] | None = None
    # Paths under the sandbox that the command may change beside `out` (e.g. a results root's
    # index.html for a study); relative to the sandbox root.
    also_writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    name: str  # unique, "<kind>/<what>"
    kind: str  # one of KINDS
    setup: Callable[[Sandbox], Attack]
    fast: bool = False  # cheap enough for the test suite's sample (no study run, < 3 s)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"case {self.name}: kind {self.kind!r} is not one of {KINDS}")


@dataclass(frozen=True)
class Sandbox:
    """A fresh folder for one case, and the shared material cases copy from."""

    root: Path
    template_run: Path | None  # a complete small study run, made once per battery (or None)

    @property
    def python(self) -> str:
        return sys.executable

    def harness(self, module: str = "harness", *args: str) -> tuple[str, ...]:
        """argv for `python -m <module> args...`."""
        return (self.python, "-m", module, *args)

    def copy_run(self, dest: Path) -> Path:
        """Copies the template run to `dest` (a run folder path), returning it."""
        if self.template_run is None:
            raise RuntimeError("this battery was started without a template run")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.template_run, dest, symlinks=True)
        return dest

    def write(self, rel: str, text: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path


# A file past this is judged by its size and time, not read: a case's sparse 6 GB file would
# otherwise cost seconds of reading zeros, twice.
HASHED_BYTES = 64 << 20


def _digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    st = path.stat()
    if st.st_size > HASHED_BYTES:
        return f"size:{st.st_size}:mtime:{st.st_mtime_ns}"
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """Every file and link under `root` (relative path → content digest); folders are implied."""
    seen: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in filenames + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            try:
                if path.is_fifo() or (not path.is_file() and not path.is_symlink()):
                    seen[str(path.relative_to(root))] = "special"
                    continue
                seen[str(path.relative_to(root))] = _digest(path)
            except OSError:
                seen[str(path.relative_to(root))] = "unreadable"
    return seen


def _under(rel: str, folder: str) -> bool:
    return folder == "." or rel == folder or rel.startswith(folder.rstrip("/") + "/")


def judge(
    before: dict[str, str], after: dict[str, str], root: Path, attack: Attack
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Returns (changed outside the output folder, lost) between two snapshots."""
    out = str(attack.out.relative_to(root)) if attack.out is not None else None
    allowed = [out] if out is not None else []
    allowed += list(attack.also_writes)
    replaceable = [str(p.relative_to(root)) for p in attack.replaceable]
    changed_outside = sorted(
        rel
        for rel, digest in after.items()
        if before.get(rel) != digest and not any(_under(rel, a) for a in allowed)
    )
    lost = sorted(
        rel
        for rel, digest in before.items()
        if after.get(rel) != digest
        and not any(_under(rel, r) for r in replaceable)
        and (
            not any(_under(rel, a) for a in allowed)  # outside: changed or gone
            or rel not in after  # inside: gone
        )
        and rel not in changed_outside
    )
    return tuple(changed_outside), tuple(lost)


def run_attack(attack: Attack, sandbox: Sandbox) -> Outcome:
    """Runs one attack in its sandbox and returns what was seen."""
    import time

    before = snapshot(sandbox.root)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TMPDIR": str(sandbox.root / "tmp"),
        "JAX_PLATFORMS": "cpu",
        **attack.env,
    }
    (sandbox.root / "tmp").mkdir(exist_ok=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            attack.argv,
            cwd=sandbox.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=attack.timeout_s,
            start_new_session=True,
        )
        rc: int | None = proc.returncode
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = None, e.stdout or b"", e.stderr or b""
    seconds = time.monotonic() - start
    changed, lost = judge(before, snapshot(sandbox.root), sandbox.root, attack)
    changed = tuple(c for c in changed if not c.startswith("tmp/")) + tuple(
        c for c in changed if c.startswith("tmp/")
    )
    return Outcome(
        rc=rc,
        stdout=stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout,
        stderr=stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr,
        seconds=seconds,
        changed_outside=changed,
        lost=lost,
    )


def failures(outcome: Outcome, attack: Attack, sandbox: Sandbox) -> list[str]:
    """Why the case does not hold (empty when it holds)."""
    why = []
    if outcome.timed_out:
        why.append(f"did not end within {attack.timeout_s:g} s")
    elif outcome.rc not in attack.expect_rc:
        why.append(f"exit {outcome.rc}, expected one of {sorted(attack.expect_rc)}")
    if outcome.traceback:
        why.append("printed a traceback")
    if outcome.changed_outside:
        why.append(f"changed outside its output: {', '.join(outcome.changed_outside[:5])}")
    if outcome.lost:
        why.append(f"lost: {', '.join(outcome.lost[:5])}")
    if attack.check is not None and not outcome.timed_out:
        extra = attack.check(outcome, sandbox)
        if extra:
            why.append(extra)
    return why
