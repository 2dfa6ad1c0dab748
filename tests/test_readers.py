"""Every reader of a run's files is total: whatever a damaged file holds (an odd schema_version,
nesting past the stack, NaN, numbers past a float, a malformed version-1 file, wrong types),
it raises SchemaError naming the file, or the run is left out; links in the pages are only
http, https or relative; names printed to a terminal are inert; config numbers are bounded."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO

from harness.common import fmt, terminal
from harness.config import load as load_config
from harness.config.experiment import ConfigError
from harness.records.summary import load_summary, parse_summary
from harness.report import doc
from harness.report.index import write_results_index
from harness.store.records import SchemaError, loads

sys.path.insert(0, str(REPO / "benchmarks"))

from hostile.cases_readers import HOSTILE_LINKS
from hostile.readers_material import DAMAGES, _summary, live_targets


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_summary_is_one_schema_error_naming_its_file(damage: str, tmp_path: Path):
    path = tmp_path / "summary.json"
    text = DAMAGES[damage]()
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SchemaError) as e:
        load_summary(path)
    assert str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_the_healthy_summary_the_damages_start_from_loads(tmp_path: Path):
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    assert set(load_summary(tmp_path / "summary.json").variants) == {"xla", "matmul_only"}


@pytest.mark.parametrize("version", [0, -1, 10**6])
def test_no_migration_is_looked_up_for_a_version_no_harness_wrote(version: int):
    with pytest.raises(SchemaError, match="schema_version"):
        parse_summary({**_summary(), "schema_version": version}, "s.json")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 3000 + "]" * 3000, "nested deeper"),
        ('{"a": ' * 65 + "1" + "}" * 65, "nested deeper"),
        ('{"x": NaN}', "NaN"),
        ('{"x": -Infinity}', "Infinity"),
        ('{"x": 1e400}', "too large"),
        ('{"x": ' + "1" * 41 + "}", "41 digits"),
        ('{"x": ' + "1" * 5000 + "}", "5000 digits"),
        ("{", "not JSON"),
    ],
)
def test_strict_json_refuses_what_no_harness_writes(text: str, problem: str):
    with pytest.raises(SchemaError, match=problem):
        loads(text, "f.json")


def test_strict_json_reads_what_a_harness_writes():
    data = {"a": [1, 2.5, None, "x", {"b": -(10**30)}], "c": 1e-300}
    assert loads(json.dumps(data), "f.json") == data


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400, "3", None])
def test_formatting_is_total(value: object):
    for f in (fmt.count, fmt.ms, fmt.secs, fmt.si, fmt.pct, fmt.sci, fmt.step, fmt.age):
        assert f(value) == "–"


def test_the_index_lists_healthy_runs_and_leaves_each_damaged_one_out(tmp_path: Path):
    root = tmp_path / "results"
    damaged = ("schema_0", "deep_100k", "nan_count", "int_5000", "v1_mode_list", "not_utf8")
    for i, damage in enumerate(damaged):
        run = root / "gelu" / f"2020010{i}-000000"
        run.mkdir(parents=True)
        text = DAMAGES[damage]()
        (run / "summary.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    good = root / "gelu" / "20260101-000000"
    good.mkdir()
    (good / "summary.json").write_text(json.dumps(_summary()))
    (good / "manifest.json").write_text('{"config": ' + "[" * 5000 + "]" * 5000 + "}")
    page = write_results_index(root).read_text()
    listed, left_out = page.split("Left out", 1)
    assert "20260101-000000" in listed
    assert all(f"2020010{i}-000000" in left_out for i in range(len(damaged)))


@pytest.mark.parametrize(
    ("href", "live"),
    [
        ("https://example.org/a?b", True),
        ("HTTP://example.org", True),
        ("plots/step_time.png", True),
        ("../../index.html", True),
        ("#findings", True),
        ("variants/xla/ir/00-jaxpr.txt", True),
        ("javascript:alert(1)", False),
        ("JaVaScRiPt:alert(1)", False),
        (" javascript:alert(1)", False),
        ("java\tscript:alert(1)", False),
        ("\x01javascript:alert(1)", False),
        ("javascript&#58;alert(1)", False),
        ("&#106;avascript:alert(1)", False),
        ("jav\u200bascript:alert(1)", False),
        ("data:text/html,x", False),
        ("vbscript:x", False),
        ("file:///etc/passwd", False),
        ("//evil.example/x", False),
        ("/etc/passwd", False),
        ("\\\\evil\\x", False),
        ("a:b/c", False),
    ],
)
def test_only_http_https_and_relative_links_are_live(href: str, live: bool):
    assert doc.safe_href(href) is live
    page = doc.to_html((doc.Para(f"[x]({href})"),), "t")
    assert ("<a href" in page) is (live and "\t" not in href and " " not in href)
    assert live_targets(page) == []


def test_every_hostile_link_renders_as_text_in_both_renderings():
    blocks = (
        doc.Heading(2, HOSTILE_LINKS[0]),
        doc.Para(" ".join(HOSTILE_LINKS)),
        doc.Bullets(HOSTILE_LINKS),
        doc.Table(("a",), tuple((link,) for link in HOSTILE_LINKS)),
        doc.Image("javascript:alert(1)", "alt"),
    )
    page = doc.to_html(blocks, "t")
    assert live_targets(page) == []
    assert "<a " not in page and "<img" not in page
    md = doc.to_markdown(blocks)
    assert "](javascript" not in md.replace("\\](javascript", "")
    assert re.search(r"(?<!\\)<[A-Za-z/!?]", md) is None  # no raw HTML, no autolink


def test_a_safe_link_still_renders():
    page = doc.to_html((doc.Para("[report](report.html) and `[c](javascript:x)`"),), "t")
    assert '<a href="report.html">report</a>' in page
    assert "<code>[c](javascript:x)</code>" in page


@pytest.mark.parametrize(
    "name",
    ["jit_f\x1b]0;title\x07", "a\x1b[2Jb", "line\rover", "x\x9b31m", "rtl\u202eevil", "n\nl"],
)
def test_terminal_text_is_inert(name: str):
    shown = terminal.shown(name)
    assert shown.isprintable()
    assert shown.startswith(name[0])


def test_terminal_lines_keep_their_newlines():
    assert terminal.lines("a\x1b[2J\nb") == "a\\x1b[2J\nb"
    assert terminal.shown("plain name") == "plain name"


def _config(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "configs" / "gelu.yaml").read_text()
    assert old in text
    path = tmp_path / "c.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("seed: 0", "seed: " + "7" * 5000, "seed"),
        ("seed: 0", "seed: -" + "7" * 5000, "seed"),
        ("seed: 0", "seed: 0x" + "f" * 5000, "seed"),
        ("budget_s: 2.5", "budget_s: " + "7" * 400, "timing.budget_s"),
        ("budget_s: 2.5", "budget_s: .nan", "timing.budget_s"),
        ("budget_s: 2.5", "budget_s: -.inf", "timing.budget_s"),
        ("batch_s: 0.02", "batch_s: 1.0e+999", "timing.batch_s"),
    ],
)
def test_a_number_no_config_takes_names_the_file_and_key(tmp_path, old, new, key):
    with pytest.raises(ConfigError) as e:
        load_config(str(_config(tmp_path, old, new)))
    assert e.value.key == key
    assert "c.yaml" in str(e.value)


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("--config.seed=" + "7" * 5000, "seed"),
        ("--config.timing.budget_s=" + "7" * 400, "timing.budget_s"),
        ("--config.timing.budget_s=.nan", "timing.budget_s"),
        ("--config.problem.batch=2," + "7" * 5000, "problem.batch"),
    ],
)
def test_a_number_no_flag_takes_names_the_flag(flag: str, key: str):
    with pytest.raises(ConfigError) as e:
        load_config("gelu.yaml", [flag])
    assert e.value.key == key
    assert flag.split("=")[0] in str(e.value)
