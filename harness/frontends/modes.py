"""A frontend's modes and traits, as data: what each decision of the harness reads.

A mode says how the capture runs a variant (op by op, compiled whole, or expected to be
refused while tracing) and what the variant's function computes (the whole expression, the
GEMM alone, a host print in the middle, a branch on a traced value). Capture, the variant
builders, the worker and the analysis read these fields; none compares a mode's name.

`Traits` is what the rules and the report say about a framework's variants, read from
summary.json alone (a saved run is analysed and reported without its frontend's code).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Mode:
    """One mode of a frontend, by what it does rather than by its name."""

    name: str  # as the config writes it (`variants[].mode`), unique across frontends
    framework: str  # the frontend's name (`jax`, `torch`, ...)
    roles: tuple[str, ...] = ()  # the roles the mode gives a variant (harness.frontends.roles)
    description: str = ""
    # The mode in a finding's sentence ("op-by-op (eager) dispatch instead of jit"); empty:
    # its name.
    words: str = ""
    # How it runs: op by op (each primitive dispatched on its own, nothing compiled whole)
    # or compiled whole; `expects_trace_error`: the compiler must refuse the function while
    # tracing it, so nothing runs and the refusal is the result.
    op_by_op: bool = False
    expects_trace_error: bool = False
    # What its function computes, beside the expression gelu(x @ W + b) itself.
    gemm_only: bool = False  # x @ W alone: the lower bound
    host_print: bool = False  # prints mean(x @ W + b) between the GEMM and the GELU
    python_branch: bool = False  # a Python `if` on the traced mean(x @ W + b)
    device_branch: bool = False  # the same branch kept on the device (lax.cond)
    program: bool = False  # a program study (the user's own function) may run it

    @property
    def branches(self) -> bool:
        """True when the result depends on the sign of mean(x @ W + b): the GELU when it is
        positive, else x @ W + b (a Python branch that ran, or the device's)."""
        return self.python_branch or self.device_branch


# The later IRs a GPU compiler's emitters write (XLA's and Inductor's Triton, LLVM, PTX): the
# emitter stages of a frontend's traits that compiles through them.
GPU_EMITTER_STAGES = ("triton", "llvm", "ptx")


@dataclasses.dataclass(frozen=True)
class Traits:
    """What the rules and the report say about a framework's variants."""

    label: str  # its name in prose: "JAX", "PyTorch"
    compiler: str = ""  # what compiles its variants, in prose: "XLA", "Inductor"
    # The call that compiles its variants, in a finding's sentence ("torch.compile 2.1 s");
    # empty: `compiler`.
    compile_call: str = ""
    refuser: str = ""  # what refuses a Python branch on a traced value: "jit"
    # The later IRs its emitters write into a variant's ladder (harness.records.ladder stages).
    emitter_stages: tuple[str, ...] = ()
    # The framework whose variant of the same role each of its variants is also timed
    # against (`vs_framework`); None: its variants are the others' reference.
    timed_against: str | None = None
    # Its compile reports phases of its own in `compile.by_pipeline`, not XLA's pipelines.
    compile_phases: bool = False
    # Its compile is XLA's: the HLO ladder, dumps, and XLA's pipelines.
    xla: bool = False
    # What its capture keeps of a variant that ran: jax.profiler's traces (read by XProf),
    # a TORCH_TRACE log (read by tlparse).
    xprof: bool = False
    torch_trace: bool = False
    # Its compiler logs Dynamo's guards and recompile reasons (summary.json's `dynamo`).
    dynamo: bool = False
    # The installed packages whose versions a run records for it (the manifest's
    # `environment.versions`, read without importing them) and the report shows.
    packages: tuple[str, ...] = ()
    # The folders of a captured variant that only its capture makes and its analysis reads
    # (run-folder names: `dump`, `torch`, `profile`): an exported copy leaves them out, so
    # `harness.commands.reanalyze` refuses a run that lacks one rather than analyse it into
    # empty sections. `raw_inputs`: every captured variant's; `compile_inputs`: only those
    # of a mode that compiles (not `op_by_op`); `profile_inputs`: only when the run profiles.
    raw_inputs: tuple[str, ...] = ()
    compile_inputs: tuple[str, ...] = ()
    profile_inputs: tuple[str, ...] = ()


UNKNOWN = Traits(label="")  # a framework no frontend registered (a run of a plug-in, read later)
