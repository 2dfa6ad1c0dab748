"""The one helper for a numeric config field with its allowed range. It lives apart from the
schema so that the sections the schema imports (timing, limits, memory) can use it too."""

from __future__ import annotations

import dataclasses
from typing import Any

# The most entries of a list-valued key without a bound of its own (variants, names, roles,
# platforms): far above any real config, far below what would stall validation or a compile.
MAX_ITEMS = 256


def ranged(default: Any, lo: float, hi: float, doc: str = "", max_len: int = MAX_ITEMS) -> Any:
    """A numeric config field with its allowed range (of each entry, for a tuple, and at most
    `max_len` of them), checked by validate.validate_ranges."""
    return dataclasses.field(
        default=default, metadata={"range": (lo, hi), "doc": doc, "max_len": max_len}
    )
