"""The analysis stage's one writer: the per-variant files its producers return.

Each producer (harness.analyze.sections, a frontend's own sections, comm, ranking) returns
its summary section and the records of the files it derives, and writes nothing; `write` puts them in the
variant's folder, each through harness.records.run_files at the path harness.store.runfolder gives it
(events.parquet through harness.records.events_file), tlparse's pattern: parsers return
outputs, one driver writes them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.records import events_file, run_files
from harness.records.run_files import (
    CommFile,
    CompileFile,
    CostFile,
    FusionsFile,
    KernelsFile,
    PassesFile,
    RankingFile,
    TimelineFile,
    TorchCompileFile,
)
from harness.store.runfolder import VariantFolder


@dataclass(frozen=True)
class VariantFiles:
    """The analysis files of one variant, as its producers returned them (None: not made)."""

    fusions: FusionsFile | None = None
    passes: PassesFile | None = None
    compile: CompileFile | TorchCompileFile | None = None
    cost: CostFile | None = None
    kernels: KernelsFile | None = None
    # events.parquet: its Arrow tables in order (harness.records.events_file), not a record.
    events: tuple[Any, ...] | None = None
    ranking: RankingFile | None = None
    comm: CommFile | None = None
    timeline: TimelineFile | None = None

    def with_(self, other: VariantFiles) -> VariantFiles:
        """Returns these files with every file `other` made added (a later producer's win)."""
        made = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) is not None
        }
        return dataclasses.replace(self, **made)


NONE = VariantFiles()


def write(folder: VariantFolder, files: VariantFiles) -> None:
    """Writes every file of `files` into the variant's folder."""
    paths = {
        "fusions": folder.fusions,
        "passes": folder.passes,
        "compile": folder.compiles,
        "cost": folder.cost,
        "kernels": folder.kernels,
        "ranking": folder.ranking,
        "comm": folder.comm,
        "timeline": folder.timeline,
    }
    for f in dataclasses.fields(files):
        record = getattr(files, f.name)
        if f.name == "events" and record is not None:
            events_file.write(folder.events, record)
        elif record is not None:
            run_files.write(paths[f.name], record)
