"""Feature-detected access to torch.compile's diagnostics, for the torch capture worker.

torch is imported lazily, inside each function, and every accessor detects features by
attribute, never by version string: the GPU machine runs torch 2.11, this one 2.13, and
Dynamo's debugging surface changes between releases. A feature that is missing returns a
`NotAvailable` ("not available: <why>") instead of raising.

What moved, and how each accessor copes:
- `torch._dynamo.explain(fn)(*args)` returns an `ExplainOutput` whose fields are read with
  getattr (`graph_count`, `graph_break_count`, `break_reasons` of `GraphCompileReason` with
  `.reason` and `.user_stack`). `CompileProfiler` is gone; nothing here uses it.
- `torch._dynamo.utils.get_compilation_metrics()`: one entry per compile, and also
  entries whose fields are all None (2.11 logs a runtime entry after each compile); fields
  are read with getattr and all-None entries are kept but marked `empty`.
- Inductor's provenance tracking flag moved twice: it first followed
  `torch._inductor.config.trace.enabled` (TORCH_COMPILE_DEBUG=1), then got its own
  `trace.provenance_tracking` (bool, INDUCTOR_PROVENANCE=1), then became
  `trace.provenance_tracking_level` (int 0/1/2; 2.11 and 2.13 have this one).
- TORCH_TRACE is read when torch's logging starts (at import); `torch_capture_env` also
  points the already-created trace handler at the new folder when torch was imported first.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.frontends.torch.inductor.trace_log import break_headline


@dataclass(frozen=True)
class NotAvailable:
    """A feature this torch does not have (or that failed): says why, never raises."""

    why: str

    def __str__(self) -> str:
        return f"not available: {self.why}"

    def to_json(self) -> str:
        return str(self)


def _torch() -> ModuleType | NotAvailable:
    try:
        return importlib.import_module("torch")
    except Exception as err:  # ImportError, or a broken install raising anything
        return NotAvailable(f"torch cannot be imported ({type(err).__name__}: {err})")


def _torch_attr(dotted: str) -> Any:
    """Returns torch.a.b.c (see `_attr`), or NotAvailable when torch cannot be imported."""
    torch = _torch()
    return torch if isinstance(torch, NotAvailable) else _attr(torch, dotted)


def _attr(root: Any, dotted: str) -> Any:
    """Returns root.a.b.c, importing submodules on the way; NotAvailable names the gap."""
    obj = root
    path = getattr(root, "__name__", "torch")
    for part in dotted.split("."):
        nxt = getattr(obj, part, None)
        if nxt is None and isinstance(obj, ModuleType):
            try:
                nxt = importlib.import_module(f"{obj.__name__}.{part}")
            except Exception:
                nxt = None
        if nxt is None:
            return NotAvailable(f"{path}.{part} does not exist in this torch")
        obj, path = nxt, f"{path}.{part}"
    return obj


def torch_version() -> str | NotAvailable:
    """The installed torch version string, e.g. `2.13.0+cpu`."""
    torch = _torch()
    return torch if isinstance(torch, NotAvailable) else str(getattr(torch, "__version__", "?"))


# --------------------------------------------------------------------------------------------
# explain()


@dataclass(frozen=True)
class ExplainFacts:
    """What `torch._dynamo.explain` says: graphs, breaks and why each break happened.

    `break_reasons` are one-line headlines (`Unsupported Tensor.item() call with
    capture_scalar_outputs=False`); `break_details` the full texts; `break_locations` the
    user's `file:line` of each break when the reason carries a user stack.
    """

    graph_count: int
    graph_break_count: int
    break_reasons: tuple[str, ...]
    break_details: tuple[str, ...]
    break_locations: tuple[str | None, ...]
    op_count: int | None
    guard_count: int | None

    def to_json(self) -> dict[str, Any]:
        return {k: _jsonable(getattr(self, k)) for k in self.__dataclass_fields__}


def explain(
    fn: Callable[..., Any], *args: Any, keep_caches: bool = False, **kwargs: Any
) -> ExplainFacts | NotAvailable:
    """Run `torch._dynamo.explain(fn)(*args, **kwargs)` and return its facts.

    Note: explain() resets Dynamo before and after it runs, so functions compiled earlier
    recompile on their next call. With `keep_caches`, both resets are suspended
    (`suspended_reset`): pass a function whose code object nothing compiled yet (its
    explanation then starts from an empty cache anyway), and every other compiled function
    keeps its graphs.
    """
    explain_fn = _torch_attr("_dynamo.explain")
    if isinstance(explain_fn, NotAvailable):
        return explain_fn
    try:
        with suspended_reset() if keep_caches else contextlib.nullcontext():
            runner = explain_fn(fn)
            out = runner(*args, **kwargs) if callable(runner) else runner
    except Exception as err:
        return NotAvailable(f"explain() raised {type(err).__name__}: {err}")
    reasons = list(getattr(out, "break_reasons", None) or [])
    texts = [str(getattr(r, "reason", r)) for r in reasons]
    graph_count = _int_or(getattr(out, "graph_count", None), len(getattr(out, "graphs", []) or []))
    guards = getattr(out, "out_guards", None)
    return ExplainFacts(
        graph_count=graph_count,
        graph_break_count=_int_or(getattr(out, "graph_break_count", None), len(reasons)),
        break_reasons=tuple(break_headline(t) for t in texts),
        break_details=tuple(texts),
        break_locations=tuple(_user_location(r) for r in reasons),
        op_count=_int_or(getattr(out, "op_count", None), None),
        guard_count=len(guards) if guards is not None else None,
    )


@contextlib.contextmanager
def suspended_reset() -> Iterator[None]:
    """Makes `torch._dynamo.reset` a no-op inside the block.

    explain() imports `reset` from `torch._dynamo` when it runs and calls it before and after
    explaining, which drops every compiled graph of the process; a study that keeps compiled
    variants for its timing stage cannot afford that.
    """
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or not hasattr(dynamo, "reset"):
        yield
        return
    saved = dynamo.reset
    dynamo.reset = lambda: None
    try:
        yield
    finally:
        dynamo.reset = saved


def _user_location(reason: Any) -> str | None:
    stack = getattr(reason, "user_stack", None) or []
    if not stack:
        return None
    frame = stack[-1]
    name, line = getattr(frame, "filename", None), getattr(frame, "lineno", None)
    return f"{name}:{line}" if name and line is not None else None


def _int_or(value: Any, default: int | None) -> Any:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


# --------------------------------------------------------------------------------------------
# Compilation metrics and compile times

METRIC_FIELDS = (
    "compile_id",
    "co_name",
    "recompile_reason",
    "guard_count",
    "num_graph_breaks",
    "graph_op_count",
    "restart_reasons",
    "entire_frame_compile_time_s",
    "backend_compile_time_s",
    "inductor_compile_time_s",
    "code_gen_time_s",
    "triton_compile_time_us",
    "compile_time_autotune_time_us",
    "runtime_triton_autotune_time_us",
    "fail_type",
    "fail_reason",
)


@dataclass(frozen=True)
class CompileMetric:
    """One entry of `get_compilation_metrics()`: the fields of METRIC_FIELDS this torch has.

    `missing` names the fields this torch's entries lack; `empty` is True for entries whose
    every field is None (2.11 adds one after each compile).
    """

    fields: Mapping[str, Any]
    missing: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return all(v is None for v in self.fields.values())

    @property
    def compile_id(self) -> str | None:
        value = self.fields.get("compile_id")
        return None if value is None else str(value)

    @property
    def recompile_reason(self) -> str | None:
        value = self.fields.get("recompile_reason")
        return None if value in (None, "None") else str(value)

    def to_json(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in self.fields.items()} | {"empty": self.empty}


def compilation_metrics() -> tuple[CompileMetric, ...] | NotAvailable:
    """Return Dynamo's compilation metrics of this process (read with getattr)."""
    getter = _torch_attr("_dynamo.utils.get_compilation_metrics")
    if isinstance(getter, NotAvailable):
        return getter
    try:
        entries = list(getter())
    except Exception as err:
        return NotAvailable(f"get_compilation_metrics() raised {type(err).__name__}: {err}")
    out = []
    for entry in entries:
        present = {f: getattr(entry, f) for f in METRIC_FIELDS if hasattr(entry, f)}
        missing = tuple(f for f in METRIC_FIELDS if not hasattr(entry, f))
        out.append(CompileMetric(present, missing))
    return tuple(out)


def recompile_reasons(metrics: tuple[CompileMetric, ...] | NotAvailable) -> tuple[str, ...]:
    """The recompile reasons of the metrics, in compile order (empty when unavailable)."""
    if isinstance(metrics, NotAvailable):
        return ()
    return tuple(r for m in metrics if (r := m.recompile_reason))


def compile_times() -> str | NotAvailable:
    """Return `torch._dynamo.utils.compile_times(repr="str")`: Dynamo's timing table."""
    fn = _torch_attr("_dynamo.utils.compile_times")
    if isinstance(fn, NotAvailable):
        return fn
    try:
        return str(fn(repr="str"))
    except TypeError:
        try:
            return str(fn())
        except Exception as err:
            return NotAvailable(f"compile_times() raised {type(err).__name__}: {err}")
    except Exception as err:
        return NotAvailable(f"compile_times() raised {type(err).__name__}: {err}")


# --------------------------------------------------------------------------------------------
# Inductor provenance tracking

# Newest first: (config object under torch._inductor.config, attribute, value that enables it).
PROVENANCE_CANDIDATES: tuple[tuple[str, str, Any], ...] = (
    ("trace", "provenance_tracking_level", 1),
    ("trace", "provenance_tracking", True),
    ("trace", "enabled", True),
)


@dataclass(frozen=True)
class ConfigSetting:
    """Where a config flag lives in this torch, and its current value."""

    path: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "value": _jsonable(self.value)}


def _inductor_config() -> ModuleType | NotAvailable:
    torch = _torch()
    if isinstance(torch, NotAvailable):
        return torch
    return _attr(torch, "_inductor.config")


def provenance_setting() -> ConfigSetting | NotAvailable:
    """Return the flag that turns on Inductor's provenance tracking in this torch."""
    config = _inductor_config()
    if isinstance(config, NotAvailable):
        return config
    for group, name, _ in PROVENANCE_CANDIDATES:
        holder = getattr(config, group, None)
        if holder is not None and hasattr(holder, name):
            return ConfigSetting(f"torch._inductor.config.{group}.{name}", getattr(holder, name))
    return NotAvailable("no provenance tracking flag under torch._inductor.config.trace")


def _provenance_patch(config: ModuleType, level: int) -> list[tuple[str, str, Any]]:
    for group, name, on in PROVENANCE_CANDIDATES:
        holder = getattr(config, group, None)
        if holder is not None and hasattr(holder, name):
            value = level if isinstance(on, int) and not isinstance(on, bool) else bool(level)
            return [(group, name, value)]
    return []


@contextlib.contextmanager
def _patched(
    config: ModuleType, changes: list[tuple[str, str, Any]], where: str = "torch._inductor.config"
) -> Iterator[list[ConfigSetting]]:
    """Set `config.<group>.<name>` for each change inside the block; restore afterwards.

    Changes whose attribute this torch lacks are skipped (the caller compares with what was
    applied to report them)."""
    saved: list[tuple[Any, str, Any]] = []
    applied: list[ConfigSetting] = []
    try:
        for group, name, value in changes:
            holder = getattr(config, group, None) if group else config
            if holder is None or not hasattr(holder, name):
                continue
            saved.append((holder, name, getattr(holder, name)))
            setattr(holder, name, value)
            applied.append(ConfigSetting(f"{where}.{group + '.' if group else ''}{name}", value))
        yield applied
    finally:
        for holder, name, old in reversed(saved):
            setattr(holder, name, old)


# --------------------------------------------------------------------------------------------
# Capture folders and environment


@dataclass(frozen=True)
class TorchCaptureDirs:
    """The folders one torch variant's capture writes, all inside the variant folder."""

    root: Path
    inductor_cache: Path
    triton_cache: Path
    debug: Path
    trace: Path
    tmp: Path  # Python's temporary folder while compiling: Inductor's precompiled headers

    def env(self, kernel_profile: bool = True) -> dict[str, str]:
        """The environment a fresh capture process needs: caches, debug dir, TORCH_TRACE,
        caches off so Inductor compiles (and writes its artifacts) every time, provenance on.
        """
        env = {
            "TORCHINDUCTOR_CACHE_DIR": str(self.inductor_cache),
            "TRITON_CACHE_DIR": str(self.triton_cache),
            "TORCH_COMPILE_DEBUG_DIR": str(self.debug),
            "TORCH_COMPILE_DEBUG": "1",
            "TORCH_TRACE": str(self.trace),
            "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
            "INDUCTOR_PROVENANCE": "1",
        }
        if kernel_profile:
            env["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
        return env


def capture_dirs(variant_dir: Path | str) -> TorchCaptureDirs:
    """Return the capture folders of a variant: `<variant>/torch/{inductor_cache,...}`."""
    root = Path(variant_dir) / "torch"
    return TorchCaptureDirs(
        root=root,
        inductor_cache=root / "inductor_cache",
        triton_cache=root / "triton_cache",
        debug=root / "debug",
        trace=root / "trace",
        tmp=root / "tmp",
    )


@dataclass(frozen=True)
class TorchCaptureState:
    """What `torch_capture_env` set: the folders, the live config it patched (when torch was
    already imported) and what it could not set."""

    dirs: TorchCaptureDirs
    env: Mapping[str, str]
    applied: tuple[ConfigSetting, ...] = ()
    unavailable: tuple[NotAvailable, ...] = ()
    trace_redirected: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "dirs": {k: str(getattr(self.dirs, k)) for k in self.dirs.__dataclass_fields__},
            "env": dict(self.env),
            "applied": [a.to_json() for a in self.applied],
            "unavailable": [str(u) for u in self.unavailable],
            "trace_redirected": self.trace_redirected,
            "notes": list(self.notes),
        }


@contextlib.contextmanager
def torch_capture_env(
    variant_dir: Path | str, kernel_profile: bool = True
) -> Iterator[TorchCaptureState]:
    """Point Inductor's caches, debug folder and TORCH_TRACE into the variant folder.

    Sets the environment of `TorchCaptureDirs.env` (enough when torch is imported inside the
    block, e.g. in a fresh worker). When torch is already imported, also patches the live
    config: `force_disable_caches`, `trace.enabled`, `trace.debug_dir`, the provenance flag,
    `cpp.enable_kernel_profile`, and moves the TORCH_TRACE handler to the new folder.
    Everything is restored on exit, except what a torch imported inside the block read from
    the environment at import (a fresh worker keeps those settings; that is the point).
    Missing features are listed in `unavailable`.
    """
    dirs = capture_dirs(variant_dir)
    for d in (dirs.inductor_cache, dirs.triton_cache, dirs.debug, dirs.trace):
        d.mkdir(parents=True, exist_ok=True)
    env = dirs.env(kernel_profile)
    with contextlib.ExitStack() as stack:
        stack.enter_context(temporary_files_in(dirs.tmp))
        if "torch" not in sys.modules:
            stack.enter_context(_environment(env))
            yield TorchCaptureState(
                dirs, env, notes=("torch not imported yet: the environment is enough",)
            )
            return
        # The live config is patched before the environment changes: importing
        # torch._inductor.config with TORCH_COMPILE_DEBUG etc. already set would bake them
        # into its defaults, and the "restored" values would be the patched ones.
        applied, unavailable = stack.enter_context(_live_config(dirs, kernel_profile))
        redirected = stack.enter_context(_trace_handler(dirs.trace))
        stack.enter_context(_environment(env))
        missing = [*unavailable, *([redirected] if isinstance(redirected, NotAvailable) else [])]
        yield TorchCaptureState(
            dirs, env, tuple(applied), tuple(missing), trace_redirected=redirected is True
        )


@contextlib.contextmanager
def torch_cache_env(variant_dir: Path | str) -> Iterator[TorchCaptureDirs]:
    """Point only Inductor's and Triton's caches into the variant folder (caches stay on): for a
    compile that is timed but not captured, whose files must still stay in the run folder."""
    dirs = capture_dirs(variant_dir)
    for d in (dirs.inductor_cache, dirs.triton_cache):
        d.mkdir(parents=True, exist_ok=True)
    with (
        temporary_files_in(dirs.tmp),
        _environment(
            {
                "TORCHINDUCTOR_CACHE_DIR": str(dirs.inductor_cache),
                "TRITON_CACHE_DIR": str(dirs.triton_cache),
            }
        ),
    ):
        yield dirs


@contextlib.contextmanager
def scratch_cache_dir() -> Iterator[None]:
    """For imports outside a variant's block: importing torch._dynamo makes Inductor's default
    cache folder, $TMPDIR/torchinductor_<user>, and keeps it in the environment, when
    TORCHINDUCTOR_CACHE_DIR is unset. Within the block it is a scratch folder instead, removed
    afterwards, and the variable is unset again (each variant's block sets its own)."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        yield
        return

    with tempfile.TemporaryDirectory(prefix="torch-import-") as scratch:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = scratch
        try:
            yield
        finally:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)


# Inductor keeps its precompiled headers in `<gettempdir()>/torchinductor_<user>`, ignoring
# TORCHINDUCTOR_CACHE_DIR, and reads the folder once, when torch._inductor.codecache is imported.
_HEADER_NAMES = ("_HEADER_DIR", "_HEADER_LOCK_DIR")


@contextlib.contextmanager
def temporary_files_in(folder: Path) -> Iterator[None]:
    """Within the block, Python's temporary folder (tempfile, and TMPDIR for the compiler's
    processes) is `folder`, so a codecache imported inside it puts its headers there; one
    imported before is pointed there too. Restored afterwards."""
    folder.mkdir(parents=True, exist_ok=True)

    saved_tempdir = tempfile.tempdir
    codecache = sys.modules.get("torch._inductor.codecache")
    saved: dict[str, Any] = {}
    with _environment({"TMPDIR": str(folder)}):
        tempfile.tempdir = str(folder)
        try:
            if codecache is not None and all(hasattr(codecache, n) for n in _HEADER_NAMES):
                saved = {n: getattr(codecache, n) for n in _HEADER_NAMES}
                user = Path(codecache._HEADER_DIR).parent.name  # torchinductor_<user>
                headers = folder / user / "precompiled_headers"
                codecache._HEADER_DIR = str(headers)
                codecache._HEADER_LOCK_DIR = str(headers / "locks")
            yield
        finally:
            tempfile.tempdir = saved_tempdir
            for name, value in saved.items():
                setattr(codecache, name, value)


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables inside the block; restore (or remove) them afterwards."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def _live_config(
    dirs: TorchCaptureDirs, kernel_profile: bool
) -> Iterator[tuple[list[ConfigSetting], list[NotAvailable]]]:
    """Patch the imported Inductor and Dynamo configs for the block (see torch_capture_env)."""
    inductor = _inductor_config()
    torch = _torch()
    dynamo = torch if isinstance(torch, NotAvailable) else _attr(torch, "_dynamo.config")
    wanted: list[tuple[ModuleType | NotAvailable, str, list[tuple[str, str, Any]]]] = [
        (
            inductor,
            "torch._inductor.config",
            [
                ("", "force_disable_caches", True),
                ("trace", "enabled", True),
                ("trace", "debug_dir", str(dirs.debug)),
                *(() if isinstance(inductor, NotAvailable) else _provenance_patch(inductor, 1)),
                *((("cpp", "enable_kernel_profile", True),) if kernel_profile else ()),
            ],
        ),
        # trace.enabled also makes Dynamo write debug logs under its own debug root (the
        # current folder by default): keep those in the variant folder too.
        (dynamo, "torch._dynamo.config", [("", "debug_dir_root", str(dirs.debug))]),
    ]
    applied: list[ConfigSetting] = []
    unavailable: list[NotAvailable] = []
    with contextlib.ExitStack() as stack:
        for config, where, changes in wanted:
            if isinstance(config, NotAvailable):
                unavailable.append(config)
                continue
            done = stack.enter_context(_patched(config, changes, where))
            applied.extend(done)
            paths = {a.path for a in done}
            unavailable.extend(
                NotAvailable(f"{path} does not exist")
                for g, n, _ in changes
                if (path := f"{where}.{g + '.' if g else ''}{n}") not in paths
            )
        yield applied, unavailable


@contextlib.contextmanager
def _trace_handler(trace_dir: Path) -> Iterator[bool | NotAvailable]:
    """Move the live TORCH_TRACE handler (created at import) to `trace_dir` for the block."""
    torch = _torch()
    internal = torch if isinstance(torch, NotAvailable) else _attr(torch, "_logging._internal")
    handler = (
        None if isinstance(internal, NotAvailable) else getattr(internal, "LOG_TRACE_HANDLER", None)
    )
    trace_log = None if isinstance(internal, NotAvailable) else getattr(internal, "trace_log", None)
    if handler is None or trace_log is None or not hasattr(handler, "root_dir"):
        yield NotAvailable("torch._logging._internal has no LOG_TRACE_HANDLER/trace_log")
        return
    old_root = handler.root_dir
    attached = handler in trace_log.handlers
    _close_trace_stream(handler)
    handler.root_dir = str(trace_dir)
    if not attached:
        trace_log.addHandler(handler)
    try:
        yield True
    finally:
        _close_trace_stream(handler)
        handler.root_dir = old_root
        if not attached:
            trace_log.removeHandler(handler)


def _close_trace_stream(handler: Any) -> None:
    """Closes the handler's open log file so its next record opens one in the new folder."""
    close = getattr(handler, "_close_stream", None)
    if callable(close):
        close()
        return
    stream = getattr(handler, "stream", None)
    if stream is not None:
        stream.flush()
        stream.close()
        handler.stream = None


def feature_report() -> dict[str, Any]:
    """Which torch.compile diagnostics this torch offers (value, or "not available: why")."""
    torch = _torch()
    report: dict[str, Any] = {"torch_version": _jsonable(torch_version())}
    if isinstance(torch, NotAvailable):
        return report
    for name, dotted in (
        ("explain", "_dynamo.explain"),
        ("compilation_metrics", "_dynamo.utils.get_compilation_metrics"),
        ("compile_times", "_dynamo.utils.compile_times"),
        ("compile_profiler", "_dynamo.utils.CompileProfiler"),
        ("trace_handler", "_logging._internal.LOG_TRACE_HANDLER"),
    ):
        found = _attr(torch, dotted)
        report[name] = str(found) if isinstance(found, NotAvailable) else f"torch.{dotted}"
    setting = provenance_setting()
    report["provenance"] = _jsonable(setting)
    return report


def _jsonable(value: Any) -> Any:
    if isinstance(value, NotAvailable | ConfigSetting):
        return value.to_json()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
