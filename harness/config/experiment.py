"""The experiment as frozen dataclasses: the study, its sections and its variants, with the
allowed values of each choice and the one error every config mistake is (`ConfigError`).

harness.config.schema builds them from a raw mapping and harness.config.validate checks them;
nothing else in the harness checks config values.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from harness.config.fields import ranged
from harness.config.limits import Limits
from harness.config.memory import MemoryOptions
from harness.config.processes import Processes
from harness.config.program import NO_KWARGS, FrozenMap, default_shapes
from harness.config.sharding import Sharding
from harness.config.timing import TimingOptions
from harness.frontends import registry
from harness.frontends.modes import Mode
from harness.frontends.roles import framework_of, roles_of

DTYPES = ("float32", "bfloat16", "float16")
# What a program's inputs may be. float64 is refused: jax's x64 is off in every measured variant
# (it is on only for the float64 reference), so a float64 input would silently be float32.
# `key` is a typed PRNG key (jax.random.key's), split from the input's seed stream.
INPUT_DTYPES = (*DTYPES, "int32", "int8", "uint32", "uint8", "bool", "key")
# The integers each integer input dtype holds: its [low, high) must lie within them.
INTEGER_RANGES = {
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int8": (-128, 128),
    "uint32": (0, (1 << 31) - 1),
    "uint8": (0, 256),
}
GELU_FORMS = ("tanh", "erf")
FRONTENDS = ("jnp", "flax_linen", "flax_nnx")
# What each frontend imports, for a worker to load before the capture (flax: 0.4 s on a
# 2-core machine, which would otherwise land between two variants' captures).
FRONTEND_MODULES = {"jnp": (), "flax_linen": ("flax.linen",), "flax_nnx": ("flax.nnx",)}
# The modes are the registered frontends' (harness.frontends.registry): a mode is data on its
# frontend, and a frontend a test plugs in brings its own.
PLATFORMS = ("cpu", "gpu", "tpu")
ISOLATION = ("auto", "shared", "per_variant")
# Numbers XLA, NumPy and JAX's PRNG accept: a seed must fit in a uint32, dims in an int32 after
# multiplying out, and counts stay small enough that a typo cannot run for a day.
MAX_DIM = 1 << 20
MAX_SEED = (1 << 32) - 1


class ConfigError(ValueError):
    """A config mistake, reported as one line that names the source, the key and what is allowed."""

    def __init__(self, source: str, key: str, problem: str):
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(_one_line(f"{where}: {problem}"))


class ConfigErrors(ConfigError):
    """Every mistake found in one config, reported together: one line each, in the order
    they were found. Its source, key and problem are the first one's, so a caller that reads
    one error (blame, the worker's config_error event) still gets a true one."""

    def __init__(self, errors: Sequence[ConfigError]):
        self.errors = tuple(errors)
        first = self.errors[0]
        self.source, self.key, self.problem = first.source, first.key, first.problem
        ValueError.__init__(self, "\n".join(str(e) for e in self.errors))


def flattened(errors: Iterable[ConfigError]) -> list[ConfigError]:
    """Returns the single errors inside `errors`, each line once: a study's problem is read
    again for every variant, so one mistake in it would otherwise be listed once a variant."""
    out: dict[str, ConfigError] = {}
    for e in errors:
        for one in e.errors if isinstance(e, ConfigErrors) else (e,):
            out.setdefault(str(one), one)
    return list(out.values())


def combined(errors: Sequence[ConfigError]) -> ConfigError:
    """Returns the one error to raise for `errors` (not empty): the error itself when there
    is one, else a ConfigErrors listing them all."""
    flat = flattened(errors)
    return flat[0] if len(flat) == 1 else ConfigErrors(flat)


class Collector:
    """Gathers the ConfigErrors of independent checks, so a config's mistakes are reported
    at once instead of one per run: `with found.check(): ...` per check, then `found.done()`."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as e:
            self.errors.append(e)

    def done(self) -> None:
        """Raises every error gathered, as one; returns when there was none."""
        if self.errors:
            raise combined(self.errors)


def _one_line(text: str) -> str:
    """Returns text with control characters escaped, so an error is always one printable line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclasses.dataclass(frozen=True)
class Problem:
    """y = gelu(x @ W + b) with x of shape batch + [m, k], W [k, n], b [n]."""

    m: int = ranged(256, 2, MAX_DIM, "rows of x (halved for the recompile, so ≥ 2)")
    k: int = ranged(512, 1, MAX_DIM, "the contracted dimension")
    n: int = ranged(512, 1, MAX_DIM, "columns of W")
    # At most 8: x then has rank 10, past any batched GEMM a study means (5,000 entries passed
    # validation and XLA compiled a rank-5002 array for minutes).
    batch: tuple[int, ...] = ranged((), 1, 4096, "leading batch dimensions of x", max_len=8)
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
    reference_max_flops: float = ranged(
        2e12,
        0,
        1e18,
        "a program study's FLOPs per call above which no CPU reference is made (the accuracy "
        "question reads not measured; the compiler-effect question is still asked)",
    )
    numerics_pass_compiles: int = ranged(
        0,
        0,
        256,
        "compiles allowed per variant to find the pass after which a result that changes the "
        "numerics moves (xla_disable_hlo_passes); 0: no search",
    )


@dataclasses.dataclass(frozen=True)
class ProfileOptions:
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
    ahead: int = ranged(
        -1,
        -1,
        16,
        "with a process per variant, how many of the next variants' workers start while one "
        "is captured: their start, imports and device client, and each one's work after it "
        "measured, run beside the others, while the device takes one compile or measurement "
        "at a time (harness.capture.turn); -1: 4 on a GPU, 0 on a CPU (where that work would "
        "share the cores a variant is timed on)",
    )
    compiles: int = ranged(
        1,
        1,
        8,
        "with a process per variant sharing a device, how many variants compile at once: 1 "
        "measures each compile pause and autotuning alone; more end a compile-bound study "
        "sooner, and their pauses, measured beside other compiles, are not compared "
        "(harness.capture.turn)",
    )
    remeasure_ceilings: bool = False  # measure the device's ceilings again, not the cached
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
        """The frontend that runs the variant (`jax`, `torch`, ...), from the mode."""
        return framework_of(self.mode)

    @property
    def mode_spec(self) -> Mode:
        """The mode's record: how the variant runs and what it computes (a validated
        variant's mode is always registered)."""
        return registry.mode(self.mode)

    @property
    def resolved_roles(self) -> tuple[str, ...]:
        """Every role the variant stands for (harness.frontends.roles): its mode's, its
        options', the config's `baseline`, `sharded`, and its own `roles` key. Resolved once,
        by the Experiment that holds it, since the baseline is the experiment's; a variant
        outside an experiment has none to read."""
        found: tuple[str, ...] | None = self.__dict__.get("_resolved_roles")
        if found is None:
            raise ValueError(
                f"variant {self.name!r} is in no Experiment: its roles depend on the baseline"
            )
        return found

    def with_roles(self, baseline: str) -> Variant:
        """Returns a copy carrying its roles resolved against `baseline`. A copy, not this
        variant: one Variant may sit in experiments of different baselines (a search's)."""
        copy = dataclasses.replace(self)
        # Not a field: `roles` is the config key (saved in the manifest, compared on resume),
        # and the resolved tuple is derived from the config, never written or read back.
        roles = roles_of(
            self.name, self.mode, self.xla_options, baseline, self.roles, self.sharding.enabled
        )
        object.__setattr__(copy, "_resolved_roles", roles)
        return copy


STRATEGIES = ("grid", "coordinate")


@dataclasses.dataclass(frozen=True)
class SearchDtypes:
    """A program search's dtypes to try: its parameters' floating leaves (`program.w_dtype`)
    and its floating inputs (`program.dtype`)."""

    params: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The values a search tries: XLA options, and optionally W's dtype and the GELU form; in a
    program study the function's own keyword arguments (`kwargs`, each knob its values, a
    range given as {min, max, step} already expanded) and its dtypes."""

    xla_options: Mapping[str, tuple[bool | int | float | str, ...]] = dataclasses.field(
        default_factory=dict
    )
    w_dtype: tuple[str, ...] = ()
    gelu: tuple[str, ...] = ()
    kwargs: Mapping[str, tuple[bool | int | float | str | None, ...]] = dataclasses.field(
        default_factory=dict
    )
    dtypes: SearchDtypes = SearchDtypes()


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
    # Bytes, or a size with its unit ("1.5 GiB"): a candidate whose peak is over it is timed
    # but never the best (harness.search.constraints names the peak it reads).
    max_peak_memory: float | None = None


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
    profile: ProfileOptions = ProfileOptions()
    dump: Dump = Dump()
    timing: TimingOptions = TimingOptions()
    capture: CaptureOptions = CaptureOptions()
    report: ReportOptions = ReportOptions()
    search: SearchOptions = SearchOptions()
    limits: Limits = Limits()  # time limits on the worker processes
    memory: MemoryOptions = MemoryOptions()  # when two peaks differ enough for a finding
    processes: Processes = Processes()  # a group of processes through jax.distributed
    variants: tuple[Variant, ...] = ()

    def __post_init__(self) -> None:
        # The variants' roles are resolved here, once, whenever an experiment is made
        # (loaded, or replaced with another baseline or other variants): every stage reads
        # `variant.resolved_roles` rather than deriving them again.
        resolved = tuple(v.with_roles(self.baseline) for v in self.variants)
        object.__setattr__(self, "variants", resolved)

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


def framework_baselines(e: Experiment) -> dict[str, str]:
    """Returns framework -> its baseline variant: the config's `baseline` for its own
    framework, and for another framework the variant whose `roles` name `baseline`."""
    out: dict[str, str] = {}
    for v in e.variants:
        if "baseline" in v.resolved_roles:
            out.setdefault(v.framework, v.name)
    return out
