"""What a function agent is called with, and what its return value means.

Parameters are filled by name: ``task``, ``example``, ``prompts`` / ``candidate``, ``lm``,
``rollout`` (``RESERVED``), else the input field of the same name. The return value is an
output (scored by the verifier), a float reward, or nothing (the last emitted reward).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from emery.core.errors import ConfigError
from emery.core.models import Candidate, Split
from emery.systems.agent_components import attribute_calls
from emery.systems.base import RunContext, SystemRun
from emery.tracing.agent_lm import AgentLM
from emery.tracing.scope import AttemptScope

Returns = Literal["auto", "output", "reward"]
RESERVED = frozenset({"task", "example", "prompts", "candidate", "lm", "rollout"})
Parameters = Mapping[str, inspect.Parameter]


class Prompts(dict[str, str]):
    """The component texts of the running candidate (a dict), with its ``id`` and ``demos``."""

    def __init__(self, candidate: Candidate, components: Mapping[str, str]) -> None:
        super().__init__(components)
        self.id = candidate.id
        self.demos = candidate.demos

    @property
    def components(self) -> dict[str, str]:
        return dict(self)


@dataclass(frozen=True)
class RolloutInfo:
    """What an agent may know about the rollout it runs in."""

    rollout_id: str | None
    attempt_id: str | None
    attempt: int
    mode: Split | None
    candidate_id: str
    example_id: str
    base_url: str | None = None
    """The LM proxy URL for this attempt (OpenAI-compatible), when the job has one."""


def _is_variadic(parameter: inspect.Parameter) -> bool:
    return parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)


def check_inputs(agent: str, parameters: Parameters, fields: set[str]) -> None:
    """Fail when a required parameter is neither reserved nor an input field."""
    for name, parameter in parameters.items():
        if name in RESERVED or _is_variadic(parameter):
            continue
        if parameter.default is parameter.empty and name not in fields:
            raise ConfigError(
                f"agent {agent}: parameter {name!r} is not an input field"
                f" (available: {', '.join(sorted(fields)) or 'none'}; or use `task`)"
            )


def agent_arguments(
    agent: str,
    parameters: Parameters,
    candidate: Candidate,
    components: dict[str, str],
    ctx: RunContext,
    scope: AttemptScope | None,
) -> dict[str, Any]:
    """The keyword arguments of one call of the agent function."""
    example = ctx.example
    values: dict[str, Any] = {
        "task": example.input,
        "example": example,
        "prompts": Prompts(candidate, components),
        "candidate": Prompts(candidate, components),
        "rollout": RolloutInfo(
            rollout_id=scope.rollout_id if scope else ctx.rollout_id,
            attempt_id=scope.attempt_id if scope else None,
            attempt=scope.attempt.number if scope else 1,
            mode=ctx.split,
            candidate_id=candidate.id,
            example_id=example.id,
            base_url=scope.proxy_url if scope else None,
        ),
    }
    kwargs: dict[str, Any] = {}
    for name, parameter in parameters.items():
        if name == "lm":
            kwargs[name] = AgentLM(ctx.lm, asyncio.get_running_loop())
        elif name in values:
            kwargs[name] = values[name]
        elif name in example.input:
            kwargs[name] = example.input[name]
        elif parameter.default is parameter.empty and not _is_variadic(parameter):
            raise ConfigError(f"agent {agent}: no value for parameter {name!r}")
    return kwargs


def system_run(
    result: Any, returns: Returns, components: dict[str, str], scope: AttemptScope | None
) -> SystemRun:
    """The agent's return value as a ``SystemRun``: an output, or a reward."""
    calls = attribute_calls(scope.lm_calls if scope else [], components)
    is_number = isinstance(result, float | int) and not isinstance(result, bool)
    if returns == "reward" or (returns == "auto" and isinstance(result, float)):
        if not is_number:
            return SystemRun(output=result, calls=calls, error="the agent returned no reward")
        return SystemRun(output=result, calls=calls, reward=float(result))
    if result is None and returns == "auto" and scope is not None:
        reward = scope.last_reward
        if reward is not None:
            return SystemRun(calls=calls, reward=reward.value)
    return SystemRun(output=result, calls=calls)
