"""The LM proxy: an OpenAI-compatible chat API in front of the job's task model.

``/v1/chat/completions`` and ``/v1/models`` forward to the default model. Under
``/rollouts/{rollout_id}/attempts/{attempt_id}/v1`` (or ``/rollouts/{rollout_id}/v1`` for
the running attempt) each call is forwarded to that attempt's model and recorded as a
``chat`` span of the attempt; an attempt that is not running gets 404. Streaming requests
get the reply as server-sent chunks once the model has answered, and the full text is
recorded. When the attempt asks for it, seed component texts in the request are replaced
by the candidate's texts before forwarding (agents that know nothing of emery). An
``X-Emery-Agent`` header names the agent that made the call (``gen_ai.agent.name`` on its
span). With the model's ``record_tokens`` set, the span also holds the call's token ids and
log-probabilities; the reply the agent gets is the same either way.

When the backend has a span sink (``emery server``: its store), calls on ``/v1`` and on a
published prompt's route, which belong to no attempt, are recorded as ``chat`` spans of
application traces (``tracing/application_spans.py``: ``X-Emery-Service``, ``traceparent``);
the reply is the same, and a failed write is logged, never the call's failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import nullcontext
from typing import Any, Protocol, TypeVar

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from opentelemetry import trace
from starlette.requests import ClientDisconnect

from emery.core.errors import EmeryError
from emery.core.models import ChatMessage
from emery.core.spans import SpanRecord
from emery.lm.base import LM, Completion
from emery.proxy.chat_request import BadRequest, ChatRequest, parse_chat_request
from emery.tracing.application_spans import ApplicationCall, CallOrigin, SpanSink
from emery.tracing.lm import open_chat_span, suppress_instrumentation
from emery.tracing.registry import LiveRollouts
from emery.tracing.scope import AttemptScope, activate

T = TypeVar("T")
log = logging.getLogger(__name__)


class ProxyBackend(Protocol):
    """Who the proxy serves: running attempts by id, a default model for ``/v1``, and
    where the calls of applications (on no attempt) are recorded, if anywhere."""

    def attempt(self, rollout_id: str, attempt_id: str | None) -> AttemptScope | None: ...

    def default_lm(self) -> LM | None: ...

    def application_sink(self) -> SpanSink | None: ...


class LiveBackend:
    """Attempts registered in this process, an optional default model, and an optional
    sink for applications' calls (``emery server`` passes its store)."""

    def __init__(
        self, registry: LiveRollouts, default: LM | None = None, sink: SpanSink | None = None
    ) -> None:
        self.registry = registry
        self.default = default
        self.sink = sink

    def attempt(self, rollout_id: str, attempt_id: str | None) -> AttemptScope | None:
        return self.registry.get(rollout_id, attempt_id)

    def default_lm(self) -> LM | None:
        return self.default

    def application_sink(self) -> SpanSink | None:
        return self.sink


class ProxyError(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """An error in the OpenAI wire format."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": status}}, status_code=status
    )


def substitute(messages: list[ChatMessage], replacements: Mapping[str, str]) -> list[ChatMessage]:
    """Replace seed texts by candidate texts (skipping messages that already hold the
    candidate text, so an agent that reads the candidate is left alone)."""
    if not replacements:
        return messages
    out: list[ChatMessage] = []
    for message in messages:
        content = message["content"]
        for seed, text in replacements.items():
            if text not in content and seed in content:
                content = content.replace(seed, text)
        out.append({**message, "content": content})
    return out


async def _on_loop(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None) -> T:
    """Await ``coro`` on ``loop`` (the attempt's own loop) when that is another loop."""
    if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
        return await coro
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    return await asyncio.wrap_future(future)


async def _recorded(
    scope: AttemptScope,
    lm: LM,
    requested: str,
    messages: list[ChatMessage],
    body: ChatRequest,
    agent: str | None,
) -> Completion:
    """Call ``lm`` as a recorded ``chat`` span of ``scope`` (a child of its root span)."""
    params = body.sampling()
    parent = (
        trace.use_span(
            scope.root, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )
        if scope.root is not None
        else nullcontext()
    )
    with activate(scope), parent:
        chat = open_chat_span(
            scope,
            model=requested or lm.model,
            messages=messages,
            source="proxy",
            temperature=params.get("temperature"),
            max_tokens=params.get("max_tokens"),
            stop=params.get("stop"),
            tools=body.tools,
            stream=body.stream,
            agent=agent,
        )
        try:
            with suppress_instrumentation():
                completion = await lm.complete(messages, **params)
        except BaseException as exc:
            chat.end(exc)
            raise
        chat.finish_completion(completion)
        chat.end()
        return completion


async def _recorded_application_call(
    sink: SpanSink,
    origin: CallOrigin,
    lm: LM,
    requested: str,
    messages: list[ChatMessage],
    body: ChatRequest,
    response_id: str,
) -> Completion:
    """Call ``lm`` for an application and write the call's span to ``sink``; a failed
    write is logged and the call answered as if nothing was recorded."""
    params = body.sampling()
    call = ApplicationCall(
        origin,
        model=requested or lm.model,
        messages=messages,
        temperature=params.get("temperature"),
        max_tokens=params.get("max_tokens"),
        stop=params.get("stop"),
        tools=body.tools,
        stream=body.stream,
    )
    try:
        with suppress_instrumentation():
            completion = await lm.complete(messages, **params)
    except Exception as exc:
        await _write(sink, call.failed(exc))
        raise
    await _write(sink, call.finished(completion, response_id))
    return completion


async def _write(sink: SpanSink, span: SpanRecord) -> None:
    try:
        await anyio.to_thread.run_sync(sink.add_spans, [span])
    except Exception:
        log.warning("could not record the proxied call's span %s", span.span_id, exc_info=True)


def completion_body(completion: Completion, requested: str, response_id: str) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    usage = completion.usage
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": completion.model or requested,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "finish_reason": completion.finish_reason or "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
    }


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


async def stream_chunks(
    completion: Completion, requested: str, response_id: str, include_usage: bool
) -> AsyncIterator[bytes]:
    """The reply as ``chat.completion.chunk`` server-sent events, then ``[DONE]``."""
    model = completion.model or requested
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None, usage: Any = None) -> bytes:
        body: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if usage is not None:
            body["choices"] = []
            body["usage"] = usage
        return f"data: {json.dumps(body)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""}, None)
    for piece in _pieces(completion.text):
        yield chunk({"content": piece}, None)
    yield chunk({}, completion.finish_reason or "stop")
    if include_usage:
        usage = completion.usage
        yield chunk(
            {},
            None,
            {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
        )
    yield b"data: [DONE]\n\n"


def _model_list(model: str) -> dict[str, Any]:
    """A ``/v1/models`` reply listing one model."""
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "emery"}],
    }


def _unknown(rollout_id: str, attempt_id: str | None) -> Response:
    what = f"rollout {rollout_id!r}" + (f" attempt {attempt_id!r}" if attempt_id else "")
    return error_response(404, f"unknown or finished {what}", "not_found")


async def _read_chat_request(request: Request) -> ChatRequest:
    """The validated chat request; ``BadRequest`` when it is malformed."""
    try:
        raw = await request.body()
    except ClientDisconnect:
        raise BadRequest("the client went away", 499) from None
    return parse_chat_request(raw)


async def _complete(
    backend: ProxyBackend,
    scope: AttemptScope | None,
    messages: list[ChatMessage],
    requested: str,
    body: ChatRequest,
    origin: CallOrigin,
    response_id: str,
) -> Completion:
    """Forward to the default model (no scope; recorded as an application's call where
    the backend has a sink) or record the call in the attempt's scope."""
    agent = origin.agent
    if scope is None:
        lm = backend.default_lm()
        if lm is None:
            raise ProxyError(
                503, "this server has no default model; use a rollout URL", "unavailable"
            )
        sink = backend.application_sink()
        if sink is None:
            return await lm.complete(messages, **body.sampling())
        return await _recorded_application_call(
            sink, origin, lm, requested, messages, body, response_id
        )
    if scope.lm is None:
        raise ProxyError(503, "the attempt has no model", "unavailable")
    messages = substitute(messages, scope.substitutions())
    recorded = _recorded(scope, scope.lm, requested, messages, body, agent)
    return await _on_loop(recorded, scope.loop)


MessagesRewrite = Callable[[list[ChatMessage]], list[ChatMessage]]
"""Changes a request's messages before they are forwarded; an ``EmeryError`` it raises
answers the request with a 400 that carries its message."""


async def handle_chat(
    backend: ProxyBackend,
    request: Request,
    scope: AttemptScope | None,
    rewrite: MessagesRewrite | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Response:
    """Answer one chat completion request, streamed when it asks for it; ``rewrite``
    changes the request's messages before they are forwarded, and ``attributes`` are
    added to the span of an application's call."""
    try:
        body = await _read_chat_request(request)
    except BadRequest as exc:
        return error_response(exc.status, str(exc), "invalid_request_error")
    requested = body.model
    response_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    messages = body.chat_messages()
    if rewrite is not None:
        try:
            messages = rewrite(messages)
        except EmeryError as exc:
            return error_response(400, str(exc), "invalid_request_error")
    origin = CallOrigin.from_headers(request.headers, attributes)
    try:
        completion = await _complete(backend, scope, messages, requested, body, origin, response_id)
    except ProxyError as exc:
        return error_response(exc.status, str(exc), exc.kind)
    except Exception as exc:
        return error_response(502, f"the model failed: {exc}", "upstream_error")
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(
            stream_chunks(completion, requested, response_id, include_usage),
            media_type="text/event-stream",
        )
    return JSONResponse(completion_body(completion, requested, response_id))


def proxy_router(backend: ProxyBackend) -> APIRouter:
    """The proxy's routes over ``backend``."""
    router = APIRouter(tags=["lm-proxy"])

    @router.get("/v1/models")
    async def models() -> Response:
        lm = backend.default_lm()
        return JSONResponse(_model_list(lm.model if lm is not None else "emery"))

    @router.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await handle_chat(backend, request, None)

    _add_attempt_routes(router, backend)
    return router


def _add_attempt_routes(router: APIRouter, backend: ProxyBackend) -> None:
    """The routes of running attempts: their models, chat and heartbeat."""

    @router.get("/rollouts/{rollout_id}/attempts/{attempt_id}/v1/models")
    async def attempt_models(rollout_id: str, attempt_id: str) -> Response:
        scope = backend.attempt(rollout_id, attempt_id)
        if scope is None or scope.lm is None:
            return _unknown(rollout_id, attempt_id)
        return JSONResponse(_model_list(scope.lm.model))

    @router.post("/rollouts/{rollout_id}/attempts/{attempt_id}/v1/chat/completions")
    async def attempt_chat(request: Request, rollout_id: str, attempt_id: str) -> Response:
        scope = backend.attempt(rollout_id, attempt_id)
        if scope is None:
            return _unknown(rollout_id, attempt_id)
        return await handle_chat(backend, request, scope)

    @router.post("/rollouts/{rollout_id}/attempts/{attempt_id}/heartbeat")
    async def attempt_heartbeat(rollout_id: str, attempt_id: str) -> Response:
        scope = backend.attempt(rollout_id, attempt_id)
        if scope is None:
            return _unknown(rollout_id, attempt_id)
        scope.touch()
        return Response(status_code=204)

    @router.post("/rollouts/{rollout_id}/v1/chat/completions")
    async def rollout_chat(request: Request, rollout_id: str) -> Response:
        scope = backend.attempt(rollout_id, None)
        if scope is None:
            return _unknown(rollout_id, None)
        return await handle_chat(backend, request, scope)
