"""Algorithms by name, ``module:attr`` or entry point, built from their settings.

Each algorithm module defines ``SPEC = AlgorithmSpec(...)``. ``[job] algorithm`` names a
built-in (``ALGORITHM_MODULES``), a ``"module:attr"`` reference to a spec, or an entry
point of the ``emery.algorithms`` group (``core/plugins.py``). Its settings are the
``[algorithm.<spec name>]`` table.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from emery.algorithms.base import Algorithm, AlgorithmSettings
from emery.core.errors import ConfigError
from emery.core.plugins import PluginRegistry
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

ALGORITHMS = PluginRegistry(
    what="algorithm",
    plural="algorithms",
    where="job.algorithm",
    builtins=ALGORITHM_MODULES,
    attribute="SPEC",
    group="emery.algorithms",
    type=AlgorithmSpec,
)


def register_builtin_payloads() -> None:
    """Import every built-in algorithm, each of which registers its event kinds when imported
    (``gepa/events.py``, ...), so that this process parses any built-in algorithm's stored
    events into their models; every reader of stored events calls it (``reports.event_text``
    when imported). A plug-in's kinds are registered once its module is imported."""
    for module in ALGORITHM_MODULES.values():
        importlib.import_module(module.partition(":")[0])


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The spec ``name`` refers to, or a one-line error listing the known names."""
    return ALGORITHMS.get(name)


def settings_table(name: str, tables: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The ``[algorithm.*]`` table of algorithm ``name``: the one under its spec's name
    (``[algorithm.best_of_k]`` for ``"my_pkg.search:SPEC"``), else one under ``name``."""
    spec_name = algorithm_spec(name).name
    return tables.get(spec_name, tables.get(name))


def parse_settings(name: str, settings: dict[str, Any] | None) -> AlgorithmSettings:
    """Validate ``[algorithm.<name>]``; errors name the offending key."""
    spec = algorithm_spec(name)
    try:
        return spec.settings.model_validate(settings or {})
    except ValidationError as exc:
        raise ConfigError(describe(exc, spec.settings, prefix=f"algorithm.{spec.name}")) from None


def checked_settings(name: str, tables: Mapping[str, dict[str, Any]]) -> AlgorithmSettings:
    """Algorithm ``name``'s validated settings out of all ``[algorithm.*]`` tables; a table
    that names no known algorithm is an error that suggests the nearest name."""
    settings = parse_settings(name, settings_table(name, tables))
    known = [*ALGORITHMS.names(), algorithm_spec(name).name, name]
    for section in sorted(set(tables) - set(known)):
        near = difflib.get_close_matches(section, known, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"unknown algorithm in [algorithm.{section}]{hint}")
    return settings


def build_algorithm(name: str, settings: dict[str, Any] | None = None) -> Algorithm[Any]:
    """The named algorithm with validated settings."""
    return algorithm_spec(name).factory(parse_settings(name, settings))
