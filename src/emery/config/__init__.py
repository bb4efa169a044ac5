"""Job configuration: schema, loading with helpful errors, and resolution into objects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.config.loading import load_config, parse_config
    from emery.config.resolve import (
        JobInputs,
        Models,
        ResolvedJob,
        build_models,
        check_system_inputs,
        open_cache,
        resolve_dataset,
        resolve_job,
        resolve_system,
        resolve_verifier,
    )
    from emery.config.schema import DatasetConfig, JobConfig, LMSection, RuntimeConfig

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "load_config": "emery.config.loading",
        "parse_config": "emery.config.loading",
        "JobInputs": "emery.config.resolve",
        "Models": "emery.config.resolve",
        "ResolvedJob": "emery.config.resolve",
        "resolve_job": "emery.config.resolve",
        "build_models": "emery.config.resolve",
        "check_system_inputs": "emery.config.resolve",
        "open_cache": "emery.config.resolve",
        "resolve_dataset": "emery.config.resolve",
        "resolve_system": "emery.config.resolve",
        "resolve_verifier": "emery.config.resolve",
        "DatasetConfig": "emery.config.schema",
        "JobConfig": "emery.config.schema",
        "LMSection": "emery.config.schema",
        "RuntimeConfig": "emery.config.schema",
    },
)

__all__ = [
    "DatasetConfig",
    "JobConfig",
    "JobInputs",
    "LMSection",
    "Models",
    "ResolvedJob",
    "RuntimeConfig",
    "build_models",
    "check_system_inputs",
    "load_config",
    "open_cache",
    "parse_config",
    "resolve_dataset",
    "resolve_job",
    "resolve_system",
    "resolve_verifier",
]
