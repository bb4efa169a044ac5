"""Record chat completions made with the ``openai`` client inside a rollout.

``instrument_openai()`` wraps ``chat.completions.create`` of the sync and async clients
(idempotent; ``uninstrument_openai()`` undoes it). Outside a rollout the wrapper only
forwards. Inside one:

- if the attempt has a proxy URL and ``redirect`` is on (a task app served by
  ``emery.taskapp``), the request is sent to that URL and the proxy records it;
- otherwise the call is recorded here as a GenAI ``chat`` span; streamed responses are
  recorded when the stream ends, with the full text.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from emery.tracing.lm import ChatSpan, instrumentation_suppressed, open_chat_span
from emery.tracing.scope import AttemptScope, current_scope

_originals: dict[str, Callable[..., Any]] = {}


class StreamText:
    """Accumulates streamed chat chunks into the full reply."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.model = ""
        self.finish_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.tool_calls: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any) -> None:
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.input_tokens = usage.prompt_tokens
            self.output_tokens = usage.completion_tokens
        for choice in getattr(chunk, "choices", None) or []:
            delta = choice.delta
            if delta is not None and delta.content:
                self.parts.append(delta.content)
            for call in (getattr(delta, "tool_calls", None) or []) if delta else []:
                entry = self.tool_calls.setdefault(
                    call.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["function"]["name"] += call.function.name or ""
                    entry["function"]["arguments"] += call.function.arguments or ""
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def finish(self, chat: ChatSpan, fallback_model: str, start: float) -> None:
        chat.finish(
            text=self.text,
            model=self.model or fallback_model,
            finish_reason=self.finish_reason,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            tool_calls=[self.tool_calls[i] for i in sorted(self.tool_calls)] or None,
            latency_s=time.perf_counter() - start,
        )


def _finish_response(chat: ChatSpan, response: Any, model: str, start: float) -> None:
    choice = response.choices[0] if response.choices else None
    message = choice.message if choice is not None else None
    usage = getattr(response, "usage", None)
    tool_calls = [c.model_dump() for c in (getattr(message, "tool_calls", None) or [])]
    chat.finish(
        text=(message.content or "") if message is not None else "",
        model=response.model or model,
        finish_reason=choice.finish_reason if choice is not None else None,
        input_tokens=usage.prompt_tokens if usage is not None else None,
        output_tokens=usage.completion_tokens if usage is not None else None,
        tool_calls=tool_calls or None,
        latency_s=time.perf_counter() - start,
        response_id=getattr(response, "id", None),
    )


class _TracedStream:
    """Wraps a sync ``Stream``: yields its chunks and records the reply when it ends."""

    def __init__(self, stream: Any, chat: ChatSpan, model: str, start: float) -> None:
        self._stream = stream
        self._chat = chat
        self._model = model
        self._start = start
        self._text = StreamText()
        self._iterator = self._chunks()

    def _chunks(self) -> Iterator[Any]:
        try:
            for chunk in self._stream:
                self._text.add(chunk)
                yield chunk
        except BaseException as exc:
            self._chat.end(exc)
            raise
        self._text.finish(self._chat, self._model, self._start)
        self._chat.end()

    def __iter__(self) -> Iterator[Any]:
        return self._iterator

    def __next__(self) -> Any:
        return next(self._iterator)

    def __enter__(self) -> _TracedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._chat.ended:
            self._text.finish(self._chat, self._model, self._start)
            self._chat.end()
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _TracedAsyncStream:
    """Wraps an ``AsyncStream`` like ``_TracedStream``."""

    def __init__(self, stream: Any, chat: ChatSpan, model: str, start: float) -> None:
        self._stream = stream
        self._chat = chat
        self._model = model
        self._start = start
        self._text = StreamText()
        self._iterator = self._chunks()

    async def _chunks(self) -> AsyncIterator[Any]:
        try:
            async for chunk in self._stream:
                self._text.add(chunk)
                yield chunk
        except BaseException as exc:
            self._chat.end(exc)
            raise
        self._text.finish(self._chat, self._model, self._start)
        self._chat.end()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterator

    async def __anext__(self) -> Any:
        return await self._iterator.__anext__()

    async def __aenter__(self) -> _TracedAsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if not self._chat.ended:
            self._text.finish(self._chat, self._model, self._start)
            self._chat.end()
        await self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _open(scope: AttemptScope, kwargs: dict[str, Any]) -> ChatSpan:
    return open_chat_span(
        scope,
        model=str(kwargs.get("model", "")),
        messages=list(kwargs.get("messages") or []),
        source="openai",
        provider="openai",
        temperature=kwargs.get("temperature"),
        max_tokens=kwargs.get("max_tokens") or kwargs.get("max_completion_tokens"),
        stop=kwargs.get("stop"),
        tools=kwargs.get("tools"),
        stream=bool(kwargs.get("stream")),
    )


def _to_proxy(resource: Any, scope: AttemptScope) -> bool:
    """Whether the client already talks to this attempt's proxy (which records the call)."""
    if scope.proxy_url is None:
        return False
    base = str(getattr(resource._client, "base_url", "")).rstrip("/")
    return base == scope.proxy_url.rstrip("/")


def _redirect_target(resource: Any, scope: AttemptScope) -> Any | None:
    """The same resource on a client pointed at the attempt's proxy, when redirecting."""
    if not scope.redirect_openai or scope.proxy_url is None:
        return None
    client = resource._client.with_options(base_url=scope.proxy_url)
    return client.chat.completions


def _sync_create(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        scope = current_scope()
        if scope is None or instrumentation_suppressed() or _to_proxy(self, scope):
            return original(self, *args, **kwargs)
        target = _redirect_target(self, scope)
        if target is not None:
            return original(target, *args, **kwargs)
        chat, start = _open(scope, kwargs), time.perf_counter()
        try:
            response = original(self, *args, **kwargs)
        except BaseException as exc:
            chat.end(exc)
            raise
        if kwargs.get("stream"):
            return _TracedStream(response, chat, str(kwargs.get("model", "")), start)
        _finish_response(chat, response, str(kwargs.get("model", "")), start)
        chat.end()
        return response

    return create


def _async_create(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        scope = current_scope()
        if scope is None or instrumentation_suppressed() or _to_proxy(self, scope):
            return await original(self, *args, **kwargs)
        target = _redirect_target(self, scope)
        if target is not None:
            return await original(target, *args, **kwargs)
        chat, start = _open(scope, kwargs), time.perf_counter()
        try:
            response = await original(self, *args, **kwargs)
        except BaseException as exc:
            chat.end(exc)
            raise
        if kwargs.get("stream"):
            return _TracedAsyncStream(response, chat, str(kwargs.get("model", "")), start)
        _finish_response(chat, response, str(kwargs.get("model", "")), start)
        chat.end()
        return response

    return create


def instrument_openai() -> None:
    """Record ``openai`` chat completions made inside rollouts (idempotent)."""
    from openai.resources.chat.completions import completions

    if _originals:
        return
    _originals["sync"] = completions.Completions.create
    _originals["async"] = completions.AsyncCompletions.create
    completions.Completions.create = _sync_create(_originals["sync"])  # type: ignore[method-assign]
    completions.AsyncCompletions.create = _async_create(_originals["async"])  # type: ignore[method-assign]


def uninstrument_openai() -> None:
    """Undo ``instrument_openai``."""
    from openai.resources.chat.completions import completions

    if not _originals:
        return
    completions.Completions.create = _originals.pop("sync")  # type: ignore[method-assign]
    completions.AsyncCompletions.create = _originals.pop("async")  # type: ignore[method-assign]
