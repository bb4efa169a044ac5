"""Job configuration: schema, loading with helpful errors, and resolution into objects."""

from emery.config.loading import load_config, parse_config
from emery.config.resolve import (
    Models,
    build_models,
    check_system_inputs,
    open_cache,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.config.schema import DatasetConfig, JobConfig, LMSection, RuntimeConfig

__all__ = [
    "DatasetConfig",
    "JobConfig",
    "LMSection",
    "Models",
    "RuntimeConfig",
    "build_models",
    "check_system_inputs",
    "load_config",
    "open_cache",
    "parse_config",
    "resolve_dataset",
    "resolve_system",
    "resolve_verifier",
]
