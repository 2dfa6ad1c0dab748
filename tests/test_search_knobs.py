"""A search over a program's own knobs (issue 63), on the CPU with real compiles: a knob that
changes the result is a trade and never the best, a knob value that fails is recorded and the
search goes on, two knob values of one program are timed once, and a peak over
search.max_peak_memory is rejected. One tiny search serves them all (examples/knob_mlp.py);
the config's mistakes and the constraints' rules are checked in-process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_harness

from harness.config import ConfigError, load
from harness.records.numerics import AccuracyFile, LeafAccuracy
from harness.records.numerics_effect import Result, allowed
from harness.records.search import Candidate, ResultChange, SearchRecord, config_lines
from harness.records.summary import Verdict
from harness.search import best_of, constraints, space
from harness.store.records import documented_keys, emitted_keys, from_json

CAP = 120 * 1024  # between the default's peak (4 chunks: ~90 kB) and one chunk's (~156 kB)

SEARCH = f"""\
experiment: knob_search
program:
  function: examples.knob_mlp:apply
  init: examples.knob_mlp:init
  inputs: [{{shape: [256, 8], dtype: float32}}]
  kwargs: {{approximate: false, remat: false, chunks: 4}}
measure: {{warmup: 1, steps: 3}}
profile: {{enabled: false}}
timing: {{rounds: 4, batch_s: 0.01, budget_s: 0.5, max_budget_s: 0.5}}
search:
  base: xla
  strategy: coordinate
  budget_s: 120
  max_candidates: 6
  max_peak_memory: {CAP}
  space:
    kwargs:
      approximate: [false, true]
      remat: [false, true]
      chunks: [4, 3, 1]     # 3 does not divide the 256 rows: it fails before 1 is tried
variants:
  - {{name: xla, mode: jit}}
"""


@pytest.fixture(scope="module")
def knob_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("knobs")
    cfg = root / "knobs.yaml"
    cfg.write_text(SEARCH)
    proc = run_harness(f"--config={cfg}", results_root=root / "results")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (root / "results" / "knob_search" / "latest").resolve()


def record(run: Path) -> SearchRecord:
    return from_json(SearchRecord, json.loads((run / "search.json").read_text()), "search.json")


def by_change(r: SearchRecord, changed: str) -> Candidate:
    (found,) = [c for c in r.candidates if c.changed == changed]
    return found


@pytest.mark.study
def test_a_knob_that_changes_the_result_is_a_trade_never_the_best(knob_run: Path) -> None:
    r = record(knob_run)
    trade = by_change(r, "approximate=true")
    assert trade.status == "ok" and trade.step_s is not None  # timed like any other
    assert trade.effect is not None and trade.effect.changes
    assert trade.effect.distance > trade.effect.allowed > 0
    assert constraints.NUMERICS in trade.rejected and r.best != trade.name
    # its own float64 reference moved with it: only the default's result tells the trade
    assert trade.numerics_ok
    md = (knob_run / "report.md").read_text()
    rejected = md.split("## Rejected by a constraint", 1)[1].split("\n## ", 1)[0]
    assert f"`{trade.name}` (approximate=true)" in rejected and "changes the result" in rejected


@pytest.mark.study
def test_a_failing_knob_value_is_recorded_and_the_search_goes_on(knob_run: Path) -> None:
    r = record(knob_run)
    failed, after = by_change(r, "chunks=3"), by_change(r, "chunks=1")
    assert failed.status == "failed" and "does not divide the 256 rows" in failed.reason
    names = [c.name for c in r.candidates]
    assert names.index(failed.name) < names.index(after.name)
    assert after.status == "ok" and after.step_s is not None
    assert failed.name in (knob_run / "report.md").read_text().split("## Excluded", 1)[1]


@pytest.mark.study
def test_two_knob_values_that_compile_to_one_program_are_timed_once(knob_run: Path) -> None:
    r = record(knob_run)
    remat = by_change(r, "remat=true")
    assert remat.status == "same_program" and remat.same_program_as == space.DEFAULT
    assert remat.fingerprint == by_change(r, "as configured").fingerprint
    timed = set()
    for stage in knob_run.glob("timing-*.json"):
        timed |= set(json.loads(stage.read_text())["variants"])
    assert remat.step_s is None and remat.name not in timed
    assert "kwargs.remat" in r.no_effect


@pytest.mark.study
def test_max_peak_memory_rejects_a_candidate_over_it(knob_run: Path) -> None:
    r = record(knob_run)
    whole, default = by_change(r, "chunks=1"), by_change(r, "as configured")
    assert r.max_peak_memory == CAP
    assert whole.peak_bytes > CAP >= default.peak_bytes and "live-range" in whole.peak_source
    assert constraints.MEMORY in whole.rejected and r.best != whole.name
    assert not default.rejected and r.best in (None, space.DEFAULT)
    md = (knob_run / "report.md").read_text()
    assert f"`{whole.name}` (chunks=1)" in md and "is over the cap" in md


@pytest.mark.study
def test_knob_search_json_holds_exactly_its_documented_keys(knob_run: Path) -> None:
    data = json.loads((knob_run / "search.json").read_text())
    assert emitted_keys(SearchRecord, data) <= {k for k, _, _ in documented_keys(SearchRecord)}
    default = record(knob_run).candidates[0]
    assert config_lines(default).splitlines() == [
        "program: {kwargs: {approximate: false, chunks: 4, remat: false}}",
        "xla_options: {}",
    ]


# --- the config, in-process -------------------------------------------------------------------


def _load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    load(str(path))


@pytest.mark.parametrize(
    ("new", "key", "says"),
    [
        ("rematt: [false, true]", "search.space.kwargs.rematt", "takes no keyword argument"),
        ("chunks: {min: 4, max: 1}", "search.space.kwargs.chunks.max", "at least min"),
        ("chunks: {min: 1, max: 100000}", "search.space.kwargs.chunks", "at most 64"),
        ("chunks: {min: 1, top: 4}", "search.space.kwargs.chunks.top", "unknown key"),
        ("chunks: []", "search.space.kwargs.chunks", "expected a list of values"),
        ("chunks: [[1]]", "search.space.kwargs.chunks[0]", "not hashable"),
        ("chunks: [4, 4]", "search.space.kwargs.chunks", "repeats a value"),
    ],
)
def test_a_bad_knob_is_one_line_naming_the_file_and_key(
    tmp_path: Path, new: str, key: str, says: str
) -> None:
    """Each knob line of the space replaced by a bad one: one line, the file, the key."""
    old = "remat: [false, true]" if new.startswith("rematt") else "chunks: [4, 3, 1]"
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, SEARCH.replace(old, new, 1))
    line = str(e.value)
    assert "\n" not in line and line.startswith(str(tmp_path / "c.yaml"))
    assert f": {key}: " in line and says in line, line


def test_kwargs_and_a_cap_are_read_and_refused_where_they_cannot_apply(tmp_path: Path) -> None:
    text = SEARCH.replace(f"max_peak_memory: {CAP}", "max_peak_memory: 1.5 MiB")
    path = tmp_path / "ok.yaml"
    path.write_text(text.replace("chunks: [4, 3, 1]", "chunks: {min: 1, max: 7, step: 3}"))
    s = load(str(path)).experiment.search
    assert s.max_peak_memory == 1.5 * 2**20 and s.space.kwargs["chunks"] == (1, 4, 7)
    with pytest.raises(ConfigError, match=r"search\.max_peak_memory: expected bytes"):
        _load(tmp_path, text.replace("1.5 MiB", "lots"))
    gelu = "experiment: g\nsearch: {base: xla, space: {kwargs: {gelu: [tanh, erf]}}}\n"
    with pytest.raises(ConfigError, match=r"search\.space\.kwargs: applies to a program study"):
        _load(tmp_path, gelu + "variants: [{name: xla, mode: jit}]\n")


def test_the_shipped_knob_configs_load() -> None:
    """The CPU example and the GPU searches the README hands the lead: every knob is one their
    functions take (read from the source, nothing imported)."""
    for name in ("search_knobs_cpu", "search_knobs_gpu_gpt", "search_knobs_gpu_scanned"):
        s = load(f"{name}.yaml").experiment.search
        assert s.base and s.space.kwargs, name


# --- the constraints' rules, on constructed records -------------------------------------------


def _result(values: list[np.ndarray], err: float) -> Result:
    leaves = tuple(
        LeafAccuracy("", "float32", (v.size,), err, 1e-5, True, kept=v.size) for v in values
    )
    return Result(AccuracyFile(1, leaves, "outputs.npz"), values, values)


@pytest.mark.parametrize("err", [0.0, 1e-7, 1e-4])
def test_a_result_changes_only_past_the_allowance_of_the_default(err: float) -> None:
    rng = np.random.default_rng(0)
    y = rng.standard_normal(512).astype(np.float32)
    base = _result([y], err)
    limit = allowed("float32", None, err)
    for scale, changes in ((0.0, False), (0.5, False), (3.0, True)):
        noise = rng.standard_normal(512)
        moved = y + (scale * limit * np.linalg.norm(y) / np.linalg.norm(noise)) * noise
        found = constraints.change(_result([moved.astype(np.float64)], err), base)
        assert found.changes is changes and found.allowed == limit, (scale, err)
    other = constraints.change(_result([y[:256]], err), base)
    assert not other.comparable and not other.changes


def _timed(name: str, ratio: float, rejected: tuple[str, ...] = ()) -> Candidate:
    v = Verdict("default", ratio, (ratio * 0.98, ratio * 1.02), "faster" if ratio < 1 else "slower")
    return Candidate(name=name, status="ok", vs_default=v, rejected=rejected)


def test_the_best_breaks_no_constraint_and_the_faster_rejected_are_named() -> None:
    default = Candidate(name="default", status="ok")
    records = {
        "default": default,
        "c01": _timed("c01", 0.70, (constraints.NUMERICS,)),
        "c02": _timed("c02", 0.53, (constraints.MEMORY,)),
        "c03": _timed("c03", 0.80),
        "c04": _timed("c04", 0.90),
        "c05": _timed("c05", 1.10),
    }
    best = best_of(records, None)
    assert best == "c03"
    rows = list(records.values())
    assert constraints.leaders(rows, best, None) == ("c03", "c04", "default")
    assert constraints.rejected_faster(rows, best) == ("c02", "c01")
    # a default over the cap is no fallback: the eligible candidate nearest to it is
    over = {**records, "default": Candidate(name="default", status="ok", rejected=("memory",))}
    only = {k: v for k, v in over.items() if k in ("default", "c05", "c02")}
    assert best_of(only, None) == "c05"
    assert best_of({"default": over["default"], "c02": records["c02"]}, None) is None


def test_each_dimension_is_reset_alone_for_the_attribution() -> None:
    point = space.Point(
        options=(("xla_cpu_enable_fast_math", True),),
        kwargs=(("attention", "cudnn"), ("remat", True)),
        params_dtype="bfloat16",
    )
    found = dict(constraints.dimensions(point))
    assert set(found) == {"kwargs.attention", "kwargs.remat", "xla_options", "dtypes"}
    assert found["kwargs.attention"] == space.Point(
        options=point.options, kwargs=(("remat", True),), params_dtype="bfloat16"
    )
    assert found["xla_options"].options == () and found["xla_options"].kwargs == point.kwargs
    assert found["dtypes"].params_dtype is None and found["dtypes"].options == point.options
    assert constraints.dimensions(space.Point()) == []
    assert ResultChange().changes is False  # a record saved without an effect claims none


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attention": "cudnn", "remat": True, "block": 64},
        {"mode": "yes", "scale": 1.5, "none": None, "empty": "", "odd": "a: b"},
    ],
)
def test_the_config_lines_read_back_as_the_candidate(kwargs: dict) -> None:
    import yaml

    c = Candidate(
        name="c01",
        kwargs=kwargs,
        params_dtype="bfloat16",
        xla_options={"xla_gpu_enable_command_buffer": "", "xla_cpu_enable_fast_math": True},
    )
    back = yaml.safe_load(config_lines(c))
    assert back["program"] == {"kwargs": kwargs, "w_dtype": "bfloat16"}
    assert back["xla_options"] == c.xla_options


def test_the_report_states_the_trade_offs_and_which_dimension_carried_the_gain() -> None:
    """The leaders with their ratio, interval, first call, peak, result and config lines; the
    faster one a cap rejected, with its peak; each dimension's measured factor, largest first."""
    from harness.records.search import Attribution
    from harness.report import doc
    from harness.report import search as search_report

    def v(ratio: float, lo: float, hi: float, verdict: str = "faster") -> Verdict:
        return Verdict("default", ratio, (lo, hi), verdict)

    within = ResultChange("", 1e-5, 3e-2, False)
    best = Candidate(
        name="c02",
        kwargs={"attention": "cudnn", "remat": False},
        xla_options={"xla_gpu_enable_command_buffer": ""},
        changed="attention=cudnn, xla_gpu_enable_command_buffer=''",
        status="ok",
        step_s=0.02,
        vs_default=v(0.67, 0.66, 0.68),
        first_call_s=12.5,
        peak_bytes=3 * 2**30,
        effect=within,
    )
    over = Candidate(
        name="c03",
        changed="layers=unrolled",
        status="ok",
        step_s=0.015,
        vs_default=v(0.5, 0.49, 0.51),
        peak_bytes=9 * 2**30,
        rejected=(constraints.MEMORY,),
    )
    trade = Candidate(
        name="c04",
        changed="approximate=true",
        status="ok",
        step_s=0.014,
        vs_default=v(0.714, 0.70, 0.73),
        effect=ResultChange("['logits']", 3.1e-2, 1e-3, True),
        rejected=(constraints.NUMERICS,),
    )
    default = Candidate(name="default", status="ok", step_s=0.03, first_call_s=10.0)
    rec = SearchRecord(
        schema_version=11,
        base="xla",
        lower_bound=None,
        strategy="grid",
        budget_s=420,
        wall_s=300,
        stopped=None,
        candidates=(default, best, over, trade),
        best="c02",
        max_peak_memory=4 * 2**30,
        leaders=("c02", "default"),
        rejected_faster=("c03",),
        attribution=(
            Attribution(
                "xla_options",
                "xla_gpu_enable_command_buffer=''",
                "c05",
                v(1.01, 0.99, 1.03, "indistinguishable"),
                2,
            ),
            Attribution(
                "kwargs.attention", "attention=cudnn", "c06", v(1.48, 1.45, 1.51, "slower"), 2
            ),
        ),
    )
    md = doc.to_markdown(search_report.blocks(rec, "Search", None))
    assert "the `attention` knob (attention=cudnn) gave 1.48× (1.45–1.51)" in md
    assert "the XLA options" in md and "added 1.01× (0.99–1.03), not resolved from 1" in md
    leaders = md.split("## Trade-offs of the leaders", 1)[1].split("\n## ", 1)[0]
    assert "| c02 |" in leaders and "1.49× faster (1.47–1.52)" in leaders
    assert "12.5" in leaders and "3.22 GB" in leaders and "within the allowance" in leaders
    assert "program: {kwargs: {attention: cudnn, remat: false}}" in leaders
    rejected = md.split("## Rejected by a constraint", 1)[1].split("\n## ", 1)[0]
    assert "`c03` (layers=unrolled): 2.00× faster" in rejected
    assert "its peak 9.66 GB is over the cap 4.29 GB: faster than the best `c02`" in rejected
    assert "`c04` (approximate=true): 1.40× faster (1.37–1.43), and changes the result" in rejected
    assert "by 3.10e-02" in rejected and "faster than the best" not in rejected.split("`c04`")[1]
