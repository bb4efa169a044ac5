"""Job events: a kind and a typed payload. The store gives each a per-job sequence number."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class Event(BaseModel):
    """One thing that happened in a job. ``seq`` and ``at`` are set when it is stored."""

    kind: str
    data: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = None
    at: datetime | None = None


class Payload(BaseModel):
    """Base of the typed payloads of the engine's core event kinds."""


class StateChanged(Payload):
    """created, queued, started, paused, resumed, succeeded, failed, cancelled."""

    state: str
    reason: str | None = None


class BaselineEvaluated(Payload):
    candidate_id: str
    split: str
    score: float
    n: int


class CandidateProposed(Payload):
    candidate_id: str
    parents: list[str]
    operation: str
    components: list[str] = Field(default_factory=list)


class CandidateEvaluated(Payload):
    candidate_id: str
    split: str
    score: float
    n: int
    new_rollouts: int = 0


class BestUpdated(Payload):
    candidate_id: str
    score: float
    previous_score: float | None = None


class FrontierUpdated(Payload):
    size: int
    best_candidate_id: str
    best_score: float


class IterationCompleted(Payload):
    iteration: int
    metric_calls: int
    best_score: float | None = None


class CheckpointSaved(Payload):
    iteration: int


class BudgetWarning(Payload):
    resource: str
    used: float
    limit: float


PAYLOADS: dict[str, type[Payload]] = {
    "created": StateChanged,
    "queued": StateChanged,
    "started": StateChanged,
    "paused": StateChanged,
    "resumed": StateChanged,
    "succeeded": StateChanged,
    "failed": StateChanged,
    "cancelled": StateChanged,
    "baseline_evaluated": BaselineEvaluated,
    "candidate_proposed": CandidateProposed,
    "candidate_evaluated": CandidateEvaluated,
    "best_updated": BestUpdated,
    "frontier_updated": FrontierUpdated,
    "iteration_completed": IterationCompleted,
    "checkpoint_saved": CheckpointSaved,
    "budget_warning": BudgetWarning,
}


def event(kind: str, payload: Payload | None = None, **data: Any) -> Event:
    """An event; core kinds are validated against their payload model.

    Algorithm-specific kinds (``gepa.minibatch_accepted``, ...) carry free ``data``.
    """
    if payload is not None:
        data = {**payload.model_dump(mode="json"), **data}
    model = PAYLOADS.get(kind)
    if model is not None:
        data = model.model_validate(data).model_dump(mode="json")
    return Event(kind=kind, data=data)
