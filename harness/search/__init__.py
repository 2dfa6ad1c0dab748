"""run_search(config, workdir, session): the fastest XLA configuration of one variant, measured.

Each candidate (harness.search.space: XLA options, and a program's own knobs and dtypes) is
compiled in the supervised worker, its numerics checked against the float64 reference and its
result against the default's, its peak memory read, and its program fingerprinted from its saved ladder
(harness.hlo.fingerprint: optimized HLO with backend configs, thunks, emitted code). A
candidate whose program is one already seen is recorded as `same_program_as` and never timed:
which options change nothing for this program is a finding of its own. The distinct programs are
timed together in interleaved rounds, always with the default and the lower bound, and judged
against the default from paired rounds (harness.common.stats).

`grid` compiles every combination and times the distinct programs in one stage; `coordinate`
starts from the default and changes one option at a time, moving to a value only when it is
resolved as faster than the current best. Both stop at the budget, seconds or candidates.
A candidate that changes the result past the compiler-effect allowance, or whose peak is over
`search.max_peak_memory`, is timed but never the best (harness.search.constraints); the best's
gain is then taken apart by timing it with each dimension reset to the default's.
Writes search.json (harness.records.search.SearchRecord) and a report of its own.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from harness.analyze import judging, verdicts
from harness.common import stats
from harness.config import ConfigError, LoadedConfig
from harness.config.experiment import Dump, Experiment, SearchOptions, Variant
from harness.hlo.fingerprint import fingerprint_dir
from harness.records import invocations, run_files
from harness.records.search import Attribution, Candidate, SearchRecord
from harness.records.summary import SCHEMA_VERSION, CaptureRecord, TimingRecord, Verdict
from harness.report import write_report
from harness.search import constraints, space
from harness.store import io
from harness.store.records import to_json
from harness.store.runfolder import RunFolder, stage_timing
from harness.study import lifecycle
from harness.study.run import Supervisor, manifest_for
from harness.study.session import Session
from harness.study.workerproc import WorkerDied

# Stop starting new candidates once this share of the budget is spent: timing still needs time.
BUDGET_SHARE_FOR_COMPILES = 0.7


def search_experiment(exp: Experiment, variants: list[Variant]) -> Experiment:
    """The experiment a search captures: its candidates, light captures (no profiles, no
    per-pass dumps, no recompile), the default as the baseline."""
    return dataclasses.replace(
        exp,
        variants=tuple(variants),
        select=(),
        baseline=space.DEFAULT,
        profile=dataclasses.replace(exp.profile, enabled=False),
        measure=dataclasses.replace(exp.measure, recompile=False, steps=min(exp.measure.steps, 5)),
        dump=Dump(passes=False, emitters=True),
        search=SearchOptions(),  # the worker captures the candidates; the search runs here
    )


def lower_bound(exp: Experiment, base: Variant) -> Variant | None:
    """The config's lower-bound variant of the base's size and platforms, if any."""
    for v in exp.variants:
        if "lower_bound" in v.resolved_roles:
            p, q = v.problem, base.problem
            if (p.m, p.k, p.n, p.batch) == (q.m, q.k, q.n, q.batch):
                return v
    return None


def _verdicts(
    timed: TimingRecord,
    pairs: list[tuple[str, str]],
    gate: judging.StageGate,
    exp: Experiment,
) -> dict[tuple[str, str], Verdict]:
    """Returns the verdict of each (name, against) pair of one timing stage, decided together:
    Holm's correction over the stage's pairs, each against its A/A floor (harness.analyze.judging,
    the gate the study computes too)."""
    found = [
        verdicts.Pending(name, against, against, estimate, False)
        for name, against in pairs
        if (estimate := verdicts.estimate(timed, name, against)) is not None
    ]
    return judging.judge(found, gate, _limits(exp))


def _limits(exp: Experiment) -> judging.TimingLimits:
    return judging.limits_from(exp.timing)


@dataclasses.dataclass
class Search:
    """The state of one search: what was compiled, which programs were seen, what was timed."""

    config: LoadedConfig
    workdir: Path
    supervisor: Supervisor
    base: Variant
    bound: Variant | None
    started: float = dataclasses.field(default_factory=time.perf_counter)
    points: dict[str, space.Point] = dataclasses.field(default_factory=dict)
    records: dict[str, Candidate] = dataclasses.field(default_factory=dict)
    programs: dict[str, str] = dataclasses.field(default_factory=dict)  # digest -> first name
    stages: int = 0
    stopped: str | None = None
    # Why a timing stage could call no difference at all (a busy machine, no A/A pair).
    unresolved: list[str] = dataclasses.field(default_factory=list)
    gate: judging.StageGate | None = None  # the last timing stage's

    @property
    def exp(self) -> Experiment:
        return self.config.experiment

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def out_of_budget(self) -> bool:
        s = self.exp.search
        if len(self.points) >= s.max_candidates + 1:
            self.stopped = f"the candidate budget ({s.max_candidates}) was reached"
        elif self.elapsed() > BUDGET_SHARE_FOR_COMPILES * s.budget_s:
            self.stopped = f"the time budget ({s.budget_s:.0f} s) was nearly spent"
        return self.stopped is not None

    def variants(self) -> list[Variant]:
        out = [space.variant_for(self.base, n, p) for n, p in self.points.items()]
        return ([self.bound] if self.bound is not None else []) + out

    def evaluate(self, points: list[space.Point], beyond_budget: bool = False) -> list[str]:
        """Compiles the new points; returns the names of those whose programs are new.
        `beyond_budget`: the attribution's points, compiled past the candidate budget."""
        fresh = []
        for point in (space.normalised(p, self.base) for p in points):
            if point in self.points.values():
                continue
            if self.points and not beyond_budget and self.out_of_budget():
                break
            name = space.DEFAULT if not self.points else f"c{len(self.points):02d}"
            self.points[name] = point
            fresh.append(name)
        if not fresh:
            return []
        exp = search_experiment(self.exp, self.variants())
        self.supervisor.configure(exp)
        wanted = [n for n in fresh]
        if self.bound is not None and self.bound.name not in self.records:
            wanted.insert(0, self.bound.name)
        planned = space.planned(self.exp.search.space, self.exp.search.strategy)
        planned = min(planned, self.exp.search.max_candidates + 1)
        stage = self.stages + 1  # the timing stage these candidates go to

        def position(name: str) -> str:
            if self.bound is not None and name == self.bound.name:
                return f"stage {stage}: the lower bound"
            number = list(self.points).index(name) + 1
            return f"stage {stage}: candidate {number} of {max(planned, number)}"

        captured = self.supervisor.capture(wanted, False, position=position)
        distinct = []
        for name in wanted:
            record = captured[name]
            point = self.points.get(name, space.Point())
            self.records[name] = self._candidate(name, point, record)
            if self.records[name].status == "ok":
                distinct.append(name)
        return [n for n in distinct if n != (self.bound.name if self.bound else None)]

    def _candidate(self, name: str, point: space.Point, record: CaptureRecord) -> Candidate:
        variant = space.variant_for(self.base, name, point)
        base = Candidate(
            name=name,
            xla_options=dict(variant.xla_options),
            w_dtype=point.w_dtype,
            gelu=point.gelu,
            kwargs=dict(variant.program.kwargs),
            params_dtype=point.params_dtype,
            inputs_dtype=point.inputs_dtype,
            changed=point.describe(self.base) if name != space.DEFAULT else "as configured",
            status="ok",
            reason=None,
            fingerprint=None,
            same_program_as=None,
            compile_s=record.pauses.xla_compile_s if record.pauses else None,
            first_call_s=record.pauses.first_call_s if record.pauses else None,
        )
        if record.status != "ok":
            return dataclasses.replace(base, status="failed", reason=record.reason)
        peak, source = constraints.peak(self.workdir, name, record.memory)
        bound = self.bound.name if self.bound else None
        effect = (
            constraints.result_change(self.workdir, name)
            if name not in (space.DEFAULT, bound)
            else None
        )
        base = dataclasses.replace(base, peak_bytes=peak, peak_source=source, effect=effect)
        base = dataclasses.replace(
            base, rejected=constraints.rejected(base, self.exp.search.max_peak_memory)
        )
        n = record.numerics
        base = dataclasses.replace(
            base, rel_fro_err=n.rel_fro_err if n else None, numerics_ok=n.ok if n else None
        )
        if n is not None and not n.ok:
            return dataclasses.replace(
                base, status="wrong", reason=f"numerics: {n.rel_fro_err:.2e} > {n.tolerance:.0e}"
            )
        found = fingerprint_dir(RunFolder(self.workdir).variant(name).ir)
        if found is None:
            return dataclasses.replace(base, status="failed", reason="no optimized HLO was dumped")
        base = dataclasses.replace(base, fingerprint=found.digest)
        first = self.programs.setdefault(found.digest, name)
        if first != name:
            return dataclasses.replace(base, status="same_program", same_program_as=first)
        return base

    def timed_stage(self, order: list[str]) -> TimingRecord:
        """Times `order` together in the next stage and judges its gate."""
        self.stages += 1
        print(f"-- timing {len(order)} programs together (stage {self.stages})", flush=True)
        timed = self.supervisor.time(order, stage_timing(self.stages))
        self.gate = judging.gate(timed, _limits(self.exp))
        return timed

    def time(self, names: list[str]) -> TimingRecord:
        """Times the distinct programs `names` with the default and the lower bound."""
        order = [space.DEFAULT, *[n for n in names if n != space.DEFAULT]]
        ran = self._bound_that_ran()
        if ran is not None:
            order.append(ran)
        timed = self.timed_stage(order)
        assert self.gate is not None  # timed_stage set it
        self.unresolved += [f"timing stage {self.stages}: {r}" for r in self.gate.withheld]
        judged = _verdicts(timed, self._judged_pairs(order), self.gate, self.exp)
        medians = _median_steps(timed)
        for name in order:
            entry = timed.variants.get(name)
            if entry is None or not entry.round_step_s or name not in self.records:
                continue
            self.records[name] = self._timed(name, list(entry.round_step_s), judged, medians)
        return timed

    def _bound_that_ran(self) -> str | None:
        """The lower bound's name where it compiled and ran: only then is it timed beside
        the rest."""
        if self.bound is None:
            return None
        record = self.records.get(self.bound.name, None)
        return self.bound.name if record and record.status == "ok" else None

    def _judged_pairs(self, order: list[str]) -> list[tuple[str, str]]:
        """Each timed program against the default, and against the lower bound where there
        is one."""
        pairs = [(n, space.DEFAULT) for n in order if n != space.DEFAULT]
        if self.bound:
            pairs += [(n, self.bound.name) for n in order if n != self.bound.name]
        return pairs

    def _timed(
        self,
        name: str,
        rounds: list[float],
        judged: dict[tuple[str, str], Verdict],
        medians: dict[str, float],
    ) -> Candidate:
        """The candidate `name` with its step time, its verdicts and this stage's references."""
        bound = self.bound.name if self.bound else None
        return dataclasses.replace(
            self.records[name],
            step_s=stats.median(rounds),
            step_ci95_s=stats.bootstrap_ci(rounds),
            vs_default=judged.get((name, space.DEFAULT)),
            vs_lower_bound=judged.get((name, bound)) if bound else None,
            stage=self.stages,
            default_step_s=medians.get(space.DEFAULT),
            lower_bound_step_s=medians.get(bound) if bound else None,
        )


def _median_steps(timed: TimingRecord) -> dict[str, float]:
    """Each timed program's median step over its rounds."""
    return {
        n: stats.median(list(v.round_step_s)) for n, v in timed.variants.items() if v.round_step_s
    }


def grid_search(search: Search) -> None:
    points = list(space.grid(search.exp.search.space))
    distinct = search.evaluate([space.Point(), *points])
    search.time(distinct)


def coordinate_search(search: Search) -> None:
    current_name = space.DEFAULT
    search.evaluate([space.Point()])
    search.time([])
    for axis, values in space.axes(search.exp.search.space):
        current = search.points[current_name]
        steps = space.coordinate_step(current, axis, values, search.base)
        if not steps or search.stopped:
            continue
        distinct = search.evaluate(steps)
        if not distinct:
            continue
        timed = search.time([current_name, *distinct])
        # The stage's gate, computed once when it was timed.
        pairs = [(n, current_name) for n in distinct]
        assert search.gate is not None  # search.time set it
        judged = _verdicts(timed, pairs, search.gate, search.exp)
        best = None
        for name in distinct:
            verdict = judged.get((name, current_name))
            if (
                verdict
                and verdict.verdict == stats.FASTER
                and not search.records[name].rejected  # a trade or over the cap: never moved to
                and (best is None or verdict.ratio < best[1])
            ):
                best = (name, verdict.ratio)
        if best is not None:
            current_name = best[0]
            print(
                f"   moved to {current_name} ({search.records[current_name].changed})", flush=True
            )


def best_of(records: dict[str, Candidate], lower_bound: str | None) -> str | None:
    """The fastest candidate resolved as faster than the default that breaks no constraint
    (harness.search.constraints), else the default; where the default itself breaks one (its
    peak is over the cap), the eligible candidate of the lowest ratio to it, else none. The
    lower bound is timed beside them as a reference: it computes less, so it is never a
    candidate."""
    faster = [
        c
        for c in records.values()
        if c.vs_default is not None
        and c.vs_default.verdict == stats.FASTER
        and constraints.eligible(c, lower_bound)
    ]
    if faster:
        return min(faster, key=lambda c: c.vs_default.ratio).name
    default = records.get(space.DEFAULT)
    if default is None or not default.rejected:
        return space.DEFAULT
    timed = [
        c
        for c in records.values()
        if constraints.eligible(c, lower_bound) and c.vs_default and c.vs_default.ratio
    ]
    return min(timed, key=lambda c: c.vs_default.ratio).name if timed else None


def _inverse(v: Verdict, against: str) -> Verdict:
    """The default's time over the best's from the best's verdict against the default."""
    flip = {stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER}
    ci = (1 / v.ci95[1], 1 / v.ci95[0]) if v.ci95 else None
    ratio = 1 / v.ratio if v.ratio else None
    return dataclasses.replace(
        v, against=against, ratio=ratio, ci95=ci, verdict=flip.get(v.verdict, v.verdict)
    )


def attribute(search: Search, best: str | None) -> tuple[tuple[Attribution, ...], str | None]:
    """Takes the best candidate's gain apart: each dimension it sets (harness.search.
    constraints.dimensions) reset to the default's alone, compiled (past the candidate budget)
    and timed beside the best in one stage; the ablated time over the best's is what that
    dimension gave. One dimension is the best's own ratio to the default, inverted. Returns the
    attributions and, where there are none, why."""
    if best is None or best == space.DEFAULT or best not in search.points:
        return (), "no best candidate other than the default"
    point, record = search.points[best], search.records[best]
    dims = constraints.dimensions(point)
    if len(dims) == 1 and record.vs_default is not None:
        (dim, _), gain = dims[0], _inverse(record.vs_default, best)
        return (Attribution(dim, "all of it", space.DEFAULT, gain, record.stage),), None
    if search.elapsed() > search.exp.search.budget_s:
        return (), f"the time budget ({search.exp.search.budget_s:.0f} s) was spent"
    ablated = _ablations(search, dims)
    judged = _timed_against(search, best, ablated)
    same = Verdict(against=best, ratio=1.0, ci95=None, verdict=stats.SAME_PROGRAM)
    out = []
    for (dim, p), name in zip(dims, ablated.values(), strict=True):
        gain = same if name == best else judged.get((name, best)) if name else None
        reset = _reset_words(point, p, search.base)
        out.append(Attribution(dim, reset, name or "", gain, search.stages))
    return tuple(out), None


def _ablations(search: Search, dims: list[tuple[str, space.Point]]) -> dict[str, str | None]:
    """Compiles each dimension's ablation (past the candidate budget); returns each
    dimension's program by its candidate's name (the first of a program seen before), None
    where it failed."""
    search.evaluate([p for _, p in dims], beyond_budget=True)
    by_point = {p: n for n, p in search.points.items()}
    ablated = {}
    for dim, p in dims:
        c = search.records.get(by_point.get(space.normalised(p, search.base), ""))
        ablated[dim] = c.same_program_as or c.name if c and c.status != "failed" else None
    return ablated


def _timed_against(
    search: Search, best: str, ablated: dict[str, str | None]
) -> dict[tuple[str, str], Verdict]:
    """Times the ablations beside the best in one stage; returns each one's verdict against
    the best."""
    order = [best, *dict.fromkeys(n for n in ablated.values() if n and n != best)]
    timed = search.timed_stage(order)
    assert search.gate is not None  # timed_stage set it
    pairs = [(n, best) for n in order if n != best]
    return _verdicts(timed, pairs, search.gate, search.exp)


def _reset_words(point: space.Point, ablated: space.Point, base: Variant) -> str:
    """What the ablation set back, in the candidates' words."""
    mine = set(point.describe(base).split(", "))
    left = set(ablated.describe(base).split(", "))
    return ", ".join(sorted(mine - left)) or "nothing that changes the program"


def _compiled(search: Search) -> list[tuple[space.Point, str]]:
    return [
        (search.points[n], c.fingerprint)
        for n, c in search.records.items()
        if n in search.points and c.fingerprint
    ]


def no_effect(search: Search) -> tuple[str, ...]:
    """Options that never changed the program where they can act: each candidate that set
    one compiled to the same program as the candidate it differs from by that option alone.
    In a coordinate search that partner is the point it was tried from, which is not always
    the default; an option that acts only with another (space.ACTS_ONLY_WITH) counts only
    where that other is set."""
    axes = [a for a, _ in space.axes(search.exp.search.space)]
    return space.unchanged_axes(axes, _compiled(search), search.base.xla_options)


def not_tried(search: Search) -> dict[str, str]:
    """Options compiled only where they cannot act, each with what it needs."""
    axes = [a for a, _ in space.axes(search.exp.search.space)]
    return space.not_tried_where_acts(axes, _compiled(search), search.base.xla_options)


def run_search(config: LoadedConfig, workdir: Path, session: Session) -> int:
    """Runs the config's search into `workdir`; returns 0, 1 when a fault stopped it (a disk
    full, a worker no candidate owns), or 130 when interrupted. The lock, the manifest,
    `latest`, signals and faults are harness.study.lifecycle's."""
    exp = config.experiment
    base = exp.variant(exp.search.base)
    bound = lower_bound(exp, base)
    with lifecycle.running(
        workdir,
        {**manifest_for(config, workdir, session.environment), "kind": "search"},
        latest=True,
        stop=session.kill,
        faults=(WorkerDied, ConfigError, OSError),
    ) as run:
        supervisor = Supervisor(session, workdir, search_experiment(exp, [base]))
        search = Search(config, workdir, supervisor, base, bound)
        if exp.search.strategy == "grid":
            grid_search(search)
        else:
            coordinate_search(search)
        held = search_record(search)
        attribution = attribute(search, held.best) if not held.unresolved else ((), None)
        supervisor.ceilings()
        session.worker.close(workdir)
        record = search_record(search, *attribution)
        io.write_json(RunFolder(workdir).search, to_json(record))
        # The status is final before the report (and the results index) read it.
        run.settle("complete", wall_s=search.elapsed())

        write_report(workdir, workdir.parent.parent)  # the results root's index too
    if run.stopped is not None:
        return _stopped(run.stopped, again_command(run.manifest, workdir))
    if record.best is None and search.unresolved:
        print(f"best: none: the search could not resolve differences ({search.unresolved[0]})")
    elif record.best is None:
        print("best: none: no candidate meets the constraints (search.max_peak_memory)")
    else:
        print(
            f"best: {record.best} ({search.records[record.best].changed}); "
            f"{record.same_program_count} candidates were the same program as another"
        )
    for name in record.rejected_faster:
        c = search.records[name]
        peak = f"; peak {c.peak_bytes / 2**30:.2f} GiB" if c.peak_bytes else ""
        print(f"rejected though faster: {name} ({c.changed}): {', '.join(c.rejected)}{peak}")
    for o, need in record.not_tried_where_acts.items():
        print(f"not tried where it acts: {o} (needs {need})", flush=True)
    print(f"report: {workdir / 'report.md'}", flush=True)
    return 0


def again_command(manifest: dict[str, Any], workdir: Path) -> str:
    """The command that starts the search in `workdir` again as it was started (a second
    form after `, or: `; harness.records.invocations), so that it pastes as printed."""
    record = run_files.from_document(run_files.MANIFEST, manifest, str(workdir))
    return ", or: ".join(invocations.start_commands(record, workdir))


def _stopped(stop: lifecycle.Stop, again: str) -> int:
    """Says why the search stopped early and the command that starts it again; returns the
    exit status."""
    if stop.status == "interrupted":
        print(
            f"interrupted ({stop.reason}): the search is not resumable; start it again with: "
            f"{again}",
            file=sys.stderr,
        )
    else:
        e = stop.error
        where = f"{e.filename}: " if isinstance(e, OSError) and e.filename else ""
        hint = stop.then(f"; the search is not resumable: start it again with: {again}")
        print(f"error: {where}{stop.reason}{hint}", file=sys.stderr, flush=True)
    return stop.exit_code


def search_record(
    search: Search, attribution: tuple[Attribution, ...] = (), note: str | None = None
) -> SearchRecord:
    """search.json's record of a finished search. A search whose timing failed its own A/A
    check names no best configuration."""
    exp, base, bound = search.exp, search.base, search.bound
    bound_name = bound.name if bound else None
    best = None if search.unresolved else best_of(search.records, bound_name)
    options = search.records[best].xla_options if best in search.records else {}
    records = list(search.records.values())
    return SearchRecord(
        schema_version=SCHEMA_VERSION,
        base=base.name,
        lower_bound=bound.name if bound else None,
        strategy=exp.search.strategy,
        budget_s=exp.search.budget_s,
        wall_s=search.elapsed(),
        stopped=search.stopped,
        candidates=tuple(search.records.values()),
        same_program_count=sum(1 for c in search.records.values() if c.status == "same_program"),
        no_effect=no_effect(search),
        not_tried_where_acts=not_tried(search),
        best=best,
        best_xla_options=dict(options),
        best_xla_flags=space.xla_flags(options),
        unresolved=tuple(search.unresolved),
        max_peak_memory=exp.search.max_peak_memory,
        leaders=constraints.leaders(records, best, bound_name),
        rejected_faster=constraints.rejected_faster(records, best),
        attribution=attribution,
        attribution_note=note,
    )
