"""The untested rules: known changes this run did not measure, each with the config that would.

They rest on what the study ran, not on timing, so the gate never suppresses them. Tensor
cores are named only on a GPU: on a CPU a bf16 GEMM is bf16 arithmetic.
"""

from __future__ import annotations

from typing import Any

from harness.findings.base import Rule
from harness.findings.facts import RunFacts, VariantFacts
from harness.records.findings import Untested

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


def _on_gpu(run: RunFacts) -> bool:
    return run.platform == "gpu"


def _bf16_gemm(run: RunFacts, plural: bool) -> str:
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

    def applies(self, run: RunFacts) -> bool:
        return run.by_role("baseline") is not None

    def conclude(self, run: RunFacts) -> tuple[Untested, ...]:
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


def _gelu_study(run: RunFacts) -> VariantFacts | None:
    """The baseline of a GELU-expression study (not a program study), or None.

    A program study's variant has an empty `problem`, and its `program` record only where it
    got as far as describing its result: a program study whose variants all failed is still
    one, and is offered no `problem:` change, which would change nothing of it."""
    base = run.by_role("baseline")
    if base is None or base.summary.identity.program is not None:
        return None
    return base if base.summary.identity.problem else None


def _program_study(run: RunFacts) -> VariantFacts | None:
    """The baseline of a program study, or None."""
    base = run.by_role("baseline")
    if base is None or _gelu_study(run) is not None:
        return None
    return base


class UntestedTanh(Rule):
    """A GELU study that measured no tanh GELU: cheaper than erf, and a cuBLASLt epilogue."""

    id = "untested.tanh_gelu"
    kind = "untested"

    def applies(self, run: RunFacts) -> bool:
        return _gelu_study(run) is not None

    def conclude(self, run: RunFacts) -> tuple[Untested, ...]:
        base = _gelu_study(run)
        assert base is not None
        forms = {v.summary.identity.problem.get("gelu") for v in run.variants if v.measured}
        # The snippet inherits the study's problem: where that is tanh already, it is the
        # baseline again (a baseline that failed measured nothing, and needs no suggestion).
        if "tanh" in forms or base.summary.identity.problem.get("gelu") == "tanh":
            return ()
        return (
            Untested(
                self.id,
                "the tanh GELU",
                "it is cheaper than erf and a cuBLASLt epilogue",
                f"  - name: {base.name}_tanh\n    problem: {{gelu: tanh}}",
            ),
        )


class UntestedBf16(Rule):
    """A float32 GELU study that measured no bfloat16 inputs."""

    id = "untested.bf16_inputs"
    kind = "untested"

    def applies(self, run: RunFacts) -> bool:
        return _gelu_study(run) is not None

    def conclude(self, run: RunFacts) -> tuple[Untested, ...]:
        base = _gelu_study(run)
        assert base is not None
        dtypes = {v.summary.identity.problem.get("dtype") for v in run.variants if v.measured}
        if "bfloat16" in dtypes or base.summary.identity.problem.get("dtype") != "float32":
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


class UntestedProgramBf16(Rule):
    """A program study that ran no variant with bfloat16 inputs and parameters."""

    id = "untested.program_bf16"
    kind = "untested"

    def applies(self, run: RunFacts) -> bool:
        return _program_study(run) is not None

    def conclude(self, run: RunFacts) -> tuple[Untested, ...]:
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
        if not ran or any(not (dtypes & WIDE_FLOATS) for dtypes in ran):
            return ()
        return (
            Untested(
                self.id,
                "bfloat16 inputs and parameters",
                f"halves the bytes moved and {_bf16_gemm(run, plural=True)}, at bf16's tolerance",
                f"  - name: {base.name}_bf16\n    mode: {base.summary.identity.mode}\n"
                "    program: {dtype: bfloat16, w_dtype: bfloat16}",
            ),
        )
