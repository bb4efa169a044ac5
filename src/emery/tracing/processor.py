"""The OpenTelemetry side: a tracer provider whose span processor numbers spans per attempt
and writes finished spans to a ``RolloutRecorder`` in batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Tracer

from emery.core.spans import SpanEvent, SpanRecord
from emery.tracing import conventions as sc
from emery.tracing.recorder import RolloutRecorder
from emery.tracing.scope import AttemptScope, active_scope


def _time(ns: int | None) -> datetime:
    return datetime.fromtimestamp((ns or time.time_ns()) / 1e9, UTC)


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in (attributes or {}).items()
    }


def to_record(span: ReadableSpan) -> SpanRecord:
    """A finished OpenTelemetry span as a stored ``SpanRecord``."""
    context = span.get_span_context()
    assert context is not None
    attributes = _plain(span.attributes)
    status = span.status
    return SpanRecord(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_id=format(span.parent.span_id, "016x") if span.parent is not None else None,
        name=span.name,
        kind=span.kind.name.lower(),
        start_time=_time(span.start_time),
        end_time=_time(span.end_time),
        attributes=attributes,
        events=[
            SpanEvent(name=e.name, time=_time(e.timestamp), attributes=_plain(e.attributes))
            for e in span.events
        ],
        status=status.status_code.name.lower(),
        status_message=status.description,
        rollout_id=attributes.get(sc.ROLLOUT_ID),
        attempt_id=attributes.get(sc.ATTEMPT_ID),
        sequence=int(attributes.get(sc.SEQUENCE, 0)),
    )


class RecordingSpanProcessor(SpanProcessor):
    """Stamps spans started inside an attempt and writes them to ``recorder`` in batches.

    A span started outside any attempt, or inside an attempt that already ended (a hung
    thread waking up late), is not recorded. A batch is written when it holds
    ``max_batch`` spans, when the oldest buffered span is ``max_delay_s`` old, and on
    ``force_flush``.
    """

    def __init__(
        self, recorder: RolloutRecorder, *, max_batch: int = 256, max_delay_s: float = 1.0
    ) -> None:
        self.recorder = recorder
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self._buffer: list[SpanRecord] = []
        self._open: dict[int, AttemptScope] = {}
        self._buffer_since = 0.0
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        scope = active_scope()
        if scope is None or scope.closed:
            return
        span.set_attribute(sc.ROLLOUT_ID, scope.rollout_id)
        span.set_attribute(sc.ATTEMPT_ID, scope.attempt_id)
        span.set_attribute(sc.SEQUENCE, scope.next_sequence())
        with self._lock:
            self._open[span.context.span_id] = scope

    def on_end(self, span: ReadableSpan) -> None:
        if not span.attributes or sc.ROLLOUT_ID not in span.attributes:
            return
        record = to_record(span)
        with self._lock:
            scope = self._open.pop(span.context.span_id, None)
        if scope is not None:
            scope.keep(record)
        self.add_record(record)

    def add_record(self, record: SpanRecord) -> None:
        """Buffer one finished span recorded without the SDK (already stamped), writing the
        batch when it is due as ``on_end`` does."""
        with self._lock:
            if not self._buffer:
                self._buffer_since = time.monotonic()
            self._buffer.append(record)
            due = (
                len(self._buffer) >= self.max_batch
                or time.monotonic() - self._buffer_since >= self.max_delay_s
            )
        if due:
            self.flush()

    def add_records(self, records: list[SpanRecord]) -> None:
        """Buffer spans recorded outside this process (already stamped)."""
        with self._lock:
            if not self._buffer:
                self._buffer_since = time.monotonic()
            self._buffer.extend(records)

    def flush(self) -> None:
        """Write every buffered span now."""
        with self._write_lock:
            with self._lock:
                batch, self._buffer = self._buffer, []
            if batch:
                self.recorder.add_spans(batch)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flush()
        return True

    def shutdown(self) -> None:
        self.flush()


class RolloutTracing:
    """A tracer provider of its own (the global one is left to the user) feeding ``recorder``."""

    def __init__(
        self, recorder: RolloutRecorder, *, max_batch: int = 256, max_delay_s: float = 1.0
    ) -> None:
        self.recorder = recorder
        self.processor = RecordingSpanProcessor(
            recorder, max_batch=max_batch, max_delay_s=max_delay_s
        )
        self.provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=Resource({"service.name": "emery"}),
            shutdown_on_exit=False,
        )
        self.provider.add_span_processor(self.processor)
        self.tracer: Tracer = self.provider.get_tracer("emery")

    def flush(self) -> None:
        """Hand buffered spans to the recorder and have a recorder that buffers its writes
        (one with a ``flush`` method) store everything now."""
        self.processor.flush()
        flush = getattr(self.recorder, "flush", None)
        if callable(flush):
            flush()
