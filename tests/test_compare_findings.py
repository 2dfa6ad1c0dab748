"""compare reads both runs' findings records (issue 25): a timing finding is changed only when
the two intervals are disjoint, else the same within noise; findings of one run appear or
vanish; no verdict for a run that failed its A/A check. Constructed runs, no study."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.findings.compare import finding_changes
from harness.records.compare import APPEARED, CHANGED, SAME, VANISHED, WITHIN_NOISE
from harness.records.findings import Findings, MemoryFinding, Observation, TimingFinding
from harness.records.summary import Noise, RunSummary

RESOLVED = Noise(baseline="xla", self_ratio=1.0, self_ci95=(0.99, 1.01), floor=0.01, rounds=10)


def pair(variant: str, verdict: str, ratio: float, lo: float, hi: float) -> TimingFinding:
    return TimingFinding("timing.difference", variant, "xla", verdict, ratio, (lo, hi), None)


def run(path: Path, *found: TimingFinding, noise: Noise = RESOLVED, **more: object) -> RunSummary:
    timing = tuple(f for f in found if f.verdict in ("slower", "faster"))
    quiet = tuple(f for f in found if f not in timing)
    return RunSummary(
        schema_version=6,
        experiment="e",
        run_id=path.name,
        platform="cpu",
        baseline="xla",
        noise=noise,
        findings=Findings(timing=timing, noise=quiet, **more),  # type: ignore[arg-type]
    )


def statuses(a: RunSummary, b: RunSummary) -> dict[str, str]:
    return {c.subject: c.status for c in finding_changes(a, b)}


def test_each_finding_is_same_changed_within_noise_appeared_or_vanished(tmp_path: Path) -> None:
    a = run(
        tmp_path / "a",
        pair("eager", "slower", 1.64, 1.36, 1.98),
        pair("xla_no_fusion", "slower", 1.22, 1.15, 1.32),
        pair("xla_mixed", "slower", 1.29, 1.20, 1.33),
        pair("xla_gone", "slower", 1.5, 1.4, 1.6),
    )
    b = run(
        tmp_path / "b",
        pair("eager", "slower", 1.70, 1.50, 1.90),  # overlapping, same verdict
        pair("xla_no_fusion", "slower", 2.5, 2.4, 2.6),  # disjoint: changed
        pair("xla_mixed", "indistinguishable", 1.05, 0.95, 1.21),  # overlapping: within noise
        pair("xla_new", "faster", 0.8, 0.7, 0.9),
    )
    assert statuses(a, b) == {
        "`eager` against `xla`": SAME,
        "`xla_no_fusion` against `xla`": CHANGED,
        "`xla_mixed` against `xla`": WITHIN_NOISE,
        "`xla_gone` against `xla`": VANISHED,
        "`xla_new` against `xla`": APPEARED,
    }
    (row,) = [c for c in finding_changes(a, b) if "xla_no_fusion" in c.subject]
    assert (row.a, row.b) == ("slower 1.220× (1.150–1.320)", "slower 2.500× (2.400–2.600)")


def test_no_verdict_when_a_run_failed_its_aa_check_and_memory_needs_no_interval(
    tmp_path: Path,
) -> None:
    failed = dataclasses.replace(RESOLVED, resolved=False, reasons=("A/A",))
    peak = MemoryFinding("memory.peak", "xla_no_fusion", "xla", "more", 400, 100)
    seen = Observation("observation.eager_launches", "eager_launches", "Eager ...", "jax", "yes")
    a = run(
        tmp_path / "a", pair("eager", "slower", 1.6, 1.4, 1.9), memory=(peak,), observations=(seen,)
    )
    b = run(
        tmp_path / "b",
        pair("eager", "slower", 3.0, 2.9, 3.1),
        noise=failed,
        memory=(dataclasses.replace(peak, verdict="less"),),
        observations=(dataclasses.replace(seen, verdict="no"),),
    )
    got = statuses(a, b)
    assert got["`eager` against `xla`"] == "no verdict: run b could not resolve differences"
    assert got["`xla_no_fusion`'s peak against `xla`"] == CHANGED
    assert got["Eager ... (jax)"] == CHANGED
    assert statuses(a, a)["Eager ... (jax)"] == SAME


def test_two_runs_programs_that_differ_say_how_many_autotuned_fusions_chose_differently() -> None:
    from harness.findings.compare import step_verdict
    from harness.records.summary import Compile, Fingerprint, Hlo, Timing, VariantSummary

    def captured(digest: str, choices: dict[str, str] | None) -> VariantSummary:
        return VariantSummary(
            timing=Timing(round_step_s=(1.0e-3, 1.01e-3, 0.99e-3, 1.0e-3)),
            hlo=Hlo(fingerprint=Fingerprint(digest=digest, hlo=digest)),
            compile=Compile(autotune_choices=choices),
        )

    tuned = {f"k{i}": "cfg" for i in range(78)}
    retuned = {**tuned, "k3": "other", "k9": "other", "k77": "other"}
    a, b = captured("p1", tuned), captured("p2", retuned)
    said = step_verdict(a, b, floor=0.01)
    assert said.endswith("; 3 of the 78 fusions autotuned in both runs chose differently")
    alike = step_verdict(a, captured("p2", {**tuned, "k78": "cfg"}), floor=0.01)
    assert alike.endswith(
        "each of the 78 fusions autotuned in both runs chose alike; "
        "1 fusion was autotuned in one run only"
    )
    apart = step_verdict(a, captured("p2", {"other": "cfg"}), floor=0.01)
    assert apart.endswith(
        "no fusion was autotuned in both runs; 79 fusions were autotuned in one run only"
    )
    # No autotuning recorded (a CPU, or an older run): nothing is said of it.
    assert "autotuned" not in step_verdict(a, captured("p2", None), floor=0.01)
    assert step_verdict(a, captured("p1", retuned), floor=0.01).startswith("same program")
