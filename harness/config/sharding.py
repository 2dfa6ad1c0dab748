"""A variant spread over several devices: a mesh, a PartitionSpec per array, or a shard_map body.

In a variant's YAML:

    sharding:
      mesh: [2, 2]        # devices along each mesh axis; empty (the default): one device
      axes: [m, n]        # the axes' names, one per mesh dimension
      x: [m, null]        # x's PartitionSpec: per dimension an axis, several joined by '+', or null
      w: [null, n]        # W [k, n]
      b: []               # b [n]; an empty spec (or a shorter one) leaves the rest replicated
      out: [m, null]      # y [.., m, n]; jit's out_shardings
      shard_map: ""       # a per-device body written by hand instead of the SPMD partitioner:
                          # `psum` (all-reduce) or `psum_scatter` (reduce-scatter over rows)

With `shard_map`, x must be split on k alone and W on the same axes along its k, b replicated;
`psum` gives a replicated output (`out: []`), `psum_scatter` one split on m by the k axes.

This module describes and checks a sharding; harness.variants.sharded builds the JAX program.
Checks that need the problem (divisibility, ranks) are here too, so the one validation pass
(harness.config.validate.validate_experiment) reports them against the config key.
"""

from __future__ import annotations

import dataclasses
import math
import re

SHARD_MAP_BODIES = ("psum", "psum_scatter")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
MAX_MESH_AXIS = 4096

Spec = tuple[str | None, ...]


@dataclasses.dataclass(frozen=True)
class Sharding:
    """How one variant is spread over devices; an empty mesh means one device, unsharded."""

    mesh: tuple[int, ...] = dataclasses.field(
        default=(),
        # A mesh of more than 8 axes names more ways to split devices than any model uses.
        metadata={"range": (1, MAX_MESH_AXIS), "doc": "devices along each mesh axis", "max_len": 8},
    )
    axes: tuple[str, ...] = ()
    x: Spec = ()
    w: Spec = ()
    b: Spec = ()
    out: Spec = ()
    shard_map: str = ""

    @property
    def enabled(self) -> bool:
        """True when the variant runs on a mesh."""
        return bool(self.mesh)

    @property
    def devices(self) -> int:
        """Returns the devices the mesh needs (1 when unsharded)."""
        return math.prod(self.mesh) if self.mesh else 1

    def axis_size(self, entry: str | None) -> int:
        """Returns how many pieces one spec entry cuts its dimension into."""
        sizes = dict(zip(self.axes, self.mesh, strict=False))
        return math.prod(sizes.get(a, 1) for a in entry_axes(entry))


def entry_axes(entry: str | None) -> tuple[str, ...]:
    """Returns the mesh axes one spec entry names: none, one, or several joined by '+'."""
    if entry is None or not entry.strip():
        return ()
    return tuple(a.strip() for a in entry.split("+"))


def padded(spec: Spec, rank: int) -> Spec:
    """Returns `spec` with trailing Nones up to `rank` dims (PartitionSpec's own convention)."""
    return tuple(spec) + (None,) * (rank - len(spec))


def problems(
    s: Sharding,
    x_shape: tuple[int, ...],
    k: int,
    n: int,
    recompile: bool,
    mode: str,
    frontend: str,
) -> tuple[str, str] | None:
    """Returns (key under `sharding`, what is wrong) for the first problem of `s`, or None.

    Checks the mesh (axis names and sizes), each spec (rank, known axes, no axis twice, every
    split dimension divisible, m also after halving for the recompile), the modes a sharding
    applies to, and what a shard_map body requires of the specs.
    """
    if not s.enabled:
        return _set_without_mesh(s)
    if (found := _mesh_problem(s, mode)) is not None:
        return found
    *batch, m = x_shape[:-1]
    shapes = {
        "x": tuple(x_shape),
        "w": (k, n),
        "b": (n,),
        "out": (*batch, m, n),
    }
    for key, shape in shapes.items():
        if (found := _spec_problem(s, key, shape, recompile)) is not None:
            return found
    if s.shard_map:
        return _shard_map_problem(s, len(x_shape), mode, frontend)
    return None


def _set_without_mesh(s: Sharding) -> tuple[str, str] | None:
    """The first sharding key set without a mesh, which would change nothing."""
    for key in ("axes", "x", "w", "b", "out", "shard_map"):
        if getattr(s, key):
            return key, "is set but the mesh is empty; give `mesh`, e.g. [4]"
    return None


def _mesh_problem(s: Sharding, mode: str) -> tuple[str, str] | None:
    """What is wrong with the mesh's axes (one valid name each, none twice), or its mode."""
    if len(s.axes) != len(s.mesh):
        return "axes", f"names {len(s.axes)} axes for a mesh of {len(s.mesh)} dims {list(s.mesh)}"
    for a in s.axes:
        if not _AXIS_NAME.match(a):
            return "axes", f"{a!r} is not an axis name; use letters, digits and '_'"
    if len(set(s.axes)) != len(s.axes):
        return "axes", f"repeats a name: {list(s.axes)}"
    if mode not in ("jit", "matmul_only"):
        return "mesh", f"applies to modes jit and matmul_only, not {mode!r}"
    return None


def _spec_problem(
    s: Sharding, key: str, shape: tuple[int, ...], recompile: bool
) -> tuple[str, str] | None:
    """What is wrong with the spec `key` of an array of `shape`: its rank, an axis unknown or
    used twice, a split that does not divide (m also after the recompile halves it)."""
    spec = getattr(s, key)
    if len(spec) > len(shape):
        return key, f"has {len(spec)} entries for an array of {len(shape)} dims {list(shape)}"
    used: list[str] = []
    for dim, (entry, size) in enumerate(zip(spec, shape, strict=False)):
        for a in entry_axes(entry):
            if a not in s.axes:
                return key, f"names {a!r}, which is not a mesh axis; axes: {list(s.axes)}"
            if a in used:
                return key, f"uses axis {a!r} twice"
            used.append(a)
        pieces = s.axis_size(entry)
        if size % pieces:
            return key, f"splits dim {dim} of size {size} into {pieces}, which does not divide"
        is_m = key in ("x", "out") and dim == len(shape) - 2
        if is_m and recompile and (size // 2) % pieces:
            return key, (
                f"splits m={size} into {pieces}, but the recompile halves m to {size // 2}, "
                "which does not divide; make m a multiple of twice the split or turn off "
                "measure.recompile"
            )
    return None


def _shard_map_problem(s: Sharding, rank: int, mode: str, frontend: str) -> tuple[str, str] | None:
    if s.shard_map not in SHARD_MAP_BODIES:
        return "shard_map", f"{s.shard_map!r} is no body; allowed: {', '.join(SHARD_MAP_BODIES)}"
    if mode != "jit" or frontend != "jnp":
        return "shard_map", f"needs mode jit and frontend jnp, got {mode} and {frontend}"
    x = padded(s.x, rank)
    k_axes = entry_axes(x[-1])
    if not k_axes or any(entry_axes(e) for e in x[:-1]):
        return "x", "a shard_map body needs x split on k (its last dim) and nothing else"
    w = padded(s.w, 2)
    if entry_axes(w[0]) != k_axes or entry_axes(w[1]):
        return "w", f"a shard_map body needs W split on k by {'+'.join(k_axes)} and nothing else"
    if any(entry_axes(e) for e in s.b):
        return "b", "a shard_map body needs b replicated (an empty spec)"
    out = padded(s.out, rank)
    want = (None,) * rank if s.shard_map == "psum" else (None,) * (rank - 2) + (x[-1], None)
    if tuple(entry_axes(e) for e in out) != tuple(entry_axes(e) for e in want):
        shown = [("+".join(entry_axes(e)) or None) for e in want]
        return "out", f"must be {shown} for the {s.shard_map} body"
    return None
