"""The float64 reference is computed once per run and reference key, kept in the run's private
folder and reused by every variant with that key (each may run in a process of its own), with
numerics bit-identical to computing it again; another problem gets its own; a kept file that is
not what it says is computed again, with a note. Real JAX on the CPU at tiny shapes."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import TINY

from harness.capture import reference
from harness.capture.variant import subject_of
from harness.config import load
from harness.records.summary import load_capture


@pytest.fixture(scope="module")
def exp():
    return load("gelu.yaml", [o for o in TINY if not o.startswith("--config.timing")]).experiment


def kept(folder: Path) -> list[Path]:
    """The references kept in `folder` (beside them, each key's lock file)."""
    return sorted(folder.glob("reference-*.npz"))


def judged(exp, name: str, folder: Path | None, overlap: bool = False):
    """Judges the variant's own jit result as its capture does; returns (numerics, the
    reference compared with, what the reference cost)."""
    variant = exp.variant(name)
    subject = subject_of(exp, variant)
    subject.reference.use(folder, overlap)
    subject.reference.start()
    y = jax.jit(subject.fn)(*subject.placed.args)
    numerics = subject.judge(y)
    _, (ref,), _ = subject.kept(y)
    return numerics, ref, subject.reference.spent()


def test_a_variant_with_the_same_problem_reuses_the_first_ones_reference_bit_for_bit(
    exp, tmp_path: Path
) -> None:
    uncached, ref, spent = judged(exp, "xla", None)
    assert spent == reference.Spent(spent.compute_s, reused=False, overlapped=False)
    first, first_ref, first_spent = judged(exp, "xla", tmp_path)
    assert not first_spent.reused and first_spent.compute_s is not None
    again, again_ref, again_spent = judged(exp, "xla_no_fusion", tmp_path)
    assert again_spent.reused and again_spent.compute_s is None
    assert uncached == first == again  # every error and the verdict, exactly
    assert ref.tobytes() == first_ref.tobytes() == again_ref.tobytes()
    assert len(kept(tmp_path)) == 1


def test_a_variant_with_another_problem_or_mode_gets_its_own(exp, tmp_path: Path) -> None:
    judged(exp, "xla", tmp_path)
    for name in ("xla_exact_gelu", "matmul_only", "xla_lax_cond", "xla_mixed_dtype"):
        own, _, spent = judged(exp, name, tmp_path)
        assert not spent.reused, name
        assert judged(exp, name, None)[0] == own, name
    assert len(kept(tmp_path)) == 5
    # What the reference does not read is not in its key: flax computes the same math.
    assert judged(exp, "xla_flax_nnx", tmp_path)[2].reused


def test_a_kept_reference_that_is_not_what_it_says_is_computed_again(
    exp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, good_ref, _ = judged(exp, "xla", tmp_path)
    (archive,) = kept(tmp_path)
    archive.write_bytes(b"not an npz")
    again, again_ref, spent = judged(exp, "xla", tmp_path)
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "computed again" in note[0]
    assert not spent.reused and again == good and again_ref.tobytes() == good_ref.tobytes()
    assert judged(exp, "xla", tmp_path)[2].reused  # kept again, readable this time
    # Another key's file copied over this one's is a miss too, never used.
    other = tmp_path / "other"
    other.mkdir()
    judged(exp, "matmul_only", other)
    (foreign,) = kept(other)
    archive.write_bytes(foreign.read_bytes())
    assert not judged(exp, "xla", tmp_path)[2].reused


def test_a_reference_computed_beside_the_first_compile_is_the_same(exp, tmp_path: Path) -> None:
    serial = judged(exp, "xla_exact_gelu", None)
    beside = judged(exp, "xla_exact_gelu", tmp_path, overlap=True)
    assert beside[2].overlapped and not beside[2].reused
    assert serial[0] == beside[0] and serial[1].tobytes() == beside[1].tobytes()


def test_a_reference_asked_for_by_two_workers_at_once_is_computed_by_one(tmp_path: Path) -> None:
    """Two workers (threads here: each opens the key's lock file itself, as processes do) ask
    for one key together; the second waits while the first computes, then reads what it kept."""
    started, computing, calls = threading.Barrier(2), threading.Event(), []

    def compute() -> reference.Made:
        calls.append(1)
        computing.set()
        time.sleep(0.2)  # a window for the other to compute too, were it let in
        return (np.arange(4.0),), None

    def ask(first: bool) -> reference.Spent | None:
        pending = reference.Pending("one key", compute)
        pending.use(tmp_path, overlap=False)
        started.wait(30)
        if not first:
            assert computing.wait(30)  # the first is computing: this one asks beside it
        assert pending.result()[0][0].tolist() == [0.0, 1.0, 2.0, 3.0]
        return pending.spent()

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        firsts = [pool.submit(ask, True), pool.submit(ask, False)]
        spent = [f.result(60) for f in firsts]
    assert len(calls) == 1
    assert [s.reused for s in spent] == [False, True] and spent[1].compute_s is None


def test_a_failed_reference_is_never_kept(tmp_path: Path) -> None:
    def fails() -> reference.Made:
        raise FloatingPointError("no float64 here")

    for overlap in (False, True):
        pending = reference.Pending("key", fails, overlappable=True)
        pending.use(tmp_path, overlap)
        pending.start()
        with pytest.raises(FloatingPointError):
            pending.result()
        assert kept(tmp_path) == []


def test_the_study_computes_each_reference_once_and_records_who_reused_it(cpu_run: Path):
    spent = {}
    for folder in sorted((cpu_run / "variants").iterdir()):
        probes = load_capture(folder / "result.json").probe_s
        if probes is not None and probes.reference_reused is not None:
            spent[folder.name] = dataclasses.asdict(probes)
    same = ("eager", "xla", "xla_no_fusion", "xla_host_callback", "xla_flax_linen", "xla_flax_nnx")
    assert [spent[n]["reference_reused"] for n in same].count(False) == 1
    for name in ("xla_exact_gelu", "xla_mixed_dtype", "xla_lax_cond", "matmul_only"):
        assert spent[name]["reference_reused"] is False, name
    for probes in spent.values():
        computed = probes["reference_compute_s"]
        assert (computed is None) == probes["reference_reused"]
        if not reference.may_overlap():  # at most CONCURRENT_CORES cores: always serial
            assert probes["reference_overlapped"] is False
    assert np.isfinite([p["reference_s"] for p in spent.values()]).all()
