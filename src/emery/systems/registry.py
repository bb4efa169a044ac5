"""System kinds by name: the ``[system]`` section's ``kind`` picks the config model and builder.

Each system module defines ``KIND = SystemKind(...)``; modules are imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from emery.core.errors import ConfigError
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


def system_kind(name: str) -> SystemKind:
    """The named kind, or a one-line error listing the known kinds."""
    module_name = SYSTEM_MODULES.get(name)
    if module_name is None:
        known = ", ".join(sorted(SYSTEM_MODULES))
        raise ConfigError(f"system.kind: unknown kind {name!r}; known kinds: {known}")
    kind: SystemKind = importlib.import_module(module_name).KIND
    return kind


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
