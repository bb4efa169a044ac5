"""Algorithms by name, built from their ``[algorithm.<name>]`` settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from emery.algorithms.base import Algorithm, AlgorithmSettings
from emery.algorithms.baseline import Baseline, BaselineSettings
from emery.core.errors import ConfigError
from emery.core.validation import describe

Factory = Callable[[Any], Algorithm[Any]]

ALGORITHMS: dict[str, tuple[type[AlgorithmSettings], Factory]] = {
    "baseline": (BaselineSettings, Baseline),
}


def register(name: str, settings: type[AlgorithmSettings], factory: Factory) -> None:
    """Make an algorithm available to configs as ``job.algorithm = name``."""
    ALGORITHMS[name] = (settings, factory)


def build_algorithm(name: str, settings: dict[str, Any] | None = None) -> Algorithm[Any]:
    """The named algorithm with validated settings; errors name the offending key."""
    if name not in ALGORITHMS:
        known = ", ".join(sorted(ALGORITHMS))
        raise ConfigError(f"unknown algorithm {name!r}; known algorithms: {known}")
    settings_type, factory = ALGORITHMS[name]
    try:
        parsed = settings_type.model_validate(settings or {})
    except ValidationError as exc:
        raise ConfigError(describe(exc, settings_type, prefix=f"algorithm.{name}")) from None
    return factory(parsed)
