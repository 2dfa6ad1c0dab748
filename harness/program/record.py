"""The input of a program's analysis: one module of the dump, parsed (`ModuleInput`).

What the analysis finds is harness.records.program's (`ProgramAnalysis` and its rows, the
roofs, analysis.json's record): the report reads those without loading any HLO code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a module's parsed input, never read back: the report loads no HLO code
    from harness.hlo.clusters import Cluster
    from harness.hlo.cost import ModuleCost
    from harness.hlo.parser import HloModule
    from harness.hlo.reverse_map import ReverseMap

ProgramKey = tuple[str, int | None]  # (HLO module name, program id / XLA module number)


@dataclass(frozen=True)
class ModuleInput:
    """One analysed module: its dump key, program, parsed HLO, clusters, costs, reverse map."""

    key: str
    name: str
    program_id: int | None
    hlo: HloModule = field(repr=False, compare=False)
    clusters: tuple[Cluster, ...] = field(repr=False, compare=False)
    cost: ModuleCost = field(repr=False, compare=False)
    reverse: ReverseMap | None = field(default=None, repr=False, compare=False)

    @property
    def program(self) -> ProgramKey:
        return (self.name, self.program_id)
