"""A program search's own knobs as a user writes them (`search.space.kwargs`), the dtypes it
tries (`search.space.dtypes`) and its memory cap (`search.max_peak_memory`).

In a config:

    search:
      max_peak_memory: 1.5 GiB     # bytes, or a size with its unit (B, KB, MB, GB, KiB, MiB, GiB)
      space:
        kwargs:                    # keyword arguments of program.function, each its values
          attention: [xla, cudnn]
          block: {min: 64, max: 256, step: 64}   # an integer range, both ends included
        dtypes: {params: [float32, bfloat16], inputs: [float32, bfloat16]}

The readers here raise ConfigError naming the key; `knobs_problem` returns (key, what is wrong)
for harness.config.validate to raise, like harness.config.sharding's checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.config.callables import keywords_of
from harness.config.experiment import ConfigError, Experiment
from harness.store.records import shown

# A knob of more values than this is a range typed wrong, not a search: each value is a compile.
MAX_KNOB_VALUES = 64
_RANGE_KEYS = ("min", "max", "step")
_SCALARS = (str, int, float, bool, type(None))
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*$")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def knob_range(raw: Mapping[str, Any], source: str, key: str) -> tuple[int, ...]:
    """Returns the integers of `{min, max, step}` (both ends included, step 1 unless given)."""
    for name in raw:
        if name not in _RANGE_KEYS:
            raise ConfigError(
                source, f"{key}.{name}", f"unknown key; a range is {{min, max, step}}, got {name!r}"
            )
    for name in ("min", "max"):
        if name not in raw:
            raise ConfigError(source, f"{key}.{name}", "is required in a range {min, max, step}")
    for name in _RANGE_KEYS:
        if name in raw and not _integer(raw[name]):
            raise ConfigError(source, f"{key}.{name}", f"expected int, got {shown(raw[name])}")
    lo, hi, step = raw["min"], raw["max"], raw.get("step", 1)
    if step < 1:
        raise ConfigError(source, f"{key}.step", f"must be at least 1, got {step}")
    if hi < lo:
        raise ConfigError(source, f"{key}.max", f"must be at least min ({lo}), got {hi}")
    if (hi - lo) // step + 1 > MAX_KNOB_VALUES:
        raise ConfigError(
            source, key, f"gives {(hi - lo) // step + 1} values; at most {MAX_KNOB_VALUES}"
        )
    return tuple(range(lo, hi + 1, step))


def parse_knobs(value: Any, source: str, key: str) -> dict[str, tuple[Any, ...]]:
    """Returns `search.space.kwargs`: each knob's values, a range expanded."""
    if not isinstance(value, Mapping):
        raise ConfigError(source, key, f"expected a mapping of knob: [values], got {shown(value)}")
    out: dict[str, tuple[Any, ...]] = {}
    for name, values in value.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(source, key, f"{shown(name)} is not a keyword argument's name")
        if isinstance(values, Mapping):
            out[name] = knob_range(values, source, where)
            continue
        if not isinstance(values, list | tuple) or not values:
            raise ConfigError(
                source,
                where,
                f"expected a list of values or a range {{min, max, step}}, got {shown(values)}",
            )
        for i, v in enumerate(values):
            if not isinstance(v, _SCALARS):
                raise ConfigError(
                    source,
                    f"{where}[{i}]",
                    f"{shown(v)} is not hashable; a knob's value is a str, number, bool or null",
                )
        if len(values) > MAX_KNOB_VALUES:
            raise ConfigError(source, where, f"has {len(values)} values; at most {MAX_KNOB_VALUES}")
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(source, where, f"repeats a value: {shown(list(values))}")
        out[name] = tuple(values)
    return out


def parse_bytes(value: Any, source: str, key: str) -> float | None:
    """Returns a size in bytes: a number, or a number with its unit (`1.5 GiB`, `800 MB`)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        size = float(value)
    elif isinstance(value, str) and (m := _SIZE.match(value)) and m[2].lower() in _UNITS:
        size = float(m[1]) * _UNITS[m[2].lower()]
    else:
        units = ", ".join(u.upper().replace("I", "i") for u in _UNITS if u)
        raise ConfigError(
            source, key, f"expected bytes or a size with its unit ({units}), got {shown(value)}"
        )
    if not 0 < size < float("inf"):
        raise ConfigError(source, key, f"must be above 0 bytes, got {shown(value)}")
    return size


def knobs_problem(e: Experiment) -> tuple[str, str] | None:
    """Returns (key, what is wrong) when the search's knobs cannot apply: kwargs or dtypes
    outside a program study, or a knob `program.function` takes no keyword of (read from its
    source without importing it; a function whose signature cannot be read passes)."""
    space, key = e.search.space, "search.space"
    if not e.search.base:
        return None
    if not e.program.enabled:
        for name, given in (("kwargs", space.kwargs), ("dtypes", space.dtypes.params)):
            if given or (name == "dtypes" and space.dtypes.inputs):
                return (
                    f"{key}.{name}",
                    "applies to a program study (`program.function`); the GELU expression's "
                    "search varies `w_dtype` and `gelu`",
                )
        return None
    accepted = keywords_of(e.program.function)
    if accepted is None:
        return None
    names, any_name = accepted
    for name in space.kwargs:
        if not any_name and name not in names:
            takes = ", ".join(sorted(names)) or "none"
            return (
                f"{key}.kwargs.{name}",
                f"{e.program.function} takes no keyword argument {name!r}; it takes: {takes}",
            )
    return None
