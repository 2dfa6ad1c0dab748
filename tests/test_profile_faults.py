"""Profiles that are not what they claim: wrong files, corrupt bytes, another program's events.
Each gives a ProfileError naming the file or an unmatched report, never a crash."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_match_events import FIXTURE_STEPS, FIXTURES, fixture_clusters

from harness.match.match import MatchReport, match_events
from harness.profile.events import ProfileError
from harness.profile.reader import read_device_events

PROFILE = FIXTURES / "jit_bf16_tanh_large" / "profile.xplane.pb"
TORCH_TRACE = FIXTURES.parent / "h200-torch2.11" / "compiled_trace.json.gz"


@pytest.fixture(scope="module")
def profile_bytes() -> bytes:
    if not PROFILE.is_file():
        pytest.skip(f"H200 fixture absent: {PROFILE}")
    return PROFILE.read_bytes()


@pytest.mark.parametrize(
    "kind", ["torch_trace", "hlo_text", "json", "random_bytes", "a_folder", "half_varint"]
)
def test_a_file_that_is_not_an_xspace_is_a_profile_error_naming_it(
    tmp_path: Path, kind: str
) -> None:
    bad = tmp_path / f"{kind}.xplane.pb"
    if kind == "torch_trace":
        if not TORCH_TRACE.is_file():
            pytest.skip(f"fixture absent: {TORCH_TRACE}")
        bad.write_bytes(TORCH_TRACE.read_bytes())
    elif kind == "hlo_text":
        bad.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    elif kind == "json":
        bad.write_text('{"traceEvents": []}\n')
    elif kind == "random_bytes":
        bad.write_bytes(random.Random(1).randbytes(4096))
    elif kind == "a_folder":
        bad.mkdir()
    else:
        bad.write_bytes(b"\x0a\xff\xff\xff")  # field 1, length varint cut short
    with pytest.raises(ProfileError) as e:
        read_device_events(bad)
    assert str(bad) in str(e.value)


def test_corrupt_profiles_through_the_matcher_give_an_error_or_a_report(
    tmp_path: Path, profile_bytes: bytes
) -> None:
    """Truncated and byte-flipped copies, read and then matched against the real clusters."""
    clusters = fixture_clusters("jit_bf16_tanh_large")
    rng = random.Random(7)
    outcomes = {"error": 0, "report": 0}
    for trial in range(150):
        data = bytearray(profile_bytes)
        if trial % 3 == 0:
            data = data[: rng.randrange(len(data))]
        for _ in range(rng.choice((1, 3, 20, 200))):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        bad = tmp_path / f"t{trial}.xplane.pb"
        bad.write_bytes(bytes(data))
        try:
            events = read_device_events(bad)
        except ProfileError as err:
            assert str(bad) in str(err)
            outcomes["error"] += 1
            continue
        try:
            report = match_events(events, clusters, steps=FIXTURE_STEPS)
        except ProfileError:  # e.g. step markers that no longer add up
            outcomes["error"] += 1
            continue
        assert isinstance(report, MatchReport)
        assert 0.0 <= report.matched_fraction <= 1.0
        assert isinstance(report.to_json()["unmatched"], list)
        outcomes["report"] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) == 150


def test_a_profile_with_no_device_plane_matches_nothing_without_crashing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    events = read_device_events(empty)
    assert events == ()
    report = match_events(events, fixture_clusters("jit_bf16_tanh_large"), steps=FIXTURE_STEPS)
    assert report.matched_fraction == 0.0 and not report.unmatched
