"""Makes a real profile longer: every event repeated `--times` times, one profile span apart.

    python benchmarks/longer_profile.py --xplane=IN.xplane.pb --out=OUT.xplane.pb --times=100

Each copy shifts the events' times by the profile's span and their ids (step numbers,
correlation ids, run ids and the flow ids `_p`/`_c`) past the largest of the copy before, so
the copies read as later steps of the same program: markers, launches and executions stay
consistent. `--keep_host=launches` keeps of the host plane only what the device events are
tied to (step markers, launches, executions), for a profile the shape of a long GPU capture
without a Python tracer. Used by benchmarks/analyze_scaling.py and the simulated hosts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from absl import app, flags

from harness.profile import xspace

SHIFTED = ("step_num", "correlation_id", "run_id", "_p", "_c")
# Ids past this are sentinels (a correlation id of 2^64 - 1), left as they are.
_ID_LIMIT = 1 << 40
_HOST_KEPT = frozenset({"step_num", "correlation_id", "run_id", "_p", "_c"})


def _bounds(space: Any) -> tuple[float, float]:
    lo, hi = float("inf"), float("-inf")
    for plane in space.planes:
        for line in plane.lines:
            for e in line.events:
                start = line.timestamp_ns * 1000 + e.offset_ps
                lo, hi = min(lo, start), max(hi, start + e.duration_ps)
    return lo, hi


def _id_spans(space: Any) -> dict[str, int]:
    """For each shifted stat, one more than the largest value it takes anywhere."""
    spans = dict.fromkeys(SHIFTED, 1)
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                for st in e.stats:
                    name = names.get(st.metadata_id)
                    if name in spans:
                        value = int(getattr(st, st.WhichOneof("value") or "int64_value"))
                        if 0 <= value < _ID_LIMIT:
                            spans[name] = max(spans[name], value + 1)
    return spans


def lengthen(space: Any, times: int, keep_host: str = "all") -> Any:
    """The profile with every event repeated `times` times (see the module docstring)."""
    lo, hi = _bounds(space)
    span_ps = int(hi - lo) + 1_000_000
    spans = _id_spans(space)
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        shifted = {k: n for k, n in names.items() if n in spans}
        device = plane.name.startswith("/device:")
        for line in plane.lines:
            originals = list(line.events)
            if not device and keep_host == "launches":
                originals = [
                    e
                    for e in originals
                    if any(names.get(s.metadata_id) in _HOST_KEPT for s in e.stats)
                ]
            del line.events[:]
            for k in range(times):
                for e in originals:
                    copy = line.events.add()
                    copy.CopyFrom(e)
                    _shift(copy, k, span_ps, {i: spans[n] for i, n in shifted.items()})
    return space


def _shift(event: Any, k: int, span_ps: int, id_spans: dict[int, int]) -> None:
    """Moves an event `k` spans later, and its ids (stat metadata id -> span) k spans on."""
    event.offset_ps += k * span_ps
    if not k:
        return
    for st in event.stats:
        span = id_spans.get(st.metadata_id)
        if span is not None:
            which = st.WhichOneof("value")
            value = int(getattr(st, which))
            if 0 <= value < _ID_LIMIT:
                setattr(st, which, value + k * span)


def as_host(space: Any, k: int, name: str) -> Any:
    """The profile as the k-th of several hosts' (a copy is changed): its clock `k` profile
    spans later, its ids (steps excepted: every host runs the same steps) past the other
    hosts', and its host name `name`. Used by benchmarks/multihost_scaling.py and the tests."""
    lo, hi = _bounds(space)
    span_ps = int(hi - lo) + 1_000_000
    spans = _id_spans(space)
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        shifted = {i: spans[n] for i, n in names.items() if n in spans and n != "step_num"}
        for line in plane.lines:
            for e in line.events:
                _shift(e, k, span_ps, shifted)
    del space.hostnames[:]
    space.hostnames.append(name)
    return space


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    space = xspace.parse(Path(values.xplane).read_bytes())
    longer = lengthen(space, values.times, values.keep_host)
    out = Path(values.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(longer.SerializeToString())
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    # Defined here, not on import: the benchmarks that import lengthen define flags of their own.
    flags.DEFINE_string("xplane", None, "The profile to repeat.")
    flags.DEFINE_string("out", None, "Where to write the longer profile.")
    flags.DEFINE_integer("times", 10, "How many copies of each event.")
    flags.DEFINE_enum("keep_host", "all", ["all", "launches"], "Host events kept.")
    flags.mark_flags_as_required(["xplane", "out"])
    app.run(main)
