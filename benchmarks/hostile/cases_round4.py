"""The issue "Nothing lost, round 4": one case per door.

- a reader given a FIFO, `/dev/zero`, a sparse 6 GB file and a link out of its tree, for every
  kind of file it reads that a user or a sibling run can plant (ceilings, a sibling run's index
  row, summary and manifest, a variant's IR text, result.json, the cache, a dump, a profile);
- a write or delete over a file the harness did not make, for every command that writes;
- remote content (a Markdown image, raw `<img>`, a javascript: link, a script) through every
  user-controlled field, into every page the harness writes.

Cases marked fast need no study (hand-made runs); the rest copy the battery's template run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from hostile.case import Attack, Case, Outcome, Sandbox
from hostile.readers_material import _manifest, _mini_run, _summary

DOORS = ("fifo", "dev_zero", "sparse", "link_out")
SPARSE = 6 << 30  # st_size 6 GB, no disk: a reader that trusts it runs out of memory


def _door(sb: Sandbox, rel: str, door: str, content: str = "{}") -> Path:
    """Puts `door` at sandbox/rel (replacing what is there): a FIFO, a link to /dev/zero, a
    sparse 6 GB file, or a link to a plausible file outside the tree (elsewhere/)."""
    path = sb.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if door == "fifo":
        os.mkfifo(path)
    elif door == "dev_zero":
        path.symlink_to("/dev/zero")
    elif door == "sparse":
        with path.open("wb") as f:
            f.truncate(SPARSE)
    else:
        outside = sb.write(f"elsewhere/{path.name}", content)
        path.symlink_to(outside)
    return path


def _py(sb: Sandbox, code: str, out: str, **kw: object) -> Attack:
    return Attack(
        argv=(sb.python, "-c", code),
        out=sb.root / out,
        expect_rc=frozenset({0}),
        timeout_s=30,
        **kw,  # type: ignore[arg-type]
    )


def _prints(words: str) -> Callable[[Outcome, Sandbox], str | None]:
    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        return None if words in outcome.stdout else f"did not print {words!r}"

    return check


INDEX = (
    "from pathlib import Path; from harness.report.index import write_results_index; "
    "print(write_results_index(Path('results')))"
)
OLD, NEW = "results/gelu/20260101-000000", "results/gelu/20260102-000000"


# --- readers -----------------------------------------------------------------------------------


def _ceilings(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        sb.write("d/m.hlo", "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
        path = _door(sb, "c.json", "fifo" if door == "link_out" else door)
        if door == "link_out":  # a file named on the command line: a link to a FIFO elsewhere
            path.rename(sb.root / "tmp_fifo")
            (sb.root / "elsewhere").mkdir(exist_ok=True)
            (sb.root / "tmp_fifo").rename(sb.root / "elsewhere" / "fifo")
            path.symlink_to(sb.root / "elsewhere" / "fifo")
        return Attack(
            argv=sb.harness("harness.analyze", "--dump=d/m.hlo", "--out=out", "--ceilings=c.json"),
            out=sb.root / "out",
            timeout_s=30,
        )

    return setup


def _index_row(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        _mini_run(sb, OLD)
        _door(sb, f"{OLD}/.index-row.json", door, json.dumps({"stamp": [], "headline": []}))
        return _py(sb, INDEX, "results", check=_prints("index.html"))

    return setup


def _sibling_summary(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        _mini_run(sb, OLD)
        _mini_run(sb, NEW)
        _door(sb, f"{OLD}/summary.json", door, json.dumps(_summary()))
        return _py(sb, INDEX, "results", check=_prints("index.html"))

    return setup


BETWEEN = (
    "from pathlib import Path; from harness.records import run_files; "
    "from harness.analyze.between_runs import earlier_runs; "
    f"new = Path('{NEW}'); "
    "m = run_files.load(run_files.MANIFEST, new / 'manifest.json'); "
    "print('earlier', len(earlier_runs(new, m)))"
)


def _older_run(name: str, door: str) -> Callable[[Sandbox], Attack]:
    """The run-to-run spread reads older runs' manifest.json and summary.json."""

    def setup(sb: Sandbox) -> Attack:
        _mini_run(sb, OLD)
        _mini_run(sb, NEW)
        content = json.dumps(_summary() if name == "summary.json" else _manifest())
        _door(sb, f"{OLD}/{name}", door, content)
        return _py(sb, BETWEEN, "results", check=_prints("earlier 0"))

    return setup


CACHE = (
    "from pathlib import Path; from harness.store import io; "
    "print('cache', io.read_cache_file(Path('results/.cache'), 'ceilings.json'))"
)


def _cache(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        sb.write("results/.cache/inputs.npz", b"x")
        _door(sb, "results/.cache/ceilings.json", door)
        return _py(sb, CACHE, "results", check=_prints("cache None"))

    return setup


def _dump(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        _door(sb, "d/module_0001.jit_f.after_optimizations.txt", door, "HloModule m\n")
        return Attack(
            argv=sb.harness("harness.analyze", "--dump=d", "--out=out"),
            out=sb.root / "out",
            expect_rc=frozenset({1, 2}),
            timeout_s=60,
        )

    return setup


def _profile(door: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        sb.write("d/m.hlo", "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
        _door(sb, "p/x.xplane.pb", door)
        return Attack(
            argv=sb.harness(
                "harness.analyze", "--dump=d/m.hlo", "--out=out", "--xplane=p/x.xplane.pb"
            ),
            out=sb.root / "out",
            expect_rc=frozenset({0, 1, 2}),
            timeout_s=60,
        )

    return setup


def _template_door(target: str, door: str, module: str) -> Callable[[Sandbox], Attack]:
    """A copy of the template run with `target` (a glob under it) replaced by the door, read by
    `python -m <module> --run=`: the report (a variant's IR text) or reanalyze (result.json)."""

    def setup(sb: Sandbox) -> Attack:
        run = sb.copy_run(sb.root / "results" / "gelu" / "20260101-000000")
        found = sorted(run.glob(target))
        if not found:
            raise RuntimeError(f"the template run has no {target}")
        _door(sb, str(found[0].relative_to(sb.root)), door, found[0].read_text(errors="replace"))
        return Attack(
            argv=sb.harness(module, f"--run={run}"),
            out=run,
            expect_rc=frozenset({0, 1, 2}),
            timeout_s=180,
            replaceable=(run,),
        )

    return setup


# --- writes over what the harness did not make ---------------------------------------------------

USER = "a user's own file\n"


def _report_foreign_folder(sb: Sandbox) -> Attack:
    """report --run on a folder the harness did not make (only a summary.json there)."""
    run = sb.root / "mine"
    sb.write("mine/summary.json", json.dumps(_summary()))
    for rel in ("report.md", "index.html", "plots/step_time.png"):
        sb.write(f"mine/{rel}", USER)
    return Attack(argv=sb.harness("harness.report", f"--run={run}"), out=run, timeout_s=60)


def _index_over_users_page(sb: Sandbox) -> Attack:
    _mini_run(sb, OLD)
    sb.write("results/index.html", USER)
    return _py(sb, INDEX, "results", check=_prints("None"))


def _study_root(where: str) -> Callable[[Sandbox], Attack]:
    """A results root that is a run, lies inside one, or inside an export."""

    def setup(sb: Sandbox) -> Attack:
        run = _mini_run(sb, OLD)
        sb.write(f"{OLD}/index.html", USER)
        root = {"is_a_run": run, "inside_a_run": run / "variants"}[where]
        return Attack(
            argv=sb.harness("harness", f"--config={REPO_CONFIG}", f"--results_root={root}"),
            out=None,
            timeout_s=60,
        )

    return setup


def _experiment_named(name: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        sb.write("results/keep.txt", USER)
        return Attack(
            argv=sb.harness(
                "harness",
                f"--config={REPO_CONFIG}",
                f"--config.experiment={name}",
                "--results_root=results",
            ),
            out=None,
            timeout_s=60,
        )

    return setup


def _resume_keeps_notes(sb: Sandbox) -> Attack:
    """--resume of an interrupted run redoes a variant; a user's notes in its folder stay."""
    run = sb.copy_run(sb.root / "results" / "gelu" / "20260101-000000")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "variants" / "xla" / "result.json").unlink()
    sb.write(f"{run.relative_to(sb.root)}/variants/xla/MY_NOTES.txt", USER)
    notes = run / "variants" / "xla" / "MY_NOTES.txt"

    def kept(outcome: Outcome, sandbox: Sandbox) -> str | None:
        return None if notes.is_file() and notes.read_text() == USER else "MY_NOTES.txt lost"

    return Attack(
        argv=sb.harness(
            "harness",
            f"--config={REPO_CONFIG}",
            f"--resume={run.name}",
            "--results_root=results",
            *TEMPLATE_OVERRIDES,
        ),
        out=sb.root / "results",
        expect_rc=frozenset({0}),
        timeout_s=300,
        replaceable=(run,),
        check=kept,
    )


def _report_over_changed_page(sb: Sandbox) -> Attack:
    """A re-render of a run whose report.md a user has since rewritten refuses, keeping it."""
    run = sb.copy_run(sb.root / "results" / "gelu" / "20260101-000000")
    (run / "report.md").write_text(USER)
    return Attack(argv=sb.harness("harness.report", f"--run={run}"), out=run, timeout_s=120)


# --- remote content through every user-controlled field ---------------------------------------

REMOTE = (
    "![x](http://127.0.0.1:9/x.png) <img src=http://127.0.0.1:9/y> "
    "[a](javascript:alert(1)) <script>window.__pwned=1</script>"
)
_IMG = re.compile(r"<img\b[^>]*\bsrc=\"([^\"]*)\"")


def _fetches_nothing(*pages: str) -> Callable[[Outcome, Sandbox], str | None]:
    """Each page exists, carries the harness's Content-Security-Policy, shows images only from
    plots/, and holds no script, frame or link to the hostile host."""

    def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
        for rel in pages:
            path = sandbox.root / rel
            if not path.is_file():
                return f"{rel} was not written"
            text = path.read_text(errors="replace")
            if "Content-Security-Policy" not in text:
                return f"{rel} has no Content-Security-Policy"
            bad = [s for s in _IMG.findall(text) if not s.startswith("plots/")]
            bad += re.findall(r"<(?:script|iframe)\b", text)
            bad += re.findall(r'href="[^"]*127\.0\.0\.1[^"]*"', text)
            if bad:
                return f"{rel} loads or links {bad[:3]}"
        return None

    return check


def _remote(field: str) -> Callable[[Sandbox], Attack]:
    def setup(sb: Sandbox) -> Attack:
        summary = _summary(REMOTE if field == "description" else "the default jit")
        manifest = _manifest()
        xla = summary["variants"]["xla"]
        if field == "option_value":
            xla["identity"]["xla_options"] = {"xla_flag": REMOTE}
        elif field == "exception_message":
            xla["identity"].update(status="failed", reason=f"RuntimeError: {REMOTE}")
        elif field == "manifest_fields":
            manifest.update(started=REMOTE, status=REMOTE)
            manifest["environment"] = {"device_kind": REMOTE, "platform": REMOTE}
        folder = "20260101-000000 ![i](x.png) <img src=y>" if field == "folder_name" else "r1"
        run = _mini_run(sb, f"results/gelu/{folder}", summary, manifest)
        if field == "op_name":
            sb.write(
                f"results/gelu/{folder}/variants/xla/fusions.json",
                json.dumps(
                    {
                        "modules": [
                            {
                                "module": "jit_f",
                                "clusters": [{"name": f"fusion {REMOTE}", "kind": "kLoop"}],
                                "reverse_map": {
                                    f"add.1 (jit(f)/{REMOTE}/add)": [f"fusion {REMOTE}"]
                                },
                            }
                        ]
                    }
                ),
            )
        pages = [
            f"results/gelu/{folder}/report.html",
            f"results/gelu/{folder}/variants/xla/report.html",
        ]
        if field in ("index_row", "folder_name", "manifest_fields"):
            if field == "index_row":
                st = (run / "summary.json").stat()
                sb.write(
                    f"results/gelu/{folder}/.index-row.json",
                    json.dumps(
                        {
                            "stamp": [2, st.st_mtime_ns, st.st_size],
                            "experiment": REMOTE,
                            "headline": [REMOTE] * 5,
                        }
                    ),
                )
            return _py(sb, INDEX, "results", check=_fetches_nothing("results/index.html"))
        if field == "export":
            return Attack(
                argv=sb.harness("harness.commands.export", f"--run={run}", "--to=exported"),
                out=sb.root / "exported",
                expect_rc=frozenset({0}),
                timeout_s=60,
                check=_fetches_nothing("exported/report.html"),
            )
        return Attack(
            argv=sb.harness("harness.report", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            timeout_s=60,
            check=_fetches_nothing(*pages),
        )

    return setup


REPO_CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "gelu.yaml")
TEMPLATE_OVERRIDES = (
    "--config.select=xla,matmul_only",
    "--config.timing.budget_s=0.5",
    "--config.timing.rounds=3",
    "--config.problem.m=64",
    "--config.problem.k=64",
    "--config.problem.n=64",
)

FIELDS = (
    "description",
    "option_value",
    "exception_message",
    "op_name",
    "manifest_fields",
    "folder_name",
    "index_row",
    "export",
)

CASES = [
    *(Case(f"hangs/r4_ceilings_{d}", "hangs", _ceilings(d), fast=True) for d in DOORS),
    *(Case(f"hangs/r4_index_row_{d}", "hangs", _index_row(d), fast=True) for d in DOORS),
    *(
        Case(f"hangs/r4_sibling_summary_{d}", "hangs", _sibling_summary(d), fast=True)
        for d in DOORS
    ),
    *(
        Case(f"hangs/r4_older_{n.split('.')[0]}_{d}", "hangs", _older_run(n, d), fast=True)
        for n in ("manifest.json", "summary.json")
        for d in DOORS
    ),
    *(Case(f"hangs/r4_cache_{d}", "hangs", _cache(d), fast=True) for d in DOORS),
    *(Case(f"hangs/r4_dump_{d}", "hangs", _dump(d), fast=True) for d in DOORS),
    *(Case(f"hangs/r4_profile_{d}", "hangs", _profile(d), fast=True) for d in DOORS),
    *(
        Case(
            f"hangs/r4_report_ir_{d}",
            "hangs",
            _template_door("variants/*/ir/*jaxpr*", d, "harness.report"),
        )
        for d in DOORS
    ),
    *(
        Case(
            f"hangs/r4_reanalyze_result_{d}",
            "hangs",
            _template_door("variants/xla/result.json", d, "harness.commands.reanalyze"),
        )
        for d in DOORS
    ),
    Case("overwrites/r4_report_foreign_folder", "overwrites", _report_foreign_folder, fast=True),
    Case("overwrites/r4_index_over_users_page", "overwrites", _index_over_users_page, fast=True),
    Case("overwrites/r4_results_root_is_a_run", "overwrites", _study_root("is_a_run"), fast=True),
    Case(
        "overwrites/r4_results_root_inside_a_run",
        "overwrites",
        _study_root("inside_a_run"),
        fast=True,
    ),
    *(
        Case(f"overwrites/r4_experiment_named_{n}", "overwrites", _experiment_named(n), fast=True)
        for n in ("index.html", "latest", "summary.json")
    ),
    Case("overwrites/r4_report_over_changed_page", "overwrites", _report_over_changed_page),
    Case("deletes/r4_resume_keeps_users_notes", "deletes", _resume_keeps_notes),
    *(Case(f"remote_content/r4_{f}", "remote_content", _remote(f), fast=True) for f in FIELDS),
]
