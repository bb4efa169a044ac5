"""Job events: a kind and its typed payload. The store gives each a per-job sequence number.

Every kind has one payload model, registered by the module that owns it
(``payloads.register_payload``): the kinds every job shares are core's and importable from
here; an algorithm's own kinds live next to it (``algorithms/gepa/events.py``), a training
job's in ``training/events.py``, a plug-in's in its module. Most models name their kind in
``kind``, so ``Event.of(BestUpdated(...))`` needs no kind string. An event is stored as
plain JSON (``Event.data``), and ``Event.payload()`` parses it back into its model, which
needs the owner's module imported: ``reports/event_text.py``, which every reader of stored
events goes through, imports the built-in owners. Making or parsing an event of a kind no
model is registered for is an ``EventKindError``; payloads forbid unknown fields, so a
misspelt field fails where the event is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from emery.core.approvals import ApprovalApplied, ApprovalRequested
from emery.core.payloads import (
    PAYLOADS,
    STATE_KINDS,
    BaselineEvaluated,
    BestUpdated,
    BudgetWarning,
    CandidateEvaluated,
    CandidateProposed,
    CheckpointSaved,
    EventKindError,
    FrontierUpdated,
    IterationCompleted,
    Payload,
    PlanPayload,
    RolloutsFailed,
    SearchNotRun,
    StateChanged,
    WarmStartScored,
    payload_model,
    register_payload,
)
from emery.core.plan_events import BudgetPlanned, PaceWarning, SelectPlanned
from emery.core.search_events import ProposalSources, SourceCount

P = TypeVar("P", bound=Payload)


class Event(BaseModel):
    """One thing that happened in a job. ``seq`` and ``at`` are set when it is stored."""

    kind: str
    data: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = None
    at: datetime | None = None

    @classmethod
    def of(cls, payload: Payload, kind: str | None = None) -> Event:
        """The event carrying ``payload`` (``kind`` only for models shared by several kinds)."""
        kind = kind or payload.kind
        model = payload_model(kind)
        if type(payload) is not model:
            raise EventKindError(f"{kind!r} carries {model.__name__}, not {type(payload).__name__}")
        data = payload.model_dump(mode="json", warnings=False)
        model.model_validate(data)  # a payload changed after it was built is checked too
        return cls(kind=kind, data=data)

    def payload(self) -> Payload:
        """``data`` parsed into its kind's model (EventKindError or ValidationError if not)."""
        return payload_model(self.kind).model_validate(self.data)

    def payload_as(self, model: type[P]) -> P:
        """``data`` as ``model``, which must be this event's kind's model."""
        if PAYLOADS.get(self.kind) is not model:
            raise EventKindError(f"a {self.kind!r} event does not carry {model.__name__}")
        return model.model_validate(self.data)


EventSink = Callable[[Sequence[Event]], None]
"""What hears a job's events as they are stored (a progress display, the SDK, a test)."""


def event(kind: str, payload: Payload | None = None, **data: Any) -> Event:
    """An event of ``kind`` from a payload model or keyword fields, validated against the
    kind's registered model (an unregistered kind is an ``EventKindError``)."""
    if payload is not None:
        data = {**payload.model_dump(mode="json"), **data}
    return Event(kind=kind, data=payload_model(kind).model_validate(data).model_dump(mode="json"))


__all__ = [
    "PAYLOADS",
    "STATE_KINDS",
    "ApprovalApplied",
    "ApprovalRequested",
    "BaselineEvaluated",
    "BestUpdated",
    "BudgetPlanned",
    "BudgetWarning",
    "CandidateEvaluated",
    "CandidateProposed",
    "CheckpointSaved",
    "Event",
    "EventKindError",
    "EventSink",
    "FrontierUpdated",
    "IterationCompleted",
    "PaceWarning",
    "Payload",
    "PlanPayload",
    "ProposalSources",
    "RolloutsFailed",
    "SearchNotRun",
    "SelectPlanned",
    "SourceCount",
    "StateChanged",
    "WarmStartScored",
    "event",
    "payload_model",
    "register_payload",
]
