"""A call of emery's own LM recorded straight as a span record looks like the SDK span the
other LM paths record: same name, attributes, parent, sequence, status and exception event."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from opentelemetry.context import Context

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.lm import FakeLM
from emery.tracing import MemoryRecorder
from emery.tracing import conventions as sc
from emery.tracing.lm import TracedLM
from emery.tracing.processor import RolloutTracing
from emery.tracing.scope import AttemptScope, activate

MESSAGES: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Say hi."},
]


class Broken(FakeLM):
    async def complete(self, messages: Any, **params: Any) -> Any:
        raise TimeoutError("the model went away")


async def record_one(direct: bool, lm: Any) -> tuple[list[SpanRecord], AttemptScope]:
    recorder = MemoryRecorder()
    tracing = RolloutTracing(recorder)
    rollout = Rollout(candidate_id="c", example_id="e")
    scope = AttemptScope(rollout, Attempt(rollout_id=rollout.id, number=1), tracing.tracer)
    if direct:
        scope.sink = tracing.processor.add_records
    with (
        activate(scope),
        tracing.tracer.start_as_current_span(sc.ROLLOUT_SPAN, context=Context()),
        contextlib.suppress(TimeoutError),
    ):
        await TracedLM(lm).complete(MESSAGES, temperature=0.0, max_tokens=8, stop=["\n"])
    scope.closed = True
    tracing.flush()
    return recorder.spans(rollout.id), scope


def comparable(span: SpanRecord, root: SpanRecord) -> dict[str, Any]:
    skip = {sc.ROLLOUT_ID, sc.ATTEMPT_ID, sc.LM_LATENCY_S}
    return {
        "name": span.name,
        "kind": span.kind,
        "status": span.status,
        "status_message": span.status_message,
        "sequence": span.sequence,
        "child_of_root": span.parent_id == root.span_id and span.trace_id == root.trace_id,
        "attributes": {k: v for k, v in span.attributes.items() if k not in skip},
        "events": [
            (e.name, sorted(e.attributes), e.attributes.get(sc.EXCEPTION_TYPE)) for e in span.events
        ],
        "ordered": span.start_time <= span.end_time,
    }


@pytest.mark.parametrize(
    "lm", [FakeLM(lambda m: "Hi."), Broken(lambda m: "unused")], ids=["reply", "error"]
)
async def test_a_direct_chat_record_matches_the_sdk_span(lm: Any) -> None:
    (sdk_root, sdk_chat), sdk_scope = await record_one(False, lm)
    (root, chat), scope = await record_one(True, lm)
    assert comparable(chat, root) == comparable(sdk_chat, sdk_root)
    assert chat.rollout_id == scope.rollout_id
    assert chat.attempt_id == scope.attempt_id
    assert chat.attributes[sc.ROLLOUT_ID] == scope.rollout_id
    assert [c.reply for c in scope.lm_calls] == [c.reply for c in sdk_scope.lm_calls]
    assert chat in scope.records  # kept for the result's trace excerpt
    assert scope.idle_seconds() > 0.0  # no call left in flight
