"""What compare concluded about two runs (harness.findings.compare makes it; harness.report.compare
and `python -m harness.commands.compare` only read it).

Nothing here is saved: a comparison is made again from the two run folders each time. It is a
record all the same so that the rules that decide "changed", "the same" or "within noise"
live in the findings layer, and the report, which may not import a rule, renders their result.
"""

from __future__ import annotations

from dataclasses import dataclass

# How one finding of either run relates across the two (FindingChange.status); a gated timing
# pair reads "no verdict: ..." instead.
SAME, CHANGED, WITHIN_NOISE = "same", "changed", "the same within noise"
APPEARED, VANISHED = "appeared in b", "vanished in b"


@dataclass(frozen=True)
class FindingChange:
    """One finding of either run, read in both: what each run concluded and how they relate."""

    rule: str
    subject: str
    a: str
    b: str
    status: str


@dataclass(frozen=True)
class VariantVerdict:
    """One variant in both runs (ok in each): its step-time verdict across them, worded."""

    name: str
    verdict: str


@dataclass(frozen=True)
class RunsCompared:
    """Everything compare concluded about runs a and b.

    `config_differences` and `size_differences` are (key, a, b); a size difference means step
    times are compared per FLOP with no verdict. `floors_differ_by` is the ratio the two noise
    floors exceed (None when they are within it).
    """

    config_differences: tuple[tuple[str, str, str], ...]
    size_differences: tuple[tuple[str, str, str], ...]
    floors_differ_by: float | None
    findings: tuple[FindingChange, ...]
    verdicts: tuple[VariantVerdict, ...]

    @property
    def same_problem(self) -> bool:
        """True when both runs ran the same problem sizes and dtypes: step times pair."""
        return not self.size_differences

    def verdict(self, name: str) -> str | None:
        """The verdict for variant `name`, None when it is not ok in both runs."""
        return next((v.verdict for v in self.verdicts if v.name == name), None)
