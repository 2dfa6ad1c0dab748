"""One sentence per fact (issue 61): each figure the pages repeat has one definition and one
name, and agrees with itself across the pages of a run: the three committed references,
rendered again, and a fresh tiny CPU run. A planted second definition of each fails the check.

- device time a step and kernel time a step (harness.common.fmt.DEVICE_TIME, KERNEL_TIME): a
  variant page's against its summary's, a module's line on every page that has it;
- `of roof` and `of peak`: every cluster's `of roof` is its rate over the run's measured
  ceiling it names (ceilings.json: the precision's peak, or the bandwidth), and a variant's
  `of peak` is its summary's, against the same ceiling;
- the accuracy verdict (harness.report.sections.accuracy_verdict): the summary table, the
  variant's page and the program table say the same of each variant, in its words.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from harness.common import fmt
from harness.records.summary import load_summary
from harness.report import sections, variant_page, write_report
from harness.report.markdown import write_variant_pages
from harness.saved.read import load_run
from harness.saved.run import SavedRun

REFERENCES = ("cpu", "h200", "h200x2")
VALUE = r"[\d.]+ (?:ms|µs|ns|s)"
NAMES = f"{re.escape(fmt.DEVICE_TIME)}|{re.escape(fmt.KERNEL_TIME)}"
FIGURE = re.compile(
    rf"(?P<before>{VALUE}) of (?P<name>{NAMES})|(?P<name2>{NAMES}) (?P<after>{VALUE})"
)
# A module's line: its name, clusters, fusions and FLOPs say which module of which variant.
MODULE_LINE = re.compile(
    rf"(?P<head>Module `[^`]+`: [^\n]*?) (?P<time>{VALUE}) of {fmt.KERNEL_TIME}"
)


def figures(text: str) -> list[tuple[str, str]]:
    """Every (name, value) of a figure named by one of the names, in page order."""
    out = []
    for m in FIGURE.finditer(text):
        out.append((m["name"] or m["name2"], m["before"] or m["after"]))
    return out


def disagreements(run: Path) -> list[str]:
    """Every place a repeated figure disagrees with its one definition or with itself."""
    data = load_run(run)
    return (
        time_disagreements(run) + roof_disagreements(run, data) + accuracy_disagreements(run, data)
    )


def time_disagreements(run: Path) -> list[str]:
    """Returns each place a figure disagrees with its one definition or with itself: a variant
    page's device time a step against its summary's, and a module's kernel time a step on its
    variant page against the same module line on the run's pages (report.md, details.md)."""
    summary = load_summary(run / "summary.json")
    report = "\n".join((run / f).read_text() for f in ("report.md", "details.md"))
    wrong = []
    for name, v in summary.variants.items():
        page = run / "variants" / name / "report.md"
        if not page.is_file():
            continue
        text = page.read_text()
        busy = v.profile.device_time_per_step_s
        for figure, value in figures(text):
            if figure == fmt.DEVICE_TIME and value != fmt.ms(busy):
                wrong.append(f"{page}: {figure} {value}, its summary's {fmt.ms(busy)}")
        for m in MODULE_LINE.finditer(text):
            for other in MODULE_LINE.finditer(report):
                if other["head"] == m["head"] and other["time"] != m["time"]:
                    wrong.append(f"{name}: {m['head']}: {m['time']} here, {other['time']} there")
    return wrong


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of a page: its header's cells and its rows' cells."""
    out: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("| ") and re.fullmatch(r"\|(?:---\|)+", lines[i + 1]):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append([c.strip() for c in row.strip("|").split(" | ")])
            out.append(([c.strip() for c in line.strip("|").split(" | ")], rows))
    return out


_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def shown(cell: str, digits: str = "sig") -> tuple[float, float] | None:
    """The interval of true values a printed figure stands for: `116 GFLOP/s` (fmt.si, three
    significant digits), `67.8%` (fmt.pct, one decimal); None for no number."""
    m = re.match(r"([\d.]+)\s?([kMGTP]?)", cell)
    if m is None:
        return None
    text, scale = m[1], _SI[m[2]] if digits == "sig" else 0.01
    last = 10.0 ** (-len(text.split(".")[1]) if "." in text else 0)
    if digits == "sig" and "." not in text:
        last = 10.0 ** max(0, len(text.lstrip("0")) - 3)
    value = float(text)
    return ((value - last / 2) * scale, (value + last / 2) * scale)


def roof_disagreements(run: Path, data: SavedRun | None = None) -> list[str]:
    """Each `of roof` cell of a variant page that is not its row's rate over the run's measured
    ceiling it names (FLOP/s over the precision's peak, B/s over the bandwidth), within what
    the printed digits allow, and each `of peak` that is not its summary's, or is against
    another ceiling than ceilings.json's of that precision."""
    path = run / "ceilings.json"
    if not path.is_file():
        return []
    ceilings = json.loads(path.read_text())
    peaks = {k: p["flops_per_s"] for k, p in ceilings.get("peaks", {}).items()}
    data = data or load_run(run)
    wrong = []
    for v in data.variants:
        page = run / "variants" / v.name / "report.md"
        if not page.is_file():
            continue
        for header, rows in tables(page.read_text()):
            if "of roof" in header:
                at = {h: i for i, h in enumerate(header)}
                for row in rows:
                    wrong += _roof_row(page, row, at, peaks, ceilings.get("peak_bytes_per_s"))
            if header == ["figure", "value"]:
                said = dict(r[:2] for r in rows if len(r) >= 2)
                if "of peak" in said and said["of peak"] != sections.fraction_of_peak(v):
                    wrong.append(f"{page}: of peak {said['of peak']}, its summary's differs")
        c = v.summary.cost
        if c.fraction_of_peak is not None and c.peak_flops_per_s != peaks.get(c.peak_precision):
            wrong.append(f"{v.name}: of peak against {c.peak_flops_per_s}, not the run's ceiling")
    return wrong


def _roof_row(
    page: Path, row: list[str], at: dict[str, int], peaks: dict[str, float], bandwidth: float | None
) -> list[str]:
    cell = row[at["of roof"]]
    m = re.fullmatch(r"([\d.]+%) \((?:(\w+) peak|(bandwidth))\)", cell)
    if m is None:
        return [] if cell in (fmt.MISSING,) or cell.startswith("withheld") else [f"{page}: {cell}"]
    ceiling = bandwidth if m[3] else peaks.get(m[2])
    rate = shown(row[at["B/s" if m[3] else "FLOP/s"]])
    fraction = shown(m[1], "pct")
    if ceiling is None or rate is None or fraction is None:
        return [f"{page}: {row[at['cluster']]} of roof {cell}: no such ceiling in this run"]
    if rate[1] < ceiling * fraction[0] or rate[0] > ceiling * fraction[1]:
        return [f"{page}: {row[at['cluster']]} of roof {cell} is not its rate over that ceiling"]
    return []


def accuracy_disagreements(run: Path, data: SavedRun | None = None) -> list[str]:
    """Each place a variant's accuracy verdict reads other than its one definition
    (sections.accuracy_verdict over its summary and the accuracy findings): the summary
    table's numerics cell (where it gives the accuracy, not the compiler effect), the
    variant's figures, the program table's worst leaf."""
    data = data or load_run(run)
    failure = sections.failed_numerics(data)
    said: dict[str, list[tuple[str, str]]] = {}
    for page in (run / "report.md", *sorted(run.glob("variants/*/report.md"))):
        for header, rows in tables(page.read_text()):
            for column in ("numerics", "numerics: worst leaf", "value"):
                if column not in header:
                    continue
                i = header.index(column)
                for row in rows:
                    if column == "value" and row[0] != "numerics":
                        continue
                    name = page.parent.name if column == "value" else _variant(row[0])
                    where = f"{page.relative_to(run)} `{row[0] if column == 'value' else column}`"
                    said.setdefault(name, []).append((where, row[i]))
    wrong = []
    for v in data.variants:
        want = sections.accuracy_verdict(v.summary.numerics, failure.get(v.name))
        for where, cell in said.get(v.name, []):
            if cell.startswith(("same as baseline", "changes: ")):
                continue  # the compiler-effect question's verdict, not the accuracy's
            got = _verdict(cell)
            if got != want:
                wrong.append(f"{v.name}: {where} reads {cell!r}, its verdict is {want!r}")
    return wrong


def _variant(cell: str) -> str:
    m = re.match(r"\[([^\]]+)\]|`?([^`]+)`?", cell)
    return (m[1] or m[2]) if m else cell


def _verdict(cell: str) -> str:
    """Which of the one definition's verdicts a cell says, in its words (else the cell)."""
    if sections.ROUNDING in cell:
        return sections.ROUNDING
    if re.search(r"(^|\) )FAIL\b", cell):
        return "FAIL"
    if re.search(r"(^|\) )ok\b", cell):
        return "ok"
    return fmt.MISSING if cell == fmt.MISSING else cell


def rendered(name: str, into: Path) -> Path:
    copy = into / name
    shutil.copytree(REPO / "results" / "reference" / name, copy)
    write_report(copy)
    return copy


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each committed reference rendered again, once for the module (read, never changed)."""
    root = tmp_path_factory.mktemp("references")
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            done[name] = rendered(name, root)
        return done[name]

    return get


def scratch(run: Path, into: Path) -> Path:
    """A copy of a rendered run to plant in."""
    return Path(shutil.copytree(run, into / run.name))


@pytest.mark.parametrize("name", REFERENCES)
def test_each_committed_reference_agrees_with_itself(
    name: str, references: Callable[[str], Path]
) -> None:
    run = references(name)
    assert disagreements(run) == []
    # the figure is there to agree: a profiled reference names its device time a step
    pages = [p.read_text() for p in run.glob("variants/*/report.md")]
    assert any(
        (fmt.DEVICE_TIME, fmt.ms(None)) != f and f[0] == fmt.DEVICE_TIME
        for p in pages
        for f in figures(p)
    )


def test_a_fresh_cpu_run_agrees_with_itself(cpu_run: Path) -> None:
    assert disagreements(cpu_run) == []


def test_a_planted_second_definition_is_found(
    tmp_path: Path, references: Callable[[str], Path]
) -> None:
    """The issue's own case: the kernels' summed time (overlapping kernels each counted, so
    larger than the busy time) written under the device time's name on the page that gives
    the profile's device time a step; and a module line that differs between two pages."""
    run = scratch(references("cpu"), tmp_path)
    assert disagreements(run) == []
    page = run / "variants" / "xla" / "report.md"
    text = page.read_text()
    busy = load_summary(run / "summary.json").variants["xla"].profile.device_time_per_step_s
    page.write_text(text + f"\n{fmt.ms(busy * 1.44)} of {fmt.DEVICE_TIME} over 3 steps.\n")
    (wrong,) = disagreements(run)
    assert fmt.DEVICE_TIME in wrong and fmt.ms(busy * 1.44) in wrong
    page.write_text(text)
    module = MODULE_LINE.search(text)
    assert module is not None
    details = run / "details.md"
    planted = module.group(0).replace(module["time"] + " of", "9.999 ms of")
    details.write_text(details.read_text() + f"\n{planted}\n")
    wrong = disagreements(run)  # every variant whose page has that module line
    assert wrong and all("9.999 ms there" in w for w in wrong), wrong


def test_a_planted_second_roof_is_found(tmp_path: Path, references: Callable[[str], Path]) -> None:
    """A cluster's `of roof` taken against another ceiling than the one it names (a peak twice
    the run's), and a variant's `of peak` said of another precision than its summary's."""
    run = scratch(references("cpu"), tmp_path)
    assert roof_disagreements(run) == []
    page = run / "variants" / "xla" / "report.md"
    text = page.read_text()
    cell = re.search(r"\| ([\d.]+)% \((f32|bf16) peak\) \|", text)
    assert cell is not None, "the reference's GEMM has a peak-bound roof to plant on"
    halved = f"| {float(cell[1]) / 2:.1f}% ({cell[2]} peak) |"
    page.write_text(text.replace(cell[0], halved, 1))
    (wrong,) = roof_disagreements(run)
    assert "is not its rate over that ceiling" in wrong
    of_peak = re.search(r"\| of peak \| ([\d.]+)% of (\w+) \|", text)
    assert of_peak is not None
    page.write_text(text.replace(of_peak[0], of_peak[0].replace(f"of {of_peak[2]}", "of bf16")))
    (wrong,) = roof_disagreements(run)
    assert "of peak" in wrong and "its summary's differs" in wrong


def test_a_planted_second_accuracy_verdict_is_found(
    tmp_path: Path, references: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variant pages rendered with a second definition of the verdict (a stricter one of
    their own), then the summary table giving the verdict in other words: both are found."""
    run = scratch(references("cpu"), tmp_path)
    assert accuracy_disagreements(run) == []

    def stricter(v: Any, failure: bool | None = None) -> str:
        n = v.summary.numerics
        if n.ok and n.rel_fro_err > n.tolerance * 1e-5:
            return "FAIL"
        return sections.numerics(v, failure)

    report = run / "report.md"
    summary_table = report.read_text()
    monkeypatch.setattr(variant_page, "numerics", stricter)
    data = load_run(run)  # the pages rendered again by the report's own writer
    write_variant_pages(data, {v.name: run / "variants" / v.name for v in data.variants})
    wrong = accuracy_disagreements(run)
    assert wrong and all(
        "report.md `numerics` reads 'FAIL', its verdict is 'ok'" in w for w in wrong
    )
    assert all(w.split(": ")[1].startswith("variants/") for w in wrong)  # the pages, not the table
    planted = summary_table.replace(" | ok | [hlo_before]", " | within tolerance | [hlo_before]", 1)
    assert planted != summary_table
    report.write_text(planted)
    wrong = accuracy_disagreements(run)
    assert "eager: report.md `numerics` reads 'within tolerance', its verdict is 'ok'" in wrong


def test_a_float32_convolution_is_held_to_the_f32_peak() -> None:
    """`of roof` has one definition: a cluster is held to the peak of the precision it runs
    in; a float32 convolution (no GEMM record) is not held to the larger bf16 peak."""
    import jax
    import jax.numpy as jnp

    from harness.hlo.clusters import find_clusters
    from harness.hlo.parser import parse_module
    from harness.program.module_analysis import _precision
    from harness.records.program import Roofs

    def conv(x: jax.Array, w: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")

    def precision_of(dtype: str) -> str:
        x, w = jnp.ones((2, 3, 8, 8), dtype), jnp.ones((4, 3, 3, 3), dtype)
        text = jax.jit(conv).lower(x, w).compile().as_text()
        clusters = find_clusters(parse_module(text))
        ceilings = Roofs({"bf16": 4e12, "f32": 1e12}, 1e11, "test", "gpu")
        found = {_precision(c, ceilings) for c in clusters} - {""}
        assert len(found) == 1, [(c.kind, c.output_shape) for c in clusters]
        return found.pop()

    assert precision_of("float32") == "f32"
    # XLA's CPU widens a bf16 convolution to f32 around it: the convolution itself runs in f32
    assert precision_of("bfloat16") == "f32"


def test_the_program_table_repeats_the_numerics_findings_verdict() -> None:
    """A leaf over its tolerance that the accuracy finding calls the dtype's own rounding is
    a note in the program table too, never FAIL beside "a note, not a failure"."""
    from harness.records.summary import Numerics
    from harness.report.sections import _worst_leaf

    over = Numerics(1e-3, 1e-3, 5e-2, 2e-2, False, worst_leaf="[0]", failed_leaves=("[0]", "[1]"))
    assert _worst_leaf(over, failure=True).endswith("FAIL (2 leaves)")
    assert _worst_leaf(over, failure=None).endswith("FAIL (2 leaves)")
    noted = _worst_leaf(over, failure=False)
    assert "FAIL" not in noted and "own rounding (a note)" in noted
    exact = Numerics(1.0, 1.0, 1.0, 0.0, False)  # an integer leaf: exact, never rounding
    assert "FAIL" in _worst_leaf(exact, failure=False)
