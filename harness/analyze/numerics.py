"""Each variant's result against the baseline's and eager's (distances.json), from the
capture's kept outputs and per-leaf errors (numerics.json, outputs.npz).

The analysis writes it once per variant that kept its outputs, beside the capture's files;
the numerics rules (harness.findings.numerics) judge it, so `python -m harness.commands.migrate`
re-judges a saved run without opening an array. The estimate is harness.records.numerics_effect's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from harness.common import terminal, userfiles
from harness.records import numerics_effect, run_files
from harness.records.numerics import DistancesFile
from harness.records.numerics_effect import Result
from harness.records.summary import RunSummary
from harness.store.runfolder import RunFolder


def kept_result(folder: RunFolder, name: str) -> Result | None:
    """A variant's per-leaf errors, kept values and references; None when it kept none."""
    vf = folder.variant(name)
    accuracy = run_files.load_if_present(run_files.NUMERICS, vf.numerics)
    if accuracy is None or accuracy.outputs is None:
        return None
    path, kept = vf.root / accuracy.outputs, [leaf.kept for leaf in accuracy.leaves]
    try:
        values = numerics_effect.read_outputs(path, kept)
        references = numerics_effect.read_outputs(path, kept, "r")
    except userfiles.Unreadable as e:  # one bad file costs its variant's distances, no more
        print(f"warning: {terminal.one_line(e)}; its distances are left out", file=sys.stderr)
        return None
    if values is None or references is None:
        return None
    return Result(accuracy, values, references)


def _first(
    kept: dict[str, Result], roles: Mapping[str, tuple[str, ...]], role: str, like: Result
) -> str | None:
    """The first variant with `role` whose result compares leaf by leaf with `like`."""
    return next(
        (
            name
            for name, have in roles.items()
            if name in kept
            and role in have
            and numerics_effect.comparable(kept[name], like) is None
        ),
        None,
    )


def distances_of(
    workdir: Path, roles: Mapping[str, tuple[str, ...]], baseline: str
) -> dict[str, DistancesFile]:
    """Returns each variant's distances from its baseline (the first baseline-role variant of
    the same leaves, shapes and dtypes, else the run's `baseline`), eager's spread included;
    `roles` are the variants' roles, in config order."""
    folder = RunFolder(workdir)
    kept = {n: k for n in roles if (k := kept_result(folder, n)) is not None}
    out: dict[str, DistancesFile] = {}
    for name, mine in kept.items():
        base = _first(kept, roles, "baseline", mine) or baseline
        if base == name or base not in kept:
            continue
        eager = _first(kept, roles, "eager", kept[base])
        out[name] = numerics_effect.distances(
            base,
            mine,
            kept[base],
            (eager, kept[eager]) if eager is not None and eager != name else None,
        )
    return out


def write_distances(workdir: Path, summary: RunSummary) -> None:
    """Writes distances.json of every variant that has a baseline to be compared with."""
    folder = RunFolder(workdir)
    roles = {name: v.identity.roles for name, v in summary.variants.items()}
    for name, record in distances_of(workdir, roles, summary.baseline).items():
        run_files.write(folder.variant(name).distances, record)
