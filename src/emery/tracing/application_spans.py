"""An application's LM call through the proxy, recorded as a finished ``chat`` span.

Calls a job's attempt makes are spans of that attempt (``chat_record.py``,
``lm.py:open_chat_span``). Calls an application makes through ``emery server``'s LM proxy
(``/v1/chat/completions``, ``/prompts/NAME/v1/chat/completions``) belong to no job: each
becomes a span of an application trace (no job, rollout or attempt), with the same
attributes as an attempt's ``chat`` span plus ``service.name`` (from the
``X-Emery-Service`` header, default ``emery-proxy``) and whatever the route adds (the
published prompt's name and version). The span starts a new trace unless the request
carries a W3C ``traceparent`` header: then it is a child of that trace's span, so an
application that traces itself sees the call in its own trace and can send feedback by its
trace id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from emery.core.spans import SpanEvent, SpanRecord, SpanStatus
from emery.lm.base import Completion
from emery.tracing import conventions as sc
from emery.tracing.agents import AGENT_HEADER
from emery.tracing.chat_record import (
    at,
    completion_attributes,
    exception_event,
    new_span_id,
    new_trace_id,
    request_attributes,
)

SERVICE_HEADER = "x-emery-service"
"""The request header that names the application (``service.name``) of a proxied call."""
DEFAULT_SERVICE = "emery-proxy"
TRACEPARENT_HEADER = "traceparent"
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


class SpanSink(Protocol):
    """Where application spans are written (an emery ``Store`` is one)."""

    def add_spans(self, records: Sequence[SpanRecord]) -> None: ...


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """The (trace id, parent span id) of a W3C ``traceparent`` header; None when it is
    missing or invalid (the call then starts a trace of its own, as W3C specifies)."""
    match = _TRACEPARENT.match((value or "").strip().lower())
    if match is None:
        return None
    version, trace_id, parent_id, _, rest = match.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    if set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    return trace_id, parent_id


@dataclass(frozen=True)
class CallOrigin:
    """Who made a call and where its span goes: service, agent, parent trace, and
    attributes the route adds."""

    service: str = DEFAULT_SERVICE
    agent: str | None = None
    parent: tuple[str, str] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_headers(
        cls, headers: Mapping[str, str], attributes: Mapping[str, Any] | None = None
    ) -> CallOrigin:
        """The origin a proxied request's headers describe."""
        return cls(
            service=headers.get(SERVICE_HEADER) or DEFAULT_SERVICE,
            agent=headers.get(AGENT_HEADER) or None,
            parent=parse_traceparent(headers.get(TRACEPARENT_HEADER)),
            attributes=dict(attributes or {}),
        )


class ApplicationCall:
    """One application call in flight: ``finished`` (with the reply) or ``failed`` (with
    the error) gives its span."""

    def __init__(
        self,
        origin: CallOrigin,
        *,
        model: str,
        messages: Sequence[Any],
        source: str = "proxy",
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | str | None = None,
        tools: Sequence[Any] | None = None,
        stream: bool = False,
    ) -> None:
        self.origin = origin
        self.model = model
        self.attributes = request_attributes(
            model=model,
            messages=[dict(m) for m in messages],
            source=source,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            tools=tools,
            stream=stream,
            agent=origin.agent,
        )
        self.attributes[sc.SERVICE_NAME] = origin.service
        self.attributes.update(origin.attributes)
        self.start_ns = time.time_ns()

    def finished(self, completion: Completion, response_id: str | None = None) -> SpanRecord:
        """The span of a call that got ``completion``."""
        self.attributes.update(completion_attributes(completion))
        if response_id is not None:
            self.attributes[sc.GEN_AI_RESPONSE_ID] = response_id
        return self._span([], "unset", None)

    def failed(self, error: BaseException) -> SpanRecord:
        """The span of a call whose model failed, with the exception event."""
        return self._span([exception_event(error)], "error", f"{type(error).__name__}: {error}")

    def _span(self, events: list[SpanEvent], status: SpanStatus, message: str | None) -> SpanRecord:
        trace_id, parent_id = self.origin.parent or (new_trace_id(), None)
        return SpanRecord(
            trace_id=trace_id,
            span_id=new_span_id(),
            parent_id=parent_id,
            name=f"{sc.CHAT_OPERATION} {self.model}",
            kind="internal",
            start_time=at(self.start_ns),
            end_time=at(time.time_ns()),
            attributes=self.attributes,
            events=events,
            status=status,
            status_message=message,
        )
