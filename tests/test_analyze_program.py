"""`python -m harness.analyze` on a user's program: a 2-layer flax MLP with layernorm
(tests/mlp_program.py), dumped and profiled on the CPU once per session, with and without
step markers. The report's numbers are checked against the profile read directly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, harness_env, run_analyze
from fresh_process import in_fresh_process

from harness.profile.events import DeviceEvent, find_xplane
from harness.profile.reader import read_device_events
from harness.program.analysis import StepsUnknown, count_steps
from harness.program.module_analysis import self_times
from harness.program.sources import scope_of

PROGRAM = REPO / "tests" / "mlp_program.py"
STEPS = 3
MAIN = "jit_step"


@pytest.fixture(scope="session")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The MLP dumped and profiled (marked and plain), and analyze's output for each."""
    root = tmp_path_factory.mktemp("mlp")
    env = {**harness_env(), "XLA_FLAGS": f"--xla_dump_to={root / 'dump'} --xla_dump_hlo_as_text"}
    proc = subprocess.run(
        [sys.executable, str(PROGRAM), str(root / "prof")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = {"root": root, "dump": root / "dump"}
    for kind in ("marked", "plain"):
        run = run_analyze(
            f"--dump={root / 'dump'}", f"--out={root / kind}", f"--xplane={root / 'prof' / kind}"
        )
        assert run.returncode == 0, run.stderr
        out[kind] = {
            "proc": run,
            "out": root / kind,
            "analysis": json.loads((root / kind / "analysis.json").read_text()),
            "xplane": find_xplane(root / "prof" / kind),
        }
    return out


def main_module(analysis: dict[str, Any]) -> dict[str, Any]:
    (main,) = [m for m in analysis["modules"] if m["role"] == "main"]
    return main


def thunks(xplane: Path, module: str, program_id: int) -> list[tuple[str, float, int]]:
    """(hlo_op, duration ns, run_id) of every CPU thunk of one program, read with ProfileData
    directly (not through harness.profile)."""
    from jax.profiler import ProfileData

    found = []
    for plane in ProfileData.from_file(str(xplane)).planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if (
                    stats.get("hlo_module") == module
                    and int(stats.get("program_id", -1)) == program_id
                    and "hlo_op" in stats
                ):
                    found.append((stats["hlo_op"], float(event.duration_ns), stats["run_id"]))
    return found


def tagged_lines() -> dict[str, int]:
    """`# line:<tag>` comments in the program -> their line numbers."""
    lines = PROGRAM.read_text().splitlines()
    tags = {
        m.group(1): i for i, text in enumerate(lines, 1) if (m := re.search(r"# line:(\w+)", text))
    }
    tags["loss"] = next(i for i, text in enumerate(lines, 1) if "jnp.mean(model.apply" in text)
    return tags


@pytest.mark.parametrize("kind", ["marked", "plain"])
def test_steps_and_kernels_a_step_equal_the_profile(mlp: dict[str, Any], kind: str) -> None:
    run = mlp[kind]
    main = main_module(run["analysis"])
    assert main["name"] == MAIN
    events = thunks(run["xplane"], MAIN, main["program_id"])
    per_run = Counter(r for _, _, r in events)
    assert len(per_run) == STEPS and len(set(per_run.values())) == 1
    truth = next(iter(per_run.values()))
    steps = run["analysis"]["steps"]
    assert steps["count"] == STEPS
    assert steps["how"] == ("markers" if kind == "marked" else "executions")
    assert main["kernels_per_step"] == truth
    assert f"{STEPS} steps ({steps['how']})" in run["proc"].stdout
    assert f"main program {MAIN}: {truth:g} kernels a step" in run["proc"].stdout


def test_ranking_and_line_rollup_equal_a_direct_sum(mlp: dict[str, Any]) -> None:
    run = mlp["plain"]
    main = main_module(run["analysis"])
    assert run["analysis"]["ranked_by"] == "device time"
    direct: dict[str, float] = defaultdict(float)
    for op, ns, _ in thunks(run["xplane"], MAIN, main["program_id"]):
        direct[op] += ns * 1e-9 / STEPS
    ranked = main["clusters"]
    assert {r["name"]: r["time_s"] for r in ranked} == pytest.approx(dict(direct), rel=1e-9)
    times = [r["time_s"] for r in ranked]
    assert times == pytest.approx(sorted(direct.values(), reverse=True), rel=1e-9)
    total = sum(direct.values()) + sum(
        h["time_s"] or 0.0 for h in run["analysis"]["modules"] if h["role"] == "helper"
    )
    assert ranked[0]["share"] == pytest.approx(times[0] / total, rel=1e-6)

    # Each cluster's lines, worked out independently from its op_names: everything under
    # MLP/layer1 is written on the layer1 line, MLP/layer2 on the layer2 line, the rest is the
    # loss line.
    tags = tagged_lines()
    fusions = json.loads(next((run["out"]).glob(f"module_*.{MAIN}/fusions.json")).read_text())
    expected_lines: dict[str, set[str]] = {}
    for c in fusions["modules"][0]["clusters"]:
        lines = set()
        for op in c["source_ops"]:
            scope = scope_of(op)
            tag = "layer1" if "layer1" in scope else "layer2" if "layer2" in scope else "loss"
            lines.add(f"{PROGRAM}:{tags[tag]}")
        expected_lines[c["name"]] = lines
    for r in ranked:
        assert set(r["lines"]) == expected_lines[r["name"]], r["name"]
    by_line: dict[str, float] = defaultdict(float)
    for name, seconds in direct.items():
        for line in expected_lines[name]:
            by_line[line] += seconds / len(expected_lines[name])
    got = {r["label"]: r["value"] for r in main["by_line"]}
    assert got == pytest.approx(dict(by_line), rel=1e-9)
    dense = next(
        r for r in ranked if "MLP/layer1/Dense_0" in r["scopes"] and r["kind"] == "library"
    )
    assert dense["lines"] == [f"{PROGRAM}:{tags['layer1']}"]


def test_report_names_the_main_program_and_lists_helpers_apart(mlp: dict[str, Any]) -> None:
    run = mlp["plain"]
    md = (run["out"] / "report.md").read_text()
    html = (run["out"] / "report.html").read_text()
    assert "is the main program: the module with the most device time" in md
    helpers = {m["name"]: m["kind"] for m in run["analysis"]["modules"] if m["role"] == "helper"}
    assert helpers["jit__threefry_split"] == "RNG set-up"
    assert helpers["jit_convert_element_type"] == "dtype conversion"
    assert MAIN not in helpers
    helper_section = md[md.index("## Helper modules") :]
    assert "jit__threefry_split" in helper_section and "RNG set-up" in helper_section
    assert md.index("## Main program") < md.index("## Helper modules")
    for heading in ("By source line", "By named scope", "Roofline", "Top kernels"):
        assert f"### {heading}" in md
    assert "`MLP/layer1/Dense_0`" in md  # named scopes from flax modules and jax.named_scope
    for img in re.findall(r'<img src="([^"]+)"', html):
        assert (run["out"] / img).is_file() and img.endswith(".png")
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "no ceilings given" in md


def test_a_profile_without_markers_or_run_ids_is_refused_naming_steps(
    mlp: dict[str, Any],
) -> None:
    events = [e for e in read_device_events(mlp["plain"]["xplane"]) if e.hlo_module == MAIN]
    counted = count_steps(events, MAIN, 0, None)
    assert (counted.count, counted.how) == (STEPS, "executions")
    blind = [replace(e, run_id=None) for e in events]
    with pytest.raises(StepsUnknown, match="--steps=N") as err:
        count_steps(blind, MAIN, 0, None)
    assert "StepTraceAnnotation" in str(err.value)
    assert count_steps(blind, MAIN, 0, 5).count == 5
    assert count_steps(events, MAIN, 4, None).how == "markers"
    with pytest.raises(ValueError, match="--steps must be a positive integer"):
        count_steps(events, MAIN, 0, 0)


def test_steps_flag_disagreeing_with_the_markers_is_refused(mlp: dict[str, Any]) -> None:
    proc = run_analyze(
        f"--dump={mlp['dump']}",
        f"--out={mlp['root'] / 'disagree'}",
        f"--xplane={mlp['marked']['xplane']}",
        "--steps=5",
    )
    assert proc.returncode == 2 and "--steps=5" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_self_time_subtracts_nested_events_on_the_same_stream() -> None:
    def event(name: str, stream: str, start: float, duration: float) -> DeviceEvent:
        return DeviceEvent(
            None,
            name,
            "host_thunk",
            None,
            None,
            "m",
            name,
            1,
            None,
            "/host:CPU",
            stream,
            start,
            duration,
        )

    loop = event("while.1", "t1", 0, 100)
    body = [event("add.1", "t1", 10, 30), event("mul.1", "t1", 50, 20)]
    other = event("sub.1", "t2", 20, 50)  # overlaps in time on another thread: not nested
    after = event("div.1", "t1", 100, 5)
    assert self_times([loop, *body, other, after]) == [50, 30, 20, 50, 5]


@pytest.mark.slow
def test_a_reverse_map_computed_in_a_forked_child_equals_the_one_made_here(tmp_path: Path) -> None:
    """Run where JAX is not loaded (fresh_process): the analyzer forks only such a process."""
    from hlo_helpers import require_fixtures

    folder = require_fixtures() / "jit_bf16_tanh_large" / "dump"
    out = in_fresh_process(
        """
        from pathlib import Path
        from harness.common import forked
        from harness.store import io
        from harness.program import analysis, dump
        folder, tmp_path = Path(sys.argv[1]), Path(sys.argv[2])
        assert forked.fork_safe()
        with io.writes_confined_to(tmp_path):
            here = dump.analyze_dump(folder, tmp_path / "here")
            dump.FORK_INSTRUCTIONS = 0
            started = dump.analyze_dump(folder, tmp_path / "child", finish=False)
            assert sum(r.pending is not None for r in started) == 1  # one child at a time
            done = dump.finish_dump(started)
            assert [r.reverse for r in done] == [r.reverse for r in here]
            for r in here:
                child = tmp_path / "child" / r.key / "fusions.json"
                assert child.read_text() == (r.out_dir / "fusions.json").read_text()
            # What the CLI does meanwhile: analyse without the pending map, fill it in after.
            early = analysis.analyse_program([r.as_input() for r in started], None, None)
            assert analysis.with_reverse_maps(
                early, [r.as_input() for r in done]
            ) == analysis.analyse_program([r.as_input() for r in done], None, None)
            stopped = dump.analyze_dump(folder, tmp_path / "stopped", finish=False)
            job = next(r.pending for r in stopped if r.pending is not None)
            dump.cancel_dump(stopped)
            assert not job.proc.is_alive()
        print("forked")
        """,
        str(folder),
        str(tmp_path),
    )
    assert out.strip() == "forked"


@pytest.mark.slow
def test_the_analyzer_never_forks_a_process_with_jax_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jax  # noqa: F401
    from hlo_helpers import require_fixtures

    from harness.program import dump
    from harness.store import io

    folder = require_fixtures() / "jit_bf16_tanh_large" / "dump"
    monkeypatch.setattr(dump, "FORK_INSTRUCTIONS", 0)
    with io.writes_confined_to(tmp_path):
        started = dump.analyze_dump(folder, tmp_path / "here", finish=False)
    assert all(r.pending is None for r in started)  # computed here, no child
