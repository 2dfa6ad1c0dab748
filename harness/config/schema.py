"""The experiment schema's entry point: a raw config mapping, whether from YAML or from
`--config.*` overrides, built strictly into the frozen dataclasses of
harness.config.experiment (unknown keys and wrong types are ConfigErrors), then validated in
one place (harness.config.validate). Every config becomes an `Experiment` through
`build_experiment`; the worker rebuilds the one the supervisor validated with `from_plain`.

The reading is harness.store.records' (the one JSON<->dataclass layer, the run's records use it
too): this module gives it the config's error and the fields it reads itself.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

from harness.config.callables import resolve_program
from harness.config.experiment import (
    Collector,
    ConfigError,
    Experiment,
    Problem,
    Program,
    SearchOptions,
    SearchSpace,
    Variant,
    combined,
)
from harness.config.knobs import parse_bytes, parse_knobs
from harness.config.program import (
    FrozenMap,
    ProgramConfigError,
    gpu_only,
    parse_inputs,
    parse_kwargs,
    parse_shapes,
)
from harness.config.validate import validate_experiment
from harness.store.records import Dialect, decode, from_json, shown

OPTION_VALUES = tuple[bool | int | float | str, ...]


def coerce(value: Any, tp: Any, source: str, key: str) -> Any:
    """Returns `value` checked against the annotation `tp`; YAML lists become tuples."""
    return decode(tp, value, source, key, CONFIG)


def build(cls: type, raw: Any, source: str, path: str, defaults: Any = None) -> Any:
    """Returns `cls` built from the mapping `raw`; unknown keys and wrong types are ConfigErrors.

    `defaults` is an instance of `cls` whose values fill keys `raw` leaves out (used for a
    variant's problem, which starts from the experiment's problem).
    """
    return from_json(cls, raw, source, path, CONFIG, defaults)


def _variants(value: Any, source: str, key: str, top: Mapping[str, Any]) -> tuple[Variant, ...]:
    """The study's variants, each read whatever the others' mistakes (all reported at once)."""
    found = Collector()
    out = []
    for i, v in enumerate(_as_list(value, source, key)):
        with found.check():
            out.append(build_variant(v, source, i, top))
    found.done()
    return tuple(out)


def _option_values(value: Any, source: str, key: str, _: Mapping[str, Any]) -> Any:
    """A search space's XLA options: option -> the values to try."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            source, key, f"expected a mapping of option: [values], got {shown(value)}"
        )
    return types.MappingProxyType(
        {str(k): coerce(v, OPTION_VALUES, source, f"{key}.{k}") for k, v in value.items()}
    )


def _knob_values(value: Any, source: str, key: str, _: Mapping[str, Any]) -> Any:
    """A program search's knobs: keyword argument -> the values to try (a range expanded)."""
    return types.MappingProxyType(parse_knobs(value, source, key))


def _bytes(value: Any, source: str, key: str, _: Mapping[str, Any]) -> Any:
    return parse_bytes(value, source, key)


def _options(value: Any, source: str, key: str, _: Mapping[str, Any]) -> Any:
    """A variant's XLA options, as given (harness.config.validate checks each one)."""
    if not isinstance(value, Mapping):
        raise ConfigError(source, key, f"expected a mapping of XLA options, got {shown(value)}")
    return types.MappingProxyType(dict(value))


def _as_given(value: Any, source: str, key: str, _: Mapping[str, Any]) -> Any:
    del source, key  # read with the others by _program_keys, the inputs first
    return value


def _program_keys(
    kwargs: dict[str, Any], source: str, path: str, defaults: Program | None
) -> dict[str, Any]:
    """Returns a program section's keys with its inputs, new shapes and keyword arguments read
    (harness.config.program); a variant's keyword arguments update the study's."""
    out = dict(kwargs)
    try:
        if "inputs" in out:
            out["inputs"] = parse_inputs(out["inputs"], f"{path}.inputs")
        inputs = out.get("inputs", defaults.inputs if defaults else ())
        if "recompile_shapes" in out:
            out["recompile_shapes"] = parse_shapes(out["recompile_shapes"], inputs)
        if "kwargs" in out:
            given = parse_kwargs(out["kwargs"], f"{path}.kwargs")
            out["kwargs"] = FrozenMap({**(defaults.kwargs if defaults else {}), **given})
    except ProgramConfigError as e:
        key = e.key if e.key.startswith(path) else e.key.replace("program", path, 1)
        raise ConfigError(source, key, e.problem) from None
    return out


def _as_list(value: Any, source: str, key: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ConfigError(source, key, f"expected a list of variants, got {type(value).__name__}")
    return list(value)


_OWN = ("problem", "program")  # a variant's sections read from the study's


def build_variant(raw: Any, source: str, index: int, top: Mapping[str, Any]) -> Variant:
    """Returns a Variant whose problem is the experiment's problem updated by its own overrides."""
    where = f"variants[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(source, where, f"expected a mapping, got {shown(raw)}")
    if "name" not in raw:
        raise ConfigError(source, f"{where}.name", "is required")
    if not isinstance(raw["name"], str):
        raise ConfigError(source, f"{where}.name", f"expected str, got {shown(raw['name'])}")
    where = f"variants.{raw['name']}"
    # Its body, problem and program are read each whatever the others' mistakes (and the
    # study's: a mistake in the study's problem is the study's line, said once).
    found = Collector()
    with found.check():
        variant = build(Variant, {k: v for k, v in raw.items() if k not in _OWN}, source, where)
    with found.check():
        shared = build(Problem, top.get("problem", {}) or {}, source, "problem")
        problem = build(Problem, raw.get("problem", {}) or {}, source, f"{where}.problem", shared)
    with found.check():
        # A variant's program is the experiment's, updated by its own keys (dtype, w_dtype).
        study = build(Program, top.get("program", {}) or {}, source, "program")
        program = build(Program, raw.get("program", {}) or {}, source, f"{where}.program", study)
    found.done()
    if gpu_only(program.kwargs) and "platforms" not in raw:
        # A keyword value only a GPU implements (`attention: cudnn`): skipped elsewhere.
        variant = dataclasses.replace(variant, platforms=("gpu",))
    return dataclasses.replace(variant, problem=problem, program=program)


# The config's dialect of the one JSON<->dataclass layer (harness.store.records): its error, and the
# fields whose data is read by a function of its own.
CONFIG = Dialect(
    error=ConfigError,
    fields=types.MappingProxyType(
        {
            (Experiment, "variants"): _variants,
            (SearchSpace, "xla_options"): _option_values,
            (SearchSpace, "kwargs"): _knob_values,
            (SearchOptions, "max_peak_memory"): _bytes,
            (Variant, "xla_options"): _options,
            (Program, "inputs"): _as_given,
            (Program, "recompile_shapes"): _as_given,
            (Program, "kwargs"): _as_given,
        }
    ),
    finish=types.MappingProxyType({Program: _program_keys}),
    combine=combined,
)


def build_experiment(raw: Mapping[str, Any], source: str) -> Experiment:
    """Returns the validated Experiment for a raw config mapping; raises ConfigError."""
    experiment = resolve_program(build(Experiment, raw, source, ""))
    validate_experiment(experiment, source)
    return experiment


def from_plain(data: Mapping[str, Any], source: str) -> Experiment:
    """Returns the Experiment the supervisor validated (build_experiment) and sent as plain
    data (harness.store.records.to_json), rebuilt without validating it again: the worker's side of
    the hello and config jobs. Its program paths are already resolved, its variants complete."""
    return build(Experiment, data, source, "")
