"""A program study's arguments as a user writes them: pytrees of input specs, the new-shape
call's shapes mirroring them, and static keyword arguments (harness.config.experiment.Program).

In a config:

    program:
      inputs:                      # positional arguments after params, each one pytree
        - {shape: [512, 256], dtype: float32}            # a spec: a mapping with `shape`
        - {shape: [512], dtype: int32, low: 0, high: 10}  # integers uniform in [low, high)
        - {x: {shape: [8, 4]}, y: [{shape: [8]}]}        # a mapping or list of specs
      recompile_shapes: [[256, 256], [256], {x: [4, 4], y: [[4]]}]   # mirrors `inputs`
      kwargs: {attention: xla}     # static keyword arguments (a variant may change them)

The checks here return (key under `program`, what is wrong) instead of raising, like
harness.config.sharding: the schema, which imports this module, raises its ConfigError.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from harness.config.fields import ranged

MAX_DIM = 1 << 20
MAX_RANK = 16  # an input of more dimensions is a mistake, not a program (jax allows 64k)
# Values no CPU backend implements: a variant whose keyword argument names one is skipped on
# the CPU with the reason, as a variant with `platforms: [gpu]` is.
GPU_ONLY_VALUES = ("cudnn", "cublas", "cublaslt", "cuda", "triton", "mosaic_gpu", "pallas_gpu")


class ProgramConfigError(ValueError):
    """A mistake in the program section: `key` (under `program`) and what is wrong."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One array among a program's arguments: shape, dtype, and for integers a range.

    Floating inputs are standard normal; integer inputs uniform in [low, high); bool inputs
    fair coin flips. Every input comes from the experiment's seed (harness.variants.program).
    """

    shape: tuple[int, ...] = ranged((), 1, MAX_DIM, "the input's dimensions", max_len=MAX_RANK)
    dtype: str = "float32"
    low: int = ranged(0, -(1 << 31), (1 << 31) - 2, "integer inputs are uniform in [low, high)")
    high: int = ranged(16, -(1 << 31) + 1, (1 << 31) - 1, "integer inputs: the upper bound")


class FrozenMap(Mapping[str, Any]):
    """A read-only, hashable mapping with its keys sorted (jax.tree's order for a dict): one
    pytree argument's mapping, or the static keyword arguments."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None):
        self._items = tuple(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other.items())

    def __repr__(self) -> str:
        return f"FrozenMap({dict(self._items)!r})"


NO_KWARGS = FrozenMap()

# One argument: an InputSpec, a tuple of arguments (a YAML list) or a FrozenMap of them.
InputTree = Any


def _number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _spec(raw: Mapping[str, Any], key: str) -> InputSpec:
    fields = {f.name for f in dataclasses.fields(InputSpec)}
    for name in raw:
        if name not in fields:
            close = difflib.get_close_matches(str(name), fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; valid: {', '.join(fields)}"
            raise ProgramConfigError(f"{key}.{name}", "unknown key" + hint)
    shape = raw.get("shape")
    if not isinstance(shape, list | tuple) or not all(_number(d) for d in shape):
        raise ProgramConfigError(f"{key}.shape", f"expected a list of int, got {shape!r:.40}")
    dtype = raw.get("dtype", "float32")
    if not isinstance(dtype, str):
        raise ProgramConfigError(f"{key}.dtype", f"expected str, got {dtype!r:.40}")
    bounds = {}
    for name in ("low", "high"):
        if name in raw:
            if not _number(raw[name]):
                raise ProgramConfigError(f"{key}.{name}", f"expected int, got {raw[name]!r:.40}")
            bounds[name] = raw[name]
    return InputSpec(shape=tuple(shape), dtype=dtype, **bounds)


def parse_tree(raw: Any, key: str, depth: int = 0) -> InputTree:
    """Returns one argument as configured: a mapping with `shape` is a spec, another mapping or
    a list holds arguments; raises ProgramConfigError naming the key of the first mistake."""
    if depth > 16:
        raise ProgramConfigError(key, "nests more than 16 levels")
    if isinstance(raw, InputSpec):  # a config rebuilt from its own plain form
        return raw
    if isinstance(raw, Mapping):
        if "shape" in raw:
            return _spec(raw, key)
        if not raw:
            raise ProgramConfigError(key, "is an empty mapping; an input is {shape: [...], ...}")
        for name in raw:
            if not isinstance(name, str):
                raise ProgramConfigError(key, f"mapping keys are strings, got {name!r:.40}")
        return FrozenMap({k: parse_tree(v, f"{key}.{k}", depth + 1) for k, v in raw.items()})
    if isinstance(raw, list | tuple) and raw and not all(_number(d) for d in raw):
        return tuple(parse_tree(v, f"{key}[{i}]", depth + 1) for i, v in enumerate(raw))
    raise ProgramConfigError(
        key,
        f"expected a mapping {{shape: [...], dtype: ...}}, or a list or mapping of them (one "
        f"pytree argument), got {raw!r:.40}",
    )


def parse_inputs(raw: Any, key: str = "program.inputs") -> tuple[InputTree, ...]:
    """Returns the positional arguments after the parameters, one InputTree each."""
    if not isinstance(raw, list | tuple):
        raise ProgramConfigError(key, f"expected a list of inputs, got {type(raw).__name__}")
    return tuple(parse_tree(item, f"{key}[{i}]") for i, item in enumerate(raw))


def leaves(tree: Any, key: str = "") -> list[tuple[str, Any]]:
    """Returns (config key, leaf) of an InputTree (or of shapes mirroring one) in jax.tree's
    order: lists in order, mappings by sorted key. A leaf is an InputSpec (or a shape)."""
    if isinstance(tree, Mapping):
        return [kv for k in sorted(tree) for kv in leaves(tree[k], f"{key}.{k}")]
    if isinstance(tree, tuple) and not all(_number(d) for d in tree):
        return [kv for i, v in enumerate(tree) for kv in leaves(v, f"{key}[{i}]")]
    return [(key, tree)]


def input_leaves(inputs: tuple[InputTree, ...]) -> list[tuple[str, InputSpec]]:
    """Returns (config key, spec) of every input array, in jax.tree order over all inputs."""
    return [kv for i, tree in enumerate(inputs) for kv in leaves(tree, f"program.inputs[{i}]")]


def map_specs(fn: Any, tree: InputTree) -> Any:
    """Returns the tree with every spec replaced by `fn(spec)`: mappings become dicts, lists
    stay lists, as the function receives them."""
    if isinstance(tree, InputSpec):
        return fn(tree)
    if isinstance(tree, Mapping):
        return {k: map_specs(fn, tree[k]) for k in sorted(tree)}
    return [map_specs(fn, v) for v in tree]


# --- the new-shape call ------------------------------------------------------------------------


def parse_shapes(raw: Any, inputs: tuple[InputTree, ...]) -> tuple[Any, ...]:
    """Returns `program.recompile_shapes` read against the inputs' structure: a shape (list of
    int) where the inputs hold a spec, a list or mapping where they hold one."""
    key = "program.recompile_shapes"
    if not isinstance(raw, list | tuple):
        raise ProgramConfigError(key, f"expected a list, one entry per input, got {raw!r:.40}")
    if not raw:
        return ()
    if len(raw) != len(inputs):
        raise ProgramConfigError(
            key, f"gives {len(raw)} entries for {len(inputs)} inputs; give one per input"
        )
    return tuple(
        _mirror(r, t, f"{key}[{i}]") for i, (r, t) in enumerate(zip(raw, inputs, strict=True))
    )


def _mirror(raw: Any, tree: InputTree, key: str) -> Any:
    if isinstance(tree, InputSpec):
        if not isinstance(raw, list | tuple) or not all(_number(d) for d in raw):
            raise ProgramConfigError(key, f"expected a shape (list of int), got {raw!r:.40}")
        if len(raw) != len(tree.shape):
            raise ProgramConfigError(
                key, f"has {len(raw)} dimensions; the input has {len(tree.shape)}"
            )
        for j, d in enumerate(raw):
            if not 1 <= d <= MAX_DIM:
                raise ProgramConfigError(f"{key}[{j}]", f"must be in [1, {MAX_DIM}], got {d}")
        return tuple(raw)
    if isinstance(tree, Mapping):
        if not isinstance(raw, Mapping) or set(raw) != set(tree):
            raise ProgramConfigError(
                key, f"expected a mapping with the input's keys {sorted(tree)}, got {raw!r:.40}"
            )
        return FrozenMap({k: _mirror(raw[k], tree[k], f"{key}.{k}") for k in tree})
    if not isinstance(raw, list | tuple) or len(raw) != len(tree):
        raise ProgramConfigError(key, f"expected a list of {len(tree)} like the input's")
    return tuple(
        _mirror(r, t, f"{key}[{i}]") for i, (r, t) in enumerate(zip(raw, tree, strict=True))
    )


def default_shapes(inputs: tuple[InputTree, ...]) -> tuple[Any, ...]:
    """Returns the new-shape call's shapes when none are configured: the leading dimension of
    every leaf that shares the first leaf's (jax.tree order) leading size, halved, so a batch
    of x and its labels shrink together."""
    found = input_leaves(inputs)
    lead = found[0][1].shape[0] if found and found[0][1].shape else None

    def shrink(s: InputSpec) -> tuple[int, ...]:
        if lead is not None and s.shape and s.shape[0] == lead:
            return (lead // 2, *s.shape[1:])
        return s.shape

    return tuple(_as_shapes(map_specs(shrink, tree)) for tree in inputs)


def _as_shapes(tree: Any) -> Any:
    # map_specs made dicts and lists; shapes are kept hashable like the inputs.
    if isinstance(tree, dict):
        return FrozenMap({k: _as_shapes(v) for k, v in tree.items()})
    if isinstance(tree, list):
        return tuple(_as_shapes(v) for v in tree)
    return tree


def shapes_problem(
    inputs: tuple[InputTree, ...], configured: tuple[Any, ...], recompile: bool
) -> tuple[str, str] | None:
    """Returns (key, what is wrong) when the new-shape call cannot be made, else None."""
    if configured:
        same = [s for _, s in leaves(configured)] == [s.shape for _, s in input_leaves(inputs)]
        if same:
            return (
                "program.recompile_shapes",
                "equals the inputs' shapes, so the call would not recompile",
            )
        return None
    if not recompile:
        return None
    key, first = input_leaves(inputs)[0]
    if not first.shape or first.shape[0] < 2:
        return (
            f"{key}.shape",
            "the new-shape call halves the leading dimension of the first input (jax.tree "
            "order) and of every input of that size, which needs one of at least 2; set "
            "program.recompile_shapes, or measure.recompile: false",
        )
    return None


# --- static keyword arguments ------------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def parse_kwargs(raw: Any, key: str) -> FrozenMap:
    """Returns the static keyword arguments; refuses a name that is no identifier and a value
    that is not hashable (jit closes over it, and variants are keyed by it)."""
    if raw is None:
        return FrozenMap()
    if isinstance(raw, FrozenMap):
        return raw
    if not isinstance(raw, Mapping):
        raise ProgramConfigError(key, f"expected a mapping of name: value, got {raw!r:.40}")
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ProgramConfigError(key, f"{name!r:.40} is not a keyword argument's name")
        if not isinstance(value, _SCALARS):
            raise ProgramConfigError(
                f"{key}.{name}",
                f"{value!r:.40} is not hashable; a static keyword argument is a str, number, "
                "bool or null",
            )
    return FrozenMap(raw)


def knob(name: str, value: Any) -> str:
    """Returns a keyword argument as the report names it, like an XLA option: `name=value`."""
    text = (
        "null"
        if value is None
        else '""'
        if value == ""
        else str(value).lower()
        if isinstance(value, bool)
        else value
    )
    return f"{name}={text}"


def gpu_only(kwargs: Mapping[str, Any]) -> list[str]:
    """Returns the keyword arguments (`name=value`) whose value only a GPU implements."""
    return [
        knob(k, v) for k, v in kwargs.items() if isinstance(v, str) and v.lower() in GPU_ONLY_VALUES
    ]


def gpu_only_note(kwargs: Mapping[str, Any]) -> str:
    """Returns why a variant is skipped off a GPU by its keyword arguments ('' when not)."""
    found = gpu_only(kwargs)
    return f" (`{'`, `'.join(found)}` works only on a GPU)" if found else ""
