"""The untested rules: known changes this run did not measure, each with the config that would.

They rest on what the study ran, not on timing, so the gate never suppresses them. Tensor
cores are named only on a GPU: on a CPU a bf16 GEMM is bf16 arithmetic.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.common import fmt
from harness.findings.base import Rule
from harness.records.findings import Untested
from harness.records.summary import ArraySpec, ProgramRecord
from harness.saved.run import SavedRun, SavedVariant

UNTESTED_GPU = (
    (
        "xla_gpu_enable_triton_gemm",
        False,
        "cuBLASLt can then fuse bias and a tanh GELU into the GEMM's epilogue",
    ),
    (
        "xla_gpu_enable_command_buffer",
        "",
        "launches each kernel on its own instead of through a CUDA graph",
    ),
    ("xla_gpu_autotune_level", 4, "autotunes more GEMM configurations (longer first call)"),
)
UNTESTED_CPU = (
    (
        "xla_cpu_enable_fast_math",
        True,
        "lets LLVM reassociate and contract floating point in fusions",
    ),
)


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "''"
    return str(value)


def _on_gpu(run: SavedRun) -> bool:
    return run.platform == "gpu"


def _bf16_gemm(run: SavedRun, plural: bool) -> str:
    """How a bf16 GEMM runs on this platform."""
    gemm = "the GEMMs" if plural else "the GEMM"
    return (
        f"runs {gemm} on bf16 tensor cores" if _on_gpu(run) else f"runs {gemm} in bf16 arithmetic"
    )


class UntestedOption(Rule):
    """An XLA option of this platform's catalogue that no variant set to the value that
    would change the program."""

    id = "untested.xla_option"
    kind = "untested"

    def applies(self, run: SavedRun) -> bool:
        return run.by_role("baseline") is not None

    def conclude(self, run: SavedRun) -> tuple[Untested, ...]:
        base = run.by_role("baseline")
        assert base is not None
        measured = {
            (k, repr(val))
            for v in run.variants
            for k, val in v.summary.identity.xla_options.items()
        }
        out = []
        for key, value, why in UNTESTED_GPU if _on_gpu(run) else UNTESTED_CPU:
            if (key, repr(value)) in measured:
                continue
            snippet = (
                f"  - name: {base.name}_{key.removeprefix('xla_')}\n"
                f"    mode: {base.summary.identity.mode}\n"
                f"    xla_options: {{{key}: {_yaml(value)}}}"
            )
            out.append(Untested(self.id, f"`{key}: {_yaml(value)}`", why, snippet))
        return tuple(out)


def _gelu_study(run: SavedRun) -> SavedVariant | None:
    """The baseline of a GELU-expression study (not a program study), or None.

    A program study's variant has an empty `problem`, and its `program` record only where it
    got as far as describing its result: a program study whose variants all failed is still
    one, and is offered no `problem:` change, which would change nothing of it."""
    base = run.by_role("baseline")
    if base is None or base.summary.identity.program is not None:
        return None
    return base if base.summary.identity.problem else None


def _program_study(run: SavedRun) -> SavedVariant | None:
    """The baseline of a program study, or None."""
    base = run.by_role("baseline")
    if base is None or _gelu_study(run) is not None:
        return None
    return base


class _GeluUntested(Rule):
    """A change to one key of a GELU study's `problem:` that no measured variant made."""

    kind = "untested"
    problem_key: ClassVar[str] = ""

    def applies(self, run: SavedRun) -> bool:
        return _gelu_study(run) is not None

    def conclude(self, run: SavedRun) -> tuple[Untested, ...]:
        base = _gelu_study(run)
        assert base is not None
        measured = {
            v.summary.identity.problem.get(self.problem_key) for v in run.variants if v.measured
        }
        return self.suggest(
            run, base, measured, base.summary.identity.problem.get(self.problem_key)
        )

    def suggest(
        self, run: SavedRun, base: SavedVariant, measured: set[Any], study: Any
    ) -> tuple[Untested, ...]:
        """The suggestion, or none, given the values of the key the measured variants had
        and the study's own (the baseline's, which its snippet inherits)."""
        raise NotImplementedError


class UntestedTanh(_GeluUntested):
    """A GELU study that measured no tanh GELU: cheaper than erf, and a cuBLASLt epilogue."""

    id = "untested.tanh_gelu"
    problem_key = "gelu"

    def suggest(
        self, run: SavedRun, base: SavedVariant, measured: set[Any], study: Any
    ) -> tuple[Untested, ...]:
        # The snippet inherits the study's problem: where that is tanh already, it is the
        # baseline again (a baseline that failed measured nothing, and needs no suggestion).
        if "tanh" in measured or study == "tanh":
            return ()
        return (
            Untested(
                self.id,
                "the tanh GELU",
                "it is cheaper than erf and a cuBLASLt epilogue",
                f"  - name: {base.name}_tanh\n    problem: {{gelu: tanh}}",
            ),
        )


class UntestedBf16(_GeluUntested):
    """A float32 GELU study that measured no bfloat16 inputs."""

    id = "untested.bf16_inputs"
    problem_key = "dtype"

    def suggest(
        self, run: SavedRun, base: SavedVariant, measured: set[Any], study: Any
    ) -> tuple[Untested, ...]:
        if "bfloat16" in measured or study != "float32":
            return ()
        return (
            Untested(
                self.id,
                "bfloat16 inputs",
                f"halves the bytes and {_bf16_gemm(run, plural=False)}",
                f"  - name: {base.name}_bf16\n    problem: {{dtype: bfloat16}}",
            ),
        )


WIDE_FLOATS = frozenset({"float32", "float64"})
# Below this share of the inputs' and parameters' bytes in wide floats, bf16 would move almost
# nothing: the narrow dtypes carry nearly all of them already (a bf16 decoder's 107 MB of
# parameters beside a float32 temperature of 8 numbers).
WIDE_SHARE = 0.05


def _wide_bytes(p: ProgramRecord) -> tuple[int, int, float] | None:
    """(bytes of the inputs and parameters in float32 or float64, bytes of all of them, bytes
    bfloat16 would save) of a program variant; None where the parameters' bytes were not kept
    (an older run). A run that kept their total but not their dtypes' counts them wide where
    any of their dtypes is."""

    def size(a: ArraySpec) -> int:
        n = 1
        for d in a.shape:
            n *= d
        return n * _ITEMSIZE.get(a.dtype, 4)

    by_dtype: dict[str, int] = {}
    for a in p.inputs:
        by_dtype[a.dtype] = by_dtype.get(a.dtype, 0) + size(a)
    if p.param_bytes_by_dtype is not None:
        for d, n in p.param_bytes_by_dtype.items():
            by_dtype[d] = by_dtype.get(d, 0) + n
    elif p.param_bytes is not None:
        wide = next((d for d in p.param_dtypes if d in WIDE_FLOATS), "params")
        by_dtype[wide] = by_dtype.get(wide, 0) + p.param_bytes
    else:
        return None
    wide_bytes = sum(n for d, n in by_dtype.items() if d in WIDE_FLOATS)
    saved = sum(n * (1 - 2 / _ITEMSIZE[d]) for d, n in by_dtype.items() if d in WIDE_FLOATS)
    return wide_bytes, sum(by_dtype.values()), saved


_ITEMSIZE = {
    "float64": 8, "int64": 8, "uint64": 8, "complex64": 8,
    "float32": 4, "int32": 4, "uint32": 4,
    "bfloat16": 2, "float16": 2, "int16": 2, "uint16": 2,
    "int8": 1, "uint8": 1, "bool": 1,
}  # fmt: skip


class UntestedProgramBf16(Rule):
    """A program study that ran no variant with bfloat16 inputs and parameters, where they
    would move fewer bytes: the bytes the change would halve are counted, and nothing is said
    where the narrow dtypes already carry nearly all of them."""

    id = "untested.program_bf16"
    kind = "untested"

    def applies(self, run: SavedRun) -> bool:
        return _program_study(run) is not None

    def conclude(self, run: SavedRun) -> tuple[Untested, ...]:
        base = run.by_role("baseline")
        assert base is not None
        ran = [
            {i.dtype for i in s.inputs} | set(s.param_dtypes)
            for v in run.variants
            if v.measured and (s := v.summary.identity.program) is not None
        ]
        # Only where it would change the program: a variant whose floating-point inputs and
        # parameters are all narrow already (bf16 parameters, int32 tokens) measured it, and
        # where no variant said what its dtypes are (all failed), nothing is known to change.
        program = base.summary.identity.program
        if not ran or program is None or any(not (dtypes & WIDE_FLOATS) for dtypes in ran):
            return ()
        weighed = _wide_bytes(program)
        if weighed is not None and (not weighed[1] or weighed[0] < WIDE_SHARE * weighed[1]):
            return ()
        moved = (
            f"moves the {fmt.si(weighed[0], 'B')} of its {fmt.si(weighed[1], 'B')} of inputs "
            f"and parameters in float32 or float64 to bfloat16 ({fmt.si(weighed[2], 'B')} "
            "fewer)"
            if weighed is not None
            else "halves the bytes moved"
        )
        return (
            Untested(
                self.id,
                "bfloat16 inputs and parameters",
                f"{moved} and {_bf16_gemm(run, plural=True)}, at bf16's tolerance",
                f"  - name: {base.name}_bf16\n    mode: {base.summary.identity.mode}\n"
                "    program: {dtype: bfloat16, w_dtype: bfloat16}",
            ),
        )
