"""LM calls as GenAI spans: a wrapper for emery's LMs and a helper the proxy and the
``openai`` instrumentation share."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion
from emery.lm.wrapper import LMWrapper
from emery.tracing import conventions as sc
from emery.tracing.agents import current_agent
from emery.tracing.chat_record import ChatRecord, request_attributes, token_attributes
from emery.tracing.scope import AttemptScope, LMCall, current_scope

_suppressed: ContextVar[bool] = ContextVar("emery_lm_spans_suppressed", default=False)


def instrumentation_suppressed() -> bool:
    """True inside an LM call emery already records (so the openai client does not again)."""
    return _suppressed.get()


@contextmanager
def suppress_instrumentation() -> Iterator[None]:
    token = _suppressed.set(True)
    try:
        yield
    finally:
        _suppressed.reset(token)


class ChatSpan:
    """An open ``chat`` span: ``finish`` records the response, ``end`` closes the span."""

    def __init__(
        self, span: Span, scope: AttemptScope, messages: list[ChatMessage], source: str
    ) -> None:
        self.span = span
        self.scope = scope
        self.messages = messages
        self.source = source
        self.ended = False

    def finish(
        self,
        *,
        text: str,
        model: str,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        latency_s: float | None = None,
        cached: bool = False,
        response_id: str | None = None,
    ) -> None:
        """Record the response (and the call, for the agent's component calls)."""
        output: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            output["tool_calls"] = tool_calls
        attributes: dict[str, AttributeValue] = {
            sc.GEN_AI_RESPONSE_MODEL: model,
            sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([output], ensure_ascii=False),
            sc.LM_CACHED: cached,
        }
        if finish_reason is not None:
            attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reason]
        if input_tokens is not None:
            attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if latency_s is not None:
            attributes[sc.LM_LATENCY_S] = latency_s
        if response_id is not None:
            attributes[sc.GEN_AI_RESPONSE_ID] = response_id
        self.span.set_attributes(attributes)
        self.scope.add_lm_call(
            LMCall(
                messages=self.messages,
                reply=text,
                model=model,
                source=self.source,
                tool_calls=list(tool_calls or []),
            )
        )

    def finish_completion(self, completion: Completion) -> None:
        self.finish(
            text=completion.text,
            model=completion.model,
            finish_reason=completion.finish_reason,
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
            latency_s=completion.latency_s,
            cached=completion.cached,
        )
        self.span.set_attributes(token_attributes(completion.tokens))

    def end(self, error: BaseException | None = None) -> None:
        """Close the span (once); ``error`` marks it failed."""
        if self.ended:
            return
        self.ended = True
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.span.end()
        self.scope.end_call()


def open_chat_span(
    scope: AttemptScope,
    *,
    model: str,
    messages: Sequence[Any],
    source: str,
    provider: str = "emery",
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop: Sequence[str] | None = None,
    tools: Sequence[Any] | None = None,
    stream: bool = False,
    agent: str | None = None,
) -> ChatSpan:
    """Start a ``chat {model}`` span (a child of the current span); the caller ends it.
    ``agent`` names the agent that made the call (default: ``as_agent``'s)."""
    attributes: dict[str, AttributeValue] = request_attributes(
        model=model,
        messages=messages,
        source=source,
        temperature=temperature,
        max_tokens=max_tokens,
        stop=stop,
        tools=tools,
        stream=stream,
        agent=agent or current_agent(),
        provider=provider,
    )
    scope.begin_call()
    span = scope.tracer.start_span(f"{sc.CHAT_OPERATION} {model}", attributes=attributes)
    return ChatSpan(span, scope, [dict(m) for m in messages], source)  # type: ignore[misc]


@contextmanager
def chat_span(scope: AttemptScope, **kwargs: Any) -> Iterator[ChatSpan]:
    """``open_chat_span`` as the current span of the enclosed code, ended on exit."""
    chat = open_chat_span(scope, **kwargs)
    try:
        with trace.use_span(chat.span, end_on_exit=False, record_exception=False):
            yield chat
    except BaseException as exc:
        chat.end(exc)
        raise
    chat.end()


class TracedLM(LMWrapper):
    """Records every call of ``inner`` made inside a rollout as a GenAI ``chat`` span
    (built directly as a record where the attempt has a recorder: ``ChatRecord``)."""

    def __init__(self, inner: LM, *, source: str = "emery") -> None:
        super().__init__(inner)
        self.source = source

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        scope = current_scope()
        if scope is None:
            return await self.inner.complete(messages, **params)
        request: dict[str, Any] = {
            "model": self.inner.model,
            "messages": messages,
            "source": self.source,
            "temperature": params.get("temperature"),
            "max_tokens": params.get("max_tokens"),
            "stop": params.get("stop"),
            "tools": params.get("tools"),
        }
        if scope.sink is not None:
            record = ChatRecord(scope, **request)
            try:
                with suppress_instrumentation():
                    completion = await self.inner.complete(messages, **params)
            except BaseException as exc:
                record.fail(exc)
                raise
            record.finish(completion)
            return completion
        with chat_span(scope, **request) as chat:
            with suppress_instrumentation():
                completion = await self.inner.complete(messages, **params)
            chat.finish_completion(completion)
        return completion
