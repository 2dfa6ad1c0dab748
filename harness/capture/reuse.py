"""What a variant's probes reuse of its first compile, and what each probe costs.

The new-shape probe measures the pause a user sees, so it stays a real compile: traced,
lowered and compiled again by the same `jax.jit` object (so JAX explains its cache miss) with
the variant's own options only. The dump options go on the dump compile alone
(`dump_compile_options`; harness.capture.dumping), so neither the first call nor the
recompile pays for the per-pass and emitter files inside the pause it measures; the
recompile's optimized HLO comes from its executable.

Everything else reuses the first compile: the profile and the blocked steps call its
executable; the timing stage calls it too (the same worker) or loads it (`keep_executable`,
`load_executable`), so a GPU variant is never autotuned twice for the same shapes. Where XLA
cannot reuse: the new-shape compile has other shapes, so its GEMMs are autotuned again (the
first compile's autotune results are keyed by shape and do not apply), which is the pause it
measures.

The autotuner's results are kept per variant on a GPU (`autotune_options`): its first compile
writes them to its own folder in the supervisor's private one (`autotune_folder`: a temporary
one where there is none). The dump compile reads them, and so does a timing worker that must
compile the variant again (its executable could not be kept), so it times the
kernels the capture chose, and pays no autotuning for them (XLA allows it: the cache is keyed
by each fusion's HLO and the device, so it never changes the program, only skips the tuning).

`spent` adds each probe's wall seconds to a dict the capture keeps; `costs` makes the typed
record result.json keeps (`CaptureRecord.probe_s`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.capture.reference import Spent
from harness.capture.turn import DeviceTurn
from harness.common import userfiles
from harness.records.probes import ProbeCosts
from harness.store import io


def dump_compile_options(dump: Mapping[str, Any], xla_options: Mapping[str, Any]) -> dict:
    """Returns the dump options the dump compile adds to the jit's (the variant's own
    options, which win where both name a key)."""
    return {k: v for k, v in dump.items() if k not in xla_options}


# XLA's per-fusion autotune cache: each autotuned fusion's choice is a file in the folder, read
# before tuning and written after (xla_gpu_experimental_autotune_cache_mode: update).
AUTOTUNE_CACHE = "xla_gpu_per_fusion_autotune_cache_dir"


def autotune_options(
    platform: str, xla_options: Mapping[str, Any], name: str, private: Path | None
) -> dict[str, str]:
    """The option that keeps a GPU variant's autotune results in its folder under `private`
    (the supervisor's; None keeps nothing), for its first compile and a timing worker's
    compile of it: never its new-shape recompile, which tunes anew as a user's would. A
    variant that sets the cache itself keeps its own setting."""
    if platform != "gpu" or private is None or AUTOTUNE_CACHE in xla_options:
        return {}
    folder = private / "autotune" / name
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {AUTOTUNE_CACHE: str(folder)}


@contextlib.contextmanager
def autotune_folder(platform: str, private: Path | None) -> Iterator[Path | None]:
    """The private folder a GPU variant's first compile keeps its autotune results in: the
    supervisor's where it gave one (a timing worker reads them too), else a temporary one
    that only the dump compile reads (harness.capture.dumping), removed after the capture."""
    if platform != "gpu" or private is not None:
        yield private
        return
    with tempfile.TemporaryDirectory(prefix="harness-autotune-") as made:
        yield Path(made)


# A legacy text result's measured times: they differ run to run where the choice does not.
_RUN_TIME = re.compile(r"run_time\s*\{[^}]*\}")
CHOICE_FILE_LIMIT = 1 << 20  # one fusion's result is a few hundred bytes
CHOICE_FILES_MAX = 100_000  # a bound on the folder's entries read


def autotune_choices(options: Mapping[str, str]) -> dict[str, str] | None:
    """What the first compile autotuned, from its cache folder (`options`, autotune_options'):
    each tuned fusion by its file's path in the folder (XLA's key: the fusion's HLO and the
    device) and a digest of the choice, so two runs' choices compare. XLA writes one file per
    fusion, a binary entry under a folder per key prefix (jaxlib 0.11 on the H200: 101 bytes,
    no timings) or a text result at the top (older: its measured times left out of the
    digest). None where no folder was kept."""
    folder = options.get(AUTOTUNE_CACHE)
    if folder is None or not Path(folder).is_dir():
        return None
    out = {}
    for path in itertools.islice(sorted(Path(folder).rglob("*")), CHOICE_FILES_MAX):
        key = path.relative_to(folder).as_posix()
        if key.startswith("tmp/") or path.suffix not in (".pb", ".textproto"):
            continue  # XLA's files being written, folders, anything not a result
        try:  # XLA's files, in the supervisor's private folder: still read through the one reader
            data = userfiles.read_bytes(path, CHOICE_FILE_LIMIT, folder)
        except (OSError, ValueError):
            continue  # not a plain file
        if path.suffix == ".textproto":
            data = _RUN_TIME.sub("", data.decode(errors="replace")).encode()
        out[key] = hashlib.sha256(data).hexdigest()[:16]
    return out


def compiled_again(jitted: Any, args: tuple[Any, ...], kept: list[Any], turn: DeviceTurn) -> Any:
    """Calls `jitted` on new-shape `args` as a user's call would compile it (trace, lower,
    compile with the jit's options, run); keeps the executable in `kept` for its HLO. The
    trace and the lowering (host work) are made beside other variants' compiles, and only
    XLA's compile and the run hold the device's compile slot (`turn`)."""
    with turn.preparing():
        lowered = jitted.trace(*args).lower()
    with turn.compiling():
        compiled = lowered.compile()
        kept.append(compiled)
        import jax  # loaded with the capture, which imported it already

        return jax.block_until_ready(compiled(*args))  # the run ends inside the phase


@contextlib.contextmanager
def spent(costs: dict[str, float], probe: str) -> Iterator[None]:
    """Adds the block's wall seconds to `costs[probe]`, however the block ends."""
    start = time.perf_counter()
    try:
        yield
    finally:
        costs[probe] = costs.get(probe, 0.0) + time.perf_counter() - start


def costs(
    seconds: Mapping[str, float], ref: Spent | None = None, turn: DeviceTurn | None = None
) -> ProbeCosts:
    """Returns the record of the probes' seconds (a probe that did not run: null), what the
    float64 reference cost (`ref`; None: it was never asked for) and the variant's turn on
    the device (`turn`; None, or one never begun: not recorded)."""
    found = ProbeCosts(**{f"{k}_s": v for k, v in seconds.items()})
    if turn is not None and turn.began is not None:
        found = dataclasses.replace(
            found,
            turn_wait_s=turn.waited_s,
            compile_wait_s=turn.compile_wait_s,
            turn_began=turn.began,
            turn_ended=turn.ended,
            turn_shared=turn.shared,
        )
        if turn.shared:  # the compile slot and the worker's timeline: only with others
            found = dataclasses.replace(
                found,
                compiles=tuple(turn.compiles),
                compiles_asked=tuple(turn.asked),
                preparations=tuple(turn.preparations),
                turn_asked=turn.asked_turn,
                turn_go=turn.go,
                worker_started=turn.worker_started,
                worker_ready=turn.worker_ready,
                capture_ended=time.time(),  # costs are the capture's last record
            )
    if ref is None:
        return found
    return dataclasses.replace(
        found,
        reference_compute_s=ref.compute_s,
        reference_reused=ref.reused,
        reference_overlapped=ref.overlapped,
    )


def keep_executable(compiled: Any, path: Path) -> None:
    """Writes the compiled program for the timing worker, after every measurement of the
    capture. One that cannot be serialized (a host callback, constants) is compiled again."""
    from jax.experimental import serialize_executable  # imports JAX: loaded only when called

    try:
        payload, _, _ = serialize_executable.serialize(compiled)
    except Exception:  # any refusal means: compile it again for timing
        return
    with contextlib.suppress(OSError):
        io.write_bytes(path, payload)


def load_executable(lowered: Any, path: Path | None) -> tuple[Any, str]:
    """Returns the program the capture kept at `path`, loaded without compiling, with a note;
    (None, why) when there is none or it does not load.

    Only from the supervisor's private folder: loading an executable runs what it holds.
    """
    import jax  # loaded with the timing worker's JAX
    from jax.experimental import serialize_executable

    if path is None or not path.is_file():
        return None, "compiled again for timing"
    try:
        in_tree = jax.tree_util.tree_flatten(lowered.args_info)[1]
        compiled = serialize_executable.deserialize_and_load(
            userfiles.read_bytes(path, userfiles.EXECUTABLE), in_tree, lowered.out_tree
        )
    except Exception as e:  # any failure means: compile it again
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return None, f"compiled again for timing (the captured program did not load: {first})"
    return compiled, "the captured program, loaded in the timing process (not compiled again)"
