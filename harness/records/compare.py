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


# How one source line's device time moved between the runs (LineChange.verdict).
SLOWER, FASTER, UNCHANGED, NO_LINE_VERDICT = "slower", "faster", "unchanged", "no verdict"


@dataclass(frozen=True)
class LineChange:
    """One source line and kind of work of a variant in both runs: its device time a step in
    each, the difference's bootstrap interval over each run's profiled steps, and whether it
    moved beyond both runs' noise (harness.analyze.line_diff)."""

    variant: str
    line: str  # file:line, or a placeholder for events no source line holds
    work: str  # the kind of work (harness.hlo.work.KINDS)
    a_s: float  # mean device time a step in run a
    b_s: float  # and in run b
    ci95_s: tuple[float, float]  # the 95% interval of b - a (s), resampling each run's steps
    ratio_ci95: tuple[float, float] | None  # of b / a (None where a line is absent in a)
    floor: float  # the noise it must clear: the larger of the two runs' A/A floors
    verdict: str  # SLOWER, FASTER, UNCHANGED or NO_LINE_VERDICT
    steps: tuple[int, int]  # the profiled steps of each run
    # The smallest difference (s) a run resolves: the floor of the larger run's device time a
    # step. A line moving less than its step could is not called, however narrow its interval.
    resolution_s: float = 0.0

    @property
    def moved(self) -> bool:
        return self.verdict in (SLOWER, FASTER)


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
    lines: tuple[LineChange, ...] = ()  # per source line and kind, the lines that moved first

    @property
    def same_problem(self) -> bool:
        """True when both runs ran the same problem sizes and dtypes: step times pair."""
        return not self.size_differences

    def verdict(self, name: str) -> str | None:
        """The verdict for variant `name`, None when it is not ok in both runs."""
        return next((v.verdict for v in self.verdicts if v.name == name), None)
