"""The capture's probes reuse the first compile: one dump per variant, the new-shape call a
real compile of its own (not dumped), one float64 reference, and what each probe cost kept in
result.json. Checked on the tiny real CPU run (cpu_run), by the files and records it made."""

from __future__ import annotations

import dataclasses

import pytest

from harness.capture import reuse
from harness.common import userfiles
from harness.records.summary import load_capture


def test_every_probe_of_a_captured_variant_says_what_it_cost(cpu_run):
    for name, probes in {
        "xla": ("first_call", "steady", "profile", "reference", "recompile", "ir"),
        "eager": ("first_call", "steady", "profile", "reference", "recompile", "ir"),
    }.items():
        record = load_capture(cpu_run / "variants" / name / "result.json")
        costs = dataclasses.asdict(record.probe_s)
        assert all(costs[f"{p}_s"] is not None and costs[f"{p}_s"] >= 0 for p in probes), name


def test_the_recompile_is_compiled_but_never_dumped_again(cpu_run):
    vdir = cpu_run / "variants" / "xla"
    modules = {p.name.split(".")[0] for p in (vdir / "dump").iterdir() if ".jit_" in p.name}
    assert len(modules) == 1  # the first compile's module alone; before, a second id
    again = userfiles.read_text(
        vdir / "ir" / "41-hlo-after-optimizations-recompile.txt", userfiles.IR_TEXT
    )
    assert "HloModule jit_" in again and "f32[8,32]" in again  # the new shape, optimized
    record = load_capture(vdir / "result.json")
    assert record.recompile is not None and record.recompile.backend_compiles == 1


def test_the_dump_compile_takes_the_dump_options_the_variant_does_not_set():
    dump = {"xla_dump_to": "/d", "xla_dump_hlo_as_text": True}
    assert reuse.dump_compile_options(dump, {"xla_dump_hlo_as_text": False}) == {
        "xla_dump_to": "/d"
    }


def test_a_gpu_variants_autotune_results_are_kept_in_its_own_folder(tmp_path):
    """On a GPU the first compile and a timing compile take the variant's own folder; a CPU,
    a study without the private folder and a variant that sets the cache itself, nothing."""
    kept = reuse.autotune_options("gpu", {}, "xla", tmp_path)
    assert kept == {reuse.AUTOTUNE_CACHE: str(tmp_path / "autotune" / "xla")}
    assert (tmp_path / "autotune" / "xla").is_dir()
    assert reuse.autotune_options("gpu", {}, "matmul_only", tmp_path) != kept
    mine = {reuse.AUTOTUNE_CACHE: "/mine"}
    assert reuse.autotune_options("gpu", mine, "xla", tmp_path) == {}
    assert reuse.autotune_options("cpu", {}, "xla", tmp_path) == {}
    assert reuse.autotune_options("gpu", {}, "xla", None) == {}


DUMPED_CONFIG = """
experiment: d
problem: {m: 16, k: 32, n: 32}
measure: {warmup: 1, steps: 2, recompile: true}
profile: {enabled: false}
dump: {passes: true}
variants:
  - {name: xla, mode: jit}
"""


def test_the_first_call_is_a_users_compile_and_the_dumps_come_from_one_of_their_own(
    tmp_path, monkeypatch
):
    import jax

    from harness.capture.variant import capture_variant
    from harness.config import load
    from harness.frontends.contract import Context

    (tmp_path / "c.yaml").write_text(DUMPED_CONFIG)
    exp = load(str(tmp_path / "c.yaml")).experiment
    asked: list[dict] = []
    real = jax.stages.Lowered.compile

    def spy(self, compiler_options=None, **kwargs):
        asked.append(dict(compiler_options or {}))
        return real(self, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", spy)
    vdir = tmp_path / "xla"
    record = capture_variant(exp, exp.variant("xla"), Context(vdir, "cpu")).record
    first, again, dumped = asked  # the first call, the new-shape recompile, the dump compile
    assert not any(k.startswith("xla_dump") for k in first | again)  # a user's compiles
    assert dumped["xla_dump_hlo_pass_re"] == ".*" and dumped["xla_dump_to"] == str(vdir / "dump")
    passes = [p for p in (vdir / "dump").iterdir() if ".jit_" in p.name]
    assert len({p.name.split(".")[0] for p in passes}) == 1 and len(passes) > 10  # one module
    assert record.probe_s.dump_s is not None and record.probe_s.dump_s > 0
    assert not record.probe_failures and not any("differs" in n for n in record.notes)
    assert (vdir / "ir").is_dir() and record.pauses.backend_compiles == 1


def test_a_dump_compile_that_is_not_the_measured_program_says_so(tmp_path):
    import jax
    import jax.numpy as jnp

    from harness.capture import dumping
    from harness.capture.turn import free

    lowered = jax.jit(lambda x: jnp.tanh(x @ x) * 2.0 + 1.0).lower(jnp.ones((8, 8)))
    measured = lowered.compile()
    options = {"xla_dump_to": str(tmp_path / "same"), "xla_dump_hlo_as_text": True}
    assert dumping.compile_dumped(lowered, options, measured, free(), tuned=False) is None
    unfused = {"xla_dump_to": str(tmp_path / "other"), "xla_disable_hlo_passes": "fusion"}
    note = dumping.compile_dumped(lowered, unfused, measured, free(), tuned=False)
    assert note is not None and "differs from the measured program's" in note
    assert any((tmp_path / "same").iterdir())


def test_a_dump_compile_that_fails_is_the_dump_probes_and_the_note_says_why(tmp_path, monkeypatch):
    """The dump compile (the only compile with `xla_dump_to`) raises: the variant stands, the
    `dump` probe's failure is recorded, and the missing dump's note names that failure rather
    than only saying XLA wrote none."""
    import jax

    from harness.capture.variant import capture_variant
    from harness.config import load
    from harness.frontends.contract import Context

    (tmp_path / "c.yaml").write_text(DUMPED_CONFIG)
    exp = load(str(tmp_path / "c.yaml")).experiment
    real = jax.stages.Lowered.compile

    def failing_dump(self, compiler_options=None, **kwargs):
        if "xla_dump_to" in (compiler_options or {}):
            raise RuntimeError("INTERNAL: the disk went away\nsecond line")
        return real(self, compiler_options=compiler_options, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", failing_dump)
    record = capture_variant(exp, exp.variant("xla"), Context(tmp_path / "xla", "cpu")).record
    assert record.status == "ok" and record.latency_blocked_s
    assert [f.probe for f in record.probe_failures] == ["dump"]
    (note,) = [n for n in record.notes if "no dump" in n]
    assert "dump compile failed" in note and "the disk went away" in note
    assert "second line" not in note


def test_a_dump_of_other_modules_says_how_many():
    from harness.capture import dumping

    assert "2 module(s) of other names" in dumping.missing_note("jit_f", 2, ())
    assert dumping.missing_note("jit_f", 0, ()) == "XLA wrote no dump for this module"


WAITED_CONFIG = """
experiment: w
program:
  function: examples.two_input:loss
  init: examples.two_input:init
  inputs:
    - {shape: [16, 8], dtype: float32}
    - {shape: [16], dtype: int32, low: 0, high: 64}
measure: {warmup: 1, steps: 2, recompile: true}
profile: {enabled: false}
dump: {passes: false}
variants:
  - {name: xla, mode: jit}
"""


@pytest.mark.parametrize(
    ("slots", "queued", "first"),
    [(1, False, True), (2, False, False), (2, True, False)],
    ids=["one-slot-held", "two-held-nobody-queued", "two-held-one-queued"],
)
def test_host_work_fills_a_long_wait_for_a_compile_slot_and_no_short_one(
    tmp_path, monkeypatch, slots, queued, first
):
    """Other variants take every compile slot after this one's turn ended, while it makes its
    new-shape inputs. Its dump compile comes before the recompile asks when the wait is for
    the rest of another's compile (the one slot held: on the H200 a scanned encoder's last
    dump compile, made after every compile, was the study's tail), after it when a slot of
    several may free soon (made first, two slots held, it left one free 11.8 s and 13 s, once
    with another worker queued). Its program's float64 reference comes last either way. The
    others' compiles end when this one's recompile asks for a slot."""
    import fcntl
    import os

    import jax

    from harness.capture import dumping, reference
    from harness.capture import turn as device_turn
    from harness.capture.variant import capture_variant
    from harness.config import load
    from harness.frontends.contract import Context

    (tmp_path / "c.yaml").write_text(WAITED_CONFIG)
    exp = load(str(tmp_path / "c.yaml")).experiment
    locks = tmp_path / "locks"
    locks.mkdir()
    turn = device_turn.DeviceTurn(locks=locks, compiles=slots)
    others = [device_turn.slot_file(i) for i in range(slots)]
    others += [device_turn.COMPILE_QUEUE_FILE] if queued else []
    held = [os.open(locks / name, os.O_RDWR | os.O_CREAT) for name in others]
    asked: list[str] = []
    real_compile, real_timed = jax.stages.Lowered.compile, reference.Pending._timed
    real_preparing, real_again = turn.preparing, reuse.compiled_again
    real_dumped = dumping.compile_dumped

    computing: list[bool] = []  # inside the reference, whose own jit is not the variant's

    def compile_spy(self, compiler_options=None, **kwargs):
        if not computing:
            asked.append("dump" if "xla_dump_to" in (compiler_options or {}) else "compile")
        return real_compile(self, compiler_options=compiler_options, **kwargs)

    def reference_spy(self):
        asked.append("reference")
        computing.append(True)
        try:
            return real_timed(self)
        finally:
            computing.clear()

    def preparing():
        if turn.ended is not None and "taken" not in asked:
            asked.append("taken")
            for fd in held:  # asked after the turn, before the recompile
                fcntl.flock(fd, fcntl.LOCK_EX)
        return real_preparing()

    def recompiled(*args):
        for fd in held:  # the others' compiles end as this one's recompile asks
            fcntl.flock(fd, fcntl.LOCK_UN)
        return real_again(*args)

    def dumped_as_on_a_gpu(lowered, options, measured, turn, tuned):
        # Reading the first compile's autotune results, it is host work and takes no slot.
        return real_dumped(lowered, options, measured, turn, True)

    monkeypatch.setattr(jax.stages.Lowered, "compile", compile_spy)
    monkeypatch.setattr(reference.Pending, "_timed", reference_spy)
    monkeypatch.setattr(turn, "preparing", preparing)
    monkeypatch.setattr(reuse, "compiled_again", recompiled)
    monkeypatch.setattr(dumping, "compile_dumped", dumped_as_on_a_gpu)
    context = Context(tmp_path / "xla", "cpu", turn=turn)
    try:
        record = capture_variant(exp, exp.variant("xla"), context).record
    finally:
        for fd in held:
            os.close(fd)
    dump = ["dump"]
    assert asked == ["compile", "taken", *(dump if first else []), "compile"] + (
        [] if first else dump
    ) + ["reference"]  # after the recompile, beside no compile of its own variant's
    assert record.status == "ok" and not record.probe_failures
    assert record.recompile is not None and record.recompile.backend_compiles == 1
    assert record.numerics is not None and record.probe_s.reference_s > 0
