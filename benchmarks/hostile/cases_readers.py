"""Attacks on the readers of a run's files, the links a report makes, the numbers a config
holds, and the size of what a report draws (issue "Nothing lost, round 3", classes 5, 6, 10
and 11).

- damaged_run: a run whose summary.json or manifest.json is damaged (an unknown or odd
  schema_version, nesting deeper than the stack, NaN, infinities, numbers past a float, a
  malformed version-1 file, wrong types). Asked about, every command refuses it in one line
  (exit 2); beside other runs, it is left out and the rest complete.
- script: links from a variant's description, a cluster's (named_scope) names, a manifest and
  a summary: none of the written pages may hold a live link other than http, https or a
  relative path; names with escape sequences never reach the terminal raw.
- big_numbers: 5,000-digit integers, 400-digit integers in float fields, NaN and infinities in
  config files and flags: one line naming the file and the key.
- quadratic: a program of 3,000 outputs and a run of 20,000 variants report in bounded time.

Most cases build a small run folder by hand (`_mini_run`, with the judges in
hostile/readers_material.py), so they need no study and are fast.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from hostile.case import Attack, Case, Outcome, Sandbox
from hostile.readers_material import (
    DAMAGES,
    _absent,
    _both,
    _deep,
    _index_lists,
    _manifest,
    _mini_run,
    _no_escapes,
    _no_live_script,
    _one_line,
    _summary,
)

# --- class 5: one damaged run breaks nothing else ----------------------------------------------


def _report_damaged(damage: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        run = _mini_run(sandbox, "results/gelu/20200101-000000", DAMAGES[damage]())
        return Attack(
            argv=sandbox.harness("harness.report", f"--run={run}"),
            out=run,
            check=_one_line("summary.json"),
        )

    return setup


def _index_with_damaged(damage: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        _mini_run(sandbox, "results/gelu/20200101-000000", DAMAGES[damage]())
        _mini_run(sandbox, "results/gelu/20260101-000000")
        code = (
            "from pathlib import Path; from harness.report.index import write_results_index; "
            "write_results_index(Path('results'))"
        )
        return Attack(
            argv=(sandbox.python, "-c", code),
            out=sandbox.root / "results",
            expect_rc=frozenset({0}),
            check=_index_lists("20260101-000000", "20200101-000000"),
        )

    return setup


def _compare_damaged(damage: str, side: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        bad = _mini_run(sandbox, "runs/bad", DAMAGES[damage]())
        good = _mini_run(sandbox, "runs/good")
        a, b = (bad, good) if side == "a" else (good, bad)
        return Attack(
            argv=sandbox.harness("harness.commands.compare", f"--a={a}", f"--b={b}", "--out=cmp"),
            out=sandbox.root / "cmp",
            check=_both(_one_line("summary.json"), _absent("cmp/compare.html")),
        )

    return setup


def _export_damaged(damage: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        bad = _mini_run(sandbox, "runs/bad", DAMAGES[damage]())
        return Attack(
            argv=sandbox.harness("harness.commands.export", f"--run={bad}", "--to=copy"),
            out=sandbox.root / "copy",
            check=_both(_one_line("summary.json"), _absent("copy/report.html")),
        )

    return setup


def _reanalyze_damaged_manifest(manifest: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        run = sandbox.copy_run(sandbox.root / "results" / "gelu" / "20200101-000000")
        (run / "manifest.json").write_text(manifest)
        return Attack(
            argv=sandbox.harness("harness.commands.reanalyze", f"--run={run}"),
            out=run,
            check=_one_line("manifest.json"),
            timeout_s=120,
        )

    return setup


def _reanalyze_damaged_summary(damage: str) -> Callable[[Sandbox], Attack]:
    """Reanalyze rebuilds summary.json from the captured files: a damaged one is replaced by
    a valid one (the run's own files are what reanalyze may rewrite)."""

    def setup(sandbox: Sandbox) -> Attack:
        run = sandbox.copy_run(sandbox.root / "results" / "gelu" / "20200101-000000")
        (run / "summary.json").write_text(str(DAMAGES[damage]()))

        def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
            sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
            from harness.records.summary import load_summary

            try:
                load_summary(run / "summary.json")
            except ValueError as e:
                return f"summary.json is still damaged: {e}"
            return None

        return Attack(
            argv=sandbox.harness("harness.commands.reanalyze", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            replaceable=(run / "summary.json",),
            check=check,
            timeout_s=120,
        )

    return setup


STUDY = (
    "--config=configs/gelu.yaml",
    "--config.select=xla,matmul_only",
    "--config.timing.budget_s=0.3",
    "--config.timing.rounds=2",
    "--config.problem.m=32",
    "--config.problem.k=32",
    "--config.problem.n=32",
)


def _study_beside_damaged(damage: str) -> Callable[[Sandbox], Attack]:
    """A fresh study in a results root that holds one damaged run completes, and its index
    lists the damaged run apart."""

    def setup(sandbox: Sandbox) -> Attack:
        from hostile.case import REPO

        _mini_run(sandbox, "results/gelu/20000101-000000", DAMAGES[damage]())

        def check(outcome: Outcome, sandbox: Sandbox) -> str | None:
            runs = [
                p
                for p in (sandbox.root / "results" / "gelu").iterdir()
                if p.is_dir() and not p.is_symlink() and p.name != "20000101-000000"
            ]
            if len(runs) != 1:
                return f"expected one new run, found {[p.name for p in runs]}"
            manifest = json.loads((runs[0] / "manifest.json").read_text())
            if manifest.get("status") != "complete":
                return f"the new run's manifest says {manifest.get('status')!r}"
            return _index_lists(runs[0].name, "20000101-000000")(outcome, sandbox)

        return Attack(
            argv=(
                sandbox.python,
                "-m",
                "harness",
                *[a.replace("configs/", f"{REPO}/configs/") for a in STUDY],
                f"--results_root={sandbox.root / 'results'}",
            ),
            out=sandbox.root / "results",
            expect_rc=frozenset({0}),
            check=check,
            timeout_s=300,
        )

    return setup


# --- class 6: clickable script ----------------------------------------------------------------

# One link per way of spelling a script target, each of which some browser or viewer has
# followed: every one must end up as text.
HOSTILE_LINKS = (
    "[a](javascript:document.title='pwned')",
    "[b](JaVaScRiPt:window.__pwned=1)",
    "[c](%20javascript:alert(1))",
    "[d](java\tscript:alert(1))",
    "[e](javascript&#58;alert(1))",
    "[f](javascript&colon;alert(1))",
    "[g](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[h](vbscript:msgbox(1))",
    "[i](file:///etc/passwd)",
    "[j](\x01javascript:alert(1))",
    "[k](//evil.example/x)",
    "[l](/etc/passwd)",
    "[m](&#106;avascript:alert(1))",
    "<javascript:alert(1)>",
    "<a href='javascript:alert(1)'>raw</a>",
    "<img src=x onerror=alert(1)>",
)


def _description_links(links: tuple[str, ...]) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        run = _mini_run(sandbox, "results/gelu/20260101-000000", _summary("see " + " ".join(links)))
        rel = "results/gelu/20260101-000000"
        return Attack(
            argv=sandbox.harness("harness.report", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            check=_no_live_script(
                f"{rel}/report.html",
                f"{rel}/report.md",
                f"{rel}/index.html",
                f"{rel}/variants/xla/report.html",  # the description is on the variant's page
                f"{rel}/variants/xla/report.md",
            ),
        )

    return setup


def _cluster_names(sandbox: Sandbox) -> Attack:
    """Names a program's jax.named_scope puts in the HLO reach fusions.json's clusters and
    reverse map, and from there the report's tables."""
    rel = "results/gelu/20260101-000000"
    run = _mini_run(sandbox, rel)
    scope = "[s](javascript:window.__pwned=1)"
    fusions = {
        "modules": [
            {
                "module": "jit_f",
                "clusters": [
                    {
                        "name": f"fusion_{scope}",
                        "kind": "kLoop",
                        "source_ops": [f"jit(f)/{scope}/add"],
                        "source_locations": [f"{scope}:1"],
                    }
                ],
                "reverse_map": {f"add.1 (jit(f)/{scope}/add)": [f"fusion_{scope}"]},
            }
        ]
    }
    sandbox.write(f"{rel}/variants/xla/fusions.json", json.dumps(fusions))
    return Attack(
        argv=sandbox.harness("harness.report", f"--run={run}"),
        out=run,
        expect_rc=frozenset({0}),
        check=_no_live_script(
            f"{rel}/report.html",
            f"{rel}/report.md",
            f"{rel}/variants/xla/report.html",  # the clusters table is on the variant's page
            f"{rel}/variants/xla/report.md",
        ),
    )


def _manifest_links(sandbox: Sandbox) -> Attack:
    """A run's manifest fields land in results/index.html, which outlives the run."""
    link = "[m](javascript:window.__pwned=1)"
    _mini_run(
        sandbox,
        "results/gelu/20260101-000000",
        manifest=_manifest(
            started=link,
            status="[st](JAVASCRIPT:alert(1))",
            environment={"device_kind": "[d](data:text/html,x)", "platform": link},
        ),
    )
    code = (
        "from pathlib import Path; from harness.report.index import write_results_index; "
        "write_results_index(Path('results'))"
    )
    return Attack(
        argv=(sandbox.python, "-c", code),
        out=sandbox.root / "results",
        expect_rc=frozenset({0}),
        check=_no_live_script("results/index.html"),
    )


def _index_row_links(sandbox: Sandbox) -> Attack:
    """A planted .index-row.json (the index's kept row) cannot put a link in the index."""
    run = _mini_run(sandbox, "results/gelu/20260101-000000")
    st = (run / "summary.json").stat()
    sandbox.write(
        "results/gelu/20260101-000000/.index-row.json",
        json.dumps(
            {
                "stamp": [1, st.st_mtime_ns, st.st_size],
                "experiment": "[e](javascript:alert(1))",
                "headline": ["[h](vbscript:x)", "x", "y", "z"],
            }
        ),
    )
    code = (
        "from pathlib import Path; from harness.report.index import write_results_index; "
        "write_results_index(Path('results'))"
    )
    return Attack(
        argv=(sandbox.python, "-c", code),
        out=sandbox.root / "results",
        expect_rc=frozenset({0}),
        check=_no_live_script("results/index.html"),
    )


def _compare_links(sandbox: Sandbox) -> Attack:
    """Summaries and manifests (descriptions, config values, run ids) land in compare.html."""
    link = "[c](javascript:window.__pwned=1)"
    a = _mini_run(
        sandbox,
        "runs/a",
        _summary(link),
        _manifest(config={"experiment": "gelu", "description": link, "seed": 0}),
    )
    b = _mini_run(
        sandbox,
        "runs/b",
        {**_summary("[d](data:text/html,x)"), "run_id": "[r](vbscript:x)"},
        _manifest(run_id=link, config={"experiment": "gelu", "description": "[x](file:///x)"}),
    )
    return Attack(
        argv=sandbox.harness("harness.commands.compare", f"--a={a}", f"--b={b}", "--out=cmp"),
        out=sandbox.root / "cmp",
        expect_rc=frozenset({0}),
        check=_no_live_script("cmp/compare.html", "cmp/compare.md"),
    )


def _escape_in_run_path(sandbox: Sandbox) -> Attack:
    """A run folder whose name holds escape sequences: its path is printed escaped."""
    run = _mini_run(sandbox, "runs/r\x1b]0;pwned\x07\x1b[2J\r")
    return Attack(
        argv=sandbox.harness("harness.report", f"--run={run}"),
        out=run,
        expect_rc=frozenset({0}),
        check=_no_escapes,
    )


def _escape_in_compare_out(sandbox: Sandbox) -> Attack:
    a, b = _mini_run(sandbox, "runs/a"), _mini_run(sandbox, "runs/b")
    out = "cmp\x1b[31m\x9b2J"
    return Attack(
        argv=sandbox.harness("harness.commands.compare", f"--a={a}", f"--b={b}", f"--out={out}"),
        out=sandbox.root / out,
        expect_rc=frozenset({0}),
        check=_no_escapes,
    )


def _escape_in_damaged_path(sandbox: Sandbox) -> Attack:
    """The one-line error of a damaged run in a folder named with escapes is escaped too."""
    run = _mini_run(sandbox, "runs/\x1b[2Jbad", DAMAGES["schema_0"]())
    return Attack(
        argv=sandbox.harness("harness.report", f"--run={run}"),
        out=run,
        check=_both(_one_line("summary.json"), _no_escapes),
    )


def _escape_in_module_name(sandbox: Sandbox) -> Attack:
    """Module names from a dump (`analyze --dump`) are printed in its table and summary."""
    if sandbox.template_run is None:
        raise RuntimeError("needs the template run's dump")
    dump = sandbox.template_run / "variants" / "xla" / "dump"
    for f in sorted(dump.glob("*after_optimizations.txt")):
        name = f.name.replace("jit_gelu_linear", "jit_gelu\x1b]0;PWN\x07\x1b[2J_linear")
        sandbox.write(f"dump/{name}", f.read_bytes())
    return Attack(
        argv=sandbox.harness("harness.analyze", "--dump=dump", "--out=out"),
        out=sandbox.root / "out",
        expect_rc=frozenset({0}),
        check=_both(_no_escapes, _no_live_script("out/report.html")),
        timeout_s=120,
    )


def _escape_in_export_dest(sandbox: Sandbox) -> Attack:
    run = _mini_run(sandbox, "runs/good")
    dest = "copy\x1b]8;;javascript:x\x1b\\"
    return Attack(
        argv=sandbox.harness("harness.commands.export", f"--run={run}", f"--to={dest}"),
        out=sandbox.root / dest,
        expect_rc=frozenset({0}),
        check=_no_escapes,
    )


# --- class 10: big numbers --------------------------------------------------------------------


def _config_file(pattern: str, line: str, named: str) -> Callable[[Sandbox], Attack]:
    """configs/gelu.yaml with the line matching `pattern` replaced by `line`, a number no config
    takes: one line naming the file and the key."""

    def setup(sandbox: Sandbox) -> Attack:
        from hostile.case import REPO

        text = (REPO / "configs" / "gelu.yaml").read_text()
        changed = re.sub(pattern, lambda _: line, text, count=1, flags=re.M)
        if changed == text:
            raise ValueError(f"{pattern!r} matches no line of configs/gelu.yaml")
        cfg = sandbox.write("big.yaml", changed)
        return Attack(
            argv=sandbox.harness("harness", f"--config={cfg}", "--results_root=results"),
            out=sandbox.root / "results",
            check=_both(_one_line(named), _one_line("big.yaml"), _absent("results/gelu")),
        )

    return setup


def _config_flag(flag: str, named: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        from hostile.case import REPO

        return Attack(
            argv=sandbox.harness(
                "harness", f"--config={REPO}/configs/gelu.yaml", flag, "--results_root=results"
            ),
            out=sandbox.root / "results",
            check=_both(_one_line(named), _absent("results/gelu")),
        )

    return setup


def _flagfile(flag: str, named: str) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        from hostile.case import REPO

        sandbox.write("flags.txt", f"--config={REPO}/configs/gelu.yaml\n{flag}\n")
        return Attack(
            argv=sandbox.harness("harness", "--flagfile=flags.txt", "--results_root=results"),
            out=sandbox.root / "results",
            check=_both(_one_line(named), _absent("results/gelu")),
        )

    return setup


def _variant_in_file(sandbox: Sandbox) -> Attack:
    """A number inside a variant of the config's list: the error names the list's key."""
    from hostile.case import REPO

    text = (REPO / "configs" / "gelu.yaml").read_text()
    text = text.replace(
        "variants:\n", "variants:\n  - name: huge\n    problem: {m: " + "9" * 400 + "}\n", 1
    )
    cfg = sandbox.write("big.yaml", text)
    return Attack(
        argv=sandbox.harness("harness", f"--config={cfg}", "--results_root=results"),
        out=sandbox.root / "results",
        check=_both(_one_line("variants[0].problem.m"), _absent("results/gelu")),
    )


def _reanalyze_huge_seed(sandbox: Sandbox) -> Attack:
    """A manifest's config with a 5,000-digit seed (reanalyze builds the config from it)."""
    run = sandbox.copy_run(sandbox.root / "results" / "gelu" / "20200101-000000")
    text = (run / "manifest.json").read_text()
    (run / "manifest.json").write_text(
        re.sub(r'"seed": \d+', '"seed": ' + "7" * 5000, text, count=1)
    )
    return Attack(
        argv=sandbox.harness("harness.commands.reanalyze", f"--run={run}"),
        out=run,
        check=_one_line("manifest.json"),
        timeout_s=120,
    )


# --- class 11: report stages linear in their size ------------------------------------------------


def _widened(variants: int, ops: int, timeout: float) -> Callable[[Sandbox], Attack]:
    def setup(sandbox: Sandbox) -> Attack:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from report_scaling import widen_run

        if sandbox.template_run is None:
            raise RuntimeError("needs the template run")
        run = widen_run(sandbox.template_run, sandbox.root / "runs" / "big", variants, ops)
        return Attack(
            argv=sandbox.harness("harness.report", f"--run={run}"),
            out=run,
            expect_rc=frozenset({0}),
            timeout_s=timeout,
            check=_absent("nothing"),
        )

    return setup


def _many_runs_index(sandbox: Sandbox) -> Attack:
    """An index over 1,500 runs (a third of them damaged) is written in bounded time."""
    good = json.dumps(_summary())
    for i in range(1500):
        text = good if i % 3 else DAMAGES["deep_100k"]()
        _mini_run(sandbox, f"results/gelu/2026{i:010d}", text)
    code = (
        "from pathlib import Path; from harness.report.index import write_results_index; "
        "write_results_index(Path('results'))"
    )
    return Attack(
        argv=(sandbox.python, "-c", code),
        out=sandbox.root / "results",
        expect_rc=frozenset({0}),
        timeout_s=120,
        check=_index_lists("20260000000001", "20260000000000"),
    )


def _many_links(sandbox: Sandbox) -> Attack:
    """A description of 20,000 links renders in bounded time, each as text or a safe link."""
    links = " ".join(f"[x{i}](javascript:alert({i}))" for i in range(20000))
    rel = "results/gelu/20260101-000000"
    run = _mini_run(sandbox, rel, _summary(links))
    return Attack(
        argv=sandbox.harness("harness.report", f"--run={run}"),
        out=run,
        expect_rc=frozenset({0}),
        timeout_s=60,
        check=_no_live_script(f"{rel}/report.html"),
    )


# --- the cases --------------------------------------------------------------------------------


def _cases() -> list[Case]:
    cases: list[Case] = []
    for damage in DAMAGES:
        cases.append(
            Case(f"damaged_run/report_{damage}", "damaged_run", _report_damaged(damage), fast=True)
        )
    for damage in ("schema_0", "deep_100k", "nan_count", "int_5000", "v1_mode_list", "not_utf8"):
        cases.append(
            Case(f"damaged_run/index_{damage}", "damaged_run", _index_with_damaged(damage), True)
        )
    for damage, side in (("schema_negative", "a"), ("deep_objects", "b"), ("infinity_step", "a")):
        cases.append(
            Case(
                f"damaged_run/compare_{side}_{damage}",
                "damaged_run",
                _compare_damaged(damage, side),
                fast=True,
            )
        )
    for damage in ("schema_0", "float_overflow", "v1_options_string"):
        cases.append(
            Case(f"damaged_run/export_{damage}", "damaged_run", _export_damaged(damage), True)
        )
    manifests = {
        "deep": '{"config": ' + _deep(100_000) + "}",
        "nan": '{"config": {"seed": NaN}}',
        "list": "[1, 2]",
        "config_string": '{"config": "gelu"}',
    }
    for name, text in manifests.items():
        cases.append(
            Case(
                f"damaged_run/reanalyze_manifest_{name}",
                "damaged_run",
                _reanalyze_damaged_manifest(text),
            )
        )
    cases.append(
        Case(
            "damaged_run/reanalyze_summary_schema_0",
            "damaged_run",
            _reanalyze_damaged_summary("schema_0"),
        )
    )
    for damage in ("schema_0", "deep_100k", "v1_passes_number"):
        cases.append(
            Case(f"damaged_run/study_beside_{damage}", "damaged_run", _study_beside_damaged(damage))
        )

    cases += [
        Case("script/description_links", "script", _description_links(HOSTILE_LINKS), fast=True),
        Case(
            "script/description_one_link",
            "script",
            _description_links(("[x](javascript:alert(document.domain))",)),
            fast=True,
        ),
        Case("script/named_scope_cluster_names", "script", _cluster_names, fast=True),
        Case("script/manifest_in_results_index", "script", _manifest_links, fast=True),
        Case("script/kept_index_row", "script", _index_row_links, fast=True),
        Case("script/compare_html", "script", _compare_links, fast=True),
        Case("script/escape_in_run_path", "script", _escape_in_run_path, fast=True),
        Case("script/escape_in_compare_out", "script", _escape_in_compare_out, fast=True),
        Case("script/escape_in_damaged_path", "script", _escape_in_damaged_path, fast=True),
        Case("script/escape_in_export_dest", "script", _escape_in_export_dest, fast=True),
        Case("script/escape_in_module_name", "script", _escape_in_module_name),
    ]

    huge, f400 = "7" * 5000, "7" * 400
    cases += [
        Case(
            "big_numbers/file_seed_5000",
            "big_numbers",
            _config_file(r"^seed:.*$", f"seed: {huge}", "seed"),
            True,
        ),
        Case(
            "big_numbers/file_seed_negative_5000",
            "big_numbers",
            _config_file(r"^seed:.*$", f"seed: -{huge}", "seed"),
            True,
        ),
        Case(
            "big_numbers/file_seed_hex",
            "big_numbers",
            _config_file(r"^seed:.*$", "seed: 0x" + "f" * 5000, "seed"),
            True,
        ),
        Case(
            "big_numbers/file_seed_underscores",
            "big_numbers",
            _config_file(r"^seed:.*$", "seed: " + "1_000" * 1200, "seed"),
            True,
        ),
        Case(
            "big_numbers/file_budget_400",
            "big_numbers",
            _config_file(r"^  budget_s:.*$", f"  budget_s: {f400}", "timing.budget_s"),
            True,
        ),
        Case(
            "big_numbers/file_budget_inf",
            "big_numbers",
            _config_file(r"^  budget_s:.*$", "  budget_s: .inf", "timing.budget_s"),
            True,
        ),
        Case(
            "big_numbers/file_budget_nan",
            "big_numbers",
            _config_file(r"^  budget_s:.*$", "  budget_s: .nan", "timing.budget_s"),
            True,
        ),
        Case(
            "big_numbers/file_batch_s_overflow",
            "big_numbers",
            _config_file(r"^  batch_s:.*$", "  batch_s: 1.0e+999", "timing.batch_s"),
            True,
        ),
        Case("big_numbers/file_variant_problem", "big_numbers", _variant_in_file, fast=True),
        Case(
            "big_numbers/flag_seed_5000",
            "big_numbers",
            _config_flag(f"--config.seed={huge}", "seed"),
            True,
        ),
        Case(
            "big_numbers/flag_budget_400",
            "big_numbers",
            _config_flag(f"--config.timing.budget_s={f400}", "timing.budget_s"),
            True,
        ),
        Case(
            "big_numbers/flag_budget_nan",
            "big_numbers",
            _config_flag("--config.timing.budget_s=.nan", "timing.budget_s"),
            True,
        ),
        Case(
            "big_numbers/flag_settle_inf",
            "big_numbers",
            _config_flag("--config.timing.settle=-.inf", "timing.settle"),
            True,
        ),
        Case(
            "big_numbers/flag_batch_list",
            "big_numbers",
            _config_flag(f"--config.problem.batch=2,{huge}", "problem.batch"),
            True,
        ),
        Case(
            "big_numbers/flag_variant_m",
            "big_numbers",
            _config_flag(f"--config.variants.xla.problem.m={huge}", "variants.xla.problem.m"),
            True,
        ),
        Case(
            "big_numbers/flagfile_seed_5000",
            "big_numbers",
            _flagfile(f"--config.seed={huge}", "seed"),
            True,
        ),
        Case(
            "big_numbers/flagfile_budget_400",
            "big_numbers",
            _flagfile(f"--config.timing.budget_s={f400}", "timing.budget_s"),
            True,
        ),
        Case("big_numbers/reanalyze_manifest_seed", "big_numbers", _reanalyze_huge_seed),
    ]

    cases += [
        Case("quadratic/fusion_map_3000_outputs", "quadratic", _widened(0, 3000, 120)),
        Case("quadratic/report_20000_variants", "quadratic", _widened(20000, 0, 240)),
        Case("quadratic/index_1500_runs", "quadratic", _many_runs_index),
        Case("quadratic/description_20000_links", "quadratic", _many_links, fast=True),
    ]
    return cases


CASES: list[Case] = _cases()
