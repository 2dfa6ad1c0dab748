"""The PyTorch frontend: the GELU expression in torch, eager or through torch.compile.

Its modes are data (harness.frontends.modes); its capture, timing and analysis are the
PyTorch row's modules (harness.frontends.torch.capture, harness.frontends.torch.sections,
harness.frontends.torch.inductor), imported when first called so that registering it imports no torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Not bound as `sections`: importing the submodule harness.frontends.torch.sections below sets
# this package's attribute of that name, which would replace the analysis's module.
from harness.analyze.sections import timing as timing_section
from harness.frontends.modes import GPU_EMITTER_STAGES, Mode, Traits
from harness.frontends.registry import register
from harness.frontends.torch.env import scratch_cache_dir
from harness.frontends.torch.inductor.diverge import torch_first_divergence
from harness.frontends.torch.sections import analyze_torch_variant
from harness.frontends.torch.validate import validate_variant
from harness.store.runfolder import PROFILE_DIR, TORCH_DIR, RunFolder

if TYPE_CHECKING:  # imported when called, so that registering the frontend imports no stage
    from harness.config.experiment import Experiment, Variant
    from harness.frontends.contract import Captured, Context
    from harness.frontends.torch.expression import TorchFn
    from harness.records.run_files import Ceilings
    from harness.records.summary import CaptureRecord, TimingRecord, VariantSummary

NAME = "torch"

# The same roles as the JAX modes', so the report pairs each torch variant with its JAX twin.
MODES = (
    Mode("torch_eager", NAME, ("eager",), "op-by-op dispatch (no torch.compile)", op_by_op=True),
    Mode("torch_compile", NAME, ("compiled",), "torch.compile of the whole function"),
    Mode(
        "torch_matmul",
        NAME,
        ("lower_bound", "compiled"),
        "x @ W alone, through torch.compile",
        gemm_only=True,
    ),
    Mode(
        "torch_print",
        NAME,
        ("host_callback", "compiled"),
        "print() between the GEMM and the GELU: Dynamo breaks the graph there",
        host_print=True,
    ),
    Mode(
        "torch_branch",
        NAME,
        ("traced_branch", "compiled"),
        "a Python branch on a tensor's value: Dynamo splits the graph (or, with "
        "fullgraph=True, refuses it)",
        python_branch=True,
    ),
)

TRAITS = Traits(
    label="PyTorch",
    compiler="Inductor",
    compile_call="torch.compile",
    refuser="torch.compile(fullgraph=True)",
    emitter_stages=(*GPU_EMITTER_STAGES, "output_code"),  # and Inductor's own output code
    timed_against="jax",
    compile_phases=True,
    torch_trace=True,
    dynamo=True,
    packages=("torch",),
    # torch.compile's working folder (Inductor's debug folder, the TORCH_TRACE log), which
    # eager never makes; and torch.profiler's trace, profile/steady/torch_trace.json.
    compile_inputs=(TORCH_DIR,),
    profile_inputs=(PROFILE_DIR,),
)


class TorchFrontend:
    """PyTorch: eager or torch.compile (Dynamo, Inductor), torch.profiler, TORCH_TRACE."""

    name = NAME
    modes = MODES
    traits = TRAITS
    shares_device = False  # its capture holds the device alone (Inductor compiles inside)

    def preload(self, variant: Variant) -> tuple[str, ...]:
        del variant
        return ("jax", "torch", "harness.frontends.torch.capture")

    def prepare(self, exp: Experiment, variant: Variant, cache: Path | None) -> None:
        # The torch inputs are the JAX inputs' bits, and the reference is the JAX variants'.
        from harness.variants import expression  # imports JAX: loaded only when called

        expression.inputs_for(variant.problem, exp.seed, cache)

    def subject(self, exp: Experiment, variant: Variant) -> TorchFn:
        del exp
        from harness.frontends.torch.expression import (
            build_torch_function,  # imports JAX: loaded only when called
        )  # imports JAX: loaded only when called

        return build_torch_function(variant)

    def capture(self, exp: Experiment, variant: Variant, ctx: Context) -> Captured:
        from harness.frontends.torch.capture import (
            capture_torch_variant,  # imports JAX: loaded only when called
        )  # imports JAX: loaded only when called

        return capture_torch_variant(exp, variant, ctx)

    def compile_for_timing(
        self,
        exp: Experiment,
        variant: Variant,
        workdir: Path,
        platform: str,
        executables: Path | None,
    ) -> tuple[Callable[[], Any], str | None]:
        del executables  # a torch program is compiled again, never loaded
        from harness.frontends.torch import capture  # imports JAX: loaded only when called

        call, _wait, note = capture.compile_for_timing(exp, variant, workdir, platform)
        return call, note

    def waiter(self, platform: str) -> Callable[[Any], Any]:
        from harness.frontends.torch.capture import waiter  # imports JAX: loaded only when called
        from harness.frontends.torch.expression import (
            device_for,  # imports JAX: loaded only when called
        )  # imports JAX: loaded only when called

        return waiter(device_for(platform))

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
        vdir = RunFolder(workdir).variant(variant.name).root
        timing = timing_section(variant.name, record, timed)
        return analyze_torch_variant(vdir, exp, variant, record, timing, ceilings, platform)

    def validate(self, variant: Variant, source: str) -> None:
        validate_variant(variant, source)

    def job_scope(self) -> contextlib.AbstractContextManager[None]:
        return scratch_cache_dir()

    # The Inductor ladder's own takes the protocol's arguments in its order: no wrapper between.
    diverge = staticmethod(torch_first_divergence)


register(TorchFrontend())
