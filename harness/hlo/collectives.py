"""Collectives of a partitioned HLO module: who talks to whom, how many bytes, and who made them.

After SPMD partitioning every cross-device transfer is one HLO instruction: `all-reduce`,
`all-gather`, `reduce-scatter`, `collective-permute`, `all-to-all`, `ragged-all-to-all` or
`collective-broadcast`, possibly split into an async `-start`/`-done` pair or wrapped in an
`async-start` that calls a computation holding the collective (which XLA prints as
`<collective>-start`/`-done` named `async-start`). Each becomes one `Collective`.

Replica groups hold *logical* ids. With `use_global_device_ids=true` (what the SPMD
partitioner writes) an id is `replica * num_partitions + partition`; jax runs partition `p` on
`mesh.devices.flat[p]`, so a mesh whose device array is not in id order puts partition `p` on
another device id. `Collective.device_groups(assignment)` applies that mapping.

Byte model (per device, N = bytes of the payload on one device, P = devices in its group),
the ring algorithm NCCL uses for large messages:
- all-reduce: sends and receives 2(P-1)/P * N (reduce-scatter then all-gather), N = input;
- all-gather: (P-1)/P * N_out, N_out = the gathered output;
- reduce-scatter: (P-1)/P * N_in, N_in = the unscattered input;
- all-to-all (and ragged): (P-1)/P * N, N = the input;
- collective-permute: N for each source->target pair the device is source (target) of; a pair
  whose source is its own target moves nothing;
- collective-broadcast: N (a pipelined ring forwards the whole payload once).
`payload_bytes` is N itself, for models other than the ring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.hlo.instruction import MAX_ID, Instruction
from harness.hlo.operands import operand_shape
from harness.hlo.parser import Computation, HloModule, parse_file
from harness.hlo.passes import XLA_PASS_FILE, pass_file_info
from harness.hlo.shapes import ArrayShape, Shape, decimal, leaves, parse_shape

COLLECTIVES = frozenset(
    {
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "collective-permute",
        "all-to-all",
        "ragged-all-to-all",
        "collective-broadcast",
    }
)
# `all-reduce-start`, `all-gather-start` and `collective-permute-start` are async ops of their
# own; XLA prints any other collective wrapped in `async-start` the same way
# (`%async-start = ((operands), result, s32[]) reduce-scatter-start(...)`).
ASYNC_STARTS = frozenset(f"{op}-start" for op in COLLECTIVES)
REDUCTIONS = {
    "add": "sum",
    "maximum": "max",
    "minimum": "min",
    "multiply": "prod",
    "and": "and",
    "or": "or",
    "xor": "xor",
}
# Passes of the partitioning pipelines: a collective first seen after one of these was made by
# the SPMD partitioner (GSPMD or Shardy), not by a later collective optimization.
SPMD_PASSES = re.compile(
    r"spmd|sharding|shardy|sdy|auto-shard|partition-assignment|collective-permute-motion",
    re.IGNORECASE,
)


class CollectiveError(ValueError):
    """A collective whose attributes cannot be read; names the module and instruction."""


@dataclass(frozen=True)
class Collective:
    """One collective of an HLO module and what it moves per device (module docstring's model).

    `name` is the instruction that runs it: the `-start` of an async pair, the collective
    inside an `async-start` wrapper (then `wrapper` names the `async-start`). Device events
    carry one of the two as `hlo_op`. Groups are logical ids (see `device_groups`).
    """

    name: str
    opcode: str
    hlo_opcode: str
    is_async: bool
    wrapper: str
    computation: str
    replica_groups: tuple[tuple[int, ...], ...]
    group_syntax: str
    group_text: str
    source_target_pairs: tuple[tuple[int, int], ...]
    participants: int
    dtype: str
    in_shape: str
    out_shape: str
    in_bytes: int
    out_bytes: int
    payload_bytes: int
    sent_bytes: int
    received_bytes: int
    model: str
    reduction: str
    channel_id: int | None
    use_global_device_ids: bool
    dimensions: tuple[int, ...]
    spmd_generated: bool
    op_name: str
    source: str

    @property
    def hlo_ops(self) -> tuple[str, ...]:
        """The instruction names a device event of this collective may carry as `hlo_op`."""
        return (self.name, self.wrapper) if self.wrapper else (self.name,)

    def device_groups(self, assignment: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """Returns the replica groups as device ids: logical id i runs on `assignment[i]`.

        jax's assignment is `[d.id for d in mesh.devices.flat]`. Raises ValueError when a
        group names a logical id the assignment does not cover.
        """
        groups = self.replica_groups or tuple((s, t) for s, t in self.source_target_pairs)
        top = max((i for g in groups for i in g), default=-1)
        if top >= len(assignment):
            raise ValueError(
                f"{self.name}: logical id {top} is outside the device assignment "
                f"({len(assignment)} devices)"
            )
        return tuple(tuple(int(assignment[i]) for i in g) for g in groups)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (groups and pairs as lists)."""
        return {
            "name": self.name,
            "opcode": self.opcode,
            "hlo_opcode": self.hlo_opcode,
            "is_async": self.is_async,
            "wrapper": self.wrapper,
            "computation": self.computation,
            "replica_groups": [list(g) for g in self.replica_groups],
            "group_syntax": self.group_syntax,
            "group_text": self.group_text,
            "source_target_pairs": [list(p) for p in self.source_target_pairs],
            "participants": self.participants,
            "dtype": self.dtype,
            "in_shape": self.in_shape,
            "out_shape": self.out_shape,
            "in_bytes": self.in_bytes,
            "out_bytes": self.out_bytes,
            "payload_bytes": self.payload_bytes,
            "sent_bytes": self.sent_bytes,
            "received_bytes": self.received_bytes,
            "model": self.model,
            "reduction": self.reduction,
            "channel_id": self.channel_id,
            "use_global_device_ids": self.use_global_device_ids,
            "dimensions": list(self.dimensions),
            "spmd_generated": self.spmd_generated,
            "op_name": self.op_name,
            "source": self.source,
        }


# --- replica groups ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaGroups:
    """Parsed replica groups: the groups of logical ids, which syntax held them, the raw text."""

    groups: tuple[tuple[int, ...], ...]
    syntax: str
    text: str


_INTS = re.compile(r"-?\d+")
_IOTA = re.compile(
    r"^\[(?P<dims>[\d,\s]*)\]\s*<=\s*\[(?P<reshape>[\d,\s]*)\](?:\s*T\((?P<perm>[\d,\s]*)\))?$"
)
_MESH_AXIS = re.compile(r"^\s*'?(?P<name>[^'=\s]+)'?\s*=\s*(?P<size>\d+)\s*$")
_GROUP_AXIS = re.compile(
    r"^\s*'?(?P<name>[^':\s]+)'?\s*(?::\s*\((?P<pre>\d+)\)\s*(?P<size>\d+))?\s*$"
)
_DEVICE_IOTA = re.compile(r"^\[(?P<reshape>[\d,\s]*)\](?:\s*T\((?P<perm>[\d,\s]*)\))?$")


def _ints(text: str, where: str, what: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(re.fullmatch(r"\d+", p) for p in parts):
        raise ValueError(f"{where}: {what} must be non-negative integers, got {text!r}")
    return [int(p) for p in parts]


def _iota(reshape: Sequence[int], perm: Sequence[int] | None, where: str) -> np.ndarray:
    """Returns iota(prod(reshape)) reshaped to `reshape` and transposed by `perm`."""
    arr = np.arange(math.prod(reshape), dtype=np.int64).reshape(tuple(reshape))
    if perm is None:
        return arr
    if sorted(perm) != list(range(len(reshape))):
        raise ValueError(f"{where}: T{tuple(perm)} is not a permutation of {len(reshape)} dims")
    return arr.transpose(tuple(perm))


def _explicit(text: str, where: str) -> tuple[tuple[int, ...], ...]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"{where}: expected {{{{...}},...}}, got {text!r}")
    inner = body[1:-1].strip()
    if not inner:
        return ()
    groups = re.findall(r"\{([^{}]*)\}", inner)
    if re.sub(r"\{[^{}]*\}", "", inner).replace(",", "").strip():
        raise ValueError(f"{where}: expected groups like {{0,1}}, got {text!r}")
    return tuple(tuple(_ints(g, where, "group members")) for g in groups)


def _iota_groups(text: str, where: str) -> tuple[tuple[int, ...], ...]:
    m = _IOTA.match(text.strip())
    if m is None:
        raise ValueError(f"{where}: expected [groups,size]<=[dims]T(perm), got {text!r}")
    dims = _ints(m["dims"], where, "iota dims")
    reshape = _ints(m["reshape"], where, "iota reshape dims")
    perm = _ints(m["perm"], where, "iota permutation") if m["perm"] is not None else None
    if len(dims) != 2 or math.prod(dims) != math.prod(reshape):
        raise ValueError(
            f"{where}: iota groups {dims} must be [groups,size] with as many ids as "
            f"{reshape} ({text!r})"
        )
    arr = _iota(reshape, perm, where).reshape(tuple(dims))
    return tuple(tuple(int(v) for v in row) for row in arr)


def _mesh_axes(axes: str, text: str, where: str) -> tuple[list[str], list[int]]:
    """The mesh's axis names and sizes, from `'a'=2,'b'=2`."""
    names: list[str] = []
    sizes: list[int] = []
    for item in (p for p in axes.split(",") if p.strip()):
        am = _MESH_AXIS.match(item)
        if am is None:
            raise ValueError(f"{where}: bad mesh axis {item.strip()} in {text}")
        if am["name"] in names:
            raise ValueError(f"{where}: mesh axis {am['name']!r} repeats in {text}")
        names.append(am["name"])
        sizes.append(int(am["size"]))
    if not names:
        raise ValueError(f"{where}: mesh without axes in {text}")
    return names, sizes


def _group_refs(
    axes: str, names: list[str], sizes: list[int], text: str, where: str
) -> list[tuple[int, int, int | None]]:
    """The grouped axes in the order written: (mesh axis, pre_size, size), size None for a
    full axis, from `{'b', 'a':(2)2}`."""
    refs: list[tuple[int, int, int | None]] = []
    for item in (p for p in axes.split(",") if p.strip()):
        rm = _GROUP_AXIS.match(item)
        if rm is None or rm["name"] not in names:
            raise ValueError(f"{where}: group axis {item.strip()} is not a mesh axis of {text}")
        axis = names.index(rm["name"])
        if rm["pre"] is None:
            refs.append((axis, 1, None))
            continue
        pre, size = int(rm["pre"]), int(rm["size"])
        if pre < 1 or size < 2 or sizes[axis] % (pre * size):
            raise ValueError(
                f"{where}: sub-axis {item.strip()} does not divide axis size {sizes[axis]}"
            )
        refs.append((axis, pre, size))
    return refs


def _split_axes(
    names: list[str],
    sizes: list[int],
    refs: list[tuple[int, int, int | None]],
    text: str,
    where: str,
) -> tuple[list[int], dict[int, int]]:
    """The device array's shape with each mesh axis split into the dims its group refs need,
    and where each ref landed in it."""
    reshape: list[int] = []
    position: dict[int, int] = {}
    for axis, size in enumerate(sizes):
        mine = [(i, pre, sub) for i, (a, pre, sub) in enumerate(refs) if a == axis]
        if not mine:
            reshape.append(size)
        elif any(sub is None for _, _, sub in mine):
            if len(mine) > 1:
                raise ValueError(f"{where}: axis {names[axis]!r} grouped twice in {text}")
            position[mine[0][0]] = len(reshape)
            reshape.append(size)
        else:
            prefix = 1
            for i, pre, sub in sorted(mine, key=lambda r: r[1]):
                if pre % prefix:
                    raise ValueError(f"{where}: overlapping sub-axes of {names[axis]!r} in {text}")
                if pre != prefix:
                    reshape.append(pre // prefix)
                    prefix = pre
                position[i] = len(reshape)
                reshape.append(sub or 1)
                prefix *= sub or 1
            if prefix != size:
                reshape.append(size // prefix)
    return reshape, position


def _mesh_groups(text: str, where: str) -> tuple[tuple[int, ...], ...]:
    """Groups of the mesh form: `mesh['a'=2,'b'=2][, device_ids=(...)] {'b'}`.

    Follows XLA's MeshAxesReplicaGroupList: reshape the device array to the mesh axes (a
    sub-axis `'a':(pre)size` splits its axis into [pre, size, rest]), move the grouped axes
    last in the order written, and cut the result into groups of their product.
    """
    m = re.match(r"^\s*mesh\s*\[(?P<axes>[^\]]*)\]\s*(?P<rest>.*)$", text, re.DOTALL)
    if m is None:
        raise ValueError(f"{where}: expected mesh[...] {{axes}}, got {text!r}")
    names, sizes = _mesh_axes(m["axes"], text, where)
    rest = m["rest"].strip()
    devices = np.arange(math.prod(sizes), dtype=np.int64)
    dm = re.match(r"^,?\s*device_ids\s*=\s*\(", rest)
    if dm is not None:
        close = _close_paren(rest, dm.end() - 1)
        if close < 0:
            raise ValueError(f"{where}: unterminated device_ids=( in {text}")
        devices = _device_ids(rest[dm.end() : close], math.prod(sizes), where)
        rest = rest[close + 1 :].strip()
    gm = re.match(r"^\{(?P<axes>[^{}]*)\}$", rest)
    if gm is None:
        raise ValueError(f"{where}: expected {{axes}} after the mesh, got {rest!r} in {text}")
    refs = _group_refs(gm["axes"], names, sizes, text, where)
    reshape, position = _split_axes(names, sizes, refs, text, where)
    grouped = [position[i] for i in range(len(refs))]
    order = [d for d in range(len(reshape)) if d not in grouped] + grouped
    size = math.prod(reshape[d] for d in grouped)
    arr = devices.reshape(tuple(reshape)).transpose(tuple(order)).reshape(-1, size)
    return tuple(tuple(int(v) for v in row) for row in arr)


def _device_ids(text: str, count: int, where: str) -> np.ndarray:
    """The mesh's device array from `device_ids=(...)`: `[r]T(p)` iota or a flat id list."""
    body = text.strip()
    im = _DEVICE_IOTA.match(body)
    if im is not None:
        reshape = _ints(im["reshape"], where, "device_ids dims")
        perm = _ints(im["perm"], where, "device_ids permutation") if im["perm"] else None
        if math.prod(reshape) != count:
            raise ValueError(f"{where}: device_ids {body!r} has not {count} devices")
        return _iota(reshape, perm, where).reshape(-1)
    ids = _ints(body, where, "device_ids")
    if sorted(ids) != list(range(count)):
        raise ValueError(f"{where}: device_ids ({body}) is not a permutation of 0..{count - 1}")
    return np.array(ids, dtype=np.int64)


def _close_paren(text: str, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_replica_groups(
    text: str, num_devices: int, where: str = "replica_groups"
) -> ReplicaGroups:
    """Returns the groups written in any of XLA's replica-group syntaxes.

    - explicit `{{0,1},{2,3}}`; `{}` means one group of all `num_devices` ids;
    - iota `[2,2]<=[4]` or `[2,2]<=[2,2]T(1,0)`: [groups,size] rows of a transposed iota;
    - mesh `mesh['a'=2,'b'=2] {'b'}`, with `, device_ids=([2,2]T(1,0))` or
      `, device_ids=(0,2,1,3)` when the mesh's devices are not in order, and sub-axes
      `{'a':(1)2}`; names may be quoted or not.
    Malformed text raises ValueError starting with `where`; so do duplicated ids.
    """
    raw = text.strip()
    if raw.startswith("mesh"):
        groups, syntax = _mesh_groups(raw, where), "mesh"
    elif raw.startswith("["):
        groups, syntax = _iota_groups(raw, where), "iota"
    elif raw.startswith("{"):
        groups, syntax = _explicit(raw, where), "explicit"
        if not groups:
            groups, syntax = (tuple(range(num_devices)),), "all"
    else:
        raise ValueError(f"{where}: unknown replica-group syntax {text!r}")
    flat = [i for g in groups for i in g]
    if any(not g for g in groups) or len(flat) != len(set(flat)):
        raise ValueError(f"{where}: empty or overlapping groups in {text}")
    return ReplicaGroups(groups, syntax, raw)


# --- collectives ------------------------------------------------------------------------------


def _num_devices(module: HloModule) -> int:
    header = module.header
    replicas = header.get("replica_count", "1")
    partitions = header.get("num_partitions", "1")
    return (decimal(replicas, MAX_ID) or 1) * (decimal(partitions, MAX_ID) or 1)


def _done_of(comp: Computation, start: Instruction) -> Instruction | None:
    for inst in comp.instructions:
        if inst.opcode.endswith("-done") and start.name in inst.operand_names:
            return inst
    return None


def _reduction(module: HloModule, inst: Instruction) -> str:
    raw = inst.attr("to_apply")
    comp = module.computations.get(raw.strip().lstrip("%")) if raw else None
    root = comp.root if comp is not None else None
    return REDUCTIONS.get(root.opcode, root.opcode) if root is not None else ""


def _ring_bytes(opcode: str, p: int, n_in: int, n_out: int) -> tuple[int, int, str]:
    """(payload N, bytes each device sends, model text) for a group of p devices."""
    if opcode == "all-reduce":
        return n_in, 2 * (p - 1) * n_in // p, "ring all-reduce: 2(P-1)/P * N_in"
    if opcode == "all-gather":
        return n_out, (p - 1) * n_out // p, "ring all-gather: (P-1)/P * N_out"
    if opcode == "reduce-scatter":
        return n_in, (p - 1) * n_in // p, "ring reduce-scatter: (P-1)/P * N_in"
    if opcode in ("all-to-all", "ragged-all-to-all"):
        return n_in, (p - 1) * n_in // p, "all-to-all: (P-1)/P * N_in"
    if opcode == "collective-broadcast":
        return n_in, n_in if p > 1 else 0, "pipelined broadcast: N_in"
    raise ValueError(f"no byte model for {opcode}")


def _pairs(inst: Instruction, where: str) -> tuple[tuple[int, int], ...]:
    raw = inst.attr("source_target_pairs")
    if raw is None:
        raise CollectiveError(f"{where}: collective-permute without source_target_pairs")
    try:
        pairs = _explicit(raw, where)
    except ValueError as err:
        raise CollectiveError(str(err)) from None
    if any(len(p) != 2 for p in pairs):
        raise CollectiveError(
            f"{where}: source_target_pairs must be {{source,target}} pairs: {raw}"
        )
    return tuple((p[0], p[1]) for p in pairs)


def _out_shape(
    comp: Computation,
    inst: Instruction,
    hlo_opcode: str,
    wrapper: Instruction | None,
    wrapper_comp: Computation | None,
) -> Shape:
    """A collective's output: the `-done` result for an async pair, else its own shape."""
    if hlo_opcode in ASYNC_STARTS:
        done = _done_of(comp, inst)
        if done is not None:
            return done.shape
        if not isinstance(inst.shape, ArrayShape) and hlo_opcode != "all-reduce-start":
            return inst.shape.elements[1]
        return inst.shape
    if wrapper is not None and wrapper_comp is not None:
        done = _done_of(wrapper_comp, wrapper)
        return done.shape if done is not None else inst.shape
    return inst.shape


@dataclass(frozen=True)
class _Traffic:
    """Who takes part in a collective and what it moves per device (Collective's fields)."""

    pairs: tuple[tuple[int, int], ...]
    groups: ReplicaGroups
    participants: int
    payload: int
    sent: int
    received: int
    model: str


def _permute_traffic(inst: Instruction, where: str, n_in: int) -> _Traffic:
    """A collective-permute's traffic: N_in per source->target pair, the busiest device's."""
    pairs = _pairs(inst, where)
    moving = [(s, t) for s, t in pairs if s != t]
    sends = max((sum(1 for s, _ in moving if s == d) for d, _ in moving), default=0)
    recvs = max((sum(1 for _, t in moving if t == d) for _, d in moving), default=0)
    return _Traffic(
        pairs=pairs,
        groups=ReplicaGroups((), "none", ""),
        participants=len({i for p in pairs for i in p}),
        payload=n_in,
        sent=sends * n_in,
        received=recvs * n_in,
        model="collective-permute: N_in per source->target pair (self pairs move nothing)",
    )


def _group_traffic(
    inst: Instruction, opcode: str, where: str, n_devices: int, sizes: tuple[int, int]
) -> _Traffic:
    """A grouped collective's traffic: the ring model over its largest replica group, of
    `sizes` (its input's and output's bytes)."""
    raw = inst.attr("replica_groups")
    try:
        groups = parse_replica_groups(raw if raw is not None else "{}", n_devices, where)
    except ValueError as err:
        raise CollectiveError(str(err)) from None
    participants = max(len(g) for g in groups.groups)
    payload, sent, model = _ring_bytes(opcode, participants, *sizes)
    return _Traffic((), groups, participants, payload, sent, sent, model)


def _async_fields(
    inst: Instruction,
    hlo_opcode: str,
    comp: Computation,
    wrapper: Instruction | None,
    wrapper_comp: Computation | None,
) -> dict[str, Any]:
    """The fields of `Collective` that tell how it runs asynchronously: its opcode as the
    module writes it, its async wrapper and the computation that calls it, and whether the
    SPMD partitioner made it (marked on the collective or on its wrapper)."""
    return {
        "hlo_opcode": hlo_opcode if wrapper is None else f"async-start({hlo_opcode})",
        "is_async": hlo_opcode in ASYNC_STARTS or wrapper is not None,
        "wrapper": wrapper.name if wrapper is not None else "",
        "computation": comp.name if wrapper_comp is None else wrapper_comp.name,
        "spmd_generated": inst.frontend_attributes.get("is_spmd_generated") == "true"
        or (wrapper is not None and wrapper.frontend_attributes.get("is_spmd_generated") == "true"),
    }


def _source_of(
    module: HloModule, inst: Instruction, wrapper: Instruction | None
) -> tuple[str, str]:
    """The op_name and source location ("" when unknown) of a collective, from its own
    metadata, else from its async wrapper's."""
    source_inst = inst if inst.metadata or wrapper is None else wrapper
    location = module.source_location(source_inst)
    return source_inst.op_name, str(location) if location is not None else ""


def _collective(
    module: HloModule,
    comp: Computation,
    inst: Instruction,
    hlo_opcode: str,
    wrapper: Instruction | None,
    wrapper_comp: Computation | None,
) -> Collective:
    where = f"{module.path}: {inst.name}"
    opcode = hlo_opcode.removesuffix("-start")
    # Input: the operands' shapes (inside an async wrapper these are its parameters).
    in_shapes = [s for o in inst.operands if (s := operand_shape(comp, o)) is not None]
    in_leaves = [leaf for s in in_shapes for leaf in leaves(s)]
    out_shape = _out_shape(comp, inst, hlo_opcode, wrapper, wrapper_comp)
    out_leaves = leaves(out_shape)
    n_in = sum(leaf.bytes for leaf in in_leaves)
    n_out = sum(leaf.bytes for leaf in out_leaves)
    n_devices = _num_devices(module)
    if opcode == "collective-permute":
        t = _permute_traffic(inst, where, n_in)
    else:
        t = _group_traffic(inst, opcode, where, n_devices, (n_in, n_out))
    op_name, source = _source_of(module, inst, wrapper)
    pairs, groups, participants = t.pairs, t.groups, t.participants
    payload, sent, received, model = t.payload, t.sent, t.received, t.model
    channel = inst.attr("channel_id")
    dims = inst.attr("dimensions") or ""
    dtypes = sorted({leaf.dtype for leaf in in_leaves or list(out_leaves)})
    return Collective(
        name=inst.name,
        opcode=opcode,
        **_async_fields(inst, hlo_opcode, comp, wrapper, wrapper_comp),
        replica_groups=groups.groups,
        group_syntax=groups.syntax if opcode != "collective-permute" else "source_target_pairs",
        group_text=groups.text,
        source_target_pairs=pairs,
        participants=participants,
        dtype=",".join(dtypes),
        in_shape=", ".join(str(s) for s in in_shapes),
        out_shape=str(out_shape),
        in_bytes=n_in,
        out_bytes=n_out,
        payload_bytes=payload,
        sent_bytes=sent,
        received_bytes=received,
        model=model,
        reduction=_reduction(module, inst),
        channel_id=decimal(channel, MAX_ID) if channel else None,
        use_global_device_ids=(inst.attr("use_global_device_ids") or "") == "true",
        dimensions=tuple(int(d) for d in _INTS.findall(dims)),
        op_name=op_name,
        source=source,
    )


def is_collective(opcode: str) -> bool:
    """True for a collective opcode or the `-start` of an async collective pair."""
    return opcode in COLLECTIVES or opcode in ASYNC_STARTS


def find_collectives(module: HloModule) -> tuple[Collective, ...]:
    """Every collective of `module` in text order, async pairs and wrappers counted once.

    Raises CollectiveError (a ValueError naming the file and instruction) for replica groups
    or source-target pairs it cannot read.
    """
    wrapped: dict[str, tuple[Instruction, Computation]] = {}
    for comp, inst in module.instructions():
        if inst.opcode == "async-start":
            for name in inst.called_computations:
                wrapped[name] = (inst, comp)
    out: list[Collective] = []
    for comp, inst in module.instructions():
        if not is_collective(inst.opcode):
            continue
        wrapper, wrapper_comp = wrapped.get(comp.name, (None, None))
        out.append(_collective(module, comp, inst, inst.opcode, wrapper, wrapper_comp))
    return tuple(out)


# --- which pass made each collective ------------------------------------------------------------


@dataclass(frozen=True)
class ModuleState:
    """One module state in compile order: its label (`pipeline/pass` or a summary dump name),
    the pass whose work it shows, and its file."""

    index: int
    label: str
    pass_name: str
    path: str


@dataclass(frozen=True)
class Origin:
    """Where a collective first appears, and so what made it. `made_by` is one of:
    - `program`: already in the first stage (written by the user, e.g. shard_map's psum);
    - `spmd-partitioner`: first in a partitioning stage (SPMD_PASSES or after_spmd_partitioner);
    - `later-pass`: first after partitioning, in a collective pass such as
      reduce-scatter-creator or the all-reduce combiner (`pass_name` says which when per-pass
      dumps exist, else '');
    - `compiler`: first in after_optimizations with no partitioning stage to compare with;
    - `unknown`: in no stage.
    """

    collective: str
    opcode: str
    made_by: str
    stage: str
    pass_name: str
    path: str

    def to_json(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {
            "collective": self.collective,
            "opcode": self.opcode,
            "made_by": self.made_by,
            "stage": self.stage,
            "pass": self.pass_name,
            "path": self.path,
        }


_MODULE_PREFIX = re.compile(r"^(module_\d+)\.")


def stages_from_dump(paths: Iterable[Path]) -> tuple[ModuleState, ...]:
    """Returns the module states of one module's dump files in compile order.

    Per-pass dumps (`--xla_dump_hlo_pass_re=.*`) come in pass-index order when present, framed
    by `before_optimizations` and `*after_optimizations`; without them the summary dumps
    (before, after the SPMD partitioner when the backend wrote it, after optimizations) are the
    stages. A per-pass file `after_pipeline-start` shows the work of the pass the previous file
    names as `before_X`, so that stage is credited to X. Files of more than one module
    (`module_NNNN.` prefixes) raise ValueError.
    """
    files = sorted(Path(p) for p in paths if Path(p).suffix == ".txt")
    prefixes = {m.group(1) for p in files if (m := _MODULE_PREFIX.match(p.name))}
    if len(prefixes) > 1:
        raise ValueError(f"dump files of several modules given: {sorted(prefixes)}")
    stages: list[ModuleState] = []

    def summary(suffix: str) -> None:
        for p in files:
            if p.name.endswith(f"{suffix}.txt"):
                stages.append(ModuleState(len(stages), suffix, "", str(p)))
                return

    summary("before_optimizations")
    per_pass = sorted((info, p) for p in files if (info := pass_file_info(p)) is not None)
    previous_next = ""
    for (_, pipeline, pass_name), p in per_pass:
        m = XLA_PASS_FILE.match(p.name)
        credited = previous_next if pass_name == "pipeline-start" and previous_next else pass_name
        stages.append(ModuleState(len(stages), f"{pipeline}/{pass_name}", credited, str(p)))
        previous_next = (m["next"] or "") if m is not None else ""
    if not per_pass:
        summary("after_spmd_partitioner")
    summary("after_optimizations")
    return tuple(stages)


def _signature(opcode: str, shape: str) -> tuple[str, str, int]:
    """(sync opcode, dtypes, element count) of a result: survives layout changes, bitcasts
    and a decomposer splitting one operand into a tuple."""
    parts = leaves(parse_shape(shape))
    return opcode, ",".join(sorted({p.dtype for p in parts})), sum(p.elements for p in parts)


def _signatures(module: HloModule) -> set[tuple[str, str, int]]:
    return {
        _signature(i.opcode.removesuffix("-start"), _result_text(module, c, i))
        for c, i in module.instructions()
        if is_collective(i.opcode)
    }


def _result_text(module: HloModule, comp: Computation, inst: Instruction) -> str:
    if inst.opcode not in ASYNC_STARTS:
        return inst.shape_text
    done = _done_of(comp, inst)
    return done.shape_text if done is not None else inst.shape_text


def _is_spmd(stage: ModuleState) -> bool:
    return stage.label == "after_spmd_partitioner" or bool(
        SPMD_PASSES.search(stage.label) or SPMD_PASSES.search(stage.pass_name)
    )


def collective_origins(
    collectives: Sequence[Collective], stages: Sequence[ModuleState]
) -> tuple[Origin, ...]:
    """Returns, per collective, the first stage holding a collective of the same opcode, dtype
    and result element count, and what made it (see Origin). Unreadable stage files raise
    ParseError."""
    found = [(s, _signatures(parse_file(s.path))) for s in stages]
    partitioned = any(_is_spmd(s) for s in stages)
    out: list[Origin] = []
    for c in collectives:
        key = _signature(c.opcode, c.out_shape)
        hit = next(((i, s) for i, (s, sigs) in enumerate(found) if key in sigs), None)
        if hit is None:
            out.append(Origin(c.name, c.opcode, "unknown", "", "", ""))
            continue
        position, stage = hit
        if position == 0:
            made_by, pass_name = "program", ""
        elif _is_spmd(stage):
            made_by, pass_name = "spmd-partitioner", stage.pass_name
        elif stage.label == "after_optimizations":
            made_by, pass_name = ("later-pass" if partitioned else "compiler"), ""
        else:
            made_by, pass_name = "later-pass", stage.pass_name
        out.append(Origin(c.name, c.opcode, made_by, stage.label, pass_name, stage.path))
    return tuple(out)
