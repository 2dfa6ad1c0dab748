"""The migrations of versions 4 to 11: each of those versions only added a section or a field,
which an older summary reads as absent (null or empty) until `python -m harness.migrate`
judges the run again from its saved files."""

from __future__ import annotations

from typing import Any


def migrate_v4(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-5 data for a version-4 summary: version 5 only added the `memory`
    section, which reads as absent."""
    del source
    return {**data, "schema_version": 5}


def migrate_v5(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-6 data for a version-5 summary: its findings read as absent (null)
    until `python -m harness.commands.migrate` makes them."""
    del source
    return {**data, "schema_version": 6, "findings": None}


def migrate_v6(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-7 data for a version-6 summary: version 7 only added the run-to-run
    spread (`noise.between_runs`, `comparison.*.between_runs` and `ci95_rounds`), which reads
    as not measured (null)."""
    del source
    return {**data, "schema_version": 7}


def migrate_v7(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-8 data for a version-7 summary. Version 8 judges each comparison against
    the A/A floor instead of withholding every verdict of a run whose A/A check failed; it added
    `noise.aa_held` (null: not judged so), `aa_reasons` and `unresolvable`, and a timing
    finding's `decomposition`. The verdicts stay as they were judged until `python -m
    harness.commands.migrate` judges them again from the saved rounds."""
    del source
    return {**data, "schema_version": 8}


def migrate_v8(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-9 data for a version-8 summary: its findings have no numerics or
    effects (absent: empty) until `python -m harness.commands.migrate` judges the run again."""
    del source
    return {**data, "schema_version": 9}


def migrate_v9(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-10 data for a version-9 summary: version 10 only added
    `findings.control_flow` (harness.findings.control_flow), which reads as none."""
    del source
    return {**data, "schema_version": 10}


def migrate_v10(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-11 data for a version-10 summary: version 11 only added the overlap
    and the waits at collectives to `comm` (harness.match.waits), which read as unmeasured."""
    del source
    return {**data, "schema_version": 11}


def migrate_v11(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-12 data for a version-11 summary: version 12 only added to a timing
    finding's decomposition its parts by kind of work and by source line, its lead and the
    profiler's overhead (harness.findings.explain), which read as absent until `python -m
    harness.commands.migrate` makes the findings again."""
    del source
    return {**data, "schema_version": 12}
