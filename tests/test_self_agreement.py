"""One sentence per fact (issue 61): each figure the pages repeat has one definition and one
name (harness.common.fmt.DEVICE_TIME, KERNEL_TIME), and agrees with itself across the pages of
a run: the three committed references, rendered again, and a fresh tiny CPU run. A planted
second definition under the same name fails the check."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from harness.common import fmt
from harness.records.summary import load_summary
from harness.report import write_report

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


def rendered(name: str, into: Path) -> Path:
    copy = into / name
    shutil.copytree(REPO / "results" / "reference" / name, copy)
    write_report(copy)
    return copy


@pytest.mark.parametrize("name", REFERENCES)
def test_each_committed_reference_agrees_with_itself(name: str, tmp_path: Path) -> None:
    run = rendered(name, tmp_path)
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


def test_a_planted_second_definition_is_found(tmp_path: Path) -> None:
    """The issue's own case: the kernels' summed time (overlapping kernels each counted, so
    larger than the busy time) written under the device time's name on the page that gives
    the profile's device time a step; and a module line that differs between two pages."""
    run = rendered("cpu", tmp_path)
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


def test_a_float32_convolution_is_held_to_the_f32_peak() -> None:
    """`of roof` has one definition: a cluster is held to the peak of the precision it runs
    in; a float32 convolution (no GEMM record) is not held to the larger bf16 peak."""
    import jax
    import jax.numpy as jnp

    from harness.analyze.module_analysis import _precision
    from harness.analyze.program import CeilingRates
    from harness.hlo.clusters import find_clusters
    from harness.hlo.parser import parse_module

    def conv(x: jax.Array, w: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")

    def precision_of(dtype: str) -> str:
        x, w = jnp.ones((2, 3, 8, 8), dtype), jnp.ones((4, 3, 3, 3), dtype)
        text = jax.jit(conv).lower(x, w).compile().as_text()
        clusters = find_clusters(parse_module(text))
        ceilings = CeilingRates({"bf16": 4e12, "f32": 1e12}, 1e11, "test", "gpu")
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
