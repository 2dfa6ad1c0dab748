"""A manifest's config, as saved, read through typed accessors.

manifest.json keeps the config as resolved, a plain JSON object (harness.config's keys), and
it stays so. Its readers (the report, the findings, the judging of a re-timed run, the
between-runs check) read it through this view instead of walking its dicts. The view is
lenient on purpose: a run saved before a key existed, or holding a value of another type,
reads as absent, and each reader keeps its own default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SavedConfig:
    """The saved config's sections and values, typed; absent or mistyped ones are None."""

    raw: Mapping[str, Any]

    def section(self, name: str) -> Mapping[str, Any] | None:
        """The top-level section `name` (`timing`, `memory`, ...), None unless it is an object."""
        value = self.raw.get(name) if isinstance(self.raw, Mapping) else None
        return value if isinstance(value, Mapping) else None

    def number(self, section: str, key: str) -> float | None:
        """`section.key` when it is a number (not a bool), else None."""
        value = (self.section(section) or {}).get(key)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else None

    def flag(self, section: str, key: str) -> bool | None:
        """`section.key` when it is a bool, else None."""
        value = (self.section(section) or {}).get(key)
        return value if isinstance(value, bool) else None

    def studied(self) -> tuple[str, Any] | None:
        """What the run studied, as saved: (`program`, its section) for a program that names a
        function, else (`problem`, its section); None when the config lacks it."""
        program = self.section("program")
        name = "program" if program and program.get("function") else "problem"
        if not isinstance(self.raw, Mapping) or name not in self.raw:
            return None
        return name, self.raw[name]
