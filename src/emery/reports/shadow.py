"""What an alias asks after it answers a request (``reports.aliases``): the run scored by
the alias's scorer, and its shadow version run on the same input and scored too.

A score is a ``score NAME`` span under the run it scores (``emery.score`` in [0, 1], the
verifier graph's reason as ``emery.feedback``, the scorer as ``emery.scorer``). A shadow
run is a ``run NAME`` trace of its own, as a served run's, marked with the trace of the run
it shadows (``emery.shadow_of``); its output is never answered. ``version_scores`` pairs
each shadow run with the run it shadows, so a candidate is compared with what serves on
the same live requests.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from typing import Any

from emery.core.models import Example
from emery.core.spans import SpanRecord
from emery.reports.published_verifier import PublishedVerifier
from emery.reports.served import (
    NAME_ATTRIBUTE,
    VERSION_ATTRIBUTE,
    ServedRun,
    ServedSystem,
    run_and_record,
)
from emery.tracing.application_spans import CallOrigin, SpanSink
from emery.tracing.chat_record import at, new_span_id
from emery.verifiers.base import clip

log = logging.getLogger(__name__)

SHADOW_OF_ATTRIBUTE = "emery.shadow_of"
SCORE_ATTRIBUTE = "emery.score"
SCORER_ATTRIBUTE = "emery.scorer"
FEEDBACK_ATTRIBUTE = "emery.feedback"


def score_span_name(name: str) -> str:
    """The name of the span of a score of a run of the published system ``name``."""
    return f"score {name}"


class LiveScorer:
    """A published verifier graph scoring served runs (``label``: ``NAME:VERSION``)."""

    def __init__(self, verifier: PublishedVerifier, label: str) -> None:
        self.verifier, self.label = verifier, label

    async def score(
        self, served: ServedSystem, inputs: dict[str, Any], answer: ServedRun
    ) -> SpanRecord | None:
        """The score span of ``answer`` (None for a failed run: it has no output)."""
        if answer.error is not None or not answer.spans:
            return None
        started = time.time_ns()
        example = Example(id=f"live-{uuid.uuid4().hex[:12]}", input=inputs)
        verdict = await self.verifier.verify(example, answer.output)
        return SpanRecord(
            trace_id=answer.trace_id,
            span_id=new_span_id(),
            parent_id=answer.spans[0].span_id,
            name=score_span_name(served.prompt.name),
            start_time=at(started),
            end_time=at(time.time_ns()),
            attributes={
                NAME_ATTRIBUTE: served.prompt.name,
                VERSION_ATTRIBUTE: served.prompt.version,
                SCORE_ATTRIBUTE: verdict.score,
                FEEDBACK_ATTRIBUTE: clip(verdict.feedback, 500),
                SCORER_ATTRIBUTE: self.label,
            },
        )


async def after_answer(
    served: ServedSystem,
    answer: ServedRun,
    inputs: dict[str, Any],
    origin: CallOrigin,
    sink: SpanSink,
    *,
    shadow: ServedSystem | None = None,
    scorer: LiveScorer | None = None,
) -> None:
    """Score ``answer``, then run ``shadow`` on ``inputs`` and score it (module doc). A
    failure is logged: the request was answered already."""
    try:
        if scorer is not None:
            _store(sink, await scorer.score(served, inputs, answer))
        if shadow is None:
            return
        shadowing = dataclasses.replace(
            origin,
            parent=None,
            attributes={**origin.attributes, SHADOW_OF_ATTRIBUTE: answer.trace_id},
        )
        shadow_answer = await run_and_record(shadow, inputs, sink, shadowing)
        if scorer is not None:
            _store(sink, await scorer.score(shadow, inputs, shadow_answer))
    except Exception as exc:  # the application's answer must not depend on this
        log.warning("scoring or shadowing a run of %s failed: %s", served.prompt.name, exc)


def _store(sink: SpanSink, span: SpanRecord | None) -> None:
    if span is not None:
        sink.add_spans([span])
