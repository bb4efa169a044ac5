"""The payload registry and the typed payloads of the job's own event kinds (state
changes, evaluations, best, budget).

Every event kind has one payload model, registered by the module that owns the kind
(``register_payload``, keyed by the model's ``kind``): the kinds every job shares here and in
``plan_events``, ``search_events`` and ``approvals``; an algorithm's own kinds next to it
(``algorithms/gepa/events.py``), a training job's in ``training/events.py``, a plug-in's in
its own module. A kind is registered when its module is imported; a kind that no model
claims is an error wherever an event of it is made or parsed (``events``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    """Base of event payloads; ``kind`` is the event kind a model is the payload of."""

    model_config = ConfigDict(extra="forbid")
    kind: ClassVar[str] = ""


class EventKindError(ValueError):
    """An event kind without a payload model, a payload given for another kind, or a kind
    claimed by two models."""


M = TypeVar("M", bound=type[Payload])

_REGISTERED: dict[str, type[Payload]] = {}

PAYLOADS: Mapping[str, type[Payload]] = MappingProxyType(_REGISTERED)
"""Every registered kind → its payload model (a live, read-only view)."""


def register_payload(model: M, *kinds: str) -> M:
    """Make ``model`` the payload of ``kinds`` (default: its own ``kind``); returns it, so
    it can decorate the class. A kind another model already has is an ``EventKindError``
    (the same class defined again, as a reloaded module does, replaces it)."""
    for kind in kinds or (model.kind,):
        if not kind:
            raise EventKindError(f"{model.__name__} names no event kind")
        held = _REGISTERED.get(kind)
        if held is not None and _name(held) != _name(model):
            raise EventKindError(
                f"event kind {kind!r} is already {_name(held)}'s, not {_name(model)}'s"
            )
        _REGISTERED[kind] = model
    return model


def _name(model: type[Payload]) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def payload_model(kind: str) -> type[Payload]:
    """The model registered for ``kind``, or an ``EventKindError``."""
    model = _REGISTERED.get(kind)
    if model is None:
        raise EventKindError(
            f"unknown event kind {kind!r}: no payload model is registered for it (its"
            " owner's module registers it when imported)"
        )
    return model


STATE_KINDS = (
    "created",
    "queued",
    "started",
    "running",
    "paused",
    "resumed",
    "succeeded",
    "failed",
    "cancelled",
)
"""The kinds of a job's state changes: its states, ``started`` and ``resumed`` (a move to
``running`` that names neither is stored as ``running``)."""


class StateChanged(Payload):
    """A job's state changed (one of ``STATE_KINDS``) to ``state``."""

    state: str
    reason: str | None = None


register_payload(StateChanged, *STATE_KINDS)


@register_payload
class BaselineEvaluated(Payload):
    kind: ClassVar[str] = "baseline_evaluated"
    candidate_id: str
    split: str
    score: float
    n: int


@register_payload
class WarmStartScored(Payload):
    """A candidate of an earlier job (``[job] warm_start``) rescored on this job's val:
    ``earlier_score`` is what it scored on the earlier job's val (None if unknown)."""

    kind: ClassVar[str] = "warm_start.scored"
    job_id: str
    candidate_id: str
    earlier_score: float | None
    score: float
    n: int


@register_payload
class CandidateProposed(Payload):
    kind: ClassVar[str] = "candidate_proposed"
    candidate_id: str
    parents: list[str]
    operation: str
    components: list[str] = Field(default_factory=list)


@register_payload
class CandidateEvaluated(Payload):
    kind: ClassVar[str] = "candidate_evaluated"
    candidate_id: str
    split: str
    score: float
    n: int
    new_rollouts: int = 0
    failed: int = 0
    """Of the ``n`` results, runs that failed (scored 0 for an error, not an answer)."""
    timeouts: int = 0
    """Of the failed runs, those that ran out of time or fell silent."""
    unreadable: int = 0
    """Of the ``n`` results, replies the parser could not read (scored 0 as wrong answers,
    not failed)."""


@register_payload
class RolloutsFailed(Payload):
    """A warning: some of the seed's rollouts failed (so its baseline is understated)."""

    kind: ClassVar[str] = "rollouts_failed"
    candidate_id: str
    split: str
    n: int
    failed: int
    timeouts: int = 0
    example_id: str
    error: str


@register_payload
class BestUpdated(Payload):
    """The best candidate by val changed (the seed becoming the first best included)."""

    kind: ClassVar[str] = "best_updated"
    candidate_id: str
    score: float
    previous_score: float | None = None


@register_payload
class FrontierUpdated(Payload):
    kind: ClassVar[str] = "frontier_updated"
    size: int
    best_candidate_id: str
    best_score: float


@register_payload
class IterationCompleted(Payload):
    kind: ClassVar[str] = "iteration_completed"
    iteration: int
    metric_calls: int
    best_score: float | None = None


@register_payload
class CheckpointSaved(Payload):
    kind: ClassVar[str] = "checkpoint_saved"
    iteration: int


@register_payload
class BudgetWarning(Payload):
    kind: ClassVar[str] = "budget_warning"
    resource: str
    used: float
    limit: float


SPENDING_LIMITS = {
    "wall_time_s": "wall-time",
    "metric_calls": "metric-call",
    "lm_tokens": "LM-token",
    "lm_cost_usd": "LM-cost",
}
"""The budget limits the seed's evaluation spends, by the words a message names them in."""


@register_payload
class SearchNotRun(Payload):
    """A warning: the seed's evaluation spent a budget limit (``limit``, such as
    ``wall_time_s``), so the search stops before its first step with the seed as best; or,
    with ``first_step``, the limit cut the first step short, so no step was kept."""

    kind: ClassVar[str] = "search_not_run"
    limit: str
    reason: str
    """The stop reason the limit gave (``wall_time_s: 12.3 of 10 used``)."""
    first_step: bool = False

    def message(self) -> str:
        name = SPENDING_LIMITS.get(self.limit, self.limit)
        if self.first_step:
            return (
                f"the search completed no step: the {name} budget ran out in its first step"
                f" ({self.reason}), so the best is the seed; raise job.budget.{self.limit}"
                " to search"
            )
        return (
            f"the search never ran: the {name} budget was spent on the seed's evaluation"
            f" ({self.reason}); raise job.budget.{self.limit} to search"
        )


class PlanPayload(Payload):
    """The shape every ``*.plan`` event shares (``mipro.plan``, ``gepa.plan``,
    ``apo.plan``, ``baseline.plan``): what the algorithm will run given the budget,
    recorded at its start.

    ``summary``: the one line the CLI prints; ``metric_calls``: the planned metric calls
    of each phase and their ``total`` (upper bounds); ``notes``: what the budget changed
    or cuts short. ``planned_trials`` and ``setup_calls`` say how the calls after the
    seed's split into the algorithm's trials (``trial_unit``), for the wall-time estimate.
    """

    trial_unit: ClassVar[str] = "trials"

    summary: str
    metric_calls: dict[str, int]
    budget_metric_calls: int | None = None
    notes: list[str] = Field(default_factory=list)

    def planned_trials(self) -> int | None:
        """How many trials the plan runs; None when another limit decides (no count)."""
        return None

    def setup_calls(self) -> int:
        """Metric calls the plan spends after the seed's evaluation, before its first trial."""
        return 0
