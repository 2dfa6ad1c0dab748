"""The PyTorch frontend's checks of a config: its `torch:` section and what its modes cannot
take. harness.config.validate asks every registered frontend (`Frontend.validate`), so the
config stage knows no framework's keys but its own."""

from __future__ import annotations

from harness.config.experiment import ConfigError, TorchOptions, Variant
from harness.config.validate import choice, mode_names

# torch.compile's `mode` argument ("default" passes none).
TORCH_COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")


def validate_variant(v: Variant, source: str) -> None:
    """Checks a variant's `torch:` section and what a torch_* mode cannot take."""
    where = f"variants.{v.name}"
    choice(source, f"{where}.torch.mode", v.torch.mode, TORCH_COMPILE_MODES)
    if v.framework != "torch":
        if v.torch != TorchOptions():
            raise ConfigError(
                source,
                f"{where}.torch",
                f"applies to the torch_* modes ({', '.join(mode_names('torch'))}); mode is {v.mode!r}",
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
