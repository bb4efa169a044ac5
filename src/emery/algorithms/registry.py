"""Algorithms by name, built from their ``[algorithm.<name>]`` settings.

Each algorithm module defines ``SPEC = AlgorithmSpec(...)``; modules are imported on
first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from emery.algorithms.base import Algorithm, AlgorithmSettings
from emery.core.errors import ConfigError
from emery.core.validation import describe


@dataclass(frozen=True)
class AlgorithmSpec:
    """How to build one algorithm: its settings model and a factory taking the settings."""

    name: str
    settings: type[AlgorithmSettings]
    factory: Callable[[Any], Algorithm[Any]]


ALGORITHM_MODULES: dict[str, str] = {
    "baseline": "emery.algorithms.baseline",
    "gepa": "emery.algorithms.gepa",
    "graph_gepa": "emery.algorithms.graph_gepa",
    "mipro": "emery.algorithms.mipro",
    "apo": "emery.algorithms.apo",
}


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The spec of a named algorithm, or a one-line error listing the known names."""
    module_name = ALGORITHM_MODULES.get(name)
    if module_name is None:
        known = ", ".join(sorted(ALGORITHM_MODULES))
        raise ConfigError(f"unknown algorithm {name!r}; known algorithms: {known}")
    spec: AlgorithmSpec = importlib.import_module(module_name).SPEC
    return spec


def parse_settings(name: str, settings: dict[str, Any] | None) -> AlgorithmSettings:
    """Validate ``[algorithm.<name>]``; errors name the offending key."""
    spec = algorithm_spec(name)
    try:
        return spec.settings.model_validate(settings or {})
    except ValidationError as exc:
        raise ConfigError(describe(exc, spec.settings, prefix=f"algorithm.{name}")) from None


def build_algorithm(name: str, settings: dict[str, Any] | None = None) -> Algorithm[Any]:
    """The named algorithm with validated settings."""
    return algorithm_spec(name).factory(parse_settings(name, settings))
