"""Host a Python agent as a task app: ``GET /health``, ``GET /task_info``, ``POST /rollout``.

The agent is run like a function agent (parameters injected by name, components bound to
the candidate the request carries). Its model calls go to the LM proxy URL in the request:
the ``lm`` parameter calls it, and ``openai`` clients are redirected to it, so emery records
them on its side. Emitted spans come back in the response. With an API key configured,
every route but ``/health`` requires it (``X-API-Key`` or ``Authorization: Bearer``),
checked before the body is read; off loopback a key is required.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import openai
import uvicorn
from fastapi import FastAPI, HTTPException
from opentelemetry.context import Context

from emery.core.models import Candidate, ChatMessage, Example
from emery.core.rollouts import Attempt, Rollout, jsonable
from emery.lm.base import Completion, LMError, TokenUsage, sampling_params
from emery.proxy.guards import (
    MAX_BODY_BYTES,
    ApiKeyMiddleware,
    BodyLimitMiddleware,
    has_lone_surrogate,
    refuse_open_binding,
    render_validation_errors,
)
from emery.systems.base import RunContext
from emery.systems.function_agent import RESERVED, FunctionAgent
from emery.systems.task_app_protocol import (
    API_KEY_ENV,
    RolloutMetrics,
    RolloutRequest,
    RolloutResponse,
    TaskInfo,
    TraceSpec,
)
from emery.tracing import conventions as sc
from emery.tracing.processor import RolloutTracing
from emery.tracing.recorder import MemoryRecorder
from emery.tracing.scope import AttemptScope, activate

log = logging.getLogger(__name__)


class ProxyLM:
    """The ``lm`` an agent gets in a task app: chat completions through emery's LM proxy."""

    def __init__(self, base_url: str | None, model: str = "task") -> None:
        self.base_url = base_url
        self.model = model

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        if self.base_url is None:
            raise LMError("this rollout request carried no LM proxy URL (policy.config)")
        body = sampling_params(temperature, max_tokens, stop, params)
        async with openai.AsyncOpenAI(
            base_url=self.base_url, api_key="emery", max_retries=0
        ) as client:
            response = await client.chat.completions.create(
                model=self.model,
                messages=list(messages),  # type: ignore[arg-type]
                **body,
            )
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "stop",
            usage=TokenUsage(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
            ),
            model=response.model or self.model,
        )


class HeartbeatForwarder:
    """Tells the job an attempt is alive (its proxy's heartbeat URL), at most once per
    ``interval_s``, from a background thread so the agent never waits on it."""

    def __init__(self, proxy_url: str, interval_s: float = 1.0) -> None:
        base = proxy_url.rstrip("/")
        self.url = (base[: -len("/v1")] if base.endswith("/v1") else base) + "/heartbeat"
        self.interval_s = interval_s
        self._last = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.interval_s:
                return
            self._last = now
        threading.Thread(target=self._send, daemon=True, name="emery-heartbeat").start()

    def _send(self) -> None:
        try:
            _heartbeat_client().post(self.url)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            log.debug("heartbeat to %s failed: %s", self.url, exc)


_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _heartbeat_client() -> httpx.Client:
    """One HTTP client for all heartbeats of this process (connections are reused)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(timeout=2.0)
        return _client


async def run_request(
    system: FunctionAgent, request: RolloutRequest, *, heartbeat_interval_s: float = 1.0
) -> RolloutResponse:
    """Run one rollout request and describe it as a response (never raises).

    Signs of life (spans, ``emery.heartbeat()``) are forwarded to the job's proxy at most
    every ``heartbeat_interval_s``, so its unresponsive check sees a busy remote agent."""
    recorder = MemoryRecorder()
    tracing = RolloutTracing(recorder)
    spec = request.env.config.example
    example = Example(id=spec.id, input=spec.input, expected=spec.expected, meta=spec.meta)
    policy = request.policy
    rollout = Rollout(
        id=request.rollout_id or request.correlation_id,
        candidate_id=policy.candidate_id,
        example_id=example.id,
        split=request.env.config.split,
        components=dict(policy.components),
        input=dict(example.input),
    )
    attempt = Attempt(rollout_id=rollout.id, number=max(1, request.attempt))
    url = policy.config.inference_url
    scope = AttemptScope(rollout, attempt, tracing.tracer, proxy_url=url)
    scope.redirect_openai = url is not None
    if url is not None:
        scope.on_activity = HeartbeatForwarder(url, heartbeat_interval_s)
    candidate = Candidate(components={**system.seed_texts(), **policy.components})
    split = request.env.config.split
    context = RunContext(
        lm=ProxyLM(url, policy.config.model or "task"),
        example=example,
        split=split if split in ("train", "val", "test") else None,  # type: ignore[arg-type]
        rollout_id=rollout.id,
    )
    error: str | None = None
    run = None
    with (
        activate(scope),
        tracing.tracer.start_as_current_span(sc.ROLLOUT_SPAN, context=Context()) as root,
    ):
        scope.root, scope.loop = root, asyncio.get_running_loop()
        try:
            run = await system.run(candidate, context)
            error = run.error
        except Exception as exc:
            log.warning("rollout %s failed: %s", request.correlation_id, exc)
            root.record_exception(exc)
            error = f"{type(exc).__name__}: {exc}"
    scope.closed = True
    tracing.flush()
    return RolloutResponse(
        correlation_id=request.correlation_id,
        output=jsonable(run.output) if run is not None else None,
        metrics=RolloutMetrics(outcome_reward=run.reward if run is not None else None),
        feedback=run.feedback if run is not None else None,
        error=error,
        trace=TraceSpec(spans=recorder.spans()),
    )


def url_problem(url: str | None) -> str | None:
    """Why the LM proxy URL of a request cannot be called, or None (no URL is fine)."""
    if url is None:
        return None
    try:
        scheme = httpx.URL(url).scheme
    except httpx.InvalidURL as exc:
        return f"is not a URL ({exc})"
    return None if scheme in ("http", "https") else "must be an http(s) URL"


def create_task_app(
    agent: Any,
    *,
    name: str | None = None,
    api_key: str | None = None,
    api_key_env: str = API_KEY_ENV,
    heartbeat_interval_s: float = 1.0,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """A FastAPI app serving ``agent`` (a function, ``@emery.agent``, ``module:attr`` or a
    ``FunctionAgent``). The API key is ``api_key``, else ``$api_key_env``, else none; with
    one, every route but ``/health`` (docs included) needs it, checked before the body is
    read."""
    system = agent if isinstance(agent, FunctionAgent) else FunctionAgent(agent)
    key = api_key or os.environ.get(api_key_env) or None
    title = name or system.name
    app = FastAPI(title=f"emery task app: {title}")
    app.state.system = system
    app.state.auth = key is not None
    render_validation_errors(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    if key is not None:  # added last: runs first, before the body is read
        app.add_middleware(ApiKeyMiddleware, key=key)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "name": title}

    @app.get("/task_info")
    async def task_info() -> TaskInfo:
        inputs = [p for p in system.parameters if p not in RESERVED]
        return TaskInfo(name=title, components=system.seed_texts(), inputs=inputs)

    @app.post("/rollout")
    async def rollout(request: RolloutRequest) -> RolloutResponse:
        if has_lone_surrogate(request.model_dump(mode="json")):
            raise HTTPException(400, "the request holds an invalid unicode escape (lone surrogate)")
        problem = url_problem(request.policy.config.inference_url)
        if problem:
            raise HTTPException(400, f"policy.config.inference_url {problem}")
        return await run_request(system, request, heartbeat_interval_s=heartbeat_interval_s)

    return app


def serve(
    agent: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8500,
    name: str | None = None,
    api_key: str | None = None,
    api_key_env: str = API_KEY_ENV,
) -> None:
    """Serve ``agent`` as a task app until interrupted (blocking). Off loopback it needs
    an API key (ConfigError otherwise)."""
    app = create_task_app(agent, name=name, api_key=api_key, api_key_env=api_key_env)
    refuse_open_binding(host, api_key or os.environ.get(api_key_env) or None, f"set ${api_key_env}")
    uvicorn.run(app, host=host, port=port, log_level="warning")
