"""Config stage: YAML plus `--config.*` overrides, validated into frozen dataclasses."""

from harness.config.load import LoadedConfig, Override, load
from harness.config.schema import ConfigError, Experiment, Problem, Variant

__all__ = ["ConfigError", "Experiment", "LoadedConfig", "Override", "Problem", "Variant", "load"]
