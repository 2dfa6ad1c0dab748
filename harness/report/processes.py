"""The report's section on a study across processes: a row per process of each variant (step
time, what its profile holds, exposed communication, the straggler), the collectives within
and across processes, the faults, and the spread findings.

Built from processes.json only (harness.analyze.processes wrote it); a run without one (a
single process) gets no section.
"""

from __future__ import annotations

from harness.common import fmt
from harness.common.fmt import MISSING
from harness.records.processes import ProcessesSummary
from harness.records.processes import load as load_processes
from harness.report.doc import Block, Bullets, Heading, Para, Table
from harness.saved.run import SavedRun

PROCESSES_HEADER = (
    "variant", "process", "host", "step (95% CI)", "events / step", "attributed",
    "communication / step", "exposed", "cross-process exposed", "within-process exposed",
    "straggler", "same program",
)  # fmt: skip
COLLECTIVES_HEADER = (
    "variant", "collective", "opcode", "scope", "device groups", "processes",
    "time / step per process", "exposed per process",
)  # fmt: skip


def _groups(groups: tuple[tuple[int, ...], ...]) -> str:
    return " ".join("{" + ",".join(map(str, g)) + "}" for g in groups) or MISSING


def _per_process(values: dict[str, float]) -> str:
    return ", ".join(f"p{r} {fmt.ms(t)}" for r, t in sorted(values.items())) or MISSING


def processes_table(summary: ProcessesSummary) -> Table:
    """Returns one row per process of each variant."""
    rows = []
    for name, v in summary.variants.items():
        for p in v.processes:
            rows.append(
                (
                    name,
                    str(p.rank),
                    fmt.text(p.host),
                    fmt.step(p.step_s, p.step_ci95_s),
                    f"{p.events_per_step:g}" if p.events_per_step is not None else MISSING,
                    fmt.pct(p.attributed_fraction),
                    fmt.ms(p.communication_s),
                    fmt.ms(p.exposed_s),
                    fmt.ms(p.cross_process_exposed_s),
                    fmt.ms(p.within_process_exposed_s),
                    "yes" if v.straggler == p.rank and len(v.processes) > 1 else "",
                    {True: "yes", False: "NO", None: MISSING}[v.same_program],
                )
            )
    return Table(PROCESSES_HEADER, tuple(rows))


def collectives_table(summary: ProcessesSummary) -> Table | None:
    """Returns one row per collective of every variant, or None when none has one."""
    rows = tuple(
        (
            name,
            c.name,
            c.opcode,
            c.scope.replace(
                "_", "-"
            ),  # the harness's own word: `cross_process` or `within_process`
            _groups(c.device_groups),
            _groups(c.process_groups),
            _per_process(c.time_s),
            _per_process(c.exposed_s),
        )
        for name, v in summary.variants.items()
        for c in v.collectives
    )
    return Table(COLLECTIVES_HEADER, rows) if rows else None


def _spread_line(name: str, summary: ProcessesSummary) -> str | None:
    v = summary.variants[name]
    if v.spread is None or v.spread_ci95 is None:
        return None
    lo, hi = v.spread_ci95
    return (
        f"`{name}`: process {v.straggler} over process {v.fastest}, {v.spread:.3f}× "
        f"(95% CI {lo:.3f}–{hi:.3f})"
    )


def processes_blocks(run: SavedRun) -> list[Block]:
    """Returns the section on the processes of the run, or nothing for a single process."""
    summary = load_processes(run.path)
    if summary is None:
        return []
    hosts = sorted(set(summary.hosts.values()))
    out: list[Block] = [
        Heading(2, "Processes", "processes"),
        Para(
            f"{summary.count} processes of {summary.devices} devices each, joined by "
            f"jax.distributed (launcher `{summary.launcher}`), on "
            f"{', '.join(f'`{h}`' for h in hosts) or MISSING}. Each process's step time is the "
            "median of its own timing rounds, which every process started together after a "
            "barrier; the straggler is the slowest. Communication and exposed time are per step, "
            "mean over the process's devices, from its own profile (`<host>-p<rank>.xplane.pb` "
            "in the variant's XProf session, `profile/steady/plugins/profile/<run_id>/`). "
            "Same program: every process's fingerprint of its optimized program is equal."
        ),
        processes_table(summary),
    ]
    table = collectives_table(summary)
    if table is not None:
        out += [
            Para(
                "Collectives by scope: cross-process when a device group holds devices of two "
                "processes, with each one's time and exposed time per step in each process."
            ),
            table,
        ]
    spreads = [line for name in summary.variants if (line := _spread_line(name, summary))]
    if spreads:
        out += [Para("The spread of step times (straggler over fastest, paired rounds):"),
                Bullets(tuple(spreads))]  # fmt: skip
    recorded = run.summary.findings
    findings = recorded.processes if recorded is not None else ()
    out.append(
        Bullets(tuple(f"{f.what} (rule `{f.rule}`)" for f in findings))
        if findings
        else Para(
            "No spread is resolvable: no straggler's interval lies above 1.0 by more than "
            "the run's noise floor"
            + (
                " (the run could not time: a busy machine, or no A/A pair)."
                if summary.noise_resolved is False
                else "."
            )
        )
    )
    if summary.faults:
        out += [
            Para("Faults of processes (processes/faults.json):"),
            Bullets(
                tuple(
                    f"`{f.variant or MISSING}` ({f.stage}): {f.how}"
                    + (
                        "; a new group ran the rest"
                        if f.launcher == "local"
                        else "; the run stopped"
                    )
                    for f in summary.faults
                )
            ),
        ]
    return out
