"""A profiling session of several hosts (harness.program.hosts): each host analysed apart.

The properties: a session's per-host totals are what each host's profile gives analysed alone,
its merged totals are their sums, and the events dataset (partitioned by host) holds each
host's rows, read back through the one events reader. The hosts are a real H200 profile (the
scan/cond/fori_loop train step in command buffers) made 1, 2 and 3 times longer, each on a
clock and ids of its own (benchmarks/longer_profile.py), so no two hosts are alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_analyze

from benchmarks.longer_profile import as_host, lengthen
from harness.profile import xspace
from harness.profile.events import ProfileError, find_xplane, session_xplanes
from harness.program import dump as analysis
from harness.program.hosts import attach_session, events_part, host_totals, workers_for
from harness.records import events_file
from harness.records.program import merged_hosts
from harness.store.records import SchemaError

RUN = FIXTURES / "h200-jax0.11.2-loops" / "loops_cmdbuf"


def make_session(folder: Path, lengths: tuple[int, ...]) -> Path:
    """A session folder of one host per length: the fixture's profile that many times longer."""
    data = find_xplane(RUN / "trace_marked").read_bytes()
    folder.mkdir(parents=True)
    for k, times in enumerate(lengths):
        space = as_host(lengthen(xspace.parse(data), times), k, f"node{k}")
        (folder / f"node{k}.xplane.pb").write_bytes(space.SerializeToString())
    return folder


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, Path]:
    """(session folder, the dump's analysed modules, the output folder analysed into)."""
    if not RUN.exists():
        pytest.skip(f"H200 fixture absent: {RUN}")
    root = tmp_path_factory.mktemp("hosts")
    folder = make_session(root / "session", (1, 2, 3))
    out = root / "out"
    return folder, analysis.analyze_dump(RUN / "dump", out), out


def test_each_host_of_a_session_is_that_host_alone_and_the_merge_is_their_sum(
    session: tuple[Path, list, Path], tmp_path: Path
) -> None:
    folder, results, out = session
    hosts = session_xplanes(folder)
    assert list(hosts) == ["node0", "node1", "node2"]
    first = attach_session(results, hosts, out, None, "jit")
    totals = first.hosts
    assert [t.host for t in totals] == list(hosts)
    for (host, path), together in zip(hosts.items(), totals, strict=True):
        alone = analysis.attach_profile(results, path, tmp_path / host, None, "jit")
        assert host_totals(host, alone, events_part(host)) == together
        # The host's part of the dataset holds the rows the host alone writes.
        rows = analysis.read_events(tmp_path / host / analysis.EVENTS_FILE)
        assert analysis.read_events(out / events_part(host)) == rows
    assert first.path == hosts["node0"]
    assert [t.steps for t in totals] == [
        5,
        10,
        15,
    ]  # the hosts differ: the sums below are not 3x one
    merged = merged_hosts(totals)
    for field in ("events", "matched", "steps", "kernels", "outside"):
        assert getattr(merged, field) == sum(getattr(t, field) for t in totals), field
    assert merged.device_time_s == pytest.approx(sum(t.device_time_s for t in totals))
    for key, n in merged.launches:
        assert n == sum(dict(t.launches).get(key, 0) for t in totals), key
    # The one reader reads the partitioned dataset as one table with a host column.
    rows = analysis.read_events(out / analysis.EVENTS_DIR)
    assert len(rows) == merged.events
    for t in totals:
        assert sum(r["host"] == t.host for r in rows) == t.events
    kernels = json.loads((out / "kernels.json").read_text())
    assert kernels["events_file"] == analysis.EVENTS_DIR and kernels["match_host"] == "node0"
    assert [h["host"] for h in kernels["hosts"]] == list(hosts)
    assert kernels["merged"]["events"] == merged.events


@pytest.mark.parametrize(
    ("sizes", "cpus", "available", "expected"),
    [
        ([100 << 20] * 64, 16, 1 << 40, 16),  # cores bound it
        ([100 << 20] * 3, 16, 1 << 40, 3),  # no more workers than hosts
        ([100 << 20] * 64, 16, 4 << 30, 7),  # memory bounds it: 4 GiB / (300 MiB + 256 MiB)
        ([1 << 30] * 8, 16, 1 << 30, 1),  # too little memory for even one: still one
    ],
)
def test_workers_are_bounded_by_cores_and_memory(
    sizes: list[int], cpus: int, available: int, expected: int
) -> None:
    assert workers_for(sizes, cpus, available) == expected


def test_a_session_names_its_hosts_and_refuses_a_name_no_partition_holds(tmp_path: Path) -> None:
    session = tmp_path / "plugins" / "profile" / "2026_12_07"
    session.mkdir(parents=True)
    for name in ("b-host", "a.host_1"):
        (session / f"{name}.xplane.pb").write_bytes(b"")
    assert list(session_xplanes(tmp_path)) == ["a.host_1", "b-host"]
    assert list(session_xplanes(session / "b-host.xplane.pb")) == ["b-host"]
    (session / "c=d.xplane.pb").write_bytes(b"")
    with pytest.raises(ProfileError, match=r"c=d\.xplane\.pb: host name 'c=d'"):
        session_xplanes(tmp_path)


def test_an_events_folder_without_a_host_part_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "events" / "node0").mkdir(parents=True)  # no host= folder: not a partition
    with pytest.raises(SchemaError, match="events: no host=<name>/"):
        events_file.read_table(tmp_path / "events")


@pytest.mark.slow  # `python -m harness.analyze` in a process of its own
def test_the_command_analyses_a_session_into_a_dataset_partitioned_by_host(
    tmp_path: Path,
) -> None:
    if not RUN.exists():
        pytest.skip(f"H200 fixture absent: {RUN}")
    folder = make_session(tmp_path / "session", (1, 2))
    proc = run_analyze(f"--dump={RUN / 'dump'}", f"--xplane={folder}", f"--out={tmp_path / 'a'}")
    assert proc.returncode == 0, proc.stderr
    assert "2 hosts: 4695 device events, 4695 matched, 15 host steps" in proc.stdout
    written = sorted(
        str(p.relative_to(tmp_path / "a")) for p in (tmp_path / "a").rglob("*.parquet")
    )
    assert written == [events_part("node0"), events_part("node1")]
    report = (tmp_path / "a" / "report.md").read_text()
    assert "**Hosts.** 2 hosts' profiles" in report and "| **all hosts** | 4695 |" in report
