"""Hostile cases of issue 32's classes 7, 8 and 9: resources, faults that must stay with their
variant, hangs and unbounded reads.

- `hangs/*`: config and flag files that are FIFOs, devices, kernel files, huge files, links to
  them, nested flag files, under every entry point; programs whose init or function never
  returns (the preflight and every worker call have a time limit).
- `fault_isolation/*`: a program that crashes, raises, stops itself, hangs or writes to the
  supervisor's pipe only in the timing stage, or only in one variant's capture; a worker killed
  or stopped from outside during the preflight, the capture or the ceilings.
- `resources/*`: meshes of forced host devices that multiply a replicated buffer, problems
  over RLIMIT_AS or RLIMIT_DATA, a worker killed as the OOM killer would.

A program study has two variants of one function: `xla` (float32) and `bad` (the inputs cast
to bfloat16); the function's misbehaviour is keyed on the bfloat16 dtype, so only `bad`
misbehaves and `xla` must still be captured and timed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from hostile.case import Attack, Case, Outcome, Sandbox

FIFO = "in/pipe.fifo"
STUDY_S = 240.0  # a small program study takes 10-20 s on two cores; a time limit adds its own


# --- shared set-up ----------------------------------------------------------------------------


def _fifo(sb: Sandbox, rel: str = FIFO) -> Path:
    path = sb.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _link(sb: Sandbox, rel: str, target: str) -> Path:
    path = sb.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def _refused(*needles: str) -> Callable[[Outcome, Sandbox], str | None]:
    """A check: stderr is one `error:` line that mentions every needle, and no results exist."""

    def check(out: Outcome, sb: Sandbox) -> str | None:
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        if len(errors) != 1:
            return f"expected one error line, got: {out.stderr[-300:]!r}"
        missing = [n for n in needles if n.lower() not in errors[0].lower()]
        if missing:
            return f"the error does not mention {missing}: {errors[0][:300]}"
        if (sb.root / "results").exists() and any((sb.root / "results").rglob("manifest.json")):
            return "a run folder was made for a refused config"
        return None

    return check


def _cli(sb: Sandbox, module: str, *args: str, timeout: float = 30.0, **kw) -> Attack:
    return Attack(
        argv=sb.harness(module, *args),
        out=sb.root / "results",
        expect_rc=frozenset({1, 2}),
        timeout_s=timeout,
        **kw,
    )


# --- programs ---------------------------------------------------------------------------------

PROGRAM = '''\
"""A program for the hostile battery: misbehaves as ACTION says, in the bfloat16 variant only,
from its AFTER-th call on (a host callback counts the calls)."""
import os
import signal
import sys
import time

import jax
import jax.numpy as jnp

ACTION = {action!r}
AFTER = {after}
WHEN = {when!r}  # "call": in the callback; "init" / "trace": in init or at trace time
_calls = [0]


def _pipes():
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{{name}}").startswith("pipe:"):
                yield int(name)
        except OSError:
            pass


def act():
    if ACTION == "abort":
        os.abort()
    if ACTION == "raise":
        raise RuntimeError("the program fails when called this often")
    if ACTION == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if ACTION == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if ACTION == "exit":
        os._exit(3)
    if ACTION == "hang":
        while True:
            time.sleep(0.2)
    if ACTION in ("pipe_garbage", "pipe_json"):
        line = (b"not json at all\\n" if ACTION == "pipe_garbage"
                else b'{{"event": "timed"}}\\n{{"event": "done", "variant": "xla"}}\\n')
        for fd in _pipes():
            try:
                os.write(fd, line)
            except OSError:
                pass
    if ACTION == "low_fds":
        for fd in range(0, 64):
            try:
                os.write(fd, b"garbage on a low descriptor\\n")
            except OSError:
                pass
    if ACTION == "spam":
        sys.stdout.write("x" * 100000 + "\\n")
        sys.stderr.write("y" * 100000 + "\\n")


def _hook(a):
    if str(a.dtype) != "bfloat16":
        return
    _calls[0] += 1
    if _calls[0] >= AFTER:
        act()


if WHEN == "import":
    act()


def init(key, x):
    if WHEN == "init":
        act()
    return {{"w": jnp.ones((x.shape[-1], 8), jnp.float32) * 0.1}}


def apply(p, x):
    if WHEN == "trace":
        act()
    if WHEN == "call":
        jax.debug.callback(_hook, x[0, 0])
    if {big} and x.dtype == jnp.bfloat16:  # a temporary the estimate cannot see
        big = jnp.sort(jnp.broadcast_to(x.ravel()[:1].astype(jnp.float32), ({big},)))
        return jnp.tanh(x @ p["w"].astype(x.dtype)) + big[0].astype(x.dtype)
    return jnp.tanh(x @ p["w"].astype(x.dtype))
'''

CONFIG = """\
experiment: faults
seed: 1
baseline: xla
program:
  function: {program}:apply
  init: {program}:init
  inputs:
    - {{shape: [16, 32], dtype: float32}}
measure: {{warmup: 1, steps: 3}}
profile: {{enabled: false}}
dump: {{passes: false}}
timing: {{rounds: 3, budget_s: 0.5}}
limits: {{preflight_s: {preflight_s}, call_s: {call_s}, stopped_s: {stopped_s}}}
variants:
  - {{name: xla, mode: jit}}
  - {{name: bad, mode: jit, program: {{dtype: bfloat16}}}}
"""


def _program_study(
    sb: Sandbox,
    action: str,
    when: str = "call",
    after: int = 1,
    big: int = 0,
    preflight_s: float = 120,
    call_s: float = 120,
    stopped_s: float = 3,
    wrap: str = "",
    extra: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Writes the program and its config into the sandbox; returns the study's argv (run
    through the wrapper script `wrap` when given)."""
    sb.write("study/prog.py", PROGRAM.format(action=action, after=after, when=when, big=big))
    sb.write(
        "study/faults.yaml",
        CONFIG.format(
            program=str(sb.root / "study" / "prog.py"),
            preflight_s=preflight_s,
            call_s=call_s,
            stopped_s=stopped_s,
        ),
    )
    argv = sb.harness("harness", "--config=study/faults.yaml", "--results_root=results", *extra)
    if wrap:
        sb.write("study/wrap.py", wrap)
        return (sb.python, "study/wrap.py", *argv)
    return argv


def _runs(sb: Sandbox) -> list[Path]:
    root = sb.root / "results"
    return sorted(p.parent for p in root.glob("*/*/manifest.json") if not p.parent.is_symlink())


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _final_run(out: Outcome, sb: Sandbox) -> tuple[Path | None, str | None]:
    """Returns the one run folder, or why it is not one finished run."""
    runs = _runs(sb)
    if len(runs) != 1:
        return None, f"expected one run folder, found {len(runs)}: {out.stderr[-400:]!r}"
    status = _read(runs[0] / "manifest.json").get("status")
    if status not in ("complete", "failed"):
        return None, f"the manifest is left {status!r}"
    if "Traceback" in out.stderr or "WorkerDied" in out.stderr:
        return None, "a traceback reached the terminal"
    return runs[0], None


def _variant_status(run: Path, name: str) -> str | None:
    return _read(run / "variants" / name / "result.json").get("status")


def timed_except_bad(*reason: str) -> Callable[[Outcome, Sandbox], str | None]:
    """A check: both variants captured ok, `xla` timed in rounds, `bad` excluded with a reason
    that mentions every string of `reason`."""

    def check(out: Outcome, sb: Sandbox) -> str | None:
        run, why = _final_run(out, sb)
        if run is None:
            return why
        timing = _read(run / "timing.json")
        if not timing.get("rounds") or "xla" not in (timing.get("variants") or {}):
            return f"xla was not timed: rounds={timing.get('rounds')}, {out.stderr[-300:]!r}"
        excluded = timing.get("excluded") or {}
        if "bad" not in excluded or "bad" in (timing.get("variants") or {}):
            return f"bad was not excluded from timing: {sorted(excluded)}"
        text = str(excluded["bad"]).lower()
        missing = [r for r in reason if r.lower() not in text]
        return f"bad's reason {excluded['bad']!r} lacks {missing}" if missing else None

    return check


def capture_fails_bad(*reason: str) -> Callable[[Outcome, Sandbox], str | None]:
    """A check: `bad` recorded as failed with a reason mentioning `reason`, `xla` ok and timed."""

    def check(out: Outcome, sb: Sandbox) -> str | None:
        run, why = _final_run(out, sb)
        if run is None:
            return why
        if _variant_status(run, "xla") != "ok":
            return f"xla is {_variant_status(run, 'xla')!r}, not ok"
        record = _read(run / "variants" / "bad" / "result.json")
        if record.get("status") != "failed":
            return f"bad is {record.get('status')!r}, not failed"
        text = str(record.get("reason")).lower()
        missing = [r for r in reason if r.lower() not in text]
        if missing:
            return f"bad's reason {record.get('reason')!r} lacks {missing}"
        timing = _read(run / "timing.json")
        if "xla" not in (timing.get("variants") or {}):
            return "xla was not timed"
        return None

    return check


def finished(out: Outcome, sb: Sandbox) -> str | None:
    """A check: one run folder, its manifest final, no traceback."""
    return _final_run(out, sb)[1]


def ceilings_missing(out: Outcome, sb: Sandbox) -> str | None:
    run, why = _final_run(out, sb)
    if run is None:
        return why
    notes = " ".join(_read(run / "manifest.json").get("notes") or [])
    if (run / "ceilings.json").exists() and "ceilings" not in notes:
        return None  # the kill landed after the ceilings: the timing stage then owns it
    if "ceilings" not in notes:
        return "the manifest does not say the ceilings are missing"
    return None


# A wrapper that runs the study and, when its output shows `trigger`, sends `sig` to the
# supervisor's worker children (the worker runs the program; the supervisor must survive it).
WRAP = """\
import os, signal, subprocess, sys, threading, time
TRIGGER, SIG, DELAY = {trigger!r}, signal.{sig}, {delay}
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)

def children():
    try:
        text = open(f"/proc/{{proc.pid}}/task/{{proc.pid}}/children").read()
    except OSError:
        return []
    return [int(p) for p in text.split()]

def hit():
    time.sleep(DELAY)
    for pid in children():
        try:
            os.kill(pid, SIG)
        except OSError:
            pass

fired = False
if TRIGGER == "":
    threading.Thread(target=hit, daemon=True).start()
    fired = True
for line in proc.stdout:
    sys.stdout.write(line)
    if not fired and line.startswith(TRIGGER):
        fired = True
        threading.Thread(target=hit, daemon=True).start()
sys.exit(proc.wait())
"""


def _wrap(trigger: str, sig: str, delay: float = 0.0) -> str:
    return WRAP.format(trigger=trigger, sig=sig, delay=delay)


# --- class 9: hangs and unbounded reads -------------------------------------------------------


def _config_case(name: str, make: Callable[[Sandbox], str], *needles: str) -> Case:
    def setup(sb: Sandbox) -> Attack:
        target = make(sb)
        return _cli(
            sb, "harness", f"--config={target}", "--results_root=results", check=_refused(*needles)
        )

    return Case(f"hangs/{name}", "hangs", setup, fast=True)


def _big(sb: Sandbox, rel: str, size: int = (1 << 20) + 10) -> str:
    sb.write(rel, b"# " + b"x" * size + b"\n")
    return rel


CONFIG_CASES = [
    _config_case("config_proc_kmsg", lambda sb: "/proc/kmsg", "/proc/kmsg"),
    _config_case("config_dev_zero", lambda sb: "/dev/zero", "/dev/zero"),
    _config_case("config_dev_urandom", lambda sb: "/dev/urandom", "/dev/urandom"),
    _config_case("config_dev_stdin", lambda sb: "/dev/stdin", "/dev/stdin"),
    _config_case("config_proc_self_mem", lambda sb: "/proc/self/mem", "/proc/self/mem"),
    _config_case("config_fifo", lambda sb: (_fifo(sb), FIFO)[1], "fifo"),
    _config_case(
        "config_link_to_fifo",
        lambda sb: (_fifo(sb), _link(sb, "deep/er/c.yaml", "../../" + FIFO), "deep/er/c.yaml")[2],
        "c.yaml",
    ),
    _config_case(
        "config_link_to_dev_zero",
        lambda sb: (_link(sb, "cfg/zero.yaml", "/dev/zero"), "cfg/zero.yaml")[1],
        "zero.yaml",
    ),
    _config_case(
        "config_link_to_kmsg",
        lambda sb: (_link(sb, "kmsg.yaml", "/proc/kmsg"), "./kmsg.yaml")[1],
        "kmsg.yaml",
    ),
    _config_case("config_huge_file", lambda sb: _big(sb, "huge.yaml"), "huge.yaml"),
    _config_case("config_folder", lambda sb: ((sb.root / "d.yaml").mkdir(), "d.yaml")[1], "d.yaml"),
]


def _flag_case(
    name: str, make: Callable[[Sandbox], tuple[str, ...]], module: str = "harness", *needles: str
) -> Case:
    def setup(sb: Sandbox) -> Attack:
        return _cli(sb, module, *make(sb), check=_refused("flagfile", *needles))

    return Case(f"hangs/{name}", "hangs", setup, fast=True)


def _nested(sb: Sandbox, final: str, depth: int) -> str:
    """Writes flag files f0 -> f1 -> ... -> `final`, each in a folder of its own, with
    relative paths (as absl reads them: from the current folder); returns f0."""
    names = [f"flags/l{i}/f{i}.flags" for i in range(depth)]
    for i, rel in enumerate(names):
        nxt = names[i + 1] if i + 1 < depth else final
        sb.write(rel, f"# level {i}\n--config.measure.steps=3\n--flagfile={nxt}\n")
    return names[0]


FLAG_CASES = [
    _flag_case("flagfile_fifo", lambda sb: (_fifo(sb), f"--flagfile={FIFO}")[1:]),
    _flag_case("flagfile_fifo_next_arg", lambda sb: (_fifo(sb), "--flagfile", FIFO)[1:]),
    _flag_case("flagfile_fifo_one_dash", lambda sb: (_fifo(sb), f"-flagfile={FIFO}")[1:]),
    _flag_case("flagfile_dev_zero", lambda sb: ("--flagfile=/dev/zero",)),
    _flag_case("flagfile_dev_urandom", lambda sb: ("--flagfile=/dev/urandom",)),
    _flag_case("flagfile_proc_kmsg", lambda sb: ("--flagfile=/proc/kmsg",)),
    _flag_case("flagfile_home_tilde_fifo", lambda sb: ("--flagfile=~/../../dev/zero",)),
    _flag_case(
        "flagfile_nested_fifo", lambda sb: (_fifo(sb), f"--flagfile={_nested(sb, FIFO, 1)}")[1:]
    ),
    _flag_case(
        "flagfile_nested_three_deep_dev_zero",
        lambda sb: (f"--flagfile={_nested(sb, '/dev/zero', 3)}",),
    ),
    _flag_case("flagfile_huge", lambda sb: (f"--flagfile={_big(sb, 'big.flags')}",)),
    _flag_case(
        "flagfile_link_to_fifo",
        lambda sb: (_fifo(sb), _link(sb, "l/f.flags", "../" + FIFO), "--flagfile=l/f.flags")[2:],
    ),
    _flag_case("flagfile_after_config", lambda sb: ("--config=gelu.yaml", "--flagfile=/dev/zero")),
    _flag_case(
        "report_flagfile_fifo", lambda sb: (_fifo(sb), f"--flagfile={FIFO}")[1:], "harness.report"
    ),
    _flag_case(
        "compare_flagfile_dev_zero",
        lambda sb: ("--flagfile=/dev/zero",),
        "harness.commands.compare",
    ),
    _flag_case(
        "export_flagfile_fifo",
        lambda sb: (_fifo(sb), f"--flagfile={FIFO}")[1:],
        "harness.commands.export",
    ),
    _flag_case(
        "reanalyze_flagfile_fifo",
        lambda sb: (_fifo(sb), f"--flagfile={FIFO}")[1:],
        "harness.commands.reanalyze",
    ),
    _flag_case(
        "analyze_flagfile_dev_zero", lambda sb: ("--flagfile=/dev/zero",), "harness.analyze"
    ),
]


def _config_through_flagfile(sb: Sandbox) -> Attack:
    _fifo(sb)
    sb.write("via.flags", f"--config={FIFO}\n")
    return _cli(
        sb, "harness", "--flagfile=via.flags", "--results_root=results", check=_refused("fifo")
    )


def _study_case(
    name: str,
    kind: str,
    check: Callable[[Outcome, Sandbox], str | None],
    rc: frozenset[int],
    **study,
) -> Case:
    def setup(sb: Sandbox) -> Attack:
        return Attack(
            argv=_program_study(sb, **study),
            out=sb.root / "results",
            expect_rc=rc,
            timeout_s=STUDY_S,
            check=check,
        )

    return Case(f"{kind}/{name}", kind, setup)


OK, FAILED, REFUSED = frozenset({0}), frozenset({1}), frozenset({2})

HANG_STUDIES = [
    _study_case(
        "program_init_never_returns",
        "hangs",
        _refused("program", "preflight"),
        REFUSED,
        action="hang",
        when="init",
        preflight_s=20,
    ),
    _study_case(
        "program_trace_never_returns",
        "hangs",
        _refused("program", "preflight"),
        REFUSED,
        action="hang",
        when="trace",
        preflight_s=20,
    ),
    _study_case(
        "program_import_never_returns",
        "hangs",
        _refused("preflight"),
        REFUSED,
        action="hang",
        when="import",
        preflight_s=20,
    ),
    _study_case(
        "program_call_never_returns_in_capture",
        "hangs",
        capture_fails_bad("did not answer"),
        FAILED,
        action="hang",
        call_s=15,
    ),
    _study_case(
        "program_call_never_returns_in_timing",
        "hangs",
        timed_except_bad("did not answer", "timing"),
        OK,
        action="hang",
        after=60,
        call_s=15,
    ),
]

# --- class 8: faults stay with their variant --------------------------------------------------

TIMING_AFTER = 60  # the capture calls `bad` fewer times than this; the timing many more

FAULT_STUDIES = (
    [
        _study_case(
            f"timing_{action}",
            "fault_isolation",
            timed_except_bad(*needles),
            OK,
            action=action,
            after=TIMING_AFTER,
        )
        for action, needles in (
            ("abort", ("SIGABRT", "timing")),
            ("raise", ("RuntimeError", "timing")),
            ("sigkill", ("SIGKILL",)),
            ("exit", ("status 3",)),
            ("sigstop", ("stopped",)),
            ("pipe_garbage", ("pipe",)),
            ("pipe_json", ("pipe",)),
        )
    ]
    + [
        _study_case(
            f"capture_{action}",
            "fault_isolation",
            capture_fails_bad(*needles),
            FAILED,
            action=action,
        )
        for action, needles in (
            ("abort", ("SIGABRT",)),
            ("sigstop", ("stopped",)),
            ("pipe_garbage", ("pipe",)),
            ("pipe_json", ("pipe",)),
            ("exit", ("status 3",)),
        )
    ]
    + [
        _study_case(
            "writes_to_low_descriptors", "fault_isolation", finished, OK, action="low_fds", after=5
        ),
        _study_case(
            "import_writes_to_low_descriptors",
            "fault_isolation",
            finished,
            OK,
            action="low_fds",
            when="import",
        ),
        _study_case(
            "spams_stdout_and_stderr", "fault_isolation", finished, OK, action="spam", after=1
        ),
        _study_case(
            "pipe_garbage_in_preflight",
            "fault_isolation",
            _refused("pipe"),
            REFUSED,
            action="pipe_garbage",
            when="init",
        ),
        _study_case(
            "ceilings_worker_killed",
            "fault_isolation",
            ceilings_missing,
            frozenset({0, 1}),
            action="none",
            wrap=_wrap("-- timing", "SIGKILL", 0.3),
        ),
        _study_case(
            "capture_worker_stopped_from_outside",
            "fault_isolation",
            finished,
            frozenset({1}),
            action="none",
            wrap=_wrap("[1/2]", "SIGSTOP"),
        ),
        _study_case(
            "capture_worker_killed_from_outside",
            "fault_isolation",
            finished,
            frozenset({1}),
            action="none",
            wrap=_wrap("[1/2]", "SIGKILL"),
        ),
        _study_case(
            "timing_worker_stopped_from_outside",
            "fault_isolation",
            finished,
            frozenset({0, 1}),
            action="none",
            wrap=_wrap("-- timing", "SIGSTOP", 1.0),
        ),
        _study_case(
            "preflight_worker_stopped",
            "fault_isolation",
            _refused("stopped"),
            REFUSED,
            action="none",
            wrap=_wrap("", "SIGSTOP", 2.0),
        ),
    ]
)

# --- class 7: resources -----------------------------------------------------------------------

RLIMIT = """\
import os, resource, sys
resource.setrlimit(resource.{which}, ({gib} << 30, resource.RLIM_INFINITY))
os.execv(sys.argv[1], sys.argv[1:])
"""


def _gelu(
    sb: Sandbox,
    *flags: str,
    rlimit: tuple[str, int] | None = None,
    check: Callable[[Outcome, Sandbox], str | None] | None = None,
    rc: frozenset[int] = REFUSED,
    config: str = "gelu.yaml",
) -> Attack:
    argv = sb.harness("harness", f"--config={config}", "--results_root=results", *flags)
    if rlimit is not None:
        sb.write("limit.py", RLIMIT.format(which=rlimit[0], gib=rlimit[1]))
        argv = (sb.python, "limit.py", *argv)
    return Attack(argv=argv, out=sb.root / "results", expect_rc=rc, timeout_s=STUDY_S, check=check)


def _mesh(
    devices: str, out: str = "[]", x: str = "[d,null]", m: int = 4096, n: int = 4096
) -> tuple[str, ...]:
    return (
        "--config.select=single,dp",
        f"--config.variants.dp.sharding.mesh={devices}",
        f"--config.variants.dp.sharding.x={x}",
        f"--config.variants.dp.sharding.out={out}",
        f"--config.problem.m={m}",
        "--config.problem.k=8",
        f"--config.problem.n={n}",
    )


def _resource(name: str, setup: Callable[[Sandbox], Attack]) -> Case:
    return Case(f"resources/{name}", "resources", setup)


BIG = (
    "--config.select=xla",
    "--config.problem.m=16384",
    "--config.problem.k=64",
    "--config.problem.n=16384",
)

RESOURCE_CASES = [
    _resource(
        "mesh_2048_replicated_output",
        lambda sb: _gelu(
            sb, *_mesh("2048"), config="gelu_sharded.yaml", check=_refused("variants.dp.sharding")
        ),
    ),
    _resource(
        "mesh_64x32_replicated_output",
        lambda sb: _gelu(
            sb,
            "--config.select=single,mesh_2d",
            "--config.variants.mesh_2d.sharding.mesh=[64,32]",
            "--config.variants.mesh_2d.sharding.out=[]",
            "--config.problem.m=4096",
            "--config.problem.k=64",
            "--config.problem.n=4096",
            config="gelu_sharded.yaml",
            check=_refused("variants.mesh_2d.sharding"),
        ),
    ),
    _resource(
        "mesh_1024_replicated_everything",
        lambda sb: _gelu(
            sb,
            *_mesh("1024", out="[]", x="[]", m=8192, n=4096),
            config="gelu_sharded.yaml",
            check=_refused("variants.dp.sharding"),
        ),
    ),
    _resource(
        "rlimit_as_big_problem",
        lambda sb: _gelu(
            sb, *BIG, rlimit=("RLIMIT_AS", 4), check=_refused("RLIMIT_AS", "variants.xla.problem")
        ),
    ),
    _resource(
        "rlimit_data_big_problem",
        lambda sb: _gelu(
            sb, *BIG, rlimit=("RLIMIT_DATA", 3), check=_refused("RLIMIT_DATA", "variants.xla")
        ),
    ),
    _resource(
        "rlimit_as_through_flag_override",
        lambda sb: _gelu(
            sb,
            "--config.select=xla,matmul_only",
            "--config.problem.m=12288",
            "--config.problem.n=16384",
            "--config.problem.k=64",
            rlimit=("RLIMIT_AS", 4),
            check=_refused("RLIMIT_AS"),
        ),
    ),
    _resource(
        "capture_killed_like_the_oom_killer",
        lambda sb: Attack(
            argv=_program_study(sb, "sigkill"),
            out=sb.root / "results",
            expect_rc=FAILED,
            timeout_s=STUDY_S,
            check=capture_fails_bad("SIGKILL", "memory"),
        ),
    ),
    _resource("hidden_temporary_over_rlimit_as", lambda sb: _hidden_temporary(sb)),
]


def _hidden_temporary(sb: Sandbox) -> Attack:
    """A program whose bfloat16 variant sorts a 4.8 GB temporary no shape estimate sees, under
    a 5 GiB address-space limit: XLA's RESOURCE_EXHAUSTED (or the kill) is that variant's. XLA
    may also sort in place and fit (seen on the 2-core CPU: the variant ran ok); either way the
    run completes, and a failure is the variant's alone."""
    sb.write("limit.py", RLIMIT.format(which="RLIMIT_AS", gib=5))
    fails = capture_fails_bad()
    return Attack(
        argv=(sb.python, "limit.py", *_program_study(sb, "none", big=1_200_000_000)),
        out=sb.root / "results",
        expect_rc=frozenset({0, *FAILED}),
        timeout_s=STUDY_S,
        check=lambda o, box: None if o.rc == 0 else fails(o, box),
    )


CASES: list[Case] = [
    *CONFIG_CASES,
    *FLAG_CASES,
    Case("hangs/config_fifo_through_flagfile", "hangs", _config_through_flagfile, fast=True),
    *HANG_STUDIES,
    *FAULT_STUDIES,
    *RESOURCE_CASES,
]

if __name__ == "__main__":  # pragma: no cover - a listing for the curious
    for c in CASES:
        print(c.name, "(fast)" if c.fast else "", file=sys.stdout)
