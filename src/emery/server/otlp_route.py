"""``POST /v1/traces``: OTLP/HTTP trace ingest (protobuf or JSON) into the store.

A span is stored under the rollout its ``emery.rollout.id`` names (span or resource
attribute) and the attempt ``emery.attempt.id`` names, or the rollout's latest attempt
when none is named. A span that names no rollout and no attempt is an application's own
span: it is stored as an application trace, with no job, rollout or attempt (what
``emery dataset from-traces`` reads). Spans naming an unknown rollout or attempt (or an
attempt without its rollout) are rejected and counted in the response's
``partial_success``, as OTLP specifies; so are spans whose ``emery.sequence`` is negative
or past ``MAX_SEQUENCE``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from emery.core.rollouts import Rollout
from emery.core.spans import SpanRecord
from emery.server.errors import ErrorBody
from emery.store.protocol import Store
from emery.store.states import NotFound
from emery.tracing import conventions as sc
from emery.tracing.otlp import decode_request, encode_response, media_type, request_spans

_EXPORT_REQUEST = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "description": "An OTLP/JSON ExportTraceServiceRequest.",
                "properties": {
                    "resourceSpans": {"type": ["array", "null"], "items": {"type": "object"}}
                },
            }
        },
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
    },
}
_EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "An ExportTraceServiceResponse (``partialSuccess`` counts rejected spans).",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        },
    },
    415: {"model": ErrorBody, "description": "Neither protobuf nor JSON"},
}


MAX_SEQUENCE = 2**30
"""The largest ``emery.sequence`` a span may carry: far past any attempt's span count, and
room left for the store to number the spans after it (its column is an SQL integer)."""


class _Rollouts:
    """Rollouts and their attempt ids, each read from the store once per request."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.known: dict[str, tuple[Rollout, list[str]] | None] = {}

    def get(self, rollout_id: str) -> tuple[Rollout, list[str]] | None:
        if rollout_id not in self.known:
            try:
                rollout = self.store.get_rollout(rollout_id)
            except NotFound:
                self.known[rollout_id] = None
            else:
                attempts = [a.id for a in self.store.list_attempts(rollout_id)]
                self.known[rollout_id] = (rollout, attempts)
        return self.known[rollout_id]


def place(store: Store, spans: Sequence[SpanRecord]) -> tuple[list[SpanRecord], list[str]]:
    """The spans with their job, rollout and attempt set (none for an application's own
    spans), and why each other one cannot be placed."""
    rollouts = _Rollouts(store)
    placed: list[SpanRecord] = []
    problems: list[str] = []
    for span in spans:
        if span.sequence is not None and not 0 <= span.sequence <= MAX_SEQUENCE:
            problems.append(f"{sc.SEQUENCE} must be from 0 to {MAX_SEQUENCE}")
            continue
        if span.rollout_id is None:
            if span.attempt_id is not None:
                problems.append(f"{sc.ATTEMPT_ID} {span.attempt_id!r} without {sc.ROLLOUT_ID}")
                continue
            placed.append(span)  # an application's own span: no job, rollout or attempt
            continue
        found = rollouts.get(span.rollout_id)
        if found is None:
            problems.append(f"unknown rollout {span.rollout_id!r}")
            continue
        rollout, attempts = found
        attempt_id = span.attempt_id or (attempts[-1] if attempts else None)
        if attempt_id is not None and attempt_id not in attempts:
            problems.append(f"rollout {rollout.id!r} has no attempt {attempt_id!r}")
            continue
        placed.append(span.model_copy(update={"job_id": rollout.job_id, "attempt_id": attempt_id}))
    return placed, problems


def _summary(problems: list[str]) -> str:
    counts = Counter(problems)
    return "; ".join(f"{n} × {problem}" for problem, n in counts.most_common(5))


def ingest(store: Store, body: bytes, kind: str) -> tuple[int, int, str]:
    """Store the spans of one export request: (stored, rejected, why rejected)."""
    records, problems = request_spans(decode_request(body, kind))
    placed, unplaced = place(store, records)
    store.add_spans(placed)
    problems += unplaced
    return len(placed), len(problems), _summary(problems)


def otlp_router(store: Store) -> APIRouter:
    """The OTLP/HTTP traces route over ``store``."""
    router = APIRouter(tags=["otlp"])

    @router.post(
        "/v1/traces", openapi_extra={"requestBody": _EXPORT_REQUEST}, responses=_EXPORT_RESPONSES
    )
    async def traces(request: Request) -> Response:
        """Export spans (``application/x-protobuf`` or ``application/json``)."""
        kind = media_type(request.headers.get("content-type"))
        body = await request.body()
        _, rejected, why = await anyio.to_thread.run_sync(ingest, store, body, kind)
        return Response(encode_response(kind, rejected, why), media_type=kind)

    return router
