"""The frontends by framework name: the `Frontend` protocol, `register`, `get` and `mode`.

The built-ins (jax, torch) are modules loaded by name the first time a frontend or a mode is
asked for, as big_vision loads its evaluators; loading one imports neither JAX nor torch
(their capture and analysis are imported when first called). A plug-in is any module that
calls `register(...)` when imported: a test registers one in its own process, and names it in
`HARNESS_FRONTENDS` (module names or paths of .py files, comma-separated) for the processes
a study starts, which inherit the environment: the supervisor, its workers and the forked
analysis children import them before their first lookup (the worker before reading a job).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.common import userfiles
from harness.frontends.modes import UNKNOWN, Mode, Traits

if TYPE_CHECKING:  # the records the protocol is typed with: stages above this low layer
    from harness.config.experiment import Experiment, Variant
    from harness.frontends.contract import Captured, Context
    from harness.hlo.diverge import Divergence
    from harness.records.run_files import Ceilings
    from harness.records.summary import CaptureRecord, TimingRecord, VariantSummary

BUILTIN = ("harness.frontends.jax", "harness.frontends.torch")
PLUGINS_ENV = "HARNESS_FRONTENDS"


class Frontend(Protocol):
    """A framework the harness runs variants in. The arguments are the harness's own
    records, imported for the type checker only (this layer sits below the stages that
    define them). Every method but `modes`' lookups runs in a worker, or in the analysis.
    `Any` is left only for the framework's own values (a call's result, an array)."""

    name: str  # the framework's name, as summary.json writes it (`identity.framework`)
    modes: tuple[Mode, ...]
    traits: Traits
    # Its capture takes its own phases on a shared device (ctx.turn: `compiling` beside
    # other variants' compiles, `begin`/`end` around its measurements; harness.capture.turn).
    # Otherwise (a plug-in that does not say) the worker holds the device alone for its
    # whole capture.
    shares_device: bool

    def preload(self, variant: Variant) -> tuple[str, ...]:
        """The modules a worker for `variant` imports before its first job."""
        ...

    def prepare(self, exp: Experiment, variant: Variant, cache: Path | None) -> None:
        """Makes what variants share before any is captured (their inputs), once per problem."""
        ...

    def subject(self, exp: Experiment, variant: Variant) -> object:
        """Returns what the variant runs: its function and arguments, and how its result is
        judged against the float64 reference (each frontend's own: JAX's is a
        harness.capture.variant.Subject; only the frontend itself calls it)."""
        ...

    def capture(self, exp: Experiment, variant: Variant, ctx: Context) -> Captured:
        """Captures one variant into ctx.variant_dir; returns its Captured (record, call, wait)."""
        ...

    def compile_for_timing(
        self,
        exp: Experiment,
        variant: Variant,
        workdir: Path,
        platform: str,
        executables: Path | None,
    ) -> tuple[Callable[[], Any], str | None]:
        """Returns a steady-state call of a variant another worker captured, and a note."""
        ...

    def waiter(self, platform: str) -> Callable[[Any], Any]:
        """Returns the wait for one call's result (block_until_ready, cuda synchronize)."""
        ...

    def analyze(
        self,
        workdir: Path,
        exp: Experiment,
        variant: Variant,
        record: CaptureRecord,
        timed: TimingRecord | None,
        ceilings: Ceilings | None,
        platform: str,
    ) -> tuple[VariantSummary, list[str]]:
        """Returns the summary (every section) of a variant that ran, from its capture record
        and the run's timing record (`timed`, or None), and its first step's kernel names."""
        ...

    def validate(self, variant: Variant, source: str) -> None:
        """Checks the config keys this frontend owns on any variant (its own section, what
        its modes cannot take); raises harness.config's ConfigError. Optional: a plug-in
        without it owns no key."""
        ...

    def job_scope(self) -> contextlib.AbstractContextManager[None]:
        """What every worker job runs inside, whichever frontend's it is (PyTorch: a scratch
        Inductor cache folder, since importing torch makes one in $TMPDIR)."""
        ...

    def diverge(
        self,
        ir_a: Path,
        ir_b: Path,
        kernels_a: list[str] | None,
        kernels_b: list[str] | None,
    ) -> Divergence:
        """Returns where the variant's IR ladder (`ir_b`, its kernel names `kernels_b`) first
        differs from its baseline's (`ir_a`, `kernels_a`): stage `none` when no compared stage
        differs."""
        ...


_FRONTENDS: dict[str, Frontend] = {}
_MODES: dict[str, Mode] = {}
_loaded: list[bool] = []


def shares_device(frontend: Frontend) -> bool:
    """True when `frontend`'s capture takes its own phases on a shared device (a plug-in
    written before they existed does not say, and gets the device alone)."""
    return bool(getattr(frontend, "shares_device", False))


def register(frontend: Frontend) -> Frontend:
    """Registers `frontend` under its name, with its modes; returns it. Registering the same
    name again replaces it (a plug-in imported twice); a mode name another frontend owns is
    refused, since a config names modes alone."""
    _load()  # the built-ins first, so they keep their order whoever registers next
    for m in frontend.modes:
        owner = _MODES.get(m.name)
        if owner is not None and owner.framework != frontend.name:
            raise ValueError(f"mode {m.name!r} is already {owner.framework}'s")
        if m.framework != frontend.name:
            raise ValueError(
                f"mode {m.name!r} names framework {m.framework!r}, not {frontend.name!r}"
            )
    old = _FRONTENDS.get(frontend.name)
    for m in old.modes if old is not None else ():
        _MODES.pop(m.name, None)
    _FRONTENDS[frontend.name] = frontend
    _MODES.update({m.name: m for m in frontend.modes})
    return frontend


def unregister(name: str) -> None:
    """Removes the frontend `name` and its modes (a test's plug-in, once the test is done)."""
    old = _FRONTENDS.pop(name, None)
    for m in old.modes if old is not None else ():
        _MODES.pop(m.name, None)


def _load() -> None:
    """Imports the built-ins, then the plug-ins `HARNESS_FRONTENDS` names, once."""
    if _loaded:
        return
    _loaded.append(True)
    for name in BUILTIN:
        importlib.import_module(name)
    load_plugins(os.environ.get(PLUGINS_ENV, ""))


def load_plugins(names: str) -> None:
    """Imports each module `names` lists (comma-separated module names or .py paths), each
    of which registers its frontend; an import error is raised, naming the plug-in."""
    for name in filter(None, (n.strip() for n in names.split(","))):
        try:
            if name.endswith(".py"):
                userfiles.import_python_file(Path(name), "harness_frontend")
            else:
                importlib.import_module(name)
        except Exception as e:
            raise ImportError(f"{PLUGINS_ENV}: the frontend plug-in {name!r} failed: {e}") from e


def get(name: str) -> Frontend:
    """Returns the frontend registered as `name`; KeyError names the registered ones."""
    _load()
    if name not in _FRONTENDS:
        raise KeyError(f"no frontend {name!r}; registered: {', '.join(sorted(_FRONTENDS))}")
    return _FRONTENDS[name]


def names() -> tuple[str, ...]:
    """The registered frontends: the built-ins in BUILTIN's order (whichever was imported
    first), then the plug-ins in the order they registered."""
    _load()
    builtin = [b.rsplit(".", 1)[-1] for b in BUILTIN]
    return tuple(
        sorted(_FRONTENDS, key=lambda n: builtin.index(n) if n in builtin else len(builtin))
    )


def modes() -> tuple[Mode, ...]:
    """Every registered mode, by frontend (names()), each frontend's in its own order."""
    return tuple(m for n in names() for m in _FRONTENDS[n].modes)


def mode(name: str) -> Mode:
    """Returns the mode called `name`; KeyError when no frontend has it."""
    _load()
    return _MODES[name]


def find_mode(name: str) -> Mode | None:
    """Returns the mode called `name`, or None (a mode of a run whose plug-in is not loaded)."""
    _load()
    return _MODES.get(name)


def op_by_op(name: str) -> bool:
    """True when the mode called `name` dispatches op by op (False for a mode no frontend has)."""
    found = find_mode(name)
    return found is not None and found.op_by_op


def traits(framework: str) -> Traits:
    """Returns what the rules and the report say about `framework`'s variants (UNKNOWN for a
    framework whose plug-in this process did not load: a saved run read elsewhere)."""
    _load()
    found = _FRONTENDS.get(framework)
    return found.traits if found is not None else UNKNOWN


@contextlib.contextmanager
def job_scope() -> Iterator[None]:
    """Enters every registered frontend's `job_scope` (a plug-in without one needs none)."""
    _load()
    with contextlib.ExitStack() as stack:
        for frontend in list(_FRONTENDS.values()):
            scope = getattr(frontend, "job_scope", None)
            if scope is not None:
                stack.enter_context(scope())
        yield
