"""A fast sample of the hostile battery (benchmarks/hostile_battery.py), run in-process: each
case's command runs for real in a sandbox of its own, and must hold (its exit code, one line
and no traceback, nothing changed outside its output, nothing lost)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from hostile.case import Sandbox, failures, run_attack
from hostile.cases_faults import CASES as FAULTS_CASES
from hostile.cases_files import CASES as FILES_CASES

# One case of each kind of foreign content, marker and input, across the three tools: the
# whole fast set (69 cases) runs in the battery itself.
FILES_SAMPLE = (
    "deletes/export_out_holding_nested_run",
    "deletes/compare_out_holding_dump_folder",
    "deletes/export_out_holding_dir_link",
    "deletes/compare_out_holding_changed_recorded",
    "deletes/export_out_holding_fifo",
    "deletes/compare_out_with_marker_is_link",
    "deletes/export_out_with_legacy_marker",
    "deletes/analyze_dump_in_out",
    "deletes/analyze_out_inside_dump",
    "deletes/export_into_link_to_it",
    "deletes/compare_into_its_parent",
)
SAMPLE = {c.name: c for c in FILES_CASES if c.name in FILES_SAMPLE}


def test_the_sample_names_fast_cases() -> None:
    assert set(SAMPLE) == set(FILES_SAMPLE)
    assert all(c.fast for c in SAMPLE.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES_SAMPLE)
def test_a_fast_hostile_case_holds(name: str, tmp_path: Path) -> None:
    sandbox = Sandbox(root=tmp_path, template_run=None)
    attack = SAMPLE[name].setup(sandbox)
    outcome = run_attack(attack, sandbox)
    assert failures(outcome, attack, sandbox) == [], (outcome.rc, outcome.stderr[-2000:])


# Issue 32's class 9 at the command line: config and flag files that would block or never end
# (FIFOs, devices, kernel files, links to them, nested flag files), one of each shape; the
# whole fast set (29 cases) and the study cases of classes 7-9 run in the battery itself.
FAULTS_SAMPLE = (
    "hangs/config_proc_kmsg",
    "hangs/config_link_to_fifo",
    "hangs/config_link_to_dev_zero",
    "hangs/config_huge_file",
    "hangs/flagfile_fifo_next_arg",
    "hangs/flagfile_nested_three_deep_dev_zero",
    "hangs/report_flagfile_fifo",
    "hangs/config_fifo_through_flagfile",
)
FAULTS = {c.name: c for c in FAULTS_CASES if c.name in FAULTS_SAMPLE}


def test_the_faults_sample_names_fast_cases() -> None:
    assert set(FAULTS) == set(FAULTS_SAMPLE)
    assert all(c.fast for c in FAULTS.values())


@pytest.mark.study
@pytest.mark.parametrize("name", FAULTS_SAMPLE)
def test_a_fast_faults_case_holds(name: str, tmp_path: Path) -> None:
    sandbox = Sandbox(root=tmp_path, template_run=None)
    attack = FAULTS[name].setup(sandbox)
    outcome = run_attack(attack, sandbox)
    assert failures(outcome, attack, sandbox) == [], (outcome.rc, outcome.stderr[-2000:])


# Issue 32's classes 5, 6, 10 and 11 (benchmarks/hostile/cases_readers.py): one damaged run of
# three shapes of damage across three readers, two link sources, a terminal path and a big
# number (tests/test_readers.py checks every damage and number in-process); the whole fast
# set (71 cases) and the cases needing a study run in the battery itself.
READERS_SAMPLE = (
    "damaged_run/report_schema_0",
    "damaged_run/report_deep_100k",
    "damaged_run/report_nan_count",
    "damaged_run/index_v1_mode_list",
    "damaged_run/compare_b_deep_objects",
    "script/description_links",
    "script/manifest_in_results_index",
    "script/escape_in_run_path",
    "big_numbers/file_seed_5000",
)


def _readers() -> dict:
    from hostile.cases_readers import CASES as READERS_CASES

    return {c.name: c for c in READERS_CASES if c.name in READERS_SAMPLE}


def test_the_readers_sample_names_fast_cases() -> None:
    readers = _readers()
    assert set(readers) == set(READERS_SAMPLE)
    assert all(c.fast for c in readers.values())


@pytest.mark.study
@pytest.mark.parametrize("name", READERS_SAMPLE)
def test_a_fast_readers_case_holds(name: str, tmp_path: Path) -> None:
    sandbox = Sandbox(root=tmp_path, template_run=None)
    attack = _readers()[name].setup(sandbox)
    outcome = run_attack(attack, sandbox)
    assert failures(outcome, attack, sandbox) == [], (outcome.rc, outcome.stderr[-2000:])


# Issue 39 (benchmarks/hostile/cases_round4.py): a reader of each kind given one of the four
# doors (FIFO, /dev/zero, a sparse 6 GB file, a link out of its tree), a write over a user's
# file by the report, the results index and a study's results root, and remote content through
# an index row and HLO op_name scopes; the whole set (47 fast cases, 10 on the template run)
# runs in the battery itself.
ROUND4_SAMPLE = (
    "hangs/r4_ceilings_fifo",
    "hangs/r4_index_row_dev_zero",
    "hangs/r4_sibling_summary_sparse",
    "hangs/r4_older_manifest_link_out",
    "hangs/r4_dump_fifo",
    "overwrites/r4_report_foreign_folder",
    "overwrites/r4_index_over_users_page",
    "overwrites/r4_results_root_inside_a_run",
    "remote_content/r4_index_row",
    "remote_content/r4_op_name",
)


def _round4() -> dict:
    from hostile.cases_round4 import CASES as ROUND4_CASES

    return {c.name: c for c in ROUND4_CASES if c.name in ROUND4_SAMPLE}


def test_the_round4_sample_names_fast_cases() -> None:
    cases = _round4()
    assert set(cases) == set(ROUND4_SAMPLE)
    assert all(c.fast for c in cases.values())


@pytest.mark.study
@pytest.mark.parametrize("name", ROUND4_SAMPLE)
def test_a_fast_round4_case_holds(name: str, tmp_path: Path) -> None:
    sandbox = Sandbox(root=tmp_path, template_run=None)
    attack = _round4()[name].setup(sandbox)
    outcome = run_attack(attack, sandbox)
    assert failures(outcome, attack, sandbox) == [], (outcome.rc, outcome.stderr[-2000:])


# Issue 59 (benchmarks/hostile/cases_round5.py, cases_round5_more.py): migrate's raw summary
# read, make running what a path says, compare's default folder, an autolink and raw ESC/BEL
# in report text; the study cases (a double fork, SIGTERM to the supervisor, XLA_FLAGS' dump
# folder, ...) run in the battery itself and in tests/test_containment.py.
ROUND5_SAMPLE = (
    "hangs/r5_migrate_summary_proc_status",
    "hangs/r5_migrate_summary_non_utf8",
    "script/r5_make_compare_semicolon",
    "overwrites/r5_two_compares_same_ids",
    "remote_content/r5_autolink",
    "remote_content/r5_escapes",
)


def _round5() -> dict:
    from hostile.cases_round5 import CASES as FIRST
    from hostile.cases_round5_more import CASES as MORE

    return {c.name: c for c in (*FIRST, *MORE) if c.name in ROUND5_SAMPLE}


def test_the_round5_sample_names_fast_cases() -> None:
    cases = _round5()
    assert set(cases) == set(ROUND5_SAMPLE)
    assert all(c.fast for c in cases.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", ROUND5_SAMPLE)
def test_a_fast_round5_case_holds(name: str, tmp_path: Path) -> None:
    sandbox = Sandbox(root=tmp_path, template_run=None)
    attack = _round5()[name].setup(sandbox)
    outcome = run_attack(attack, sandbox)
    assert failures(outcome, attack, sandbox) == [], (outcome.rc, outcome.stderr[-2000:])
