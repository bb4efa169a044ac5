"""OTLP/HTTP trace ingest at /v1/traces: protobuf and JSON payloads land as spans of the
right rollout and attempt; what cannot be placed is counted as rejected."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from server_support import Served, random_search_module, served

from emery.store.records import SpanFilter

__all__ = ["random_search_module", "served"]

PROTOBUF = {"Content-Type": "application/x-protobuf"}
T0 = 1_700_000_000_000_000_000


def a_rollout(served: Served) -> tuple[str, str]:
    rollout = served.store.list_rollouts(limit=1).items[0]
    attempt = served.store.list_attempts(rollout.id)[-1]
    return rollout.id, attempt.id


def kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, list):
        items = [AnyValue(string_value=str(v)) for v in value]
        return KeyValue(key=key, value=AnyValue(array_value={"values": items}))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def span(trace: bytes, span_id: bytes, parent: bytes = b"", **attrs: Any) -> Span:
    return Span(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=f"agent-step-{span_id.hex()[-2:]}",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=T0,
        end_time_unix_nano=T0 + 250_000_000,
        attributes=[kv(k.replace("_", "."), v) for k, v in attrs.items()],
        status=Status(code=Status.STATUS_CODE_ERROR, message="tool timed out"),
    )


def export(*spans: Span, resource: dict[str, Any] | None = None) -> ExportTraceServiceRequest:
    resource_attrs = [kv(k, v) for k, v in (resource or {}).items()]
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": resource_attrs},
                scope_spans=[ScopeSpans(spans=list(spans))],
            )
        ]
    )


def stored(served: Served, trace: bytes) -> list[Any]:
    return served.store.list_spans(SpanFilter(trace_id=trace.hex())).items


def test_protobuf_spans_land_under_the_named_attempt(served: Served) -> None:
    rollout_id, attempt_id = a_rollout(served)
    trace = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
    parent, child = bytes.fromhex("b7ad6b7169203331"), bytes.fromhex("00f067aa0ba902b7")
    ids = {"emery.rollout.id": rollout_id, "emery.attempt.id": attempt_id}
    body = export(
        span(trace, child, parent, tags=["a", "b"], **{"tool.calls": 3}),  # children first
        span(trace, parent, **ids),
        resource={**ids, "service.name": "java-agent"},
    ).SerializeToString()
    response = served.client.post("/v1/traces", content=body, headers=PROTOBUF)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 0
    spans = {s.span_id: s for s in stored(served, trace)}
    assert set(spans) == {parent.hex(), child.hex()}
    assert {(s.rollout_id, s.attempt_id) for s in spans.values()} == {(rollout_id, attempt_id)}
    first = spans[child.hex()]
    assert first.parent_id == parent.hex()
    assert first.attributes["tool.calls"] == 3
    assert first.attributes["tags"] == ["a", "b"]
    assert first.kind == "client"
    assert first.status == "error"
    assert first.status_message == "tool timed out"
    assert first.duration_s == 0.25
    assert first.job_id == served.job_id
    tree = served.client.get(f"/api/rollouts/{rollout_id}/spans").json()["spans"]
    ingested = next(node for node in tree if node["span_id"] == parent.hex())
    assert [c["span_id"] for c in ingested["children"]] == [child.hex()]


def test_json_spans_take_the_rollout_from_the_resource_and_its_latest_attempt(
    served: Served,
) -> None:
    rollout_id, attempt_id = a_rollout(served)
    trace = "5b8efff798038103d269b633813fc60c"
    payload = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "emery.rollout.id", "value": {"stringValue": rollout_id}}
                    ]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "my-sdk"},
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": "eee19b7ec3c1b174",
                                "name": "chat gpt-x",
                                "kind": 3,
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 10**9),
                                "attributes": [
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "12"},
                                    },
                                    {"key": "ok", "value": {"boolValue": True}},
                                ],
                                "events": [
                                    {
                                        "name": "exception",
                                        "timeUnixNano": str(T0 + 5),
                                        "attributes": [
                                            {
                                                "key": "exception.type",
                                                "value": {"stringValue": "KeyError"},
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = served.client.post("/v1/traces", json=payload)
    assert response.status_code == 200, response.text
    assert response.json() == {}
    (record,) = stored(served, bytes.fromhex(trace))
    assert (record.rollout_id, record.attempt_id) == (rollout_id, attempt_id)
    assert record.name == "chat gpt-x"
    assert record.attributes == {"gen_ai.usage.input_tokens": 12, "ok": True}
    assert record.events[0].attributes == {"exception.type": "KeyError"}
    assert record.duration_s == 1.0


def test_spans_that_cannot_be_placed_are_counted_as_rejected(served: Served) -> None:
    rollout_id, _ = a_rollout(served)
    trace = bytes.fromhex("11111111111111111111111111111111")
    body = export(
        span(trace, bytes.fromhex("0000000000000001"), **{"emery.rollout.id": "ro-nope"}),
        span(trace, bytes.fromhex("0000000000000002")),
        span(
            trace,
            bytes.fromhex("0000000000000003"),
            **{"emery.rollout.id": rollout_id, "emery.attempt.id": "ro-x:9"},
        ),
        span(trace, b"\x01\x02", **{"emery.rollout.id": rollout_id}),
        span(trace, bytes.fromhex("0000000000000004"), **{"emery.rollout.id": rollout_id}),
    )
    response = served.client.post("/v1/traces", json=json.loads(to_otlp_json(body)))
    answer = response.json()["partialSuccess"]
    assert answer["rejectedSpans"] == "3"
    message = answer["errorMessage"]
    assert "unknown rollout 'ro-nope'" in message
    assert "has no attempt 'ro-x:9'" in message
    assert "8-byte span id" in message
    assert sorted(s.span_id for s in stored(served, trace)) == [
        "0000000000000002",  # no rollout named: an application's own span
        "0000000000000004",
    ]


def test_an_applications_own_spans_are_stored_as_application_traces(served: Served) -> None:
    trace = bytes.fromhex("22222222222222222222222222222222")
    body = export(
        span(trace, bytes.fromhex("0000000000000001"), **{"gen_ai.request.model": "m"}),
        span(trace, bytes.fromhex("0000000000000002"), **{"emery.attempt.id": "ro-x:0"}),
        span(trace, bytes.fromhex("0000000000000003"), **{"emery.sequence": -1}),
        resource={"service.name": "support-bot"},
    )
    answer = served.client.post("/v1/traces", content=body.SerializeToString(), headers=PROTOBUF)
    response = ExportTraceServiceResponse.FromString(answer.content)
    assert response.partial_success.rejected_spans == 2
    message = response.partial_success.error_message
    assert "emery.attempt.id 'ro-x:0' without emery.rollout.id" in message
    assert "emery.sequence must be from 0" in message
    [record] = stored(served, trace)
    assert record.span_id == "0000000000000001"
    assert (record.job_id, record.rollout_id, record.attempt_id) == (None, None, None)
    assert record.attributes["service.name"] == "support-bot"


def to_otlp_json(request: ExportTraceServiceRequest) -> str:
    """The request as OTLP JSON (hex ids, as exporters write them)."""
    data = json_format.MessageToDict(request)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for item in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = base64.b64decode(item[key]).hex()
    return json.dumps(data)


def test_bad_payloads_are_one_line_errors(served: Served) -> None:
    garbage = served.client.post("/v1/traces", content=b"\xff\x00junk", headers=PROTOBUF)
    assert garbage.status_code == 400
    assert garbage.json()["detail"] == "the body is not an OTLP ExportTraceServiceRequest"
    text = served.client.post("/v1/traces", content=b"x", headers={"Content-Type": "text/plain"})
    assert text.status_code == 415
    bad_id = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}
    not_hex = served.client.post("/v1/traces", json=bad_id)
    assert not_hex.status_code == 400
    assert not_hex.json()["detail"] == "traceId must be hex, not 'zz'"
    assert served.client.post("/v1/traces", json=[1]).status_code == 400


@pytest.mark.parametrize(
    "payload",
    [
        {"resourceSpans": ["a", ""]},
        {"resourceSpans": 3},
        {"resourceSpans": [{"scopeSpans": [{"spans": [7]}]}]},
    ],
)
def test_message_lists_of_non_objects_are_refused(served: Served, payload: object) -> None:
    # found by the schema fuzz: protobuf read them as empty messages and answered 200
    answer = served.client.post("/v1/traces", json=payload)
    assert answer.status_code == 400
    assert answer.json()["detail"].endswith("must be a list of objects")
