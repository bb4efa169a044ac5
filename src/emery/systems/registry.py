"""System kinds: the ``[system]`` section's ``kind`` picks the config model and builder.

Each system module defines ``KIND = SystemKind(...)``. ``kind`` names a built-in
(``SYSTEM_MODULES``), a ``"module:attr"`` reference to a ``SystemKind``, or an entry point
of the ``emery.systems`` group (``core/plugins.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from emery.core.errors import ConfigError
from emery.core.plugins import PluginRegistry
from emery.core.validation import describe
from emery.systems.base import System


@dataclass(frozen=True)
class SystemKind:
    """One kind of system: its config model and how to build a system from it."""

    name: str
    config: type[BaseModel]
    build: Callable[[Any], System]


SYSTEM_MODULES: dict[str, str] = {
    "prompt_program": "emery.systems.prompt_program",
    "function_agent": "emery.systems.function_agent",
    "task_app": "emery.systems.task_app",
    "code_harness": "emery.systems.harness.system",
    "graph": "emery.systems.graph.system",
}

SYSTEM_KINDS = PluginRegistry(
    what="kind",
    plural="kinds",
    where="system.kind",
    builtins=SYSTEM_MODULES,
    attribute="KIND",
    group="emery.systems",
    type=SystemKind,
)


def system_kind(name: str) -> SystemKind:
    """The kind ``name`` refers to, or a one-line error listing the known kinds."""
    return SYSTEM_KINDS.get(name)


def parse_system_config(data: Any) -> BaseModel:
    """Validate a ``[system]`` table (or pass through an already-built config model)."""
    if isinstance(data, BaseModel):
        return data
    if not isinstance(data, dict):
        raise ConfigError("system: must be a table with a 'kind' key")
    kind = system_kind(str(data.get("kind", "prompt_program")))
    try:
        return kind.config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, kind.config, prefix="system")) from None


def build_system(config: BaseModel) -> System:
    """The system a validated config describes."""
    return system_kind(str(getattr(config, "kind", "prompt_program"))).build(config)
