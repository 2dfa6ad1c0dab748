"""The attributed timeline for Perfetto (issue 40), on the H200 loops fixture with command
buffers, as `python -m harness.analyze` writes it.

The `perfetto` package's trace processor downloads its binary at first use, which CI cannot
do, so the file is checked as Chrome trace JSON against the format's rules (an object with
`traceEvents`; `X` slices with a name, numeric `ts`/`dur` in µs and integer `pid`/`tid`; `M`
events naming tracks) and through its own record; then its slices are counted and summed by
name as the trace processor's `slice` table would be.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES, run_analyze

from harness.program.dump import read_events
from harness.records import run_files
from harness.store import runfolder

LOOPS = FIXTURES / "h200-jax0.11.2-loops" / "loops_cmdbuf"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not LOOPS.is_dir():
        pytest.skip(f"loops fixture not found at {LOOPS}")
    out = tmp_path_factory.mktemp("loops") / "a"
    proc = run_analyze(
        f"--dump={LOOPS / 'dump'}", f"--xplane={LOOPS / 'trace_marked'}", f"--out={out}"
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _check_chrome_trace(doc: object) -> list[dict]:
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
    assert doc.get("displayTimeUnit") in ("ms", "ns")
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ph"] in ("X", "M"), e
        if e["ph"] == "X":
            assert isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float)
            assert e["ts"] >= 0 and e["dur"] >= 0
        else:
            assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
    return doc["traceEvents"]


@pytest.mark.slow
def test_the_timeline_is_a_chrome_trace_of_every_event_step_and_buffer(analysed: Path) -> None:
    path = analysed / runfolder.TIMELINE_FILE
    events = _check_chrome_trace(json.loads(gzip.decompress(path.read_bytes())))
    record = run_files.read_gzipped(run_files.TIMELINE, path)
    assert len(record.traceEvents) == len(events)
    cats = Counter(e.get("cat") for e in events if e["ph"] == "X")
    kernels = json.loads((analysed / "kernels.json").read_text())
    rows = read_events(analysed / "events.parquet")
    assert cats["cluster"] == len(rows) == kernels["match"]["events_in_window"] == 1565
    assert cats["unattributed"] == 0 and all(e["matched"] for e in rows)
    assert cats["step"] == 5
    buffers = Counter(e["name"] for e in events if e.get("cat") == "command_buffer")
    # Once a step each, and the scan's two body buffers once an iteration (6 layers).
    assert buffers == {
        "command_buffer_1": 5,
        "command_buffer_14": 30,
        "command_buffer_60": 30,
        "command_buffer_128": 5,
    }
    args = next(
        e["args"] for e in events if e.get("cat") == "cluster" and e["args"]["iteration"] == 5
    )
    assert args["command_buffer"] in ("command_buffer_14", "command_buffer_60")
    assert args["source"] and args["source"].split(":")[0].endswith(".py")
    assert {"kernel", "hlo_op", "cluster", "rule"} <= args.keys()


@pytest.mark.slow
def test_the_five_largest_slices_are_the_reports_five_largest_clusters(analysed: Path) -> None:
    events = json.loads(gzip.decompress((analysed / runfolder.TIMELINE_FILE).read_bytes()))
    total: Counter[str] = Counter()
    for e in events["traceEvents"]:
        if e.get("cat") == "cluster":
            total[e["name"]] += e["dur"]
    analysis = json.loads((analysed / "analysis.json").read_text())
    ranked = [c["name"] for c in analysis["modules"][0]["clusters"][:5]]
    assert [name for name, _ in total.most_common(5)] == ranked
    report = (analysed / "report.md").read_text()
    assert f"[`{runfolder.TIMELINE_FILE}`]" in report and "ui.perfetto.dev" in report
