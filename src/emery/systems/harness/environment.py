"""The environment protocol, and how a config names one (``ENVIRONMENTS``, ``core/plugins.py``):
a built-in name (``calculator``, ``kv_store``, ``files``), ``module:attr`` or an entry point of
the ``emery.environments`` group, naming a class or a function that makes an environment.

An environment is made fresh for each episode. ``reset(task)`` gets the example's input
and returns the instruction; ``execute(action)`` gets ``{"tool", "arguments"}`` and returns
an ``Observation`` (either may be async). ``tools`` lists the JSON tool specs (name,
description, parameters). An optional ``check(answer)`` is the environment's own success
signal: a score, ``(score, feedback)``, or None to let the job's verifier compare the
answer with the example's gold output. An optional ``close()`` runs after the episode.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from emery.core.errors import ConfigError
from emery.core.plugins import PluginRegistry
from emery.systems.harness.observation import Observation

BUILTIN_ENVIRONMENTS: dict[str, str] = {
    "calculator": "emery.systems.harness.envs.calculator:CalculatorEnv",
    "kv_store": "emery.systems.harness.envs.kv_store:KeyValueEnv",
    "files": "emery.systems.harness.envs.files:FilesEnv",
}


@runtime_checkable
class Environment(Protocol):
    """What a code-harness episode acts on."""

    tools: Sequence[Mapping[str, Any]]

    def reset(self, task: Mapping[str, Any]) -> Any:
        """Start an episode on ``task`` (an example's input); return the instruction."""
        ...

    def execute(self, action: Mapping[str, Any]) -> Any:
        """Run ``{"tool": name, "arguments": {...}}``; return an ``Observation``."""
        ...


EnvironmentFactory = Callable[[], Environment]

ENVIRONMENTS: PluginRegistry[Callable[..., Any]] = PluginRegistry(
    what="environment",
    plural="environments",
    where="system.environment",
    builtins=BUILTIN_ENVIRONMENTS,
    attribute="ENVIRONMENT",
    group="emery.environments",
    type=Callable,  # type: ignore[arg-type]  # a class or a function: checked below
)
"""``[system] environment``: a factory of fresh environments, called with no arguments."""


def load_environment(spec: str) -> EnvironmentFactory:
    """A factory of fresh environments (``ENVIRONMENTS``), checked by making one; a name that
    is none, or a factory that fails or makes no environment, is a one-line ConfigError."""
    factory = ENVIRONMENTS.get(spec)
    try:
        sample = factory()
    except Exception as exc:  # e.g. a function that needs arguments: not a factory
        raise ConfigError(
            f"system.environment: {spec!r} is not an environment class or factory: calling it"
            f" with no arguments failed ({type(exc).__name__}: {exc})"
        ) from None
    missing = [name for name in ("reset", "execute", "tools") if not hasattr(sample, name)]
    if missing:
        raise ConfigError(
            f"system.environment: {spec!r} made a {type(sample).__name__}, not an environment"
            f" (it has no {', '.join(missing)})"
        )
    if hasattr(sample, "close"):
        sample.close()
    built: EnvironmentFactory = factory
    return built


async def maybe_await(value: Any) -> Any:
    """``value``, awaited when it is awaitable (environments may be sync or async)."""
    return await value if inspect.isawaitable(value) else value


def as_observation(value: Any) -> Observation:
    """An environment's return value as an Observation (a string is an ok observation)."""
    if isinstance(value, Observation):
        return value
    if isinstance(value, Mapping):
        return Observation.from_dict(dict(value))
    return Observation(text="" if value is None else str(value))


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of ``tools``; a spec without a name is a config error."""
    names = []
    for spec in tools:
        name = spec.get("name") if isinstance(spec, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"system.environment: a tool spec has no name: {spec!r}")
        names.append(name)
    return names
