"""The experiment schema's entry point: a raw config mapping, whether from YAML or from
`--config.*` overrides, built strictly into the frozen dataclasses of
harness.config.experiment (unknown keys and wrong types are ConfigErrors), then validated in
one place (harness.config.validate). Every config becomes an `Experiment` through
`build_experiment`.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from harness.config.callables import resolve_program
from harness.config.experiment import (
    FRONTEND_MODULES,
    ConfigError,
    Dump,
    Experiment,
    Problem,
    Program,
    SearchOptions,
    SearchSpace,
    Variant,
    shown,
    to_plain,
)
from harness.config.program import (
    FrozenMap,
    ProgramConfigError,
    gpu_only,
    parse_inputs,
    parse_kwargs,
    parse_shapes,
)
from harness.config.validate import validate_experiment
from harness.records import SCALARS, scalar

# What other modules import from here. FRONTEND_MODULES, Dump, SearchOptions and to_plain belong
# to harness.config.experiment: harness/worker.py, run.py and search/ still read them here (they
# are being changed on other branches; point them at harness.config.experiment after the merge).
__all__ = [
    "FRONTEND_MODULES",
    "ConfigError",
    "Dump",
    "Experiment",
    "SearchOptions",
    "SearchSpace",
    "Variant",
    "build_experiment",
    "suggest",
    "to_plain",
]


def suggest(key: str, valid: typing.Iterable[str]) -> str:
    """Returns ' (did you mean X?)' for the closest valid key, or '; valid: ...' listing them all."""
    valid = [str(v) for v in valid]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; valid: {', '.join(valid)}" if valid else ""


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "list of " + _type_name(typing.get_args(tp)[0])
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, source: str, key: str) -> Any:
    """Returns `value` checked against the annotation `tp`; YAML lists become tuples."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, source, key)
            except ConfigError:
                continue
        raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}")
        (item,) = typing.get_args(tp)[:1]
        return tuple(coerce(v, item, source, f"{key}[{i}]") for i, v in enumerate(value))
    if tp not in SCALARS:
        return value
    try:
        return scalar(tp, value)
    except ValueError:
        if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
            # scalar refuses a NaN, an infinity and an integer past a float's range
            raise ConfigError(source, key, f"must be a finite number, got {shown(value)}") from None
        raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}") from None


def build(cls: type, raw: Any, source: str, path: str, defaults: Any = None) -> Any:
    """Returns `cls` built from the mapping `raw`; unknown keys and wrong types are ConfigErrors.

    `defaults` is an instance of `cls` whose values fill keys `raw` leaves out (used for a
    variant's problem, which starts from the experiment's problem).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(
            source, path or "<top level>", f"expected a mapping, got {type(raw).__name__}"
        )
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        full = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise ConfigError(source, full, "unknown key" + suggest(str(key), fields))
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            base = getattr(defaults, key) if defaults is not None else None
            kwargs[key] = build(tp, value, source, full, base)
        elif key == "variants":
            kwargs[key] = tuple(
                build_variant(v, source, i, raw)
                for i, v in enumerate(_as_list(value, source, full, "variants"))
            )
        elif cls is Program and key in ("inputs", "recompile_shapes", "kwargs"):
            kwargs[key] = value  # read by harness.config.program below, inputs first
        elif key == "xla_options" and cls is SearchSpace:
            if not isinstance(value, Mapping):
                raise ConfigError(
                    source, full, f"expected a mapping of option: [values], got {shown(value)}"
                )
            kwargs[key] = types.MappingProxyType(
                {
                    str(k): coerce(v, tuple[bool | int | float | str, ...], source, f"{full}.{k}")
                    for k, v in value.items()
                }
            )
        elif key == "xla_options":
            if not isinstance(value, Mapping):
                raise ConfigError(
                    source, full, f"expected a mapping of XLA options, got {shown(value)}"
                )
            kwargs[key] = types.MappingProxyType(dict(value))
        else:
            kwargs[key] = coerce(value, tp, source, full)
    if cls is Program:
        kwargs = _program_keys(kwargs, source, path, defaults)
    if defaults is not None:
        return dataclasses.replace(defaults, **kwargs)
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        missing = [
            n
            for n, f in fields.items()
            if n not in kwargs
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        raise ConfigError(source, f"{path}.{missing[0]}" if missing else path, "is required") from e


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


def _as_list(value: Any, source: str, key: str, what: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ConfigError(source, key, f"expected a list of {what}, got {type(value).__name__}")
    return list(value)


def build_variant(raw: Any, source: str, index: int, top: Mapping[str, Any]) -> Variant:
    """Returns a Variant whose problem is the experiment's problem updated by its own overrides."""
    where = f"variants[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(source, where, f"expected a mapping, got {shown(raw)}")
    if "name" not in raw:
        raise ConfigError(source, f"{where}.name", "is required")
    if not isinstance(raw["name"], str):
        raise ConfigError(source, f"{where}.name", f"expected str, got {shown(raw['name'])}")
    shared = build(Problem, top.get("problem", {}) or {}, source, "problem")
    body = {k: v for k, v in raw.items() if k not in ("problem", "program")}
    variant = build(Variant, body, source, f"variants.{raw['name']}")
    problem = build(
        Problem, raw.get("problem", {}) or {}, source, f"variants.{raw['name']}.problem", shared
    )
    # A variant's program is the experiment's, updated by its own keys (dtype, w_dtype).
    program = build(
        Program,
        raw.get("program", {}) or {},
        source,
        f"variants.{raw['name']}.program",
        build(Program, top.get("program", {}) or {}, source, "program"),
    )
    if gpu_only(program.kwargs) and "platforms" not in raw:
        # A keyword value only a GPU implements (`attention: cudnn`): skipped elsewhere.
        variant = dataclasses.replace(variant, platforms=("gpu",))
    return dataclasses.replace(variant, problem=problem, program=program)


def build_experiment(raw: Mapping[str, Any], source: str) -> Experiment:
    """Returns the validated Experiment for a raw config mapping; raises ConfigError."""
    experiment = resolve_program(build(Experiment, raw, source, ""))
    validate_experiment(experiment, source)
    return experiment
