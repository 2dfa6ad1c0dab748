"""The program analysis' record types moved to harness.program.record (issue 62, item 1).

Kept only for harness.report.data, which another branch is rewriting (RunFacts/RunData merged):
when that lands its import names harness.program.record and this module goes.
"""

from __future__ import annotations

from harness.program.record import ModuleAnalysis

__all__ = ["ModuleAnalysis"]
