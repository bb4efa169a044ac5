"""Job events: a kind and its typed payload. The store gives each a per-job sequence number.

Every kind has one payload model (``PAYLOADS``): the job's own kinds are defined in
``payloads``, the algorithms' in ``search_events``, and all are importable from here. Most
models name their kind in ``kind``, so ``Event.of(BestUpdated(...))`` needs no kind string.
An event is stored as plain JSON (``Event.data``), and ``Event.payload()`` parses it back
into its model. Payloads forbid unknown fields, so a misspelt field fails where the event
is made.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from emery.core.approvals import ApprovalApplied, ApprovalRequested
from emery.core.payloads import (
    BaselineEvaluated,
    BestUpdated,
    BudgetWarning,
    CandidateEvaluated,
    CandidateProposed,
    CheckpointSaved,
    FrontierUpdated,
    IterationCompleted,
    Payload,
    PlanPayload,
    RolloutsFailed,
    SearchNotRun,
    StateChanged,
    WarmStartScored,
)
from emery.core.plan_events import (
    ApoPlanned,
    BaselinePlanned,
    BudgetPlanned,
    GepaPlanned,
    PaceWarning,
    SelectPlanned,
)
from emery.core.search_events import (
    ApoBeamUpdated,
    ApoCritique,
    ApoEdit,
    ApoExpansionSkipped,
    ApoFullValScored,
    ApoOperatorChild,
    ApoRoundCut,
    ApoRoundStarted,
    BeamMember,
    DemoSetSize,
    GepaCandidateSelected,
    GepaMergeAccepted,
    GepaMergeAttempted,
    GepaMergeRejected,
    GepaMinibatchAccepted,
    GepaMinibatchRejected,
    GepaMinibatchSampled,
    GepaMinibatchSkipped,
    GepaProposal,
    GepaProposalInvalid,
    GepaReflectiveDataset,
    GepaValEvaluated,
    GepaValRejected,
    GraphCandidateCost,
    InstructionOption,
    MiproDatasetSummary,
    MiproDemosBootstrapped,
    MiproFullEvaluation,
    MiproInstructionsProposed,
    MiproPlanned,
    MiproProposalRejected,
    MiproRace,
    MiproTrial,
    ProposalSources,
    SourceCount,
)

P = TypeVar("P", bound=Payload)


class EventKindError(ValueError):
    """An event kind without a payload model, or a payload given for another kind."""


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
        model = PAYLOADS.get(kind)
        if model is None:
            raise EventKindError(f"unknown event kind {kind!r}")
        if type(payload) is not model:
            raise EventKindError(f"{kind!r} carries {model.__name__}, not {type(payload).__name__}")
        data = payload.model_dump(mode="json", warnings=False)
        model.model_validate(data)  # a payload changed after it was built is checked too
        return cls(kind=kind, data=data)

    def payload(self) -> Payload:
        """``data`` parsed into its kind's model (EventKindError or ValidationError if not)."""
        model = PAYLOADS.get(self.kind)
        if model is None:
            raise EventKindError(f"unknown event kind {self.kind!r}")
        return model.model_validate(self.data)

    def payload_as(self, model: type[P]) -> P:
        """``data`` as ``model``, which must be this event's kind's model."""
        if PAYLOADS.get(self.kind) is not model:
            raise EventKindError(f"a {self.kind!r} event does not carry {model.__name__}")
        return model.model_validate(self.data)


STATE_KINDS = (
    "created",
    "queued",
    "started",
    "paused",
    "resumed",
    "succeeded",
    "failed",
    "cancelled",
)

_SINGLE_KIND: tuple[type[Payload], ...] = (
    BudgetPlanned,
    SelectPlanned,
    BaselineEvaluated,
    WarmStartScored,
    CandidateProposed,
    CandidateEvaluated,
    BestUpdated,
    FrontierUpdated,
    IterationCompleted,
    CheckpointSaved,
    BudgetWarning,
    SearchNotRun,
    PaceWarning,
    RolloutsFailed,
    GepaCandidateSelected,
    GepaMinibatchSampled,
    GepaMinibatchSkipped,
    GepaMinibatchAccepted,
    GepaMinibatchRejected,
    GepaValEvaluated,
    GepaValRejected,
    GraphCandidateCost,
    GepaReflectiveDataset,
    GepaProposal,
    GepaProposalInvalid,
    GepaMergeAttempted,
    GepaMergeAccepted,
    GepaMergeRejected,
    ApoRoundStarted,
    ApoExpansionSkipped,
    ApoRoundCut,
    ApoBeamUpdated,
    ApoFullValScored,
    ApoCritique,
    ApoEdit,
    ApoOperatorChild,
    ProposalSources,
    GepaPlanned,
    ApoPlanned,
    BaselinePlanned,
    MiproPlanned,
    MiproDemosBootstrapped,
    MiproDatasetSummary,
    MiproProposalRejected,
    MiproInstructionsProposed,
    MiproTrial,
    MiproFullEvaluation,
    MiproRace,
    ApprovalRequested,
    ApprovalApplied,
)

PAYLOADS: dict[str, type[Payload]] = {
    **dict.fromkeys(STATE_KINDS, StateChanged),
    **{model.kind: model for model in _SINGLE_KIND},
}


def event(kind: str, payload: Payload | None = None, **data: Any) -> Event:
    """An event of ``kind`` from a payload model or keyword fields.

    A registered kind is validated against its model. Unregistered kinds carry free
    ``data``: only the store's own tests make them; algorithms emit models (``Event.of``).
    """
    if payload is not None:
        data = {**payload.model_dump(mode="json"), **data}
    model = PAYLOADS.get(kind)
    if model is not None:
        data = model.model_validate(data).model_dump(mode="json")
    return Event(kind=kind, data=data)


__all__ = [
    "PAYLOADS",
    "STATE_KINDS",
    "ApoBeamUpdated",
    "ApoCritique",
    "ApoEdit",
    "ApoExpansionSkipped",
    "ApoFullValScored",
    "ApoOperatorChild",
    "ApoPlanned",
    "ApoRoundCut",
    "ApoRoundStarted",
    "BaselineEvaluated",
    "BaselinePlanned",
    "BeamMember",
    "BestUpdated",
    "BudgetPlanned",
    "BudgetWarning",
    "CandidateEvaluated",
    "CandidateProposed",
    "CheckpointSaved",
    "DemoSetSize",
    "Event",
    "EventKindError",
    "FrontierUpdated",
    "GepaCandidateSelected",
    "GepaMergeAccepted",
    "GepaMergeAttempted",
    "GepaMergeRejected",
    "GepaMinibatchAccepted",
    "GepaMinibatchRejected",
    "GepaMinibatchSampled",
    "GepaMinibatchSkipped",
    "GepaPlanned",
    "GepaProposal",
    "GepaProposalInvalid",
    "GepaReflectiveDataset",
    "GepaValEvaluated",
    "GepaValRejected",
    "GraphCandidateCost",
    "InstructionOption",
    "IterationCompleted",
    "MiproDatasetSummary",
    "MiproDemosBootstrapped",
    "MiproFullEvaluation",
    "MiproInstructionsProposed",
    "MiproPlanned",
    "MiproProposalRejected",
    "MiproRace",
    "MiproTrial",
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
]
