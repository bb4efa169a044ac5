"""Batches of OTLP spans for the ingest benchmark: protobuf export requests for the
server, and the same spans as placed ``SpanRecord``s for the store (every batch with new
ids, built before the clock starts)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from emery.core.spans import SpanRecord
from emery.server.otlp_route import place
from emery.store.protocol import Store
from emery.tracing import conventions as sc
from emery.tracing.otlp import PROTOBUF, decode_request, request_spans

T0 = 1_700_000_000_000_000_000


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


class SpanBatches:
    """Export requests of ``size`` spans under one stored rollout of ``job_id``."""

    def __init__(self, store: Store, job_id: str, size: int = 100) -> None:
        self.store, self.size = store, size
        rollout = store.list_rollouts(limit=1).items[0]
        self.rollout_id = rollout.id
        self.counter: Iterator[int] = itertools.count()
        self.bodies: list[bytes] = []
        self.placed: list[list[SpanRecord]] = []
        assert rollout.job_id == job_id

    def _request(self) -> ExportTraceServiceRequest:
        batch = next(self.counter)
        trace = batch.to_bytes(16, "big")
        spans = [
            Span(
                trace_id=trace,
                span_id=(batch * self.size + i + 1).to_bytes(8, "big"),
                parent_span_id=(batch * self.size + 1).to_bytes(8, "big") if i else b"",
                name=f"tool-call-{i}",
                kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=T0 + i * 1_000_000,
                end_time_unix_nano=T0 + i * 1_000_000 + 500_000,
                attributes=[_kv("tool.name", "search"), _kv("tool.args", '{"q": "x"}')],
            )
            for i in range(self.size)
        ]
        resource = {"attributes": [_kv(sc.ROLLOUT_ID, self.rollout_id)]}
        return ExportTraceServiceRequest(
            resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=spans)])]
        )

    def prepare(self, count: int) -> None:
        """Build ``count`` requests and ``count`` placed record batches (other ids)."""
        self.bodies = [self._request().SerializeToString() for _ in range(count)]
        self.placed = []
        for _ in range(count):
            records, _ = request_spans(
                decode_request(self._request().SerializeToString(), PROTOBUF)
            )
            placed, problems = place(self.store, records)
            assert not problems, problems
            self.placed.append(placed)

    def protobuf(self) -> bytes:
        """The next export request's body."""
        return self.bodies.pop()

    def records(self) -> list[SpanRecord]:
        """The next batch of placed spans."""
        return self.placed.pop()


__all__ = ["SpanBatches"]
