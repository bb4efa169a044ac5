"""Spans recorded elsewhere (a task app on another machine) adopted into the local attempt."""

from __future__ import annotations

from collections.abc import Sequence

from emery.core.spans import SpanRecord
from emery.tracing import conventions as sc
from emery.tracing.adapters import is_chat, request_messages, response_message
from emery.tracing.scope import AttemptScope, LMCall


def adopt_spans(scope: AttemptScope, spans: Sequence[SpanRecord]) -> list[SpanRecord]:
    """Make ``spans`` spans of ``scope``'s attempt and hand them to its sink.

    The remote root span is dropped and its children hang under the local root; spans keep
    their remote order and are numbered after the attempt's spans so far. LM calls among
    them join the attempt's LM calls.
    """
    if scope.root is None:
        return []
    context = scope.root.get_span_context()
    trace_id, root_id = format(context.trace_id, "032x"), format(context.span_id, "016x")
    remote_roots = {s.span_id for s in spans if s.parent_id is None or s.name == sc.ROLLOUT_SPAN}
    kept = sorted(
        (s for s in spans if s.span_id not in remote_roots),
        key=lambda s: (s.sequence or 0, s.start_time),
    )
    adopted = []
    for span in kept:
        parent = root_id if span.parent_id in remote_roots else span.parent_id
        attributes = {
            **span.attributes,
            sc.ROLLOUT_ID: scope.rollout_id,
            sc.ATTEMPT_ID: scope.attempt_id,
        }
        sequence = scope.next_sequence()
        attributes[sc.SEQUENCE] = sequence
        adopted.append(
            span.model_copy(
                update={
                    "trace_id": trace_id,
                    "parent_id": parent,
                    "attributes": attributes,
                    "rollout_id": scope.rollout_id,
                    "attempt_id": scope.attempt_id,
                    "sequence": sequence,
                }
            )
        )
        if is_chat(span):
            reply = response_message(span) or {}
            scope.add_lm_call(
                LMCall(
                    messages=request_messages(span),  # type: ignore[arg-type]
                    reply=str(reply.get("content") or ""),
                    model=str(span.attributes.get(sc.GEN_AI_RESPONSE_MODEL, "")),
                    source=str(span.attributes.get(sc.LM_SOURCE, "remote")),
                    tool_calls=list(reply.get("tool_calls") or []),
                )
            )
    for record in adopted:
        scope.keep(record)
    if scope.sink is not None and adopted:
        scope.sink(adopted)
    return adopted
