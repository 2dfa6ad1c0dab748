"""What a search writes (search.json): every candidate with its timing, numerics, memory and
what it changed, the constraints it broke, the leaders with their trade-offs, and which
dimension of the best candidate carried its gain (harness.search).

The candidates and the record were summary.json's section before knobs came (schema 11's
keys are unchanged); the keys added since read as absent in an older search.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harness.records.summary import Verdict
from harness.store.records import EMPTY, Plain, doc

# Why a timed candidate cannot be the best, however fast (Candidate.rejected).
NUMERICS = "numerics"  # it changes the result past the compiler-effect allowance: a trade
MEMORY = "memory"  # its peak is over search.max_peak_memory


@dataclass(frozen=True)
class ResultChange:
    """A candidate's result against the default's of the same inputs, leaf by leaf, held to
    the compiler-effect allowance (harness.records.numerics_effect.allowed): what two correct
    compiles of one function may differ by. A knob that changes the function moves past it."""

    leaf: str | None = doc("the leaf furthest past (or nearest to) its allowed distance")
    distance: float | None = doc("‖y − y_default‖ / ‖y_default‖ of that leaf, over kept values")
    allowed: float | None = doc("its allowed distance")
    changes: bool = doc("some leaf is further from the default's than allowed", False)
    comparable: bool = doc("same leaves and shapes as the default's result", True)
    why: str = doc("why not comparable, or what the allowance was made of", "")


@dataclass(frozen=True)
class Candidate:
    name: str = doc("the candidate's name (`default` is the base variant as configured)")
    xla_options: dict[str, Plain] = doc("its XLA options", EMPTY)
    w_dtype: str | None = doc("W's dtype, when the space varies it")
    gelu: str | None = doc("the GELU form, when the space varies it")
    kwargs: dict[str, Plain] = doc("a program's keyword arguments as called (its knobs)", EMPTY)
    params_dtype: str | None = doc("a program's parameters' dtype, when the space varies it")
    inputs_dtype: str | None = doc("a program's inputs' dtype, when the space varies it")
    changed: str = doc("what differs from the default, in words", "")
    status: str = doc("`ok`, `same_program`, `failed` (compile or run) or `wrong` (numerics)")
    reason: str | None = doc("why it failed or was excluded")
    fingerprint: str | None = doc("its program's digest (harness.hlo.fingerprint)")
    same_program_as: str | None = doc(
        "the earlier candidate with the same program; not timed again"
    )
    compile_s: float | None = doc("its XLA compile, seconds")
    first_call_s: float | None = doc("its first call: trace, lower, compile and first run")
    peak_bytes: int | None = doc("its peak memory (the source in `peak_source`)")
    peak_source: str | None = doc("where the peak comes from: XLA's live ranges, else jax's")
    effect: ResultChange | None = doc("its result against the default's (null: not compared)")
    rejected: tuple[str, ...] = doc(
        "why it is never the best, though timed: `numerics` (a trade: it changes the result "
        "past the compiler-effect allowance), `memory` (its peak is over "
        "search.max_peak_memory)",
        (),
    )
    step_s: float | None = doc("time per step from the interleaved rounds")
    step_ci95_s: tuple[float, float] | None = doc("its 95% interval")
    vs_default: Verdict | None = doc("against the default, from paired rounds")
    vs_lower_bound: Verdict | None = doc("against the lower bound, from paired rounds")
    # A coordinate search times the default again in every stage: a candidate's figures are
    # read against the default's and the lower bound's of its own stage, never a later one.
    stage: int | None = doc(
        "the timing stage its step and ratios come from (`timing-<stage>.json`); null when"
        " untimed or saved before it was recorded"
    )
    default_step_s: float | None = doc("the default's time per step in that stage")
    lower_bound_step_s: float | None = doc("the lower bound's time per step in that stage")
    rel_fro_err: float | None = doc("its error against the float64 reference")
    numerics_ok: bool | None = doc("within the dtype's tolerance")


@dataclass(frozen=True)
class Attribution:
    """One dimension of the best candidate (a knob, the XLA options, the dtypes), measured by
    timing the best with that dimension alone reset to the default's."""

    dimension: str = doc("`kwargs.<knob>`, `xla_options` or `dtypes`")
    reset: str = doc("what was set back to the default's, in words")
    ablated: str = doc("the candidate timed: the best with that dimension reset")
    gain: Verdict | None = doc(
        "the ablated candidate's time over the best's, from paired rounds: the factor this "
        "dimension gave (above 1: it made the best faster)"
    )
    stage: int | None = doc("the timing stage it was measured in")


@dataclass(frozen=True)
class SearchRecord:
    """A search over XLA options (and a program's knobs and dtypes) for the fastest
    configuration of one variant, within its constraints."""

    schema_version: int = doc("as summary.json's")
    base: str = doc("the variant searched from")
    lower_bound: str | None = doc("the lower-bound variant timed alongside")
    strategy: str = doc("`grid` or `coordinate`")
    budget_s: float = doc("the time budget")
    wall_s: float = doc("the search's wall time")
    stopped: str | None = doc("why the search stopped early (budget), if it did")
    candidates: tuple[Candidate, ...] = doc("every candidate, in the order compiled", ())
    same_program_count: int = doc("candidates that compiled to a program already seen", 0)
    no_effect: tuple[str, ...] = doc(
        "options (and knobs, `kwargs.<name>`) that never changed the program where they can "
        "act (compiled against the candidate they differ from by that one alone)",
        (),
    )
    not_tried_where_acts: dict[str, str] = doc(
        "options compiled only where they cannot act, each with the option it needs "
        "(harness.search.space.ACTS_ONLY_WITH): never called `no effect`",
        EMPTY,
    )
    best: str | None = doc(
        "the fastest candidate resolved as faster than the default that breaks no constraint, "
        "else `default`"
    )
    best_xla_options: dict[str, Plain] = doc("its options, ready to paste as `xla_options`", EMPTY)
    best_xla_flags: str = doc("the same as an XLA_FLAGS string", "")
    unresolved: tuple[str, ...] = doc("timing stages that failed their A/A check: no best", ())
    max_peak_memory: float | None = doc("search.max_peak_memory, bytes (null: no cap)")
    leaders: tuple[str, ...] = doc(
        "the best and the next two candidates that break no constraint, fastest first", ()
    )
    rejected_faster: tuple[str, ...] = doc(
        "candidates faster than the best that a constraint rejected, fastest first", ()
    )
    attribution: tuple[Attribution, ...] = doc("each dimension's share of the best's gain", ())
    attribution_note: str | None = doc("why the gain is not taken apart, where it is not")


def config_lines(c: Candidate) -> str:
    """The YAML a variant entry needs to be the candidate: its program's keyword arguments and
    dtypes, and its XLA options (what is left out is the base variant's)."""
    program: dict[str, Any] = {}
    if c.kwargs:
        program["kwargs"] = dict(c.kwargs)
    if c.params_dtype:
        program["w_dtype"] = c.params_dtype
    if c.inputs_dtype:
        program["dtype"] = c.inputs_dtype
    entry: dict[str, Any] = {}
    if program:
        entry["program"] = program
    if c.w_dtype or c.gelu:
        entry["problem"] = {k: v for k, v in (("w_dtype", c.w_dtype), ("gelu", c.gelu)) if v}
    entry["xla_options"] = dict(c.xla_options)
    return "\n".join(f"{key}: {_flow(value)}" for key, value in entry.items())


# A string YAML reads back as that string when written bare; any other is written quoted.
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})


def _flow(value: Any) -> str:
    """A value as YAML flow text that reads back as the same value."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        bare = _BARE.match(value) and value.lower() not in _YAML_WORDS
        return value if bare else json.dumps(value)
    return repr(value)
