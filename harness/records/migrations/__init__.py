"""summary.json's migrations, every version in one place: `MIGRATIONS[n]` turns version-n data
into version n+1, and harness.records.summary.parse_summary applies them in turn.

    v1          versions 1 and 2: flat variants into sections, the comparisons apart
    v3          version 3: the A/A gate judged from what the run recorded
    additive    versions 4 to 10: a section or a field added, read as absent

A change to summary.json's records raises SCHEMA_VERSION (harness.records.summary) and adds
its migration here, with a test that an old summary reads (tests/test_schema.py).

    ceilings    ceilings.json's own (harness.records.run_files.CEILINGS), not summary.json's
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.records.migrations.additive import (
    migrate_v4,
    migrate_v5,
    migrate_v6,
    migrate_v7,
    migrate_v8,
    migrate_v9,
    migrate_v10,
    migrate_v11,
)
from harness.records.migrations.v1 import migrate_v1, migrate_v2
from harness.records.migrations.v3 import migrate_v3

Migration = Callable[[dict[str, Any], str], dict[str, Any]]

MIGRATIONS: dict[int, Migration] = {
    1: migrate_v1,
    2: migrate_v2,
    3: migrate_v3,
    4: migrate_v4,
    5: migrate_v5,
    6: migrate_v6,
    7: migrate_v7,
    8: migrate_v8,
    9: migrate_v9,
    10: migrate_v10,
    11: migrate_v11,
}
