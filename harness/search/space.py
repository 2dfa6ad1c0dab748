"""The candidates of a search: points of the configured space, as variants of the base.

Pure functions over the config: a candidate is the base variant with some XLA options (and
perhaps W's dtype or the GELU form; in a program study its keyword arguments, `kwargs.<name>`,
and its dtypes, `dtypes.params` and `dtypes.inputs`) changed. `grid` enumerates every
combination; `coordinate_step` changes one axis of the current best at a time.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.config.experiment import SearchSpace, Variant
from harness.config.program import FrozenMap, knob

DEFAULT = "default"
# The axes of a program's knobs and dtypes: `kwargs.<name>`, `dtypes.params`, `dtypes.inputs`.
KWARG = "kwargs."
PARAMS_DTYPE, INPUTS_DTYPE = "dtypes.params", "dtypes.inputs"

# Options that act only when another option has a value: XLA reads each of these only on a
# path the other one opens, so trying one where that value is not set says nothing about it.
# Each maps to the settings it needs.
ACTS_ONLY_WITH: Mapping[str, tuple[tuple[str, Any], ...]] = types.MappingProxyType(
    {
        # The CPU backend reads the fast-math honour flags only with fast math on.
        "xla_cpu_fast_math_honor_nans": (("xla_cpu_enable_fast_math", True),),
        "xla_cpu_fast_math_honor_infs": (("xla_cpu_enable_fast_math", True),),
        "xla_cpu_fast_math_honor_division": (("xla_cpu_enable_fast_math", True),),
        "xla_cpu_fast_math_honor_functions": (("xla_cpu_enable_fast_math", True),),
    }
)


def needs(axis: str) -> str:
    """What an option needs to act, in config words ('' when it acts alone)."""
    return ", ".join(f"{k}: {_yaml(v)}" for k, v in ACTS_ONLY_WITH.get(axis, ()))


def _yaml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def acts_at(axis: str, point: Point, configured: Mapping[str, Any]) -> bool:
    """True when `axis` can act at `point`: every setting it needs holds there (the point's
    options over the base variant's `configured` ones)."""
    options = {**configured, **dict(point.options)}
    return all(options.get(k) == v for k, v in ACTS_ONLY_WITH.get(axis, ()))


@dataclasses.dataclass(frozen=True)
class Point:
    """One configuration: option values (absent = XLA's default), the problem's changes, and
    a program's keyword arguments and dtypes (absent = the base variant's)."""

    options: tuple[tuple[str, Any], ...] = ()
    w_dtype: str | None = None
    gelu: str | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()
    params_dtype: str | None = None
    inputs_dtype: str | None = None

    def with_option(self, name: str, value: Any) -> Point:
        kept = tuple((k, v) for k, v in self.options if k != name)
        return dataclasses.replace(self, options=tuple(sorted((*kept, (name, value)))))

    def describe(self, base: Variant) -> str:
        parts = [f"{k}={v!r}" for k, v in self.options if base.xla_options.get(k) != v]
        if self.w_dtype and self.w_dtype != base.problem.weight_dtype:
            parts.append(f"w_dtype={self.w_dtype}")
        if self.gelu and self.gelu != base.problem.gelu:
            parts.append(f"gelu={self.gelu}")
        configured = base.program.kwargs
        parts += [knob(k, v) for k, v in self.kwargs if k not in configured or configured[k] != v]
        for what, value, now in (
            ("params", self.params_dtype, base.program.w_dtype),
            ("inputs", self.inputs_dtype, base.program.dtype),
        ):
            if value and value != now:
                parts.append(f"{what}={value}")
        return ", ".join(parts) or "as configured"


def normalised(point: Point, base: Variant) -> Point:
    """The point without the knobs and dtypes it sets to the base variant's own values: one
    configuration is one point, so a grid, which lists the base's value of every knob, does
    not compile the default twice."""
    own = base.program.kwargs

    def same(k: str, v: Any) -> bool:
        return k in own and (type(own[k]), own[k]) == (type(v), v)

    return dataclasses.replace(
        point,
        kwargs=tuple((k, v) for k, v in point.kwargs if not same(k, v)),
        params_dtype=None if point.params_dtype == base.program.w_dtype else point.params_dtype,
        inputs_dtype=None if point.inputs_dtype == base.program.dtype else point.inputs_dtype,
    )


def variant_for(base: Variant, name: str, point: Point) -> Variant:
    """Returns the base variant changed to the point's configuration, under a new name."""
    options = {**base.xla_options, **dict(point.options)}
    problem = base.problem
    if point.w_dtype:
        problem = dataclasses.replace(problem, w_dtype=point.w_dtype)
    if point.gelu:
        problem = dataclasses.replace(problem, gelu=point.gelu)
    program = base.program
    if point.kwargs:
        program = dataclasses.replace(
            program, kwargs=FrozenMap({**program.kwargs, **dict(point.kwargs)})
        )
    if point.params_dtype:
        program = dataclasses.replace(program, w_dtype=point.params_dtype)
    if point.inputs_dtype:
        program = dataclasses.replace(program, dtype=point.inputs_dtype)
    return dataclasses.replace(
        base,
        name=name,
        description=point.describe(base),
        xla_options=types.MappingProxyType(options),
        problem=problem,
        program=program,
        roles=(),
    )


def axes(space: SearchSpace) -> list[tuple[str, tuple[Any, ...]]]:
    """The space's axes in config order: a program's knobs and dtypes first (the levers a
    coordinate search should move before the options tune them), then each option, then W's
    dtype and the GELU form."""
    out: list[tuple[str, tuple[Any, ...]]] = [
        (KWARG + k, tuple(v)) for k, v in space.kwargs.items()
    ]
    if space.dtypes.params:
        out.append((PARAMS_DTYPE, tuple(space.dtypes.params)))
    if space.dtypes.inputs:
        out.append((INPUTS_DTYPE, tuple(space.dtypes.inputs)))
    out += [(k, tuple(v)) for k, v in space.xla_options.items()]
    if space.w_dtype:
        out.append(("w_dtype", tuple(space.w_dtype)))
    if space.gelu:
        out.append(("gelu", tuple(space.gelu)))
    return out


# The Point field each axis that is no XLA option sets.
_FIELDS = {"w_dtype": "w_dtype", "gelu": "gelu", PARAMS_DTYPE: "params_dtype"}
_FIELDS[INPUTS_DTYPE] = "inputs_dtype"


def _pairs_without(items: tuple[tuple[str, Any], ...], name: str) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in items if k != name)


def _with(items: tuple[tuple[str, Any], ...], name: str, value: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((*_pairs_without(items, name), (name, value))))


def without(point: Point, axis: str) -> Point:
    """The point with `axis` left as configured."""
    if axis in _FIELDS:
        return dataclasses.replace(point, **{_FIELDS[axis]: None})
    if axis.startswith(KWARG):
        return dataclasses.replace(point, kwargs=_pairs_without(point.kwargs, axis[len(KWARG) :]))
    return dataclasses.replace(point, options=_pairs_without(point.options, axis))


def _pairs(axis: str, programs: Sequence[tuple[Point, str]]) -> list[tuple[Point, str, str]]:
    """Each compiled point that sets `axis`, with its digest and that of its partner without
    it (when the partner was compiled too)."""
    return [
        (point, digest, partner)
        for point, digest in programs
        if (alone := without(point, axis)) != point
        for other, partner in programs
        if other == alone
    ]


def unchanged_axes(
    axes: Sequence[str],
    programs: Sequence[tuple[Point, str]],
    configured: Mapping[str, Any] | None = None,
) -> tuple[str, ...]:
    """The axes whose setting never changed the program where it can act: for each compiled
    point that sets the axis, can act there (ACTS_ONLY_WITH), and whose partner without it was
    compiled too, the two digests are equal."""
    out = []
    for axis in axes:
        same = [
            digest == partner
            for point, digest, partner in _pairs(axis, programs)
            if acts_at(axis, point, configured or {})
        ]
        if same and all(same):
            out.append(axis)
    return tuple(out)


def not_tried_where_acts(
    axes: Sequence[str],
    programs: Sequence[tuple[Point, str]],
    configured: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The axes that were compiled against their partner only where they cannot act, each
    with what it needs: the search can say nothing about them."""
    out = {}
    for axis in axes:
        pairs = _pairs(axis, programs)
        if pairs and not any(acts_at(axis, p, configured or {}) for p, _, _ in pairs):
            out[axis] = needs(axis)
    return out


def _set(point: Point, axis: str, value: Any) -> Point:
    if axis in _FIELDS:
        return dataclasses.replace(point, **{_FIELDS[axis]: value})
    if axis.startswith(KWARG):
        return dataclasses.replace(point, kwargs=_with(point.kwargs, axis[len(KWARG) :], value))
    return point.with_option(axis, value)


def grid(space: SearchSpace) -> Iterator[Point]:
    """Every combination of the space's values."""
    names = axes(space)
    for values in itertools.product(*(v for _, v in names)):
        point = Point()
        for (axis, _), value in zip(names, values, strict=True):
            point = _set(point, axis, value)
        yield point


def planned(space: SearchSpace, strategy: str) -> int:
    """How many configurations the strategy compiles at most, the default included: every
    combination for `grid`; for `coordinate`, one per other value of each axis."""
    values = [len(v) for _, v in axes(space)]
    if strategy == "grid":
        return 1 + math.prod(values)
    return 1 + sum(max(0, n - 1) for n in values)


def value_of(point: Point, axis: str, base: Variant) -> Any:
    if axis == "w_dtype":
        return point.w_dtype or base.problem.weight_dtype
    if axis == "gelu":
        return point.gelu or base.problem.gelu
    if axis == PARAMS_DTYPE:
        return point.params_dtype or base.program.w_dtype
    if axis == INPUTS_DTYPE:
        return point.inputs_dtype or base.program.dtype
    if axis.startswith(KWARG):
        name = axis[len(KWARG) :]
        return dict(point.kwargs).get(name, base.program.kwargs.get(name))
    return dict(point.options).get(axis, base.xla_options.get(axis))


def coordinate_step(
    current: Point, axis: str, values: tuple[Any, ...], base: Variant
) -> list[Point]:
    """The current point with one axis set to each of its other values.

    An option neither the base nor the current point sets has XLA's default, which the config
    lists first, so the first value is not compiled again. A knob or dtype the base leaves
    unset is the function's own default, which the config need not list first: each value is
    tried, and the one equal to it is the default's program (the search times it once).
    """
    now = value_of(current, axis, base)
    if now is None and values and axis not in _FIELDS and not axis.startswith(KWARG):
        now = values[0]
    return [_set(current, axis, v) for v in values if v != now or now is None]


def xla_flags(options: Mapping[str, Any]) -> str:
    """The options as an XLA_FLAGS string."""

    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    return " ".join(f"--{k}={text(v)}" for k, v in sorted(options.items()))
