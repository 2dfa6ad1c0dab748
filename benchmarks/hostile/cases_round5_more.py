"""The issue "Nothing lost, round 5", continued: user code that outlives its variant, a signal
aimed at the supervisor, writes outside the run (a `.references` link, XLA_FLAGS' dump folder),
unbounded printed output, make running what a path says, compare's default folder, and text
that should stay text (an autolink, raw ESC and BEL bytes).

Each broke attack of the issue is here, with a new one of its class beside it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from hostile.case import REPO, Attack, Case, Outcome, Sandbox
from hostile.cases_round4 import TEMPLATE_OVERRIDES, _fetches_nothing
from hostile.readers_material import _manifest, _mini_run, _summary

FORKING = REPO / "tests" / "forking_program.py"
STUDY_S = 240.0
# The template run's flags (benchmarks/hostile_battery.py), for a --resume of a copy of it.
TEMPLATE = ("--config=gelu.yaml", *TEMPLATE_OVERRIDES)


def _tagged(tag: str) -> list[int]:
    """Live processes whose environment holds HARNESS_TEST_TAG=tag."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"HARNESS_TEST_TAG={tag}".encode() not in (proc / "environ").read_bytes():
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        found.append(int(proc.name))
    return found


def _digests(run: Path) -> dict[str, int]:
    return {
        str(p.relative_to(run)): hash(p.read_bytes())
        for p in sorted(run.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# --- user code that outlives its variant, a signal at the supervisor ----------------------------


def _program_config(sb: Sandbox, program: Path, dtype: str, experiment: str = "fork") -> str:
    text = (
        f"experiment: {experiment}\n"
        "program:\n"
        f"  function: {program}:step\n"
        f"  init: {program}:init\n"
        "  inputs:\n"
        f"    - {{shape: [8, 16], dtype: {dtype}}}\n"
        "measure: {warmup: 1, steps: 2}\n"
        "profile: {enabled: false}\n"
        "timing: {rounds: 2, budget_s: 0.2, max_budget_s: 0.2}\n"
        "variants:\n"
        "  - {name: xla, mode: jit}\n"
    )
    sb.write("study/study.yaml", text)
    return "study/study.yaml"


def _contained(tag: str) -> Callable[[Outcome, Sandbox], str | None]:
    """No process of the study 1 s after it returned; the run's files unchanged 10 s later."""

    def check(_outcome: Outcome, sb: Sandbox) -> str | None:
        time.sleep(1)
        left = _tagged(tag)
        for pid in left:  # never leave them to the next case
            os.kill(pid, 9)
        if left:
            return f"{len(left)} processes of the study outlived it"
        runs = sorted(p.parent for p in (sb.root / "results").glob("*/*/manifest.json"))
        if not runs:
            return "no run was written"
        before = _digests(runs[-1])
        time.sleep(10)
        return None if _digests(runs[-1]) == before else "the finished run changed afterwards"

    return check


def _double_fork(sb: Sandbox) -> Attack:
    tag = uuid.uuid4().hex
    config = _program_config(sb, FORKING, "float32")
    return Attack(
        argv=sb.harness("harness", f"--config={config}", "--results_root=results"),
        out=sb.root / "results",
        expect_rc=frozenset({0}),
        timeout_s=STUDY_S,
        env={"HARNESS_TEST_TAG": tag},
        check=_contained(tag),
    )


CLEARS_MARK = """\
import os, subprocess, sys
import jax, jax.numpy as jnp


def _escape():
    # New in round 5: a grandchild started through subprocess with a fresh session that also
    # renames itself; it keeps its environment (the worker's marker with it).
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def init(key, x):
    return {}


def step(params, x):
    jax.debug.callback(_escape)
    return jnp.tanh(x @ x.T)
"""


def _popen_setsid(sb: Sandbox) -> Attack:
    tag = uuid.uuid4().hex
    program = sb.write("study/popen_prog.py", CLEARS_MARK)
    config = _program_config(sb, program, "float32")
    return Attack(
        argv=sb.harness("harness", f"--config={config}", "--results_root=results"),
        out=sb.root / "results",
        expect_rc=frozenset({0}),
        timeout_s=STUDY_S,
        env={"HARNESS_TEST_TAG": tag},
        check=_contained(tag),
    )


def _interrupted(outcome: Outcome, sb: Sandbox) -> str | None:
    if "Exception ignored" in outcome.stderr:
        return "the signal's handler raised where Python ignores it"
    manifests = [
        m for m in (sb.root / "results").glob("*/*/manifest.json") if not m.parent.is_symlink()
    ]
    status = [json.loads(m.read_text()).get("status") for m in manifests]
    return None if status == ["interrupted"] else f"the run ended {status}, not interrupted"


def _sigterm(sb: Sandbox) -> Attack:
    config = _program_config(sb, FORKING, "bfloat16")
    return Attack(
        argv=sb.harness("harness", f"--config={config}", "--results_root=results"),
        out=sb.root / "results",
        expect_rc=frozenset({130}),
        timeout_s=STUDY_S,
        check=_interrupted,
    )


# --- writes outside the run -----------------------------------------------------------------------


def _resume_with_references(kind: str) -> Callable[[Sandbox], Attack]:
    """A copy of the template run marked interrupted, resumed, with `.references` a link to a
    folder outside the run (the attack of issue 59) or, new in round 5, a user's folder
    holding a `.git/` and a file named like the harness's own."""

    def setup(sb: Sandbox) -> Attack:
        run = sb.copy_run(sb.root / "results" / "gelu" / "20260101-000000")
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["status"] = "interrupted"
        (run / "manifest.json").write_text(json.dumps(manifest))
        (run / "summary.json").unlink()
        refs = run / ".references"
        if refs.exists():
            for p in sorted(refs.rglob("*"), reverse=True):
                p.rmdir() if p.is_dir() else p.unlink()
            refs.rmdir()
        if kind == "link_out":
            sb.write("elsewhere/keep.txt", "mine\n")
            refs.symlink_to(sb.root / "elsewhere")
        else:
            sb.write(f"{refs.relative_to(sb.root)}/.git/HEAD", "ref: refs/heads/main\n")
            sb.write(f"{refs.relative_to(sb.root)}/.notes", "a user's notes\n")
        return Attack(
            argv=sb.harness(
                "harness", *TEMPLATE, "--results_root=results", "--resume=20260101-000000"
            ),
            out=run,
            expect_rc=frozenset({0}),
            timeout_s=STUDY_S,
            also_writes=("results/index.html", "results/gelu/latest", "results/.cache"),
        )

    return setup


def _xla_dump_to(where: str) -> Callable[[Sandbox], Attack]:
    """XLA_FLAGS naming a dump folder outside the run (issue 59), or, new in round 5, an
    autotune results file."""

    def setup(sb: Sandbox) -> Attack:
        sb.write("elsewhere/keep.txt", "mine\n")
        target = sb.root / "elsewhere" / ("dumps" if where == "dump" else "autotune.txt")
        flag = (
            f"--xla_dump_to={target}"
            if where == "dump"
            else f"--xla_gpu_dump_autotune_results_to={target}"
        )
        return Attack(
            argv=sb.harness(
                "harness", "--config=gelu.yaml", "--config.select=xla", "--results_root=results"
            ),
            out=sb.root / "results",
            expect_rc=frozenset({0}),
            timeout_s=STUDY_S,
            env={"XLA_FLAGS": flag},
            check=_said("taken out for the study"),
        )

    return setup


def _said(words: str) -> Callable[[Outcome, Sandbox], str | None]:
    def check(outcome: Outcome, _sb: Sandbox) -> str | None:
        return None if words in outcome.stderr else f"stderr does not say {words!r}"

    return check


# --- bounded output ---------------------------------------------------------------------------------

PRINTS = """\
import jax, jax.numpy as jnp


def _loud():
    print("{char}" * ({mib} << 20){end})


def init(key, x):
    return {{}}


def step(params, x):
    jax.debug.callback(_loud)
    return jnp.tanh(x @ x.T)
"""


def _prints(char: str, end: str) -> Callable[[Sandbox], Attack]:
    """A callback printing 20 MiB a call on one line (issue 59: 100 MB a call), or, new in
    round 5, as many one-character lines."""

    def setup(sb: Sandbox) -> Attack:
        program = sb.write("study/loud.py", PRINTS.format(char=char, mib=20, end=end))
        config = _program_config(sb, program, "float32", "loud")

        def check(_outcome: Outcome, sb: Sandbox) -> str | None:
            found = list((sb.root / "results").glob("loud/*/variants/xla/callback_output.txt"))
            if not found:
                return "no callback_output.txt"
            size = found[0].stat().st_size
            return None if size < (16 << 20) else f"callback_output.txt is {size} bytes"

        return Attack(
            argv=sb.harness("harness", f"--config={config}", "--results_root=results"),
            out=sb.root / "results",
            expect_rc=frozenset({0}),
            timeout_s=STUDY_S,
            check=check,
        )

    return setup


# --- make, compare's folder, text that stays text ---------------------------------------------------


def _make_compare(name: str) -> Callable[[Sandbox], Attack]:
    """`make compare` of a run folder named to run a command (issue 59: `run;touch X;#`), or,
    new in round 5, one holding a command substitution."""

    def setup(sb: Sandbox) -> Attack:
        marker = sb.root / "X"
        folder = name.format(X=marker)
        _mini_run(sb, f"results/gelu/{folder}")
        _mini_run(sb, "results/gelu/20260102-000000")
        sb.write("venv/.installed", "")
        return Attack(
            argv=(
                "make",
                "-s",
                "-C",
                str(REPO),
                "compare",
                f"VENV={sb.root / 'venv'}",
                f"PY={sb.python}",
                f"A={sb.root / 'results' / 'gelu' / folder}",
                f"B={sb.root / 'results' / 'gelu' / '20260102-000000'}",
                f"OUT={sb.root / 'cmp'}",
            ),
            out=sb.root / "cmp",
            expect_rc=frozenset({0, 2}),
            timeout_s=60,
            check=lambda _o, _sb: f"make ran {marker.name}" if marker.exists() else None,
        )

    return setup


def _two_compares(sb: Sandbox) -> Attack:
    """Two compares without --out of two pairs of runs whose experiment and run ids coincide
    (two results roots): two folders, neither replacing the other."""
    for root in ("rootA", "rootB"):
        _mini_run(sb, f"{root}/gelu/20260101-000000")
        _mini_run(sb, f"{root}/gelu/20260102-000000", _summary(f"the {root} jit"))
    compare = f"{sb.python} -m harness.commands.compare"
    script = " && ".join(
        f"{compare} --a={root}/gelu/20260101-000000 --b={root}/gelu/20260102-000000"
        for root in ("rootA", "rootB")
    )

    def check(_outcome: Outcome, sb: Sandbox) -> str | None:
        found = sorted(p.name for p in (sb.root / "results" / "compare").iterdir())
        return None if len(found) == 2 else f"the two compares wrote {found}"

    return Attack(
        argv=("sh", "-c", script),
        out=sb.root / "results",
        expect_rc=frozenset({0}),
        timeout_s=60,
        check=check,
    )


def _text_stays_text(kind: str) -> Callable[[Sandbox], Attack]:
    """An autolink in a description (issue 59), and, new in round 5, raw ESC/BEL bytes in a
    failed variant's reason: report.md and the HTML hold neither a live link nor the bytes."""

    def setup(sb: Sandbox) -> Attack:
        summary = _summary("see <http://127.0.0.1:9/auto> and <https://127.0.0.1:9/s>")
        if kind == "escapes":
            summary["variants"]["matmul_only"]["identity"].update(
                status="failed", reason="RuntimeError: \x1b[31mred\x1b[0m\x07 \x1b]0;title\x07"
            )
        run = _mini_run(sb, "results/gelu/r1", summary, _manifest())
        pages = ("results/gelu/r1/report.html",)

        def check(outcome: Outcome, sb: Sandbox) -> str | None:
            bad = _fetches_nothing(*pages)(outcome, sb)
            if bad:
                return bad
            for name in ("report.md", "report.html"):
                text = (run / name).read_text(errors="replace")
                if "\x1b" in text or "\x07" in text:
                    return f"{name} holds a raw ESC or BEL"
            return None

        return Attack(
            argv=sb.harness("harness.report", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            timeout_s=60,
            check=check,
        )

    return setup


CASES = [
    Case("fault_isolation/r5_callback_double_fork_setsid", "fault_isolation", _double_fork),
    Case("fault_isolation/r5_callback_popen_new_session", "fault_isolation", _popen_setsid),
    Case("fault_isolation/r5_callback_sigterm_supervisor", "fault_isolation", _sigterm),
    *(
        Case(
            f"writes_outside/r5_resume_references_{k}", "writes_outside", _resume_with_references(k)
        )
        for k in ("link_out", "users_folder")
    ),
    *(
        Case(f"writes_outside/r5_xla_flags_{w}", "writes_outside", _xla_dump_to(w))
        for w in ("dump", "autotune_results")
    ),
    Case("resources/r5_callback_prints_20mib_a_call", "resources", _prints("x", "")),
    Case("resources/r5_callback_prints_lines", "resources", _prints("\\n", ', end=""')),
    Case("script/r5_make_compare_semicolon", "script", _make_compare("run;touch {X};#"), True),
    Case("script/r5_make_compare_substitution", "script", _make_compare("run`touch {X}`"), True),
    Case("overwrites/r5_two_compares_same_ids", "overwrites", _two_compares, fast=True),
    *(
        Case(f"remote_content/r5_{k}", "remote_content", _text_stays_text(k), fast=True)
        for k in ("autolink", "escapes")
    ),
]
