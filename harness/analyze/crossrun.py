"""Where one variant's IR ladders of two runs first differ, for compare (harness.report.compare).

The report reads no IR file; comparing two saved runs' ladders is analysis, done here when
compare asks, through the same first-divergence walk a run uses (harness.hlo.diverge).
"""

from __future__ import annotations

from pathlib import Path

from harness.hlo.diverge import first_divergence


def ladder_divergence(a_ir: Path, b_ir: Path) -> tuple[str, str]:
    """Returns (stage, detail) where the two ladders first differ; an unparsable stage gives
    ("–", why) rather than stopping the comparison."""
    try:
        d = first_divergence(a_ir, b_ir)
    except Exception as e:  # a damaged stage of one run must not stop the comparison
        return "–", f"the ladders could not be compared ({type(e).__name__}: {str(e)[:120]})"
    return d.stage, d.detail
