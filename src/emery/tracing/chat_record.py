"""An LM call of emery's own models recorded straight as a finished ``chat`` span.

``TracedLM`` knows everything about its calls (messages, parameters, completion, times)
and runs no user code while a call is in flight, so it needs no live OpenTelemetry span:
it builds the stored ``SpanRecord`` itself, with the same name, attributes, parent,
sequence number and exception event an SDK span would have had, for a small part of the
SDK's cost per span. The span is a child of the span current when the call starts (the
attempt's root, or a span of the agent). Calls seen by the ``openai`` instrumentation or
the LM proxy, where the caller's code runs around the call, keep real SDK spans
(``emery.tracing.lm.open_chat_span``).
"""

from __future__ import annotations

import json
import random
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from emery.core.spans import SpanEvent, SpanRecord, SpanStatus
from emery.lm.base import Completion, TokenTrace
from emery.tracing import conventions as sc
from emery.tracing.agents import current_agent
from emery.tracing.scope import AttemptScope, LMCall

_ids = random.Random()


def at(ns: int) -> datetime:
    """A time in nanoseconds since the epoch as a UTC datetime."""
    return datetime.fromtimestamp(ns / 1e9, UTC)


def token_attributes(tokens: TokenTrace | None) -> dict[str, Any]:
    """A completion's token ids and log-probabilities as span attributes (those it has)."""
    if tokens is None:
        return {}
    attributes: dict[str, Any] = {}
    if tokens.prompt_token_ids:
        attributes[sc.LM_PROMPT_TOKEN_IDS] = list(tokens.prompt_token_ids)
    if tokens.completion_token_ids:
        attributes[sc.LM_COMPLETION_TOKEN_IDS] = list(tokens.completion_token_ids)
    if tokens.completion_logprobs is not None:
        attributes[sc.LM_COMPLETION_LOGPROBS] = list(tokens.completion_logprobs)
    return attributes


def request_attributes(
    *,
    model: str,
    messages: Sequence[Any],
    source: str,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop: Sequence[str] | str | None = None,
    tools: Sequence[Any] | None = None,
    stream: bool = False,
    agent: str | None = None,
    provider: str = "emery",
) -> dict[str, Any]:
    """The attributes of a ``chat`` span that its request decides."""
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.CHAT_OPERATION,
        sc.GEN_AI_PROVIDER_NAME: provider,
        sc.GEN_AI_REQUEST_MODEL: model,
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(list(messages), ensure_ascii=False, default=str),
        sc.LM_SOURCE: source,
        sc.LM_STREAM: stream,
    }
    if temperature is not None:
        attributes[sc.GEN_AI_REQUEST_TEMPERATURE] = temperature
    if max_tokens is not None:
        attributes[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    if stop:
        attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = (
            [stop] if isinstance(stop, str) else list(stop)
        )
    if tools:
        attributes[sc.GEN_AI_TOOL_DEFINITIONS] = json.dumps(list(tools), default=str)
    if agent is not None:
        attributes[sc.GEN_AI_AGENT_NAME] = agent
    return attributes


def completion_attributes(completion: Completion) -> dict[str, Any]:
    """The attributes of a ``chat`` span that its reply decides."""
    output = {"role": "assistant", "content": completion.text}
    return {
        sc.GEN_AI_RESPONSE_MODEL: completion.model,
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([output], ensure_ascii=False),
        sc.LM_CACHED: completion.cached,
        sc.GEN_AI_RESPONSE_FINISH_REASONS: [completion.finish_reason],
        sc.GEN_AI_USAGE_INPUT_TOKENS: completion.usage.prompt_tokens,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: completion.usage.completion_tokens,
        sc.LM_LATENCY_S: completion.latency_s,
        **token_attributes(completion.tokens),
    }


def exception_event(error: BaseException) -> SpanEvent:
    """The exception event the OpenTelemetry SDK records for ``error``, at this moment."""
    return SpanEvent(
        name=sc.EXCEPTION_EVENT,
        time=at(time.time_ns()),
        attributes={
            sc.EXCEPTION_TYPE: type(error).__name__,
            sc.EXCEPTION_MESSAGE: str(error),
            sc.EXCEPTION_STACKTRACE: "".join(traceback.format_exception(error)),
            "exception.escaped": "False",
        },
    )


def new_trace_id() -> str:
    """A random 128-bit trace id, as hex."""
    return format(_ids.getrandbits(128) or 1, "032x")


def new_span_id() -> str:
    """A random non-zero 64-bit span id, as hex."""
    return format(_ids.getrandbits(64) or 1, "016x")


class ChatRecord:
    """One call in flight: ``finish`` (with the completion) or ``fail`` (with the error)
    ends it and hands the span to the attempt's recorder."""

    def __init__(
        self,
        scope: AttemptScope,
        *,
        model: str,
        messages: Sequence[Any],
        source: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        self.scope = scope
        self.model = model
        self.source = source
        self.messages = [dict(m) for m in messages]
        parent = trace.get_current_span().get_span_context()
        self.trace_id = format(parent.trace_id, "032x") if parent.is_valid else None
        self.parent_id = format(parent.span_id, "016x") if parent.is_valid else None
        self.attributes = request_attributes(
            model=model,
            messages=self.messages,
            source=source,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            tools=tools,
            agent=current_agent(),
        )
        self.attributes[sc.ROLLOUT_ID] = scope.rollout_id
        self.attributes[sc.ATTEMPT_ID] = scope.attempt_id
        self.sequence = scope.next_sequence()
        self.attributes[sc.SEQUENCE] = self.sequence
        scope.begin_call()
        self.start_ns = time.time_ns()

    def finish(self, completion: Completion) -> None:
        """Record the reply and end the span."""
        self.attributes.update(completion_attributes(completion))
        self.scope.add_lm_call(
            LMCall(
                messages=self.messages,  # type: ignore[arg-type]
                reply=completion.text,
                model=completion.model,
                source=self.source,
            )
        )
        self._end([], "unset", None)

    def fail(self, error: BaseException) -> None:
        """End the span as failed, with the exception event the SDK would record."""
        self._end([exception_event(error)], "error", f"{type(error).__name__}: {error}")

    def _end(self, events: list[SpanEvent], status: SpanStatus, message: str | None) -> None:
        end_ns = time.time_ns()
        self.scope.end_call()
        if self.scope.closed:  # the attempt ended without waiting for this call
            return
        record = SpanRecord(
            trace_id=self.trace_id or new_trace_id(),
            span_id=new_span_id(),
            parent_id=self.parent_id,
            name=f"{sc.CHAT_OPERATION} {self.model}",
            kind="internal",
            start_time=at(self.start_ns),
            end_time=at(end_ns),
            attributes=self.attributes,
            events=events,
            status=status,
            status_message=message,
            rollout_id=self.scope.rollout_id,
            attempt_id=self.scope.attempt_id,
            sequence=self.sequence,
        )
        self.scope.keep(record)
        if self.scope.sink is not None:
            self.scope.sink([record])
