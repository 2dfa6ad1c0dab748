"""Number formatting shared by every table, so report.md and report.html print identical figures.

A library, not part of the report: the analysis stage's rules (harness.findings) word
their findings with the same figures the report's tables print.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

MISSING = "–"  # no such figure

# One name per figure (issue 61): a figure the pages repeat is written with its one phrase, and
# two figures never share one (tests/test_self_agreement.py reads every page for them).
# The union of the device's busy intervals in a profiled step (`profile.device_time_per_step_s`):
# overlapping kernels counted once, so it never exceeds the step's wall time.
DEVICE_TIME = "device time a step"
# The kernels' own durations summed over a step (a module's or a cluster's `time_s`): kernels
# that overlap (several CPU threads, GPU streams) each count, so it may exceed the step.
KERNEL_TIME = "kernel time a step"


def num(value: Any) -> float | None:
    """Returns `value` as a float, or None when it is absent, not a number, or not finite
    (an infinity or NaN has no figure to print, and round() of one raises)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        v = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return v if math.isfinite(v) else None


def _figure(value: Any, written: Callable[[float], str]) -> str:
    """Returns `value` as `written` prints a number, or MISSING where it is none (num)."""
    v = num(value)
    return MISSING if v is None else written(v)


def ms(seconds: Any) -> str:
    return _figure(seconds, lambda v: f"{v * 1e3:.3f} ms")


def secs(seconds: Any) -> str:
    return _figure(seconds, lambda v: f"{v:.3f} s")


def age(seconds: Any) -> str:
    """Returns an age in the largest whole unit that fits: `40 s`, `12 min`, `3 h`, `2 days`."""
    v = num(seconds)
    if v is None:
        return MISSING
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if v >= size:
            return f"{v / size:.0f} {unit}"
    return f"{v:.0f} s"


def count(value: Any) -> str:
    """Returns a per-step count: integers without decimals, fractions with one."""
    v = num(value)
    if v is None:
        return MISSING
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.1f}"


def plural(noun: str) -> str:
    """The plural of a counted noun: kernels, copies, launches."""
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")


def counted(value: Any, noun: str) -> str:
    """Returns a per-step count with its noun, singular for exactly one: "1 kernel", "2.5 kernels"."""
    return f"{count(value)} {noun if num(value) == 1 else plural(noun)}"


def versus(a: Any, b: Any, noun: str, per: str = "") -> str:
    """Two counts compared in words computed from them, never written by hand: "3 kernels more
    a step (101 against 98)", "2 D2H copies fewer (0 against 2)", "the same 4 kernels". `per`
    follows the noun ("a step")."""
    x, y = num(a), num(b)
    if x is None or y is None:
        return f"{plural(noun)}: {count(a)} against {count(b)} (not measured)"
    tail = f" {per}" if per else ""
    if x == y:
        return f"the same {counted(x, noun)}{tail}"
    word = "more" if x > y else "fewer"
    return f"{counted(abs(x - y), noun)} {word}{tail} ({count(x)} against {count(y)})"


def bytes_versus(a: Any, b: Any, what: str = "memory traffic") -> str:
    """Two byte counts compared: "17.1 MB more memory traffic (40 MB against 22.9 MB)"."""
    x, y = num(a), num(b)
    if x is None or y is None:
        return f"{what}: {si(a, 'B')} against {si(b, 'B')} (not measured)"
    word = "more" if x > y else "less"
    return f"{si(abs(x - y), 'B')} {word} {what} ({si(x, 'B')} against {si(y, 'B')})"


def against_threshold(value: float, threshold: float, suffix: str = "×") -> str:
    """`value` against `threshold` with the comparison computed, and printed with as many
    decimals as it takes for the printed value to fall on the same side: "9.7× < 10×",
    "10.0× ≥ 10×" (9.96 is never printed as a 10.0 that is under 10)."""
    shown = f"{value:.1f}"
    for digits in range(1, 6):
        shown = f"{value:.{digits}f}"
        if (float(shown) >= threshold) == (value >= threshold):
            break
    sign = "≥" if value >= threshold else "<"
    return f"{shown}{suffix} {sign} {threshold:g}{suffix}"


def ratio(a: Any, b: Any) -> str:
    x, y = num(a), num(b)
    return MISSING if x is None or not y else f"{x / y:.2f}×"


def si(value: Any, unit: str = "") -> str:
    """Returns `value` with an SI prefix, e.g. 1.35e+11 FLOP -> '135 GFLOP'."""
    v = num(value)
    if v is None:
        return MISSING
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def tflops(value: Any) -> str:
    return _figure(value, lambda v: f"{v / 1e12:.3g}")


def pct(value: Any) -> str:
    return _figure(value, lambda v: f"{v * 100:.1f}%")


def sci(value: Any) -> str:
    return _figure(value, lambda v: f"{v:.2e}")


def text(value: Any) -> str:
    """Returns a short cell for any value: MISSING for None/empty, yes/no for booleans."""
    if value is None or value == "" or value == [] or value == {}:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def option(value: Any) -> str:
    """Returns an XLA option's or a keyword's value as the config writes it: an empty string is
    `""` (for a list option such as xla_gpu_enable_command_buffer, "off"), never MISSING,
    which means no value."""
    return '""' if value == "" else text(value)


def ci(bounds: Any, scale: float = 1e3, unit: str = "") -> str:
    """Returns an interval `lo–hi` scaled (ms by default), or '' without one."""
    if not isinstance(bounds, list | tuple) or len(bounds) != 2:
        return ""
    lo, hi = num(bounds[0]), num(bounds[1])
    if lo is None or hi is None:
        return ""
    return f"{lo * scale:.3f}–{hi * scale:.3f}{unit}"


def step(value: Any, bounds: Any = None) -> str:
    """Returns a step time in ms with its 95% interval when there is one."""
    v = num(value)
    if v is None:
        return MISSING
    interval = ci(bounds)
    return ms(v) + (f" ({interval})" if interval else "")


VERDICT_WORDS = {
    "same_program": "same program",
    "indistinguishable": "no resolvable difference",
    "faster": "faster",
    "slower": "slower",
    "not_comparable": "not comparable",
    "not_resolved": "not resolved in this run",
}


SHORT_WORDS = {**VERDICT_WORDS, "indistinguishable": "noise", "not_resolved": "not resolved"}


def verdict(v: Any, words_for: dict[str, str] = VERDICT_WORDS) -> str:
    """Returns a comparison cell: the ratio with its interval and the verdict in words.

    A pair that is the same program or indistinguishable is never called faster or slower:
    the cell says so, and gives the ratio only as measured noise.
    """
    if v is None:
        return MISSING
    words = words_for.get(v.verdict, v.verdict)
    if v.ratio is None:
        return words
    interval = f" ({v.ci95[0]:.3f}–{v.ci95[1]:.3f})" if v.ci95 else ""
    if v.verdict in ("same_program", "indistinguishable", "not_resolved"):
        return f"{words}: {v.ratio:.3f}×{interval}"
    return f"{v.ratio:.3f}×{interval} {words}"


def short_verdict(v: Any) -> str:
    """The summary table's comparison cell: as `verdict`, in fewer words ("noise", "not
    resolved"); the variant's page and the notes under the table say them in full."""
    return verdict(v, SHORT_WORDS)
