"""The experiment schema: frozen dataclasses and the one place that validates them.

Every config, whether from YAML or from `--config.*` overrides, becomes an `Experiment` through
`build_experiment`. Nothing else in the harness checks config values.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import os
import re
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

from harness.config.fields import ranged
from harness.config.limits import Limits
from harness.config.memory import MemoryOptions
from harness.config.processes import Processes
from harness.config.processes import problem as processes_problem
from harness.config.program import (
    NO_KWARGS,
    FrozenMap,
    ProgramConfigError,
    default_shapes,
    gpu_only,
    input_leaves,
    parse_inputs,
    parse_kwargs,
    parse_shapes,
    shapes_problem,
)
from harness.config.roles import ROLES, framework_of, roles_of
from harness.config.sharding import Sharding
from harness.config.sharding import problems as sharding_problems
from harness.config.timing import TimingOptions, timing_problem
from harness.records import SCALARS, scalar

DTYPES = ("float32", "bfloat16", "float16")
# What a program's inputs may be. float64 is refused: jax's x64 is off in every measured variant
# (it is on only for the float64 reference), so a float64 input would silently be float32.
INPUT_DTYPES = (*DTYPES, "int32", "int8", "uint8", "bool")
# The modes a program study runs; the others build the GELU expression's own variants.
PROGRAM_MODES = ("eager", "jit")
GELU_FORMS = ("tanh", "erf")
FRONTENDS = ("jnp", "flax_linen", "flax_nnx")
# What each frontend imports, for a worker to load before the capture (flax: 0.4 s on a
# 2-core machine, which would otherwise land between two variants' captures).
FRONTEND_MODULES = {"jnp": (), "flax_linen": ("flax.linen",), "flax_nnx": ("flax.nnx",)}
TORCH_MODES = ("torch_eager", "torch_compile", "torch_matmul", "torch_print", "torch_branch")
MODES = (
    "eager",
    "jit",
    "jit_host_callback",
    "matmul_only",
    "jit_python_branch",
    "jit_lax_cond",
    *TORCH_MODES,
)
# torch.compile's `mode` argument ("default" passes none).
TORCH_COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
PLATFORMS = ("cpu", "gpu", "tpu")
ISOLATION = ("auto", "shared", "per_variant")
# Numbers XLA, NumPy and JAX's PRNG accept: a seed must fit in a uint32, dims in an int32 after
# multiplying out, and counts stay small enough that a typo cannot run for a day.
MAX_DIM = 1 << 20
MAX_SEED = (1 << 32) - 1


# Experiment names become folder names, so they are kept to a safe alphabet.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ConfigError(ValueError):
    """A config mistake, reported as one line that names the source, the key and what is allowed."""

    def __init__(self, source: str, key: str, problem: str):
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(_one_line(f"{where}: {problem}"))


def _one_line(text: str) -> str:
    """Returns text with control characters escaped, so an error is always one printable line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclasses.dataclass(frozen=True)
class Problem:
    """y = gelu(x @ W + b) with x of shape batch + [m, k], W [k, n], b [n]."""

    m: int = ranged(256, 2, MAX_DIM, "rows of x (halved for the recompile, so ≥ 2)")
    k: int = ranged(512, 1, MAX_DIM, "the contracted dimension")
    n: int = ranged(512, 1, MAX_DIM, "columns of W")
    batch: tuple[int, ...] = ranged((), 1, 4096, "leading batch dimensions of x")
    dtype: str = "float32"
    w_dtype: str | None = None
    gelu: str = "tanh"
    bias: bool = True
    frontend: str = "jnp"

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (*self.batch, self.m, self.k)

    @property
    def weight_dtype(self) -> str:
        return self.w_dtype or self.dtype

    @property
    def rows(self) -> int:
        """All rows of x, batch dimensions included."""
        out = self.m
        for d in self.batch:
            out *= d
        return out


@dataclasses.dataclass(frozen=True)
class Program:
    """The user's own function as the study's program (README: "Studying your own function").

    `function` is called as `function(params, *inputs)` with `params = init(jax.random.key(
    seed), *input_specs)`, each spec a `jax.ShapeDtypeStruct` of one input as configured. A
    variant may change only `dtype` (every floating input cast to it), `w_dtype` (every
    floating leaf of the parameters cast to it) and `kwargs`; the rest is the study's. Inputs,
    new shapes and keyword arguments are read by harness.config.program.
    """

    function: str = ""  # module:function (importable) or path/to/file.py:function
    init: str = ""  # module:function: init(key, *input_specs) -> params
    inputs: tuple[Any, ...] = ()  # one pytree of program.InputSpec per positional argument
    flops: float | None = None  # FLOPs per call; None: our cost model of the unoptimized HLO
    # The inputs' shapes for the new-shape call, mirroring `inputs`; empty: the leading
    # dimension of every leaf sized like the first leaf's halved.
    recompile_shapes: tuple[Any, ...] = ()
    kwargs: FrozenMap = NO_KWARGS  # static keyword arguments of the function (and init)
    dtype: str | None = None  # a variant's dtype for every floating input
    w_dtype: str | None = None  # a variant's dtype for every floating leaf of the parameters

    @property
    def enabled(self) -> bool:
        """True when the config names a function: the study is of that program."""
        return bool(self.function)

    def new_shapes(self) -> tuple[Any, ...]:
        """Returns the inputs' shapes for the recompile, mirroring `inputs`: as configured,
        else harness.config.program.default_shapes."""
        return self.recompile_shapes or default_shapes(self.inputs)


@dataclasses.dataclass(frozen=True)
class Measure:
    """How each variant is timed and checked."""

    warmup: int = ranged(2, 0, 1000, "untimed calls before the blocked per-call latency")
    steps: int = ranged(20, 1, 100_000, "blocked calls timed for the per-call latency")
    recompile: bool = True
    numerics_rows: int = ranged(
        256, 1, 1 << 20, "rows of y checked against the float64 reference (a program: all of it)"
    )


@dataclasses.dataclass(frozen=True)
class Profile:
    """jax.profiler capture: the first call, `steps` steady-state steps, and the recompile."""

    enabled: bool = True
    steps: int = ranged(3, 1, 1000, "steady-state steps in the profiled window")


@dataclasses.dataclass(frozen=True)
class Dump:
    """Which XLA dumps are written besides the HLO before and after optimization."""

    passes: bool = True
    emitters: bool = True


@dataclasses.dataclass(frozen=True)
class CaptureOptions:
    """How variants are isolated from each other while they are captured."""

    isolation: str = "auto"  # auto: a process per variant on a GPU, one shared process on a CPU
    remeasure_ceilings: bool = False  # measure the CPU's ceilings again instead of the cached
    torch_threads: int = ranged(
        0, 0, 4096, "torch's intra-op threads and Inductor's compile workers; 0: torch's defaults"
    )


@dataclasses.dataclass(frozen=True)
class ReportOptions:
    """What the report writes besides report.md and report.html."""

    svg: bool = False  # each plot as SVG too, next to the PNG the report shows


@dataclasses.dataclass(frozen=True)
class TorchOptions:
    """A PyTorch variant's `torch.compile(fn, mode=..., dynamic=..., fullgraph=...)` arguments."""

    mode: str = "default"  # default | max-autotune-no-cudagraphs | reduce-overhead | max-autotune
    dynamic: bool | None = None  # None: Dynamo's automatic dynamic shapes after a recompile
    fullgraph: bool = False  # True: a graph break is an error instead of a split


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of compiling the expression."""

    name: str
    mode: str = "jit"
    description: str = ""
    problem: Problem = Problem()
    program: Program = Program()  # the experiment's program with this variant's dtype changes
    xla_options: Mapping[str, bool | int | float | str] = dataclasses.field(default_factory=dict)
    platforms: tuple[str, ...] = PLATFORMS
    roles: tuple[str, ...] = ()  # roles beyond those its mode and options give (config.roles)
    # A mesh and PartitionSpecs (harness.config.sharding); the default, no mesh, is one device.
    sharding: Sharding = dataclasses.field(default_factory=Sharding)
    torch: TorchOptions = TorchOptions()  # torch.compile's arguments, for the torch_* modes

    @property
    def framework(self) -> str:
        """`jax` or `torch`, from the mode."""
        return framework_of(self.mode)


STRATEGIES = ("grid", "coordinate")


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The values a search tries: XLA options, and optionally W's dtype and the GELU form."""

    xla_options: Mapping[str, tuple[bool | int | float | str, ...]] = dataclasses.field(
        default_factory=dict
    )
    w_dtype: tuple[str, ...] = ()
    gelu: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    """A search for the fastest configuration of one variant (harness.search).

    `base` names the variant the search starts from; an empty base means the config is a
    study, not a search.
    """

    base: str = ""
    strategy: str = "coordinate"  # grid: every combination; coordinate: one option at a time
    budget_s: float = ranged(420.0, 1.0, 3600.0, "the search's time budget in seconds")
    max_candidates: int = ranged(40, 1, 1000, "at most this many candidates are compiled")
    space: SearchSpace = SearchSpace()


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A whole study: the shared problem and the variants that compile it."""

    experiment: str = "gelu"
    description: str = ""
    seed: int = ranged(0, 0, MAX_SEED, "the PRNG seed of the inputs")
    baseline: str = "xla"
    select: tuple[str, ...] = ()
    problem: Problem = Problem()
    program: Program = Program()  # set: the study is of the user's own function, not the GELU
    measure: Measure = Measure()
    profile: Profile = Profile()
    dump: Dump = Dump()
    timing: TimingOptions = TimingOptions()
    capture: CaptureOptions = CaptureOptions()
    report: ReportOptions = ReportOptions()
    search: SearchOptions = SearchOptions()
    limits: Limits = Limits()  # time limits on the worker processes
    memory: MemoryOptions = MemoryOptions()  # when two peaks differ enough for a finding
    processes: Processes = Processes()  # a group of processes through jax.distributed
    variants: tuple[Variant, ...] = ()

    @property
    def selected_variants(self) -> tuple[Variant, ...]:
        if not self.select:
            return self.variants
        return tuple(v for v in self.variants if v.name in self.select)

    @property
    def cpu_devices(self) -> int:
        """Returns the host devices a CPU run must force: in a group of processes each
        process's own (`processes.devices`), else the largest mesh of a selected variant that
        runs on a CPU (1 when none is sharded)."""
        if self.processes.enabled:
            return self.processes.devices
        return max(
            (v.sharding.devices for v in self.selected_variants if "cpu" in v.platforms),
            default=1,
        )

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


def _allowed(values: typing.Iterable[str]) -> str:
    return "allowed: " + ", ".join(values)


def _choice(source: str, key: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(source, key, f"{shown(value)} is not supported; {_allowed(allowed)}")


def validate_ranges(obj: Any, source: str, path: str) -> None:
    """Checks every numeric field that declares a range, in `obj` and the sections inside it."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{path}.{f.name}" if path else f.name
        if "range" in f.metadata:
            lo, hi = f.metadata["range"]
            for i, v in enumerate(value) if isinstance(value, tuple) else ((None, value),):
                if not lo <= v <= hi:
                    where = key if i is None else f"{key}[{i}]"
                    raise ConfigError(
                        source, where, f"must be in [{_num(lo)}, {_num(hi)}], got {shown(v)}"
                    )
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            validate_ranges(value, source, key)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def shown(value: Any) -> str:
    """Returns a value for an error message, cut short: a 10**23 seed is printed, not a novel."""
    if isinstance(value, int) and value.bit_length() > 128:
        # repr() of a long integer is slow, and past 4300 digits it raises ValueError.
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_problem(p: Problem, source: str, path: str) -> None:
    validate_ranges(p, source, path)
    if p.rows * p.k > 1 << 34 or p.rows * p.n > 1 << 34 or p.k * p.n > 1 << 34:
        raise ConfigError(source, path, "the problem is larger than 2**34 elements in one array")
    _choice(source, f"{path}.dtype", p.dtype, DTYPES)
    if p.w_dtype is not None:
        _choice(source, f"{path}.w_dtype", p.w_dtype, DTYPES)
    _choice(source, f"{path}.gelu", p.gelu, GELU_FORMS)
    _choice(source, f"{path}.frontend", p.frontend, FRONTENDS)


def validate_name(source: str, key: str, name: str) -> None:
    if not _NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            source,
            key,
            f"{shown(name)} is not a safe name; use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit, without '/' or '..'",
        )


# XLA options that name a file or folder: XLA would read or write there, outside the run.
_PATH_OPTION = re.compile(r"(_dir|_to|_from|_path|_paths|_file|_filename|_prefix)$")


def validate_xla_option(source: str, key: str, value: object) -> None:
    name = key.rsplit(".", 1)[-1]
    if not name.startswith("xla_"):
        raise ConfigError(source, key, "XLA option names start with 'xla_'")
    if _PATH_OPTION.search(name):
        raise ConfigError(
            source,
            key,
            "names a file or folder, which would make XLA read or write outside the run folder; "
            "the harness pins its own dumps under each variant's folder",
        )
    if not isinstance(value, bool | int | float | str):
        raise ConfigError(
            source, key, f"must be a bool, number or string, got {type(value).__name__}"
        )
    # XLA's options are C++ int64s and doubles: a longer integer or an infinity would fail
    # inside the compile, in every variant's worker, instead of here.
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        raise ConfigError(source, key, f"must fit in a 64-bit integer, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(source, key, f"must be a finite number, got {shown(value)}")


def validate_search(s: SearchOptions, source: str, names: list[str]) -> None:
    if not s.base:
        return
    if s.base not in names:
        raise ConfigError(
            source, "search.base", f"{shown(s.base)} names no variant; {_allowed(names)}"
        )
    _choice(source, "search.strategy", s.strategy, STRATEGIES)
    if not s.space.xla_options and not s.space.w_dtype and not s.space.gelu:
        raise ConfigError(source, "search.space", "is empty; name XLA options with their values")
    for name, values in s.space.xla_options.items():
        key = f"search.space.xla_options.{name}"
        validate_xla_option(source, key, values[0] if values else 0)
        if not values:
            raise ConfigError(source, key, "needs at least one value")
    for d in s.space.w_dtype:
        _choice(source, "search.space.w_dtype", d, DTYPES)
    for g in s.space.gelu:
        _choice(source, "search.space.gelu", g, GELU_FORMS)


def validate_experiment(e: Experiment, source: str) -> None:
    validate_name(source, "experiment", e.experiment)
    validate_problem(e.problem, source, "problem")
    validate_ranges(e, source, "")  # the seed and every section's numbers
    if (problem := timing_problem(e.timing)) is not None:
        raise ConfigError(source, *problem)
    validate_program(e, source)
    _choice(source, "capture.isolation", e.capture.isolation, ISOLATION)
    if not e.variants:
        raise ConfigError(
            source, "variants", "the variant list is empty; name at least one variant"
        )
    seen: set[str] = set()
    for i, v in enumerate(e.variants):
        where = f"variants[{i}]"
        validate_name(source, f"{where}.name", v.name)
        if v.name in seen:
            raise ConfigError(
                source,
                f"{where}.name",
                f"duplicate variant name {shown(v.name)}; each variant needs a unique name",
            )
        seen.add(v.name)
        _choice(source, f"variants.{v.name}.mode", v.mode, MODES)
        validate_problem(v.problem, source, f"variants.{v.name}.problem")
        if not v.platforms:
            raise ConfigError(
                source, f"variants.{v.name}.platforms", f"is empty; {_allowed(PLATFORMS)}"
            )
        for p in v.platforms:
            _choice(source, f"variants.{v.name}.platforms", p, PLATFORMS)
        for r in v.roles:
            _choice(source, f"variants.{v.name}.roles", r, ROLES)
        for opt, value in v.xla_options.items():
            validate_xla_option(source, f"variants.{v.name}.xla_options.{opt}", value)
        validate_ranges(v.sharding, source, f"variants.{v.name}.sharding")
        p = v.problem
        found = sharding_problems(
            v.sharding, p.x_shape, p.k, p.n, e.measure.recompile, v.mode, p.frontend
        )
        if found is not None:
            raise ConfigError(source, f"variants.{v.name}.sharding.{found[0]}", found[1])
        validate_torch_variant(v, source)
    names = [v.name for v in e.variants]
    validate_search(e.search, source, names)
    found = processes_problem(e.processes, e.selected_variants, bool(e.search.base))
    if found is not None:
        raise ConfigError(source, *found)
    if e.baseline not in seen:
        raise ConfigError(
            source, "baseline", f"{shown(e.baseline)} names no variant; {_allowed(names)}"
        )
    validate_baselines(e, source)
    for s in e.select:
        if s not in seen:
            raise ConfigError(source, "select", f"{shown(s)} names no variant; {_allowed(names)}")


# ---------------------------------------------------------------------------------------------
# A program study: the user's own function.

# The folders the capture worker imports from: the repo root (its working folder and
# PYTHONPATH), the caller's PYTHONPATH and the installed packages. The caller's current folder
# is not among them unless it is the repo root, so a module found only there is refused.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A literal on the right of `name = ...` can never be called.
_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)


def split_callable(spec: str) -> tuple[str, str, bool]:
    """Returns (module or file, function name, whether it names a file) of `module:function`
    or `path/to/file.py:function`; raises ValueError for anything else."""
    where, sep, name = spec.rpartition(":")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    ok_module = is_file or all(part.isidentifier() for part in where.split("."))
    if not sep or not where or not name.isidentifier() or not ok_module:
        raise ValueError(
            f"{shown(spec)} is not module:function or path/to/file.py:function "
            "(e.g. examples.mlp:apply)"
        )
    return where, name, is_file


def import_roots() -> list[str]:
    """Returns the folders a `module:function` is looked up in: those the capture worker has."""
    cwd = os.getcwd()
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = [REPO_ROOT, *extra]
    for entry in sys.path:
        folder = os.path.abspath(entry or cwd)
        if (entry in ("", ".") or folder == cwd) and folder != REPO_ROOT:
            continue  # the caller's own folder: the worker runs in the repo root
        roots.append(folder)
    return list(dict.fromkeys(roots))


def module_file(module: str) -> str | None:
    """Returns the source file of a dotted module name under import_roots(), without importing
    anything (the supervisor never imports the user's code, nor JAX); None when absent."""
    parts = module.split(".")
    for root in import_roots():
        base = os.path.join(root, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _top_level(tree: ast.Module) -> typing.Iterator[ast.stmt]:
    """Yields a module's top-level statements, those inside top-level if/try blocks too."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [node.finalbody, *(h.body for h in node.handlers)]
            for block in reversed(blocks):
                stack.extend(reversed(block))


def definition_problem(path: str, name: str) -> str | None:
    """Returns why the file at `path` cannot provide a callable `name` at its top level, or None.

    Read with `ast`, not imported: a def, class, import or non-literal assignment of `name`
    passes (the worker imports it and checks that it is callable); a literal (`name = 3`) or
    no binding at all does not. A star import or a module `__getattr__` passes unchecked.
    """
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read {path}: {e}"
    except SyntaxError as e:
        return f"{path} does not parse: {e.msg} at line {e.lineno}"
    for node in _top_level(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in (name, "__getattr__"):
                return None
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name.split(".")[0]) == name:
                    return None
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if isinstance(node.value, _LITERALS):
                    kind = type(node.value).__name__.lower()
                    return f"`{name}` is a {kind} value at line {node.lineno}, not a function"
                return None
    return f"defines no top-level `{name}` ({path})"


def validate_callable(source: str, key: str, spec: str) -> None:
    """Checks that `spec` names a callable the capture worker can import, without importing it."""
    try:
        where, name, is_file = split_callable(spec)
    except ValueError as e:
        raise ConfigError(source, key, str(e)) from None
    if is_file:
        if not os.path.isfile(where):
            raise ConfigError(source, key, f"file {where} not found")
        path = where
    else:
        found = module_file(where)
        if found is None:
            raise ConfigError(
                source,
                key,
                f"module {where!r} not found in the repo root, PYTHONPATH or the installed "
                f"packages (where the capture worker imports from); add its folder to "
                f"PYTHONPATH, or name the file: path/to/{where.split('.')[-1]}.py:{name}",
            )
        path = found
    problem = definition_problem(path, name)
    if problem is not None:
        raise ConfigError(source, key, f"{where}: {problem}")


def resolve_program(e: Experiment) -> Experiment:
    """Returns `e` with a program named by a relative file path made absolute (from the
    current folder), so the worker, which runs in the repo root, finds the same file."""

    def absolute(spec: str) -> str:
        try:
            where, name, is_file = split_callable(spec)
        except ValueError:
            return spec  # validation says what is wrong
        return f"{os.path.abspath(where)}:{name}" if is_file else spec

    def fixed(p: Program) -> Program:
        return dataclasses.replace(p, function=absolute(p.function), init=absolute(p.init))

    if not e.program.enabled:
        return e
    return dataclasses.replace(
        e,
        program=fixed(e.program),
        variants=tuple(dataclasses.replace(v, program=fixed(v.program)) for v in e.variants),
    )


# What a variant of a program study may set under `program:`; the rest is the study's.
_PROGRAM_SHARED = ("function", "init", "inputs", "flops", "recompile_shapes")


def validate_program(e: Experiment, source: str) -> None:
    """Checks a program study: the function and its init, the inputs, the FLOPs, the new
    shapes, and that every variant is one a program study can run (eager or jit, one device,
    no GELU `problem`, dtype changes only)."""
    p = e.program
    if not p.enabled:
        if p != Program():
            raise ConfigError(
                source,
                "program.function",
                "is required in a `program` section: module:function or path/to/file.py:function",
            )
        for v in e.variants:
            if v.program != p:
                raise ConfigError(
                    source,
                    f"variants.{v.name}.program",
                    "applies to a program study; this config names no `program.function`",
                )
        return
    validate_callable(source, "program.function", p.function)
    if not p.init:
        raise ConfigError(
            source,
            "program.init",
            "is required: module:function of init(key, *input_specs) -> params (a function "
            "without parameters can use an init that returns {})",
        )
    validate_callable(source, "program.init", p.init)
    if not p.inputs:
        raise ConfigError(
            source,
            "program.inputs",
            "is empty; list the arguments after the parameters, e.g. "
            "[{shape: [256, 512], dtype: float32}]",
        )
    for where, spec in input_leaves(p.inputs):
        validate_ranges(spec, source, where)
        if spec.low >= spec.high:
            raise ConfigError(
                source, f"{where}.high", f"must be above low ({spec.low}), got {spec.high}"
            )
        if spec.dtype == "float64":
            raise ConfigError(
                source,
                f"{where}.dtype",
                "float64 is refused: the measured variants run without jax's x64 (only the "
                f"float64 reference has it), so it would be float32; {_allowed(INPUT_DTYPES)}",
            )
        _choice(source, f"{where}.dtype", spec.dtype, INPUT_DTYPES)
        if math.prod(spec.shape) > 1 << 34:
            raise ConfigError(source, f"{where}.shape", "has more than 2**34 elements")
    if p.flops is not None and not (p.flops > 0 and p.flops < float("inf")):
        raise ConfigError(
            source,
            "program.flops",
            f"must be the FLOPs of one call (> 0), or null for our cost model of the "
            f"unoptimized HLO; got {shown(p.flops)}",
        )
    validate_new_shapes(e, source)
    _program_dtypes(p, source, "program")
    if e.problem != Problem():
        raise ConfigError(
            source,
            "problem",
            "a program study has no `problem` (the GELU expression's m, k, n, ...); its "
            "arguments are `program.inputs`",
        )
    for v in e.variants:
        validate_program_variant(e, v, source)
    space = e.search.space
    for key, values in (("w_dtype", space.w_dtype), ("gelu", space.gelu)):
        if e.search.base and values:
            raise ConfigError(
                source,
                f"search.space.{key}",
                "a program study's search varies XLA options only (`search.space.xla_options`)",
            )


def validate_new_shapes(e: Experiment, source: str) -> None:
    """Checks that the new-shape call can be made and differs from the first call."""
    problem = shapes_problem(e.program.inputs, e.program.recompile_shapes, e.measure.recompile)
    if problem is not None:
        raise ConfigError(source, *problem)


def _program_dtypes(p: Program, source: str, where: str) -> None:
    """Checks the dtype changes a program section makes (`dtype`, `w_dtype`), when set."""
    for key in ("dtype", "w_dtype"):
        if getattr(p, key) is not None:
            _choice(source, f"{where}.{key}", getattr(p, key), DTYPES)


def validate_program_variant(e: Experiment, v: Variant, source: str) -> None:
    """Refuses what a program study's variant cannot be: a mode that builds the GELU
    expression's own variant, a `problem`, a mesh, or a change of the study's function."""
    where = f"variants.{v.name}"
    if v.mode not in PROGRAM_MODES:
        raise ConfigError(
            source,
            f"{where}.mode",
            f"{v.mode!r} builds the GELU expression's own variant, which a program study does "
            f"not have; {_allowed(PROGRAM_MODES)}",
        )
    if v.problem != e.problem:
        raise ConfigError(
            source,
            f"{where}.problem",
            "a program study has no `problem`; change dtypes with "
            "`program: {dtype: ..., w_dtype: ...}`",
        )
    for key in _PROGRAM_SHARED:
        if getattr(v.program, key) != getattr(e.program, key):
            raise ConfigError(
                source,
                f"{where}.program.{key}",
                "a variant changes only `dtype`, `w_dtype` and `kwargs`; the function, its init, "
                "inputs, FLOPs and new shapes are the study's (`program.*`)",
            )
    _program_dtypes(v.program, source, f"{where}.program")
    if v.sharding.enabled:
        raise ConfigError(
            source,
            f"{where}.sharding",
            "a mesh applies to the GELU expression's sharded variants; a program study runs "
            "on one device",
        )


def validate_torch_variant(v: Variant, source: str) -> None:
    """Checks a variant's `torch:` section and what a torch_* mode cannot take."""
    where = f"variants.{v.name}"
    _choice(source, f"{where}.torch.mode", v.torch.mode, TORCH_COMPILE_MODES)
    if v.framework != "torch":
        if v.torch != TorchOptions():
            raise ConfigError(
                source,
                f"{where}.torch",
                f"applies to the torch_* modes ({', '.join(TORCH_MODES)}); mode is {v.mode!r}",
            )
        return
    if v.mode == "torch_eager" and v.torch != TorchOptions():
        raise ConfigError(source, f"{where}.torch", "torch_eager compiles nothing; remove it")
    if v.xla_options:
        raise ConfigError(
            source, f"{where}.xla_options", "a torch variant runs no XLA compile; remove them"
        )
    if v.problem.frontend != "jnp":
        raise ConfigError(
            source,
            f"{where}.problem.frontend",
            f"torch variants compute x @ W + b with torch itself; got {v.problem.frontend!r}, "
            "allowed: jnp",
        )


def framework_baselines(e: Experiment) -> dict[str, str]:
    """Returns framework -> its baseline variant: the config's `baseline` for its own
    framework, and for another framework the variant whose `roles` name `baseline`."""
    out: dict[str, str] = {}
    for v in e.variants:
        if "baseline" in roles_of(v.name, v.mode, v.xla_options, e.baseline, v.roles):
            out.setdefault(v.framework, v.name)
    return out


def validate_baselines(e: Experiment, source: str) -> None:
    """Refuses two baselines in one framework: every comparison needs exactly one reference."""
    seen: dict[str, str] = {}
    for v in e.variants:
        if "baseline" not in roles_of(v.name, v.mode, v.xla_options, e.baseline, v.roles):
            continue
        if v.framework in seen:
            raise ConfigError(
                source,
                f"variants.{v.name}.roles",
                f"{seen[v.framework]!r} is already the {v.framework} baseline; each framework "
                "has one (the config's `baseline`, or a variant with `roles: [baseline]`)",
            )
        seen[v.framework] = v.name


# ---------------------------------------------------------------------------------------------
# Building dataclasses from plain mappings, strictly.


def suggest(key: str, valid: typing.Iterable[str]) -> str:
    """Returns ' (did you mean X?)' for the closest valid key, or '; valid: ...' listing them all."""
    valid = [str(v) for v in valid]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; valid: {', '.join(valid)}" if valid else ""


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "list of " + _type_name(typing.get_args(tp)[0])
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, source: str, key: str) -> Any:
    """Returns `value` checked against the annotation `tp`; YAML lists become tuples."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, source, key)
            except ConfigError:
                continue
        raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}")
        (item,) = typing.get_args(tp)[:1]
        return tuple(coerce(v, item, source, f"{key}[{i}]") for i, v in enumerate(value))
    if tp not in SCALARS:
        return value
    try:
        return scalar(tp, value)
    except ValueError:
        if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
            # scalar refuses a NaN, an infinity and an integer past a float's range
            raise ConfigError(source, key, f"must be a finite number, got {shown(value)}") from None
        raise ConfigError(source, key, f"expected {_type_name(tp)}, got {shown(value)}") from None


def build(cls: type, raw: Any, source: str, path: str, defaults: Any = None) -> Any:
    """Returns `cls` built from the mapping `raw`; unknown keys and wrong types are ConfigErrors.

    `defaults` is an instance of `cls` whose values fill keys `raw` leaves out (used for a
    variant's problem, which starts from the experiment's problem).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(
            source, path or "<top level>", f"expected a mapping, got {type(raw).__name__}"
        )
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        full = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise ConfigError(source, full, "unknown key" + suggest(str(key), fields))
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            base = getattr(defaults, key) if defaults is not None else None
            kwargs[key] = build(tp, value, source, full, base)
        elif key == "variants":
            kwargs[key] = tuple(
                build_variant(v, source, i, raw)
                for i, v in enumerate(_as_list(value, source, full, "variants"))
            )
        elif cls is Program and key in ("inputs", "recompile_shapes", "kwargs"):
            kwargs[key] = value  # read by harness.config.program below, inputs first
        elif key == "xla_options" and cls is SearchSpace:
            if not isinstance(value, Mapping):
                raise ConfigError(
                    source, full, f"expected a mapping of option: [values], got {shown(value)}"
                )
            kwargs[key] = types.MappingProxyType(
                {
                    str(k): coerce(v, tuple[bool | int | float | str, ...], source, f"{full}.{k}")
                    for k, v in value.items()
                }
            )
        elif key == "xla_options":
            if not isinstance(value, Mapping):
                raise ConfigError(
                    source, full, f"expected a mapping of XLA options, got {shown(value)}"
                )
            kwargs[key] = types.MappingProxyType(dict(value))
        else:
            kwargs[key] = coerce(value, tp, source, full)
    if cls is Program:
        kwargs = _program_keys(kwargs, source, path, defaults)
    if defaults is not None:
        return dataclasses.replace(defaults, **kwargs)
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field is missing
        missing = [
            n
            for n, f in fields.items()
            if n not in kwargs
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        raise ConfigError(source, f"{path}.{missing[0]}" if missing else path, "is required") from e


def _program_keys(
    kwargs: dict[str, Any], source: str, path: str, defaults: Program | None
) -> dict[str, Any]:
    """Returns a program section's keys with its inputs, new shapes and keyword arguments read
    (harness.config.program); a variant's keyword arguments update the study's."""
    out = dict(kwargs)
    try:
        if "inputs" in out:
            out["inputs"] = parse_inputs(out["inputs"], f"{path}.inputs")
        inputs = out.get("inputs", defaults.inputs if defaults else ())
        if "recompile_shapes" in out:
            out["recompile_shapes"] = parse_shapes(out["recompile_shapes"], inputs)
        if "kwargs" in out:
            given = parse_kwargs(out["kwargs"], f"{path}.kwargs")
            out["kwargs"] = FrozenMap({**(defaults.kwargs if defaults else {}), **given})
    except ProgramConfigError as e:
        key = e.key if e.key.startswith(path) else e.key.replace("program", path, 1)
        raise ConfigError(source, key, e.problem) from None
    return out


def _as_list(value: Any, source: str, key: str, what: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ConfigError(source, key, f"expected a list of {what}, got {type(value).__name__}")
    return list(value)


def build_variant(raw: Any, source: str, index: int, top: Mapping[str, Any]) -> Variant:
    """Returns a Variant whose problem is the experiment's problem updated by its own overrides."""
    where = f"variants[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(source, where, f"expected a mapping, got {shown(raw)}")
    if "name" not in raw:
        raise ConfigError(source, f"{where}.name", "is required")
    if not isinstance(raw["name"], str):
        raise ConfigError(source, f"{where}.name", f"expected str, got {shown(raw['name'])}")
    shared = build(Problem, top.get("problem", {}) or {}, source, "problem")
    body = {k: v for k, v in raw.items() if k not in ("problem", "program")}
    variant = build(Variant, body, source, f"variants.{raw['name']}")
    problem = build(
        Problem, raw.get("problem", {}) or {}, source, f"variants.{raw['name']}.problem", shared
    )
    # A variant's program is the experiment's, updated by its own keys (dtype, w_dtype).
    program = build(
        Program,
        raw.get("program", {}) or {},
        source,
        f"variants.{raw['name']}.program",
        build(Program, top.get("program", {}) or {}, source, "program"),
    )
    if gpu_only(program.kwargs) and "platforms" not in raw:
        # A keyword value only a GPU implements (`attention: cudnn`): skipped elsewhere.
        variant = dataclasses.replace(variant, platforms=("gpu",))
    return dataclasses.replace(variant, problem=problem, program=program)


def build_experiment(raw: Mapping[str, Any], source: str) -> Experiment:
    """Returns the validated Experiment for a raw config mapping; raises ConfigError."""
    experiment = resolve_program(build(Experiment, raw, source, ""))
    validate_experiment(experiment, source)
    return experiment


def to_plain(obj: Any) -> Any:
    """Returns JSON-ready data for a config dataclass (tuples become lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    return obj
