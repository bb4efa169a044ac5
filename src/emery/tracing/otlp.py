"""OTLP/HTTP trace payloads (protobuf or JSON) read into emery's ``SpanRecord`` model.

The rollout and attempt a span belongs to come from its ``emery.rollout.id`` and
``emery.attempt.id`` attributes, else from its resource's (the LM proxy and emery's own
tracer set them on spans; an exporter in another process can set them on its resource).
OTLP JSON writes trace and span ids as hex, where protobuf's JSON mapping expects base64:
they are converted before parsing. The resource's ``service.name`` is copied onto each of
its spans (unless the span sets one), so traces can be selected by service.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from emery.core.errors import EmeryError
from emery.core.spans import SpanEvent, SpanRecord, SpanStatus
from emery.tracing import conventions as sc

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_KINDS = {0: "internal", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUSES: dict[int, SpanStatus] = {0: "unset", 1: "ok", 2: "error"}
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_MESSAGE_LISTS = frozenset({"resourceSpans", "scopeSpans", "spans", "events", "links"})


class OtlpError(EmeryError):
    """A payload that is not an OTLP trace export request."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def media_type(content_type: str | None) -> str:
    """``PROTOBUF`` or ``JSON`` from a Content-Type header; OtlpError (415) otherwise."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if kind == JSON:
        return JSON
    raise OtlpError(f"Content-Type must be {PROTOBUF} or {JSON}, not {kind or 'none'!r}", 415)


def _hex_to_base64(value: Any, field: str) -> Any:
    if not isinstance(value, str) or not value:
        return value
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError:
        raise OtlpError(f"{field} must be hex, not {value[:40]!r}") from None


def _is_object_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, dict) for v in value))


def _ids_as_base64(node: Any) -> None:
    """Convert hex id fields anywhere in the parsed JSON payload, in place; OtlpError
    where a list of messages holds something else (protobuf would read it as empty)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS:
                node[key] = _hex_to_base64(value, key)
                continue
            if key in _MESSAGE_LISTS and not _is_object_list(value):
                raise OtlpError(f"{key} must be a list of objects")
            _ids_as_base64(value)
    elif isinstance(node, list):
        for item in node:
            _ids_as_base64(item)


def decode_request(body: bytes, kind: str) -> ExportTraceServiceRequest:
    """The export request in ``body`` (``kind`` from ``media_type``); OtlpError when the
    body is not one."""
    request = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError):
            raise OtlpError("the body is not an OTLP ExportTraceServiceRequest") from None
        return request
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise OtlpError("the body must be JSON (UTF-8, not nested too deeply)") from None
    if not isinstance(data, dict):
        raise OtlpError("the body must be a JSON object")
    _ids_as_base64(data)
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise OtlpError(f"not an OTLP trace export: {str(exc)[:200]}") from None
    return request


def encode_response(kind: str, rejected: int = 0, message: str = "") -> bytes:
    """The export response (with partial success when spans were rejected)."""
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    if kind == PROTOBUF:
        return response.SerializeToString()
    return json.dumps(json_format.MessageToDict(response)).encode()


def any_value(value: AnyValue) -> Any:
    """An OTLP attribute value as plain JSON data."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-value pairs as a dict."""
    items: list[KeyValue] = list(pairs)
    return {pair.key: any_value(pair.value) for pair in items}


def _time(nanos: int, fallback: datetime | None = None) -> datetime:
    if nanos <= 0:
        return fallback or datetime.now(UTC)
    return datetime.fromtimestamp(nanos / 1e9, UTC)


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def to_record(span: Span, resource: dict[str, Any]) -> SpanRecord:
    """One OTLP span as a ``SpanRecord`` (rollout and attempt from span or resource)."""
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        raise OtlpError("a span needs a 16-byte trace id and an 8-byte span id")
    if span.parent_span_id and len(span.parent_span_id) != 8:
        raise OtlpError("a parent span id must be 8 bytes")
    attrs = attributes(span.attributes)
    if sc.SERVICE_NAME in resource:  # the service a span came from, kept for selection
        attrs.setdefault(sc.SERVICE_NAME, resource[sc.SERVICE_NAME])
    start = _time(span.start_time_unix_nano)
    sequence = attrs.get(sc.SEQUENCE)
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex() or None,
        name=span.name[:200] or "(unnamed)",
        kind=_KINDS.get(span.kind, "internal"),
        start_time=start,
        end_time=_time(span.end_time_unix_nano, start),
        attributes=attrs,
        events=[
            SpanEvent(
                name=e.name,
                time=_time(e.time_unix_nano, start),
                attributes=attributes(e.attributes),
            )
            for e in span.events
        ],
        status=_STATUSES.get(span.status.code, "unset"),
        status_message=span.status.message or None,
        rollout_id=_text(attrs.get(sc.ROLLOUT_ID, resource.get(sc.ROLLOUT_ID))),
        attempt_id=_text(attrs.get(sc.ATTEMPT_ID, resource.get(sc.ATTEMPT_ID))),
        sequence=sequence if isinstance(sequence, int) else None,
    )


def request_spans(request: ExportTraceServiceRequest) -> tuple[list[SpanRecord], list[str]]:
    """Every well-formed span of an export request, in payload order, and why each of the
    others was left out."""
    records: list[SpanRecord] = []
    problems: list[str] = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                try:
                    records.append(to_record(span, resource))
                except OtlpError as exc:
                    problems.append(str(exc))
    return records, problems
