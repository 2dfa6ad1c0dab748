"""Shapes an HLO instruction reads and writes, looked up in its computation: what the cost
model (harness.hlo.cost) counts elements and bytes of, and the shapes the clusters' library
calls (harness.hlo.clusters) and the collectives (harness.hlo.collectives) are read from."""

from __future__ import annotations

import math

from harness.hlo.instruction import Instruction
from harness.hlo.parser import Computation
from harness.hlo.shapes import ArrayShape, Shape, TupleShape, leaves


def elements(shape: Shape | None) -> int:
    """The elements of every array of `shape` (0 for none)."""
    return sum(s.elements for s in leaves(shape)) if shape is not None else 0


def unbounded(shape: Shape | None) -> bool:
    """True when some dimension is `?` (no bound; parsed as -1)."""
    return shape is not None and any(d < 0 for s in leaves(shape) for d in s.dims)


def first_array(shape: Shape | None) -> ArrayShape | None:
    """The first array of `shape`, or None."""
    if shape is None:
        return None
    arrays = leaves(shape)
    return arrays[0] if arrays else None


def operand_shape(comp: Computation, operand: str) -> Shape | None:
    """The shape of `operand` (`name` or `name#i`, the i-th element of a tuple) in `comp`."""
    name, _, index = operand.partition("#")
    inst = comp.get(name)
    if inst is None:
        return None
    shape = inst.shape
    if index.isdigit() and isinstance(shape, TupleShape):
        i = int(index)
        return shape.elements[i] if i < len(shape.elements) else None
    return shape


def contracted(lhs: Shape | None, dims: tuple[int, ...]) -> int:
    """The product of `lhs`'s contracted dimensions (a dot's K)."""
    if not isinstance(lhs, ArrayShape):
        return 0
    return math.prod(lhs.dims[d] for d in dims if d < len(lhs.dims))


def operand_array(comp: Computation, inst: Instruction, i: int) -> ArrayShape | None:
    """The i-th operand's first array shape, or None where there is none."""
    return first_array(operand_shape(comp, inst.operands[i])) if len(inst.operands) > i else None


def operand_elements(comp: Computation, inst: Instruction, i: int) -> int:
    """The elements of the i-th operand (0 where there is none)."""
    return elements(operand_shape(comp, inst.operands[i])) if len(inst.operands) > i else 0
