"""The record of a PyTorch variant's `torch.json`: what its capture knew that no later file says.

Written once by harness.frontends.torch.capture (through harness.records.run_files.
write_torch_facts) and read by harness.frontends.torch.sections (run_files.load). It lives here,
not in the frontend's folder, because the run files' key tables (harness.records.keytables)
document every FileKind and sit below the frontends: a torch-named record kept as data.

Typed where the capture's shape is the harness's own and stable: the compile ids, explain()'s
counts (harness.frontends.torch.env.ExplainFacts), the capture environment
(TorchCaptureState.to_json) and the feature report. Kept open (`Plain`) where the shape is
torch's and changes with its version: each compilation metric's fields (the METRIC_FIELDS a
given torch has, with torch's own value types), torch.compile's keyword arguments, and a
config setting's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.store.records import EMPTY, Plain, doc


@dataclass(frozen=True)
class CompileIds:
    """Dynamo's compile ids (`0/0`, `1/0`, ...) that each call of the capture produced."""

    first_call: tuple[str, ...] = doc("the first call's: one per frame Dynamo compiled", ())
    steady: tuple[str, ...] = doc("the steady calls': none expected (they hit the graphs)", ())
    recompile: tuple[str, ...] = doc("the new-shape call's: empty when the guards held", ())


@dataclass(frozen=True)
class Explain:
    """What torch._dynamo.explain said of the function (harness.frontends.torch.env.ExplainFacts)."""

    graph_count: int = doc("graphs Dynamo made")
    graph_break_count: int = doc("graph breaks")
    break_reasons: tuple[str, ...] = doc("each break's one-line headline", ())
    break_details: tuple[str, ...] = doc("each break's full text", ())
    break_locations: tuple[str | None, ...] = doc(
        "each break's `file:line` in the user's code, null when its reason carries no stack", ()
    )
    op_count: int | None = doc("ops in the graphs")
    guard_count: int | None = doc("guards on the graphs")


@dataclass(frozen=True)
class ConfigSetting:
    """A torch config flag: where it lives in this torch, and its value."""

    path: str = doc("its dotted path (`torch._inductor.config.trace.enabled`)")
    value: Plain = doc("its value, as torch holds it")


@dataclass(frozen=True)
class CaptureEnv:
    """Where the capture pointed torch.compile's folders, and what it set
    (harness.frontends.torch.env.TorchCaptureState)."""

    dirs: dict[str, str] = doc(
        "the variant's torch/ folders by name: root, inductor_cache, triton_cache, debug, "
        "trace, tmp",
        EMPTY,
    )
    env: dict[str, str] = doc("the environment variables it set", EMPTY)
    applied: tuple[ConfigSetting, ...] = doc("the live config it patched", ())
    unavailable: tuple[str, ...] = doc("what this torch could not set, and why", ())
    trace_redirected: bool = doc("whether the TORCH_TRACE handler was moved to `dirs.trace`", False)
    notes: tuple[str, ...] = doc("what else it says", ())


@dataclass(frozen=True)
class Features:
    """Which torch.compile diagnostics this torch offers: each the attribute it was found at
    (`torch._dynamo.explain`) or `not available: why`."""

    torch_version: str = doc("the torch version (or `not available: why`)")
    explain: str | None = doc("torch._dynamo.explain")
    compilation_metrics: str | None = doc("torch._dynamo.utils.get_compilation_metrics")
    compile_times: str | None = doc("torch._dynamo.utils.compile_times")
    compile_profiler: str | None = doc(
        "torch._dynamo.utils.CompileProfiler (gone from recent torch)"
    )
    trace_handler: str | None = doc("the TORCH_TRACE handler")
    provenance: ConfigSetting | str | None = doc(
        "Inductor's provenance flag and its value, or `not available: why`"
    )


@dataclass(frozen=True)
class TorchFacts:
    """A PyTorch variant's capture facts: torch.compile's arguments, the compile ids of each
    call, explain(), Dynamo's compilation metrics and the features this torch offers. An eager
    variant has its torch version, device and `eager` only; a refused one (fullgraph=True on a
    graph break) what was known before the call, and the error."""

    schema_version: int = doc("this file's version (harness.records.run_files.TORCH_FACTS)")
    torch_version: str | None = doc("the torch version (or `not available: why`)")
    device: str | None = doc("where the variant ran: `cpu`, `cuda`")
    eager: bool = doc("an eager variant: nothing was compiled", False)
    compile_kwargs: dict[str, Plain] | None = doc(
        "torch.compile's keyword arguments (fullgraph, dynamic, mode, ...)"
    )
    capture_env: CaptureEnv | None = doc("the folders and settings of the capture")
    recompile_started: float | None = doc(
        "when the new-shape call started (Unix seconds): the log's later compiles are its"
    )
    compile_times: str | None = doc("torch._dynamo.utils.compile_times()'s table, as text")
    compile_ids: CompileIds | None = doc("each call's Dynamo compile ids")
    explain: Explain | str | None = doc("explain()'s counts, or `not available: why`")
    metrics: tuple[dict[str, Plain], ...] | str | None = doc(
        "Dynamo's compilation metrics of this variant's compiles, or `not available: why`: "
        "per compile the METRIC_FIELDS (harness.frontends.torch.env) this torch has, with "
        "torch's own values (left open: both change with the torch version), and `empty`"
    )
    features: Features | None = doc("the diagnostics this torch offers")
    first_call_s: float | None = doc("the first call's seconds, compile included")
    recompile_s: float | None = doc("the new-shape call's seconds")
    expected_error: str | None = doc("fullgraph=True: Dynamo's refusal (its first 2000 characters)")

    def ids(self, call: str) -> tuple[str, ...]:
        """The compile ids of `call` (`first_call`, `steady`, `recompile`); () when not recorded."""
        return getattr(self.compile_ids, call) if self.compile_ids is not None else ()

    def metrics_of(self, ids: Sequence[str]) -> list[dict[str, Plain]]:
        """The compilation metrics of the compiles `ids` ([] when none were recorded)."""
        if not isinstance(self.metrics, tuple):
            return []
        return [m for m in self.metrics if m.get("compile_id") in ids]
