"""Config stage: YAML plus `--config.*` overrides, validated into frozen dataclasses."""

from harness.config.experiment import ConfigError, Experiment, Problem, Variant
from harness.config.load import LoadedConfig, OverrideFlag, load

__all__ = [
    "ConfigError",
    "Experiment",
    "LoadedConfig",
    "OverrideFlag",
    "Problem",
    "Variant",
    "load",
]
