"""The one place that validates an experiment: every choice against its allowed values, every
range, and what a variant, a search and a program study may be. Each problem is a ConfigError
naming the config file, the key and what would be allowed.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable
from typing import Any

from harness.config.callables import validate_callable
from harness.config.experiment import (
    DTYPES,
    FRONTENDS,
    GELU_FORMS,
    INPUT_DTYPES,
    INTEGER_RANGES,
    ISOLATION,
    PLATFORMS,
    STRATEGIES,
    Collector,
    ConfigError,
    Experiment,
    Problem,
    Program,
    SearchOptions,
    Variant,
)
from harness.config.fields import MAX_ITEMS
from harness.config.knobs import knobs_problem
from harness.config.processes import problem as processes_problem
from harness.config.program import InputSpec, input_leaves, shapes_problem
from harness.config.sharding import problems as sharding_problems
from harness.config.timing import timing_problem
from harness.frontends import registry
from harness.frontends.roles import ROLES
from harness.store.records import shown
from harness.store.runfolder import RESERVED_NAMES

# Experiment names become folder names, so they are kept to a safe alphabet.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def mode_names(framework: str | None = None) -> tuple[str, ...]:
    """The registered frontends' modes (harness.frontends.registry), of one framework if named."""
    return tuple(m.name for m in registry.modes() if framework in (None, m.framework))


def program_modes() -> tuple[str, ...]:
    """The modes a program study may run; the others build the GELU expression's variants."""
    return tuple(m.name for m in registry.modes() if m.program)


def _allowed(values: typing.Iterable[str]) -> str:
    return "allowed: " + ", ".join(values)


def choice(source: str, key: str, value: object, allowed: tuple[str, ...]) -> None:
    """Raises a ConfigError naming `key` when `value` is not one of `allowed` (a frontend's
    checks use it too, so every choice reads alike)."""
    if value not in allowed:
        raise ConfigError(source, key, f"{shown(value)} is not supported; {_allowed(allowed)}")


def validate_ranges(obj: Any, source: str, path: str) -> None:
    """Checks every numeric field that declares a range, in `obj` and the sections inside it."""
    for f in dataclasses.fields(obj):
        _field_range(obj, f, source, path)


def _field_range(obj: Any, f: dataclasses.Field[Any], source: str, path: str) -> None:
    """Checks one field's range, or the ranges inside it when it is a section."""
    value = getattr(obj, f.name)
    key = f"{path}.{f.name}" if path else f.name
    if isinstance(value, tuple) and len(value) > f.metadata.get("max_len", MAX_ITEMS):
        limit = f.metadata.get("max_len", MAX_ITEMS)
        raise ConfigError(source, key, f"has {len(value)} entries; at most {limit} are allowed")
    if "range" in f.metadata:
        lo, hi = f.metadata["range"]
        for i, v in enumerate(value) if isinstance(value, tuple) else ((None, value),):
            if not lo <= v <= hi:
                where = key if i is None else f"{key}[{i}]"
                raise ConfigError(
                    source, where, f"must be in [{_num(lo)}, {_num(hi)}], got {shown(v)}"
                )
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        validate_ranges(value, source, key)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def validate_problem(p: Problem, source: str, path: str) -> None:
    validate_ranges(p, source, path)
    if p.rows * p.k > 1 << 34 or p.rows * p.n > 1 << 34 or p.k * p.n > 1 << 34:
        raise ConfigError(source, path, "the problem is larger than 2**34 elements in one array")
    choice(source, f"{path}.dtype", p.dtype, DTYPES)
    if p.w_dtype is not None:
        choice(source, f"{path}.w_dtype", p.w_dtype, DTYPES)
    choice(source, f"{path}.gelu", p.gelu, GELU_FORMS)
    choice(source, f"{path}.frontend", p.frontend, FRONTENDS)


def _valid_problem(p: Problem) -> bool:
    try:
        validate_problem(p, "", "problem")
    except ConfigError:
        return False
    return True


def validate_name(source: str, key: str, name: str) -> None:
    if not _NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            source,
            key,
            f"{shown(name)} is not a safe name; use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit, without '/' or '..'",
        )


# XLA options that name a file or folder: XLA would read or write there, outside the run.
_PATH_OPTION = re.compile(r"(_dir|_to|_from|_path|_paths|_file|_filename|_prefix)$")


def validate_xla_option(source: str, key: str, value: object) -> None:
    name = key.rsplit(".", 1)[-1]
    if not name.startswith("xla_"):
        raise ConfigError(source, key, "XLA option names start with 'xla_'")
    if _PATH_OPTION.search(name):
        raise ConfigError(
            source,
            key,
            "names a file or folder, which would make XLA read or write outside the run folder; "
            "the harness pins its own dumps under each variant's folder",
        )
    if not isinstance(value, bool | int | float | str):
        raise ConfigError(
            source, key, f"must be a bool, number or string, got {type(value).__name__}"
        )
    # XLA's options are C++ int64s and doubles: a longer integer or an infinity would fail
    # inside the compile, in every variant's worker, instead of here.
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        raise ConfigError(source, key, f"must fit in a 64-bit integer, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(source, key, f"must be a finite number, got {shown(value)}")


def validate_search(s: SearchOptions, source: str, names: list[str]) -> None:
    if not s.base:
        return
    if s.base not in names:
        raise ConfigError(
            source, "search.base", f"{shown(s.base)} names no variant; {_allowed(names)}"
        )
    choice(source, "search.strategy", s.strategy, STRATEGIES)
    space = s.space
    if not (space.xla_options or space.w_dtype or space.gelu or space.kwargs) and not (
        space.dtypes.params or space.dtypes.inputs
    ):
        raise ConfigError(
            source,
            "search.space",
            "is empty; name XLA options with their values (or a program's kwargs or dtypes)",
        )
    for name, values in s.space.xla_options.items():
        key = f"search.space.xla_options.{name}"
        validate_xla_option(source, key, values[0] if values else 0)
        if not values:
            raise ConfigError(source, key, "needs at least one value")
    for d in s.space.w_dtype:
        choice(source, "search.space.w_dtype", d, DTYPES)
    for g in s.space.gelu:
        choice(source, "search.space.gelu", g, GELU_FORMS)
    for what in ("params", "inputs"):
        for d in getattr(s.space.dtypes, what):
            choice(source, f"search.space.dtypes.{what}", d, DTYPES)


def validate_experiment(e: Experiment, source: str) -> None:
    """Checks the whole experiment; raises every mistake found at once (harness.config.
    experiment.Collector): each check below is independent of the others' outcome."""
    found = Collector()
    with found.check():
        validate_name(source, "experiment", e.experiment)
        if e.experiment.lower() in RESERVED_NAMES:
            raise ConfigError(
                source,
                "experiment",
                f"{shown(e.experiment)} is a name the harness gives its own files in a results "
                "folder; choose another",
            )
    with found.check():
        validate_problem(e.problem, source, "problem")
    # The seed and every section's numbers. A section with a number out of range gets no
    # further check: it would judge a value already refused (processes.count: 0 is no group).
    refused: set[str] = set()
    for f in dataclasses.fields(e):
        with found.check():
            try:
                _field_range(e, f, source, "")
            except ConfigError:
                refused.add(f.name)
                raise
    with found.check():
        if "timing" not in refused and (problem := timing_problem(e.timing)) is not None:
            raise ConfigError(source, *problem)
    with found.check():
        validate_program(e, source)
    with found.check():
        choice(source, "capture.isolation", e.capture.isolation, ISOLATION)
    # A list whose names are refused (empty, unsafe, repeated) makes every check by name (the
    # baseline, `select`, the search's base, the roles) a knock-on of that one mistake.
    names_refused = not e.variants
    with found.check():
        if not e.variants:
            raise ConfigError(
                source, "variants", "the variant list is empty; name at least one variant"
            )
    seen: set[str] = set()
    for i, v in enumerate(e.variants):
        with found.check():
            where = f"variants[{i}]"
            try:
                validate_name(source, f"{where}.name", v.name)
                if v.name in seen:
                    raise ConfigError(
                        source,
                        f"{where}.name",
                        f"duplicate variant name {shown(v.name)}; each variant needs a unique name",
                    )
            except ConfigError:
                names_refused = True
                raise
        seen.add(v.name)
        for check in _variant_checks(e, v, source):
            with found.check():
                check()
    if names_refused:
        found.done()
    names = [v.name for v in e.variants]
    with found.check():
        validate_search(e.search, source, names)
    with found.check():
        if (knobs := knobs_problem(e)) is not None:
            raise ConfigError(source, *knobs)
    with found.check():
        problem = processes_problem(e.processes, e.selected_variants, bool(e.search.base))
        if problem is not None and "processes" not in refused:
            raise ConfigError(source, *problem)
    with found.check():
        if e.baseline not in seen:
            raise ConfigError(
                source, "baseline", f"{shown(e.baseline)} names no variant; {_allowed(names)}"
            )
    with found.check():
        validate_baselines(e, source)
    for s in e.select:
        with found.check():
            if s not in seen:
                raise ConfigError(
                    source, "select", f"{shown(s)} names no variant; {_allowed(names)}"
                )
    found.done()


def _variant_checks(e: Experiment, v: Variant, source: str) -> list[Callable[[], None]]:
    """Returns one variant's checks, each raising its first mistake, run one by one so that
    a bad mode does not hide a bad platform."""
    where = f"variants.{v.name}"

    def problem() -> None:
        # What the variant inherits is the study's, checked once at `problem`: listing its
        # mistakes again under every variant would bury the others. Only the keys the variant
        # wrote are its own; the rest are the study's values where those are valid (else the
        # defaults), so the sizes are still checked together.
        if v.problem == e.problem:
            return
        own = {
            f.name: getattr(v.problem, f.name)
            for f in dataclasses.fields(Problem)
            if getattr(v.problem, f.name) != getattr(e.problem, f.name)
        }
        base = e.problem if _valid_problem(e.problem) else Problem()
        validate_problem(dataclasses.replace(base, **own), source, f"{where}.problem")

    def platforms() -> None:
        if not v.platforms:
            raise ConfigError(source, f"{where}.platforms", f"is empty; {_allowed(PLATFORMS)}")
        for p in v.platforms:
            choice(source, f"{where}.platforms", p, PLATFORMS)

    def roles() -> None:
        for r in v.roles:
            choice(source, f"{where}.roles", r, ROLES)

    def options() -> None:
        for opt, value in v.xla_options.items():
            validate_xla_option(source, f"{where}.xla_options.{opt}", value)

    def sharding() -> None:
        validate_ranges(v.sharding, source, f"{where}.sharding")
        p = v.problem
        found = sharding_problems(
            v.sharding, p.x_shape, p.k, p.n, e.measure.recompile, v.mode, p.frontend
        )
        if found is not None:
            raise ConfigError(source, f"{where}.sharding.{found[0]}", found[1])

    return [
        lambda: choice(source, f"{where}.mode", v.mode, mode_names()),
        problem,
        platforms,
        roles,
        options,
        sharding,
        lambda: validate_frontends(v, source),
    ]


# What a variant of a program study may set under `program:`; the rest is the study's.
_PROGRAM_SHARED = ("function", "init", "inputs", "flops", "recompile_shapes")


def validate_program(e: Experiment, source: str) -> None:
    """Checks a program study: the function and its init, the inputs, the FLOPs, the new
    shapes, and that every variant is one a program study can run (eager or jit, one device,
    no GELU `problem`, dtype changes only)."""
    p = e.program
    if not p.enabled:
        _no_program_set(e, source)
        return
    validate_callable(source, "program.function", p.function)
    if not p.init:
        raise ConfigError(
            source,
            "program.init",
            "is required: module:function of init(key, *input_specs) -> params (a function "
            "without parameters can use an init that returns {})",
        )
    validate_callable(source, "program.init", p.init)
    if not p.inputs:
        raise ConfigError(
            source,
            "program.inputs",
            "is empty; list the arguments after the parameters, e.g. "
            "[{shape: [256, 512], dtype: float32}]",
        )
    for where, spec in input_leaves(p.inputs):
        _validate_input(spec, source, where)
    if p.flops is not None and not (p.flops > 0 and p.flops < float("inf")):
        raise ConfigError(
            source,
            "program.flops",
            f"must be the FLOPs of one call (> 0), or null for our cost model of the "
            f"unoptimized HLO; got {shown(p.flops)}",
        )
    validate_new_shapes(e, source)
    _program_dtypes(p, source, "program")
    if e.problem != Problem():
        raise ConfigError(
            source,
            "problem",
            "a program study has no `problem` (the GELU expression's m, k, n, ...); its "
            "arguments are `program.inputs`",
        )
    for v in e.variants:
        validate_program_variant(e, v, source)
    _program_search_space(e, source)


def _no_program_set(e: Experiment, source: str) -> None:
    """Refuses a `program` section, at the study or in a variant, that names no function."""
    if e.program != Program():
        raise ConfigError(
            source,
            "program.function",
            "is required in a `program` section: module:function or path/to/file.py:function",
        )
    for v in e.variants:
        if v.program != e.program:
            raise ConfigError(
                source,
                f"variants.{v.name}.program",
                "applies to a program study; this config names no `program.function`",
            )


def _validate_input(spec: InputSpec, source: str, where: str) -> None:
    """Checks one input leaf: its range, a dtype the measured variants can run, values its
    dtype holds, and a size that fits."""
    validate_ranges(spec, source, where)
    if spec.low >= spec.high:
        raise ConfigError(
            source, f"{where}.high", f"must be above low ({spec.low}), got {spec.high}"
        )
    if spec.dtype == "float64":
        raise ConfigError(
            source,
            f"{where}.dtype",
            "float64 is refused: the measured variants run without jax's x64 (only the "
            f"float64 reference has it), so it would be float32; {_allowed(INPUT_DTYPES)}",
        )
    choice(source, f"{where}.dtype", spec.dtype, INPUT_DTYPES)
    if spec.dtype in INTEGER_RANGES:
        _integer_range(spec, source, where)
    if math.prod(spec.shape) > 1 << 34:
        raise ConfigError(source, f"{where}.shape", "has more than 2**34 elements")


def _integer_range(spec: InputSpec, source: str, where: str) -> None:
    """Checks that an integer input's low and (exclusive) high are values its dtype holds."""
    lowest, highest = INTEGER_RANGES[spec.dtype]
    if spec.low < lowest:
        raise ConfigError(
            source, f"{where}.low", f"{spec.dtype} holds no {spec.low}; at least {lowest}"
        )
    if spec.high > highest:
        raise ConfigError(
            source,
            f"{where}.high",
            f"{spec.dtype} holds values below {highest} (high is exclusive), got {spec.high}",
        )


def _program_search_space(e: Experiment, source: str) -> None:
    """Refuses a program study's search over the GELU expression's own dimensions."""
    space = e.search.space
    for key, values in (("w_dtype", space.w_dtype), ("gelu", space.gelu)):
        if e.search.base and values:
            raise ConfigError(
                source,
                f"search.space.{key}",
                "a program study's search varies XLA options only (`search.space.xla_options`)",
            )


def validate_new_shapes(e: Experiment, source: str) -> None:
    """Checks that the new-shape call can be made and differs from the first call."""
    problem = shapes_problem(e.program.inputs, e.program.recompile_shapes, e.measure.recompile)
    if problem is not None:
        raise ConfigError(source, *problem)


def _program_dtypes(p: Program, source: str, where: str) -> None:
    """Checks the dtype changes a program section makes (`dtype`, `w_dtype`), when set."""
    for key in ("dtype", "w_dtype"):
        if getattr(p, key) is not None:
            choice(source, f"{where}.{key}", getattr(p, key), DTYPES)


def validate_program_variant(e: Experiment, v: Variant, source: str) -> None:
    """Refuses what a program study's variant cannot be: a mode that builds the GELU
    expression's own variant, a `problem`, a mesh, or a change of the study's function."""
    where = f"variants.{v.name}"
    allowed = program_modes()
    if v.mode not in allowed:
        raise ConfigError(
            source,
            f"{where}.mode",
            f"{v.mode!r} builds the GELU expression's own variant, which a program study does "
            f"not have; {_allowed(allowed)}",
        )
    if v.problem != e.problem:
        raise ConfigError(
            source,
            f"{where}.problem",
            "a program study has no `problem`; change dtypes with "
            "`program: {dtype: ..., w_dtype: ...}`",
        )
    for key in _PROGRAM_SHARED:
        if getattr(v.program, key) != getattr(e.program, key):
            raise ConfigError(
                source,
                f"{where}.program.{key}",
                "a variant changes only `dtype`, `w_dtype` and `kwargs`; the function, its init, "
                "inputs, FLOPs and new shapes are the study's (`program.*`)",
            )
    _program_dtypes(v.program, source, f"{where}.program")
    s = v.sharding
    if s.enabled and (s.x or s.w or s.b or s.out or s.shard_map):
        raise ConfigError(
            source,
            f"{where}.sharding",
            "a program study takes only `mesh` and `axes`: its function gets the mesh as its "
            "`mesh` keyword and places its own arrays (harness.variants.program_mesh); x, w, "
            "b, out and shard_map are the GELU expression's",
        )


def validate_frontends(v: Variant, source: str) -> None:
    """Lets each registered frontend check the keys it owns on `v` (its own section, what its
    modes cannot take), whichever frontend runs `v`; one without `validate` owns none."""
    for name in registry.names():
        check = getattr(registry.get(name), "validate", None)
        if check is not None:
            check(v, source)


def validate_baselines(e: Experiment, source: str) -> None:
    """Refuses two baselines in one framework: every comparison needs exactly one reference."""
    seen: dict[str, str] = {}
    for v in e.variants:
        if "baseline" not in v.resolved_roles:
            continue
        if v.framework in seen:
            raise ConfigError(
                source,
                f"variants.{v.name}.roles",
                f"{seen[v.framework]!r} is already the {v.framework} baseline; each framework "
                "has one (the config's `baseline`, or a variant with `roles: [baseline]`)",
            )
        seen[v.framework] = v.name
