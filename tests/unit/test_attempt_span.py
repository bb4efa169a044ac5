"""An attempt's root span recorded straight as a span record looks like the SDK span it
replaces: same name, kind, attributes, sequence, status and exception event, and SDK
spans started inside it are its children."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.tracing import MemoryRecorder
from emery.tracing import conventions as sc
from emery.tracing.attempt_span import AttemptSpan
from emery.tracing.processor import RolloutTracing
from emery.tracing.scope import AttemptScope, activate

ATTRIBUTES: dict[str, Any] = {
    sc.CANDIDATE_ID: "c",
    sc.EXAMPLE_ID: "e",
    sc.ATTEMPT_NUMBER: 1,
    sc.SPLIT: "val",
}
OUTCOMES = {
    "succeeded": (True, "succeeded: None", None),  # the runner passes one either way
    "failed": (False, "failed: ValueError: bad", ValueError("bad")),
    "cancelled": None,  # an exception leaves the block before any status is set
}


def record(direct: bool, outcome: str) -> tuple[list[SpanRecord], AttemptScope]:
    recorder = MemoryRecorder()
    tracing = RolloutTracing(recorder)
    rollout = Rollout(candidate_id="c", example_id="e")
    scope = AttemptScope(rollout, Attempt(rollout_id=rollout.id, number=1), tracing.tracer)
    marks = OUTCOMES[outcome]
    try:
        with activate(scope):
            if direct:
                root = AttemptSpan(scope, ATTRIBUTES, tracing.processor.add_record)
                try:
                    with root.current():
                        tracing.tracer.start_span("child").end()
                        if marks is None:
                            raise KeyboardInterrupt
                        ok, message, error = marks
                        if error is not None:
                            root.record_exception(error)
                        root.set_status(ok, message)
                finally:
                    root.end()
            else:
                with tracing.tracer.start_as_current_span(
                    sc.ROLLOUT_SPAN,
                    context=Context(),
                    attributes=ATTRIBUTES,
                    record_exception=False,
                    set_status_on_exception=False,
                ) as sdk_root:
                    tracing.tracer.start_span("child").end()
                    if marks is None:
                        raise KeyboardInterrupt
                    ok, message, error = marks
                    if error is not None:
                        sdk_root.record_exception(error)
                    sdk_root.set_status(
                        Status(StatusCode.OK) if ok else Status(StatusCode.ERROR, message)
                    )
    except KeyboardInterrupt:
        pass
    scope.closed = True
    tracing.flush()
    return recorder.spans(rollout.id), scope


def comparable(span: SpanRecord) -> dict[str, Any]:
    skip = {sc.ROLLOUT_ID, sc.ATTEMPT_ID}
    return {
        "name": span.name,
        "kind": span.kind,
        "parent": span.parent_id,
        "status": span.status,
        "status_message": span.status_message,
        "sequence": span.sequence,
        "attributes": {k: v for k, v in span.attributes.items() if k not in skip},
        "attribute_order": list(span.attributes),
        "events": [(e.name, sorted(e.attributes), dict(e.attributes)) for e in span.events],
        "ordered": span.start_time <= span.end_time,
    }


def without_trace(event: tuple[str, list[str], dict[str, Any]]) -> tuple[Any, ...]:
    name, keys, attributes = event
    return name, keys, {k: v for k, v in attributes.items() if k != sc.EXCEPTION_STACKTRACE}


@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_a_direct_root_span_matches_the_sdk_span(outcome: str) -> None:
    (sdk_root, sdk_child), sdk_scope = record(False, outcome)
    (root, child), scope = record(True, outcome)
    mine, theirs = comparable(root), comparable(sdk_root)
    assert [without_trace(e) for e in mine.pop("events")] == [
        without_trace(e) for e in theirs.pop("events")
    ]
    assert mine == theirs
    assert root.rollout_id == scope.rollout_id
    assert root.attempt_id == scope.attempt_id
    assert root.attributes[sc.ROLLOUT_ID] == scope.rollout_id
    assert (child.parent_id, child.trace_id) == (root.span_id, root.trace_id)
    assert (child.sequence, sdk_child.sequence) == (1, 1)
    assert [s.name for s in scope.records] == [s.name for s in sdk_scope.records]
    assert len(root.trace_id) == 32
    assert len(root.span_id) == 16
