"""The one helper for a numeric config field with its allowed range. It lives apart from the
schema so that the sections the schema imports (timing, limits, memory) can use it too."""

from __future__ import annotations

import dataclasses
from typing import Any


def ranged(default: Any, lo: float, hi: float, doc: str = "") -> Any:
    """A numeric config field with its allowed range, checked by validate.validate_ranges."""
    return dataclasses.field(default=default, metadata={"range": (lo, hi), "doc": doc})
