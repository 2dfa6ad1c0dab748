"""The JAX frontend: the GELU expression (or the user's program) jitted, dumped and profiled.

Its modes are data (harness.frontends.modes); its capture, timing and analysis are the
harness's own JAX stages (harness.capture.variant, harness.analyze), imported when first
called so that registering it imports no JAX.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analyze import analyze_xla_variant
from harness.config.experiment import FRONTEND_MODULES
from harness.frontends.modes import GPU_EMITTER_STAGES, Mode, Traits
from harness.frontends.registry import register
from harness.hlo.diverge import first_divergence
from harness.store.runfolder import DUMP_DIR, PROFILE_DIR

if TYPE_CHECKING:  # imported when called, so that registering the frontend imports no stage
    from harness.capture.variant import Subject
    from harness.config.experiment import Experiment, Variant
    from harness.frontends.contract import Captured, Context

NAME = "jax"

MODES = (
    Mode(
        "eager",
        NAME,
        ("eager",),
        "op-by-op dispatch",
        words="op-by-op (eager) dispatch",
        op_by_op=True,
        program=True,
    ),
    Mode("jit", NAME, ("compiled",), "the whole function jitted", words="jit", program=True),
    Mode(
        "jit_host_callback",
        NAME,
        ("host_callback", "compiled"),
        "jitted, with jax.debug.print between the GEMM and the GELU",
        words="a host callback (jax.debug.print) inside jit",
        host_print=True,
    ),
    Mode(
        "matmul_only",
        NAME,
        ("lower_bound", "compiled"),
        "x @ W alone, jitted",
        words="the GEMM alone",
        gemm_only=True,
    ),
    Mode(
        "jit_python_branch",
        NAME,
        ("traced_branch",),
        "a Python branch on a traced value: jit must refuse it while tracing",
        expects_trace_error=True,
        python_branch=True,
    ),
    Mode(
        "jit_lax_cond",
        NAME,
        ("device_branch", "compiled"),
        "the branch kept on the device (lax.cond), jitted",
        words="a data-dependent lax.cond inside jit",
        device_branch=True,
    ),
)

TRAITS = Traits(
    label="JAX",
    compiler="XLA",
    refuser="jit",
    emitter_stages=GPU_EMITTER_STAGES,  # the later IRs XLA's emitters write
    xla=True,
    xprof=True,
    packages=("jax", "jaxlib", "flax"),
    raw_inputs=(DUMP_DIR,),  # XLA's dump: the passes, the HLO, the thunks
    profile_inputs=(PROFILE_DIR,),  # jax.profiler's traces
)


def _block(out: Any) -> Any:
    import jax  # imports JAX: loaded only when called

    return jax.block_until_ready(out)


class JaxFrontend:
    """JAX: jit (or op-by-op dispatch), XLA's dumps, jax.profiler, the HLO ladder."""

    name = NAME
    modes = MODES
    traits = TRAITS
    shares_device = True  # harness.capture.variant: compiles beside others, measures alone

    def preload(self, variant: Variant) -> tuple[str, ...]:
        return ("jax", "harness.capture.variant", *FRONTEND_MODULES[variant.problem.frontend])

    def prepare(self, exp: Experiment, variant: Variant, cache: Path | None) -> None:
        from harness.variants import expression, program  # imports JAX: loaded only when called

        if variant.program.enabled:
            # An init that fails here fails again in the variant's capture, which records why.
            with contextlib.suppress(Exception):
                program.args_for(variant.program, exp.seed)
        elif not variant.mode_spec.expects_trace_error:
            expression.inputs_for(variant.problem, exp.seed, cache)

    def subject(self, exp: Experiment, variant: Variant) -> Subject:
        from harness.capture.variant import subject_of  # imports JAX: loaded only when called

        return subject_of(exp, variant)

    def capture(self, exp: Experiment, variant: Variant, ctx: Context) -> Captured:
        from harness.capture.variant import capture_variant  # imports JAX: loaded only when called

        # Its own subject: a frontend built on this one that runs another function (its
        # `subject`) is captured, dumped and profiled as JAX's are.
        return capture_variant(exp, variant, ctx, self.subject)

    def compile_for_timing(
        self,
        exp: Experiment,
        variant: Variant,
        workdir: Path,
        platform: str,
        executables: Path | None,
    ) -> tuple[Callable[[], Any], str | None]:
        del platform
        from harness.capture.variant import (
            compile_for_timing,  # imports JAX: loaded only when called
        )  # imports JAX: loaded only when called

        return compile_for_timing(exp, variant, workdir, executables, self.subject)

    def waiter(self, platform: str) -> Callable[[Any], Any]:
        del platform
        return _block

    # The harness's own stages take the protocol's arguments in its order: no wrapper between.
    analyze = staticmethod(analyze_xla_variant)

    def validate(self, variant: Variant, source: str) -> None:
        del variant, source  # its keys are the config's own (harness.config.validate)

    def job_scope(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    diverge = staticmethod(first_divergence)


register(JaxFrontend())
