"""Task apps: an agent behind HTTP as an optimizable system.

For each attempt emery POSTs ``{base_url}/rollout`` (see ``emery.systems.task_app_protocol``) with
the example, the candidate's components and an LM proxy URL, and reads the reward at
``reward_path`` (default ``metrics.outcome_reward``); without a reward the output at
``output_path`` is scored by the job's verifier. ``GET /health`` is checked before the job
starts and ``GET /task_info`` gives the seed components when the config does not. Time
limits and retries are the job's rollout settings (``[runtime]``).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Candidate, Example, Split
from emery.core.settings import Settings
from emery.core.spans import SpanRecord
from emery.systems.agent_components import attribute_calls
from emery.systems.base import RunContext, System, SystemRun
from emery.systems.registry import SystemKind
from emery.systems.task_app_protocol import (
    API_KEY_ENV,
    API_KEY_HEADER,
    EnvConfig,
    EnvSpec,
    ExampleSpec,
    PolicyConfig,
    PolicySpec,
    RolloutRequest,
    TaskInfo,
    dig,
)
from emery.tracing.remote import adopt_spans
from emery.tracing.scope import current_scope


class TaskAppConfig(Settings):
    """``[system]`` for ``kind = "task_app"``."""

    kind: Literal["task_app"] = "task_app"
    base_url: str
    name: str | None = None
    env_name: str | None = None
    components: dict[str, str] | None = None
    api_key: str | None = None
    api_key_env: str = API_KEY_ENV
    api_key_header: str = API_KEY_HEADER
    reward_path: str = "metrics.outcome_reward"
    output_path: str = "output"
    feedback_path: str = "feedback"
    send_expected: bool = True
    proxy: bool = True
    rewrite_prompts: bool = False
    model: str | None = None
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_timeout_s: float | None = Field(default=None, gt=0)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")


def example_seed(example_id: str) -> int:
    """A stable 31-bit seed for an example's environment."""
    return int(content_hash(example_id, 8), 16) & 0x7FFFFFFF


class TaskApp:
    """Calls a task app per attempt; see the module docstring."""

    reports_rewards = True  # the app scores its runs: a dataset needs no gold outputs

    def __init__(self, config: TaskAppConfig) -> None:
        self.config = config
        self.name = config.name or config.env_name or "task_app"
        self.needs_proxy = config.proxy
        self.rewrite_prompts = config.rewrite_prompts
        self._info: TaskInfo | None = None
        self._healthy = False

    # HTTP

    def headers(self) -> dict[str, str]:
        key = self.config.api_key or os.environ.get(self.config.api_key_env)
        return {self.config.api_key_header: key} if key else {}

    def _timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.config.request_timeout_s, connect=self.config.connect_timeout_s)

    def _get(self, path: str) -> httpx.Response:
        url = self.config.base_url + path
        try:
            return httpx.get(url, headers=self.headers(), timeout=self.config.connect_timeout_s)
        except httpx.HTTPError as exc:
            raise ConfigError(f"task app {url}: {type(exc).__name__}: {exc}") from None

    def check_health(self) -> None:
        """``GET /health``, then ``GET /task_info`` for the key (``/health`` is open to
        probes); a ConfigError says what is wrong (unreachable, refused key...)."""
        response = self._get("/health")
        refused = response if response.status_code in (401, 403) else self._get("/task_info")
        if refused.status_code in (401, 403):
            raise ConfigError(
                f"task app {self.config.base_url} refused the API key"
                f" (HTTP {refused.status_code}): set system.api_key or ${self.config.api_key_env}"
            )
        if response.status_code != 200:
            raise ConfigError(
                f"task app {self.config.base_url}/health answered HTTP {response.status_code}:"
                f" {response.text[:200]}"
            )
        self._healthy = True

    def task_info(self) -> TaskInfo | None:
        """``GET /task_info`` (read once); None when the app has none."""
        if self._info is None:
            response = self._get("/task_info")
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                raise ConfigError(
                    f"task app {self.config.base_url}/task_info answered HTTP"
                    f" {response.status_code}: {response.text[:200]}"
                )
            try:
                self._info = TaskInfo.model_validate(response.json())
            except ValueError as exc:
                raise ConfigError(f"task app /task_info is not valid: {exc}") from None
        return self._info

    # System protocol

    def seed_candidate(self) -> Candidate:
        if self.config.components is not None:
            return Candidate(components=dict(self.config.components))
        if not self._healthy:
            self.check_health()
        info = self.task_info()
        return Candidate(components=dict(info.components) if info is not None else {})

    def version(self) -> str:
        return content_hash(
            self.config.model_dump(
                exclude={"components", "api_key", "api_key_env", "name", "connect_timeout_s"}
            )
        )

    def check_inputs(self, fields: set[str]) -> None:
        """The app must be up (and accept our key) before the job starts."""
        self.check_health()
        info = self.task_info()
        missing = sorted(set(info.inputs) - fields) if info is not None else []
        if missing:
            raise ConfigError(
                f"task app {self.name}: it reads input {missing[0]!r}, which the examples"
                f" lack (available: {', '.join(sorted(fields)) or 'none'})"
            )

    def request(
        self, candidate: Candidate, example: Example, split: Split | None, proxy_url: str | None
    ) -> RolloutRequest:
        scope = current_scope()
        rollout_id = scope.rollout_id if scope is not None else None
        number = scope.attempt.number if scope is not None else 1
        correlation = scope.attempt_id if scope is not None else f"{candidate.id}:{example.id}"
        return RolloutRequest(
            correlation_id=correlation,
            rollout_id=rollout_id,
            attempt=number,
            mode=split,
            env=EnvSpec(
                name=self.config.env_name or self.name,
                seed=example_seed(example.id),
                config=EnvConfig(
                    example=ExampleSpec(
                        id=example.id,
                        input=example.input,
                        expected=example.expected if self.config.send_expected else None,
                        meta=example.meta,
                    ),
                    split=split,
                ),
            ),
            policy=PolicySpec(
                candidate_id=candidate.id,
                components=dict(candidate.components),
                config=PolicyConfig(inference_url=proxy_url, model=self.config.model),
            ),
        )

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        scope = current_scope()
        proxy_url = scope.proxy_url if scope is not None else None
        body = self.request(candidate, ctx.example, ctx.split, proxy_url)
        async with httpx.AsyncClient(timeout=self._timeout()) as client:
            response = await client.post(
                self.config.base_url + "/rollout",
                json=body.model_dump(mode="json"),
                headers=self.headers(),
            )
        if response.status_code in (401, 403):
            return SystemRun(
                error=f"the task app refused the API key (HTTP {response.status_code})"
            )
        if response.status_code >= 400:
            return SystemRun(
                error=f"the task app answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            data: Any = response.json()
        except ValueError:
            return SystemRun(error=f"the task app answered non-JSON: {response.text[:200]}")
        if scope is not None:
            spans = dig(data, "trace.spans")
            if isinstance(spans, list) and spans:
                # An app with a trace format of its own: nothing to adopt.
                with contextlib.suppress(ValueError):
                    adopt_spans(scope, [SpanRecord.model_validate(s) for s in spans])
        calls = attribute_calls(scope.lm_calls if scope is not None else [], candidate.components)
        output = dig(data, self.config.output_path)
        feedback = dig(data, self.config.feedback_path)
        error = dig(data, "error")
        if error:
            return SystemRun(output=output, calls=calls, error=str(error))
        reward = dig(data, self.config.reward_path)
        if reward is None:
            return SystemRun(output=output, calls=calls)
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            return SystemRun(
                output=output,
                calls=calls,
                error=f"the reward at {self.config.reward_path} is not a number: {reward!r}",
            )
        return SystemRun(
            output=output,
            calls=calls,
            reward=float(reward),
            feedback=str(feedback) if feedback is not None else None,
        )


def build(config: TaskAppConfig) -> System:
    return TaskApp(config)


KIND = SystemKind(name="task_app", config=TaskAppConfig, build=build)
