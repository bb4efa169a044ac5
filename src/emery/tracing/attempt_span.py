"""An attempt's root span recorded straight as a finished ``SpanRecord``.

The root span of an attempt (``emery.rollout``) runs no code of its own: its attributes,
status and exception are all set by the rollout maker (``evaluation/rollouts.py``). So it
needs no live OpenTelemetry SDK span, only a span context that children can hang under: a
non-recording span with a fresh trace and span id is made current, and the stored record
(same name, kind, attributes, sequence, status and exception event an SDK span would have
had) is built when it ends, for a fraction of the SDK's cost per span (about 40
microseconds a rollout).
Spans started inside it (the ``openai`` instrumentation, the LM proxy, a function agent's
own spans) are SDK spans as before, children of this one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from emery.core.spans import SpanEvent, SpanRecord, SpanStatus
from emery.tracing import conventions as sc
from emery.tracing.chat_record import at, exception_event, new_span_id, new_trace_id
from emery.tracing.scope import AttemptScope


class AttemptSpan:
    """The open root span of ``scope``'s attempt: ``current`` makes it the current span,
    ``record_exception`` and ``set_status`` mark it, ``end`` hands the record to ``sink``
    (and keeps it in the scope, for the result's trace excerpt)."""

    def __init__(
        self,
        scope: AttemptScope,
        attributes: dict[str, Any],
        sink: Callable[[SpanRecord], None],
        *,
        name: str = sc.ROLLOUT_SPAN,
    ) -> None:
        self.scope = scope
        self.name = name
        self.sink = sink
        self.trace_id = new_trace_id()
        self.span_id = new_span_id()
        self.span = NonRecordingSpan(
            SpanContext(
                trace_id=int(self.trace_id, 16),
                span_id=int(self.span_id, 16),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        )
        self.attributes = dict(attributes)
        self.attributes[sc.ROLLOUT_ID] = scope.rollout_id
        self.attributes[sc.ATTEMPT_ID] = scope.attempt_id
        self.sequence = scope.next_sequence()
        self.attributes[sc.SEQUENCE] = self.sequence
        self.events: list[SpanEvent] = []
        self.status: SpanStatus = "unset"
        self.status_message: str | None = None
        self.start_ns = time.time_ns()
        self.ended = False

    @contextmanager
    def current(self) -> Iterator[NonRecordingSpan]:
        """The span as the current span of the enclosed code (not ended on exit)."""
        with trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield self.span

    def record_exception(self, error: BaseException) -> None:
        """Add the exception event the SDK records for ``error``."""
        self.events.append(exception_event(error))

    def set_status(self, ok: bool, message: str | None = None) -> None:
        """``ok``, or ``error`` with ``message`` (as the SDK's ``Status`` reads back)."""
        self.status, self.status_message = ("ok", None) if ok else ("error", message)

    def end(self) -> None:
        """Build the record and hand it on (once)."""
        if self.ended:
            return
        self.ended = True
        record = SpanRecord(
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_id=None,
            name=self.name,
            kind="internal",
            start_time=at(self.start_ns),
            end_time=at(time.time_ns()),
            attributes=self.attributes,
            events=self.events,
            status=self.status,
            status_message=self.status_message,
            rollout_id=self.scope.rollout_id,
            attempt_id=self.scope.attempt_id,
            sequence=self.sequence,
        )
        self.scope.keep(record)
        self.sink(record)
