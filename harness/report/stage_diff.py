"""The first stage at which a variant's IR differs from its reference's, as a diff.

Pure functions over the two stage texts (the report's edge reads them, harness.report.markdown):
a unified diff with context, cut to a line budget, which report.md prints as a `diff` block and
report.html shows side by side (harness.report.doc.Diff). The texts are the ones the ladder
kept, with only what differs in every line of two compiles left out: StableHLO's locations
(`loc(...)`, `#loc` lines) and HLO's `metadata={...}` (source positions, op names).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from harness.report.doc import Diff, DiffHunk, DiffLine

MAX_LINES = 200  # of the diff, headers and context included
CONTEXT = 3
MAX_LINE_CHARS = 400  # an HLO line with a large constant can run to megabytes
# Lines of each side compared once the common head and tail are set aside: SequenceMatcher
# (autojunk=False) grows with the product of the two sides, and on repetitive text much
# faster (5,000 alike lines a side ran past 400 s, 1,500 took 12 s); 500 a side takes
# about half a CPU-second at worst, and a first divergence rarely spans more.
MAX_COMPARED = 500

# The ladder's stages the report can diff, and how each is normalised before comparing.
TEXT_STAGES = (
    "jaxpr",
    "fx_graph",
    "aot_forward",
    "stablehlo",
    "post_grad",
    "hlo_before",
    "spmd",
    "passes",
    "inductor_pre_fusion",
    "hlo_after",
    "inductor_post_fusion",
    "output_code",
)

_METADATA = re.compile(r",?\s*metadata=\{[^{}]*\}")
_MLIR_LOC = re.compile(r"\s*loc\([^()]*(?:\([^()]*\)[^()]*)*\)")
HLO_STAGES = ("hlo_before", "spmd", "passes", "hlo_after")


def normalized(stage: str, text: str) -> str:
    """The stage's text as the diff compares it: indentation and names kept."""
    if stage == "stablehlo":
        return "\n".join(
            _MLIR_LOC.sub("", line).rstrip()
            for line in text.splitlines()
            if not line.startswith("#loc")
        )
    if stage in HLO_STAGES:
        return "\n".join(_METADATA.sub("", line).rstrip() for line in text.splitlines())
    return text


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …"


@dataclass(frozen=True)
class StageDiff:
    """A stage's diff: the block to show, how many diff lines were left out, whether the
    two texts were equal after normalisation, and how many lines past the first differing
    one were not compared (MAX_COMPARED a side; 0 when all were)."""

    diff: Diff
    left_out: int = 0
    equal: bool = False
    not_compared: int = 0


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """The lengths of the common head and the common tail (not overlapping): linear."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def stage_diff(
    stage: str,
    left: tuple[str, str],
    right: tuple[str, str],
    max_lines: int = MAX_LINES,
    context: int = CONTEXT,
    max_compared: int = MAX_COMPARED,
) -> StageDiff:
    """Returns the diff of `left` and `right`, each (label, text), normalised for `stage`,
    with `context` lines around each change; hunks past `max_lines` lines are left out.

    The common head and tail are set aside first (linear), and of what lies between only the
    first `max_compared` lines a side are compared: the work is linear in the texts plus a
    bounded part, and `not_compared` says how many lines were not looked at."""
    a = [_clip(x) for x in normalized(stage, left[1]).splitlines()]
    b = [_clip(x) for x in normalized(stage, right[1]).splitlines()]
    head, tail = _common_ends(a, b)
    keep = max(0, head - context)
    a_end, b_end = len(a) - tail, len(b) - tail
    not_compared = max(0, a_end - head - max_compared) + max(0, b_end - head - max_compared)
    if not_compared:  # compare the first max_compared lines of each side's middle only
        a_end, b_end = min(a_end, head + max_compared), min(b_end, head + max_compared)
    else:  # the tail's context lines go with the last change
        a_end, b_end = min(len(a), a_end + context), min(len(b), b_end + context)
    hunks: list[DiffHunk] = []
    used = 2  # the --- and +++ lines
    left_out = 0
    matcher = difflib.SequenceMatcher(None, a[keep:a_end], b[keep:b_end], autojunk=False)
    for group in _shifted(matcher.get_grouped_opcodes(context), keep):
        hunk = _hunk(group, a, b)
        size = 1 + len(hunk.lines)
        if used + size > max_lines:
            left_out += size
            continue
        hunks.append(hunk)
        used += size
    return StageDiff(Diff(left[0], right[0], tuple(hunks)), left_out, a == b, not_compared)


def _shifted(
    groups: Iterable[list[tuple[str, int, int, int, int]]], by: int
) -> Iterator[list[tuple[str, int, int, int, int]]]:
    """difflib's grouped opcodes of a slice starting at line `by`, in the whole texts' lines."""
    for group in groups:
        yield [(tag, i1 + by, i2 + by, j1 + by, j2 + by) for tag, i1, i2, j1, j2 in group]


def _hunk(group: Sequence[tuple[str, int, int, int, int]], a: list[str], b: list[str]) -> DiffHunk:
    """One hunk of difflib's grouped opcodes, with line numbers on both sides."""
    a0, a1 = group[0][1], group[-1][2]
    b0, b1 = group[0][3], group[-1][4]
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            lines += [DiffLine(" ", a[i], i + 1, j1 + k + 1) for k, i in enumerate(range(i1, i2))]
            continue
        lines += [DiffLine("-", a[i], left=i + 1) for i in range(i1, i2)]
        lines += [DiffLine("+", b[j], right=j + 1) for j in range(j1, j2)]
    return DiffHunk(f"@@ -{_span(a0, a1)} +{_span(b0, b1)} @@", tuple(lines))


def _span(start: int, end: int) -> str:
    """A unified diff's range: the first line and the count (`start,0` for none)."""
    count = end - start
    first = start + 1 if count else start
    return f"{first}" if count == 1 else f"{first},{count}"
