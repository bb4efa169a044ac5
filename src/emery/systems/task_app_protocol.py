"""The task-app wire format: what emery POSTs to ``{base_url}/rollout`` and reads back.

The ``task_app`` system (the client) and ``emery.taskapp`` (which hosts agents as task
apps) both speak it.

Request: a correlation id, the environment (name, seed, config with the example and its
split) and the policy (candidate id, its component texts, and the LM proxy URL the app
should send its model calls to). Response: the reward under ``metrics.outcome_reward``
(or any JSON path the client is configured with), optionally the output, feedback, an
error and the spans the app recorded.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from emery.core.spans import SpanRecord

API_KEY_HEADER = "X-API-Key"
API_KEY_ENV = "EMERY_TASK_APP_KEY"


class Open(BaseModel):
    """Unknown keys are kept: apps and clients may add their own."""

    model_config = ConfigDict(extra="allow")


class ExampleSpec(Open):
    id: str
    input: dict[str, Any]
    expected: Any = None
    meta: dict[str, Any] = Field(default_factory=dict)


class EnvConfig(Open):
    example: ExampleSpec
    split: str | None = None


class EnvSpec(Open):
    name: str
    seed: int
    config: EnvConfig


class PolicyConfig(Open):
    inference_url: str | None = None
    """OpenAI-compatible base URL of emery's LM proxy for this attempt (None: no proxy)."""
    model: str | None = None


class PolicySpec(Open):
    candidate_id: str
    components: dict[str, str] = Field(default_factory=dict)
    config: PolicyConfig = PolicyConfig()


class RolloutRequest(Open):
    correlation_id: str
    rollout_id: str | None = None
    attempt: int = 1
    mode: str | None = None
    env: EnvSpec
    policy: PolicySpec


class RolloutMetrics(Open):
    outcome_reward: float | None = None


class TraceSpec(Open):
    spans: list[SpanRecord] = Field(default_factory=list)


class RolloutResponse(Open):
    correlation_id: str
    output: Any = None
    metrics: RolloutMetrics = RolloutMetrics()
    feedback: str | None = None
    error: str | None = None
    trace: TraceSpec = TraceSpec()


class TaskInfo(Open):
    """``GET /task_info``: what the app is and the seed texts of its components."""

    name: str
    components: dict[str, str] = Field(default_factory=dict)
    inputs: list[str] = Field(default_factory=list)


_MISSING = object()


def dig(data: Any, path: str) -> Any:
    """The value at a dotted JSON path (``metrics.outcome_reward``, ``results.0.score``);
    ``None`` when any step is missing."""
    value = data
    for step in path.split(".") if path else []:
        if isinstance(value, dict):
            value = value.get(step, _MISSING)
        elif isinstance(value, list) and step.lstrip("-").isdigit():
            index = int(step)
            value = value[index] if -len(value) <= index < len(value) else _MISSING
        else:
            value = _MISSING
        if value is _MISSING:
            return None
    return value
