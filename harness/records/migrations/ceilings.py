"""ceilings.json's migration to version 1 (harness.records.run_files.CEILINGS).

A version-0 file is either the shape of version 1 without the number, or the first day's
(2026-11-30, before the `Ceilings` record): one `peak_flops_per_s` of its `dtype`, and one
`source` for it and the copy. That one becomes a peak of its precision, as
`python -m harness.analyze --ceilings` has always read it.
"""

from __future__ import annotations

import math
from typing import Any

# The first day's dtype names, as a precision of `peaks` is named.
_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def migrate_ceilings_v0(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Returns version-1 data for a version-0 ceilings.json read from `source`."""
    del source
    if "peak_flops_per_s" not in data:
        return {**data, "schema_version": 1}
    rest = {k: v for k, v in data.items() if k not in ("peak_flops_per_s", "dtype", "source")}
    flops, said = data["peak_flops_per_s"], data.get("source")
    peaks = dict(rest.get("peaks") or {})
    if isinstance(flops, int | float) and not isinstance(flops, bool) and math.isfinite(flops):
        dtype = str(data.get("dtype") or "peak")
        peaks.setdefault(_SHORT.get(dtype, dtype), {"flops_per_s": flops, "source": said})
    return {**rest, "peaks": peaks, "bytes_source": said, "schema_version": 1}
